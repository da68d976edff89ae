/* Clock, sorting and operand helpers shared by the tools' measurements. */
#include <stdlib.h>
#include <time.h>

#include "tools/timing.h"

double strata_tool_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double strata_tool_cpu_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double strata_tool_process_cpu_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
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

float *strata_tool_filled(size_t n, unsigned seed)
{
        float *x = malloc(n * sizeof(float));

        for (size_t i = 0; x && i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                x[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
        }
        return x;
}
