/*
 * dp and ddp on 1-4 devices reach the parameters single-device training reaches on the whole
 * batch (relative difference <= 1e-5, bitwise on one device), and repeated runs are bitwise
 * identical. Batches of 16 rows are not divisible by 3 devices.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)
#define STEPS 20

static void compare(enum strata_strategy_kind kind)
{
        static float ref[NP], a[NP], b[NP];
        struct rig r;

        rig_init(&r, 0);
        rig_train(&r, STEPS, ref, NP);
        for (int n = 1; n <= 4; n++) {
                struct strata_config c = rig_cfg(&r, kind, n, 0);
                double d;

                rig_train_cfg(&r, &c, STEPS, a, NP);
                rig_train_cfg(&r, &c, STEPS, b, NP);
                cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "%d devices: runs differ", n);
                d = rig_rel_diff(a, ref, NP);
                if (n == 1)
                        cr_assert_eq(memcmp(a, ref, sizeof(a)), 0, "1 device must be bitwise single");
                else
                        cr_assert_leq(d, 1e-5, "%d devices: relative difference %g", n, d);
        }
}

Test(parallel_equivalence, ddp, .timeout = 120)
{
        compare(STRATA_STRATEGY_DDP);
}

Test(parallel_equivalence, dp, .timeout = 120)
{
        compare(STRATA_STRATEGY_DP);
}
