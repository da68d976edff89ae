/*
 * The two-input, two-output model (tests/support/multinet.h) under every strategy, as the
 * graph models are held (skip_parallel.c): ddp on 1 device bitwise single, on 2 repeating
 * bitwise and within 1e-5 of single; zero1, zero2 and fsdp on 2 bitwise ddp on 2; dp on 2
 * within 1e-5 of single; in invariant mode single, ddp on 2 and 4 and fsdp on 2 bitwise the
 * same run (parameters and losses). Every run: planned == used, no heap call during steps.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/multinet.h"
#include "tests/support/rig.h"

#define STEPS 8

static struct multinet_run ref, a, b;

static void run(enum strata_strategy_kind s, int devices, int invariant,
                struct multinet_run *out)
{
        struct strata_config c = multinet_cfg(s, devices);

        c.strategy.invariant = invariant;
        multinet_train(&c, STEPS, out);
        cr_assert(out->heap_calls <= 0, "%s on %d: %ld heap calls during steps",
                  strata_strategy_name(s), devices, out->heap_calls);
}

static int same(const struct multinet_run *x, const struct multinet_run *y)
{
        return !memcmp(x->p, y->p, sizeof(x->p));
}

Test(multi_io_parallel, ddp_sharded_dp, .timeout = 240)
{
        static const enum strata_strategy_kind sharded[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };
        double d;

        run(STRATA_STRATEGY_SINGLE, 1, 0, &ref);
        cr_assert(ref.loss[STEPS - 1] < ref.loss[0], "the weighted loss falls: %g -> %g",
                  ref.loss[0], ref.loss[STEPS - 1]);
        run(STRATA_STRATEGY_DDP, 1, 0, &a);
        cr_assert(same(&a, &ref), "ddp on 1 device is not bitwise single");
        run(STRATA_STRATEGY_DDP, 2, 0, &a);
        run(STRATA_STRATEGY_DDP, 2, 0, &b);
        cr_assert(same(&a, &b), "ddp on 2 devices: runs differ");
        d = rig_rel_diff(a.p, ref.p, MULTINET_NP);
        cr_assert_leq(d, 1e-5, "ddp on 2: %g from single", d);
        for (size_t i = 0; i < sizeof(sharded) / sizeof(sharded[0]); i++) {
                run(sharded[i], 2, 0, &b);
                cr_assert(same(&b, &a), "%s on 2 devices is not bitwise ddp",
                          strata_strategy_name(sharded[i]));
        }
        run(STRATA_STRATEGY_DP, 2, 0, &b);
        d = rig_rel_diff(b.p, ref.p, MULTINET_NP);
        cr_assert_leq(d, 1e-5, "dp on 2: %g from single", d);
}

Test(multi_io_parallel, invariant_on_any_device_count, .timeout = 240)
{
        run(STRATA_STRATEGY_SINGLE, 1, 1, &ref);
        for (int n = 2; n <= 4; n *= 2) {
                run(STRATA_STRATEGY_DDP, n, 1, &a);
                cr_assert(same(&a, &ref), "invariant mode on %d devices differs from 1", n);
                cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
        }
        run(STRATA_STRATEGY_FSDP, 2, 1, &a);
        cr_assert(same(&a, &ref), "invariant fsdp on 2 devices differs");
        cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
}
