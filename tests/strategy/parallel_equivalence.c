/*
 * dp and ddp on 1-4 devices reach the parameters single-device training reaches on the whole
 * batch (relative difference <= 1e-5, bitwise on one device), and repeated runs are bitwise
 * identical. Batches of 16 rows are not divisible by 3 devices.
 */
#include <criterion/criterion.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)
#define STEPS 20

static void compare(enum strata_strategy_kind kind)
{
        struct rig r;

        rig_init(&r, 0);
        rig_equivalence(&r, kind, 4, NP, STEPS);
}

Test(parallel_equivalence, ddp, .timeout = 120)
{
        compare(STRATA_STRATEGY_DDP);
}

Test(parallel_equivalence, dp, .timeout = 120)
{
        compare(STRATA_STRATEGY_DP);
}
