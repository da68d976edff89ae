/* SyncBatchNorm on N devices equals BatchNorm1d over the whole batch on one device. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 2 * 16 + 16 * RIG_CLASSES + RIG_CLASSES)

static void check(enum strata_strategy_kind kind, int steps, double tol)
{
        static float ref[NP], a[NP];
        struct rig r;

        rig_init(&r, 1);
        rig_train(&r, steps, ref, NP);
        for (int n = 2; n <= 4; n++) {
                struct strata_config c = rig_cfg(&r, kind, n, 1);
                double d;

                rig_train_cfg(&r, &c, steps, a, NP);
                d = rig_rel_diff(a, ref, NP);
                cr_assert_leq(d, tol, "%d devices: relative difference %g", n, d);
                /* Without synchronisation each device normalises its own rows: not equal. */
                c.strategy.sync_bn = 0;
                c.strategy.replication_callbacks = 0;
                rig_train_cfg(&r, &c, steps, a, NP);
                cr_assert_gt(rig_rel_diff(a, ref, NP), 1e-4, "%d devices without sync_bn", n);
        }
}

Test(sync_batchnorm, ddp_one_step, .timeout = 60)
{
        check(STRATA_STRATEGY_DDP, 1, 1e-6);
}

Test(sync_batchnorm, dp_one_step, .timeout = 60)
{
        check(STRATA_STRATEGY_DP, 1, 1e-6);
}

Test(sync_batchnorm, ddp_twenty_steps, .timeout = 60)
{
        check(STRATA_STRATEGY_DDP, 20, 1e-5);
}

Test(sync_batchnorm, dp_needs_the_patch)
{
        struct strata_runtime *rt = NULL;
        struct rig r;

        rig_init(&r, 1);
        r.cfg.strategy.kind = STRATA_STRATEGY_DP;
        r.cfg.strategy.devices = 2;
        r.cfg.strategy.sync_bn = 1;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "patch_replication_callback"));
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        cr_assert_eq(strata_patch_replication_callback(&r.cfg), STRATA_EINVAL);
}
