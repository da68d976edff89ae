/*
 * Graph models with skip connections across devices, as the sequential models are held: the
 * ResNet and the U-Net under ddp repeat bitwise, on one device are bitwise the single
 * strategy and on two within 1e-5 of it (the parameters, relative); zero1, zero2 and fsdp on
 * two devices are bitwise ddp on two (fsdp's shards put together); dp on two is within 1e-5 of
 * single; in invariant mode (within 1e-5 of single) ddp on 1, 2 and 4 devices and fsdp on 2 give
 * bitwise the same run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/skipnet.h"

#define STEPS 8

static struct skipnet_run ref, a, b;

static void run(enum skipnet_kind kind, enum strata_strategy_kind s, int devices, int invariant,
                struct skipnet_run *out)
{
        struct strata_config c = skipnet_cfg(kind, s, devices);

        c.strategy.invariant = invariant;
        skipnet_train(&c, STEPS, out);
}

static double rel_diff(const struct skipnet_run *x, const struct skipnet_run *y)
{
        double worst = 0.0;

        for (size_t i = 0; i < x->np; i++) {
                double d = fabs((double)x->p[i] - y->p[i]) / (1.0 + fabs((double)y->p[i]));

                worst = d > worst ? d : worst;
        }
        return worst;
}

static int same(const struct skipnet_run *x, const struct skipnet_run *y)
{
        return x->np == y->np && !memcmp(x->p, y->p, x->np * sizeof(float));
}

static void ddp_and_sharded(enum skipnet_kind kind)
{
        static const enum strata_strategy_kind sharded[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };

        run(kind, STRATA_STRATEGY_SINGLE, 1, 0, &ref);
        run(kind, STRATA_STRATEGY_DDP, 1, 0, &a);
        cr_assert(same(&a, &ref), "ddp on 1 device is not bitwise single");
        run(kind, STRATA_STRATEGY_DDP, 2, 0, &a);
        run(kind, STRATA_STRATEGY_DDP, 2, 0, &b);
        cr_assert(same(&a, &b), "ddp on 2 devices: runs differ");
        cr_assert_leq(rel_diff(&a, &ref), 1e-5, "ddp on 2: %g from single", rel_diff(&a, &ref));
        for (size_t i = 0; i < sizeof(sharded) / sizeof(sharded[0]); i++) {
                run(kind, sharded[i], 2, 0, &b);
                cr_assert(same(&b, &a), "%s on 2 devices is not bitwise ddp",
                          strata_strategy_name(sharded[i]));
        }
        run(kind, STRATA_STRATEGY_DP, 2, 0, &b);
        cr_assert_leq(rel_diff(&b, &ref), 1e-5, "dp on 2: %g from single", rel_diff(&b, &ref));
}

Test(skip_parallel, resnet_ddp_sharded_dp, .timeout = 240)
{
        ddp_and_sharded(SKIPNET_RESNET);
}

Test(skip_parallel, unet_ddp_sharded_dp, .timeout = 240)
{
        ddp_and_sharded(SKIPNET_UNET);
}

static void invariant(enum skipnet_kind kind)
{
        run(kind, STRATA_STRATEGY_SINGLE, 1, 0, &b);
        run(kind, STRATA_STRATEGY_DDP, 1, 1, &ref);
        cr_assert_leq(rel_diff(&ref, &b), 1e-5, "invariant mode: %g from single",
                      rel_diff(&ref, &b));
        for (int n = 2; n <= 4; n *= 2) {
                run(kind, STRATA_STRATEGY_DDP, n, 1, &a);
                cr_assert(same(&a, &ref), "invariant mode on %d devices differs from 1", n);
                cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
        }
        run(kind, STRATA_STRATEGY_FSDP, 2, 1, &a);
        cr_assert(same(&a, &ref), "invariant fsdp on 2 devices differs");
}

Test(skip_parallel, resnet_invariant_on_any_device_count, .timeout = 240)
{
        invariant(SKIPNET_RESNET);
}

Test(skip_parallel, unet_invariant_on_any_device_count, .timeout = 240)
{
        invariant(SKIPNET_UNET);
}
