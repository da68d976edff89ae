/*
 * Conv backward against central finite differences of the forward: the objective sum(y * w)
 * for fixed w (so dL/dy = w), in each input and each parameter, for a geometry of every
 * padding mode and dimension count.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/fdcheck.h"
#include "tests/support/conv_ref.h"

static double objective(struct conv_rig *r)
{
        double s = 0.0;

        r->desc.ops->forward(&r->l, &r->c, r->x, r->y, r->cc->rows);
        for (int i = 0; i < r->cc->rows * r->l.out; i++)
                s += (double)r->y[i] * r->dy[i];
        return s;
}

static float dx[1 << 16], dp[1 << 16];

/* objective() for fd_check(). */
static double objective_of(void *ctx)
{
        return objective(ctx);
}

static void against_numeric(struct conv_rig *r, float *v, const float *analytic, size_t n,
                            const char *what)
{
        fd_check(objective_of, r, v, analytic, n, 1e-2f, 1e-2, r->cc->what, what);
}

Test(conv_gradcheck, finite_differences)
{
        /* one case of each mode and dimension count from the table */
        static const char *const picks[] = { "2d zeros k3 p1", "2d circular k3 p1",
                                             "2d reflect k3 p2 s2 odd",
                                             "2d replicate k3x2 p2x1 d1x2",
                                             "1d circular k3 p1 d2", "1d replicate same k4",
                                             "3d reflect k3 p1 d1x2x1", "3d circular same k3" };

        for (size_t p = 0; p < sizeof(picks) / sizeof(picks[0]); p++) {
                struct conv_rig r;
                int i = 0;

                while (i < conv_ncases && strcmp(conv_cases[i].what, picks[p]))
                        i++;
                cr_assert_lt(i, conv_ncases, "%s", picks[p]);
                conv_rig_init(&r, &conv_cases[i]);
                objective(&r);
                r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, dx, r.cc->rows);
                memcpy(dp, r.l.grad, r.l.nparam * sizeof(float));
                against_numeric(&r, r.x, dx, (size_t)r.cc->rows * r.l.in, "dx");
                against_numeric(&r, r.l.param, dp, r.l.nparam, "dparam");
        }
}
