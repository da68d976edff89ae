/*
 * A training step's device work is one run of the worker pool where the chain lets it
 * (decision 0097): ddp's devices meet the coordinator once a step, not after each of
 * training_step, backward and optimizer_step; an accumulation micro-batch (no optimizer step)
 * and a zero1 step too. dp, whose master steps on the coordinator, keeps its runs.
 * What a step computes is results_matrix's; a failure in each phase of each device is
 * multi_failure's.
 */
#include <criterion/criterion.h>

#include "strategy/multi.h"
#include "tests/support/rig.h"

/* Runs of @p rt's pool that one training step on @p b takes, and that it returned @p rc. */
static unsigned runs_of_step(struct strata_runtime *rt, const struct strata_batch *b)
{
        struct strata__workers *w = strata__multi(rt)->workers;
        unsigned before = strata__workers_runs(w);

        cr_assert_eq(strata_train_step(rt, b, NULL), STRATA_OK, "%s", strata_last_error());
        return strata__workers_runs(w) - before;
}

static void runs(enum strata_strategy_kind kind, int devices, int accumulate, int bn,
                 unsigned want_step, unsigned want_micro)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_config c;
        struct rig r;

        rig_init(&r, bn);
        c = rig_cfg(&r, kind, devices, bn);
        c.train.accumulate = accumulate;
        rt = rig_open(&c);
        cr_assert_not_null(strata__multi(rt)->workers, "a pool of %d devices", devices);
        strata_loader_reset(&r.loader, r.idx, 256);
        for (int s = 0; s < 2 * accumulate; s++) {
                int micro = (s + 1) % accumulate != 0;
                unsigned n;

                cr_assert(strata_loader_next(&r.loader, &b));
                n = runs_of_step(rt, &b);
                cr_assert_eq(n, micro ? want_micro : want_step,
                             "kind %d, %d devices, step %d: %u runs of the pool", kind, devices,
                             s, n);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(step_one_job, ddp_one_run_a_step, .timeout = 60)
{
        runs(STRATA_STRATEGY_DDP, 2, 1, 0, 1, 1);
        runs(STRATA_STRATEGY_DDP, 3, 1, 1, 1, 1); /* sync-bn: its sums inside the run */
}

Test(step_one_job, micro_batches_and_zero1_one_run, .timeout = 60)
{
        runs(STRATA_STRATEGY_DDP, 2, 2, 0, 1, 1);
        runs(STRATA_STRATEGY_ZERO1, 2, 1, 0, 1, 1);
}

Test(step_one_job, dp_keeps_its_runs, .timeout = 60)
{
        runs(STRATA_STRATEGY_DP, 2, 1, 0, 4, 0);
}
