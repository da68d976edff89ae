/* Clock and sorting helpers shared by the tools' measurements. */
#include <stdlib.h>
#include <time.h>

#include "tools/timing.h"

double strata_tool_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int strata_tool_cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

double strata_tool_median(double *v, size_t n)
{
        if (!n)
                return 0.0;
        qsort(v, n, sizeof(double), strata_tool_cmp_double);
        return v[n / 2];
}
