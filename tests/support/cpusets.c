/* The CPU driver's kernel sets as the GEMM tests call them, and their operands. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "drivers/drivers.h"
#include "tests/support/cpusets.h"

const struct strata_kernel_ops *cpusets_kernels(enum strata_kernels set, int with_buffer)
{
        static _Thread_local void *buf;
        const struct strata_device_ops *d;
        size_t n = strata__cpu_driver.scratch_bytes();

        if (strata__cpu_driver_for(set, &d) != STRATA_OK || d->prepare(1) != STRATA_OK)
                return NULL;
        if (!buf)
                buf = aligned_alloc(64, (n + 63) / 64 * 64);
        cr_assert_not_null(buf);
        strata__cpu_driver.warm_up(with_buffer ? buf : NULL);
        return d->kernels;
}

void cpusets_fill(float *p, size_t n, unsigned s)
{
        for (size_t i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                p[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
        }
}

float *cpusets_filled(size_t n, unsigned s)
{
        float *x = malloc(n * sizeof(float));

        cr_assert_not_null(x);
        cpusets_fill(x, n, s);
        return x;
}
