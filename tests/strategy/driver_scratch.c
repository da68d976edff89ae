/*
 * The driver's scratch memory is the plan's (decision 0034): the CPU driver's GEMM packing
 * buffer, one per device, grows a configuration's plan by exactly devices x the driver's
 * scratch bytes (the scalar set declares none), and a runtime torn down leaves no thread with
 * its buffer: a second runtime in the same process, and a GEMM on the caller's thread in
 * between, never touch the first one's (freed) region (run under ASan: `make asan`).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "tests/support/rig.h"

static struct strata_plan_info plan_of(const struct strata_config *c)
{
        struct strata_plan_info pl;

        cr_assert_eq(strata_plan(c, &pl), STRATA_OK, "%s", strata_last_error());
        return pl;
}

Test(driver_scratch, the_plan_grows_by_devices_times_the_scratch_bytes)
{
        static const enum strata_strategy_kind kinds[] = { STRATA_STRATEGY_SINGLE,
                                                           STRATA_STRATEGY_DP,
                                                           STRATA_STRATEGY_DDP,
                                                           STRATA_STRATEGY_FSDP };
        size_t s = strata__cpu_driver.scratch_bytes();

        cr_assert_gt(s, 0);
        cr_assert_eq(s % 4096, 0, "whole pages: nothing pads around it");
        for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                for (int n = 1; n <= (kinds[i] == STRATA_STRATEGY_SINGLE ? 1 : 4); n++) {
                        struct strata_config c = rig_default_mlp(kinds[i], n);
                        struct strata_plan_info with, without;

                        c.device.kernels = STRATA_KERNELS_NATIVE;
                        with = plan_of(&c);
                        c.device.kernels = STRATA_KERNELS_SCALAR; /* packs nothing */
                        without = plan_of(&c);
                        cr_assert_eq(with.per_device - without.per_device, s,
                                     "kind %d, %d devices", (int)kinds[i], n);
                        cr_assert_eq(with.bytes - without.bytes, (size_t)n * s,
                                     "kind %d, %d devices: %zu against %zu bytes",
                                     (int)kinds[i], n, with.bytes, without.bytes);
                }
}

/* One GEMM on the calling thread, checked against the scalar set's bits. */
static void gemm_here(void)
{
        const struct strata_device_ops *scalar;
        enum { M = 40, N = 70, K = 300 };
        static float a[M * K], b[K * N], c[M * N], ref[M * N];

        for (int i = 0; i < M * K; i++)
                a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        for (int i = 0; i < K * N; i++)
                b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
        memset(c, 0, sizeof(c));
        memset(ref, 0, sizeof(ref));
        cr_assert_eq(strata__cpu_driver_for(STRATA_KERNELS_SCALAR, &scalar), STRATA_OK);
        strata__cpu_driver.kernels->gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
        scalar->kernels->gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, ref, N);
        cr_assert_eq(memcmp(c, ref, sizeof(c)), 0, "the same bits on every path");
}

/* Train in a region of the caller's own, tear down, free it; the thread keeps computing. */
static void train_freed(struct rig *r, const struct strata_config *cfg, float *out, size_t n)
{
        struct strata_config c = *cfg;
        struct strata_plan_info pl = plan_of(&c);
        size_t bytes = (pl.bytes + pl.align - 1) / pl.align * pl.align;
        void *region = aligned_alloc(pl.align, bytes);

        cr_assert_not_null(region);
        c.memory = region;
        c.memory_size = bytes;
        rig_train_cfg(r, &c, 3, out, n);
        memset(region, 0xff, bytes); /* a buffer still in use would now pack garbage */
        free(region);
}

Test(driver_scratch, a_second_runtime_never_uses_the_first_ones_buffer, .timeout = 120)
{
        static const enum strata_strategy_kind kinds[] = { STRATA_STRATEGY_SINGLE,
                                                           STRATA_STRATEGY_DP,
                                                           STRATA_STRATEGY_DDP };
        struct rig r;

        rig_init(&r, 0);
        for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                struct strata_config c = rig_cfg(&r, kinds[i], i ? 2 : 1, 0);
                size_t n = plan_of(&c).params;
                float *one = malloc(n * sizeof(float)), *two = malloc(n * sizeof(float));

                cr_assert(one && two);
                train_freed(&r, &c, one, n);
                gemm_here(); /* the caller's thread, which may have run a device inline */
                train_freed(&r, &c, two, n); /* a new region, maybe at the same address */
                gemm_here();
                rig_train_cfg(&r, &c, 3, two, n); /* and one the library maps itself */
                cr_expect_eq(memcmp(one, two, n * sizeof(float)), 0, "kind %d",
                             (int)kinds[i]);
                free(one);
                free(two);
        }
}

/* The driver alone: a thread whose buffer was forgotten runs the scalar path, same bits. */
Test(driver_scratch, a_forgotten_buffer_is_never_touched_again)
{
        size_t s = strata__cpu_driver.scratch_bytes();
        void *buf = aligned_alloc(64, s);

        cr_assert_not_null(buf);
        cr_assert_eq(strata__cpu_driver.prepare(1), STRATA_OK, "%s", strata_last_error());
        strata__cpu_driver.warm_up(buf);
        gemm_here();
        strata__cpu_driver.forget(buf);
        free(buf); /* ASan: any later packing into it is a use after free */
        gemm_here();
        strata__cpu_driver.warm_up(NULL); /* a device with no scratch: the scalar path */
        gemm_here();
}
