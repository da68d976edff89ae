/*
 * The conv rig (Conv2d circular-relu-linear) trained under ddp and dp: runs repeat bitwise,
 * one device is bitwise the single strategy, two within 1e-5 of it; fsdp on two devices is
 * bitwise ddp on two (its shards put together); in invariant mode one,
 * two and four devices give bitwise the same parameters (the convolution runs per chunk, its
 * gradients combined by the chunks' tree).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (4 * 9 + 4 + 4 * 36 * RIG_CLASSES + RIG_CLASSES)

Test(conv_parallel, ddp_and_dp_match_single, .timeout = 120)
{
        struct rig r;

        rig_init_conv(&r);
        rig_equivalence(&r, STRATA_STRATEGY_DDP, 2, NP, 6);
        rig_equivalence(&r, STRATA_STRATEGY_DP, 2, NP, 6);
}

/* 6 steps of @p kind on 2 devices: the flat parameters, every device's part in order. */
static void train_two(struct rig *r, enum strata_strategy_kind kind, float *out)
{
        struct strata_config c = rig_cfg(r, kind, 2, 0);
        struct strata_runtime *rt = rig_open(&c);
        size_t at = 0, n;
        const float *p;

        rig_steps(r, rt, 6, NULL);
        for (int g = 0; g < (kind == STRATA_STRATEGY_FSDP ? 2 : 1); g++) {
                cr_assert_eq(strata_parameters(rt, g, &p, &n), STRATA_OK);
                n = n < NP - at ? n : NP - at;
                memcpy(out + at, p, n * sizeof(float));
                at += n;
        }
        cr_assert_eq(at, (size_t)NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(conv_parallel, fsdp_is_ddp, .timeout = 120)
{
        static float ddp[NP], fsdp[NP];
        struct rig r;

        rig_init_conv(&r);
        train_two(&r, STRATA_STRATEGY_DDP, ddp);
        train_two(&r, STRATA_STRATEGY_FSDP, fsdp);
        cr_assert_eq(memcmp(ddp, fsdp, sizeof(ddp)), 0, "fsdp differs from ddp");
}

Test(conv_parallel, invariant_on_any_device_count, .timeout = 120)
{
        static float ref[NP], got[NP];
        struct rig r;

        rig_init_conv(&r);
        r.cfg.strategy.invariant = 1;
        rig_train(&r, 6, ref, NP);
        for (int n = 1; n <= 4; n *= 2) {
                struct strata_config c = rig_cfg(&r, STRATA_STRATEGY_DDP, n, 0);

                rig_train_cfg(&r, &c, 6, got, NP);
                cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0, "%d devices differ", n);
        }
}
