/* Gradients against central differences (tests/support/fdcheck.h). */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/support/fdcheck.h"

void fd_check(double (*objective)(void *), void *ctx, float *v, const float *analytic, size_t n,
              float h, double tol, const char *who, const char *what)
{
        for (size_t i = 0; i < n; i++) {
                float keep = v[i];
                double up, down, num;

                v[i] = keep + h;
                up = objective(ctx);
                v[i] = keep - h;
                down = objective(ctx);
                v[i] = keep;
                num = (up - down) / (2.0 * h);
                cr_assert(fabs(num - analytic[i]) <= tol * (1.0 + fabs(num)),
                          "%s %s[%zu]: analytic %g, numeric %g", who, what, i, analytic[i], num);
        }
}
