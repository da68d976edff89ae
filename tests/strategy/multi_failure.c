/*
 * An error injected on any device in any phase of a training step comes back from the call
 * with its message (which device, which phase) in the caller's strata_last_error(), the runtime is in ERROR (refusing further steps), every worker was released (the call
 * returned), and teardown succeeds.
 */
#include <criterion/criterion.h>

#include "strategy/internal.h"
#include "strategy/multi.h"
#include "kernel/lifecycle.h"
#include <stdio.h>
#include <string.h>

#include "tests/support/rig.h"

static const int phases[] = { STRATA__EV_BATCH_START, STRATA__EV_TRAINING_STEP,
                              STRATA__EV_BACKWARD, STRATA__EV_OPTIMIZER_STEP,
                              STRATA__EV_BATCH_END };

/* A runtime of @p c connected, one step taken on the rig's first batch @p b. */
static struct strata_runtime *stepped(struct rig *r, const struct strata_config *c,
                                      struct strata_batch *b)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r->loader, r->idx, 256);
        cr_assert(strata_loader_next(&r->loader, b));
        cr_assert_eq(strata_train_step(rt, b, NULL), STRATA_OK);
        return rt;
}

static void each(enum strata_strategy_kind kind, int n)
{
        for (int dev = 0; dev < n; dev++)
                for (size_t p = 0; p < sizeof(phases) / sizeof(phases[0]); p++) {
                        struct strata_runtime *rt;
                        struct strata_batch b;
                        struct strata_config c;
                        struct rig r;
                        char want[128];

                        rig_init(&r, 1);
                        c = r.cfg;
                        c.strategy.kind = kind;
                        c.strategy.devices = n;
                        c.strategy.sync_bn = kind == STRATA_STRATEGY_DDP;
                        c.device.timeout_s = 5.0;
                        rt = stepped(&r, &c, &b);
                        cr_assert_eq(strata__inject_failure(rt, dev, phases[p], STRATA_EINJECTED),
                                     STRATA_OK);
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINJECTED,
                                     "device %d phase %s", dev, strata__event_name(phases[p]));
                        snprintf(want, sizeof(want), "device %d: injected failure in %s", dev,
                                 strata__event_name(phases[p]));
                        cr_assert_not_null(strstr(strata_last_error(), want),
                                           "the caller's message: '%s', want '%s'",
                                           strata_last_error(), want);
                        cr_assert_eq(strata_state(rt), STRATA_STATE_ERROR);
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EBADSTATE);
                        cr_assert_eq(strata_teardown(rt), STRATA_OK);
                }
}

Test(multi_failure, ddp_every_device_every_phase, .timeout = 120)
{
        each(STRATA_STRATEGY_DDP, 3);
}

Test(multi_failure, dp_every_device_every_phase, .timeout = 120)
{
        each(STRATA_STRATEGY_DP, 3);
}

Test(multi_failure, single_every_phase)
{
        each(STRATA_STRATEGY_SINGLE, 1);
}

Test(multi_failure, inject_bad_arguments)
{
        struct strata_runtime *rt;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
        cr_assert_eq(strata__inject_failure(rt, 1, STRATA__EV_BACKWARD, STRATA_EINJECTED),
                     STRATA_EINVAL);
        cr_assert_eq(strata__inject_failure(rt, 0, 99, STRATA_EINJECTED), STRATA_EINVAL);
        cr_assert_eq(strata__inject_failure(rt, 0, STRATA__EV_BACKWARD, 3), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The events outside a training step: connect, setup, evaluation and prediction. */
static void each_other_event(enum strata_strategy_kind kind, int n)
{
        static const int events[] = { STRATA__EV_CONNECT, STRATA__EV_SETUP,
                                      STRATA__EV_VALIDATION_STEP, STRATA__EV_PREDICT_STEP };

        for (int dev = 0; dev < n; dev++)
                for (size_t e = 0; e < sizeof(events) / sizeof(events[0]); e++) {
                        float logits[RIG_BATCH * RIG_CLASSES];
                        struct strata_runtime *rt;
                        struct strata_batch b;
                        struct strata_config c;
                        struct rig r;
                        int rc, ev = events[e];

                        rig_init(&r, 1);
                        c = r.cfg;
                        c.strategy.kind = kind;
                        c.strategy.devices = n;
                        c.device.timeout_s = 5.0;
                        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                        cr_assert_eq(strata__inject_failure(rt, dev, ev, STRATA_EINJECTED),
                                     STRATA_OK);
                        rc = strata_connect(rt);
                        if (ev == STRATA__EV_CONNECT || ev == STRATA__EV_SETUP) {
                                cr_assert_eq(rc, STRATA_EINJECTED, "device %d %s", dev,
                                             strata__event_name(ev));
                                cr_assert_eq(strata_teardown(rt), STRATA_OK);
                                continue;
                        }
                        cr_assert_eq(rc, STRATA_OK, "%s", strata_last_error());
                        strata_loader_reset(&r.loader, r.idx, 256);
                        cr_assert(strata_loader_next(&r.loader, &b));
                        rc = ev == STRATA__EV_VALIDATION_STEP
                                     ? strata_eval_step(rt, &b, NULL)
                                     : strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES);
                        cr_assert_eq(rc, STRATA_EINJECTED, "device %d %s", dev,
                                     strata__event_name(ev));
                        cr_assert_eq(strata_teardown(rt), STRATA_OK);
                }
}

Test(multi_failure, other_events_every_strategy, .timeout = 120)
{
        each_other_event(STRATA_STRATEGY_SINGLE, 1);
        each_other_event(STRATA_STRATEGY_DP, 2);
        each_other_event(STRATA_STRATEGY_DDP, 2);
}

/*
 * ddp's split step (decisions 0111, 0121): a device failing at its optimizer step leaves every
 * replica's parameters as they were, checked or under allow_nonfinite (which agrees on nothing
 * after the backward: its own meeting before the update is what keeps the others from writing
 * into the replicas).
 */
Test(multi_failure, split_step_failure_leaves_every_replica, .timeout = 120)
{
        static float before[4096];

        for (int unchecked = 0; unchecked < 2; unchecked++)
                for (int dev = 0; dev < 3; dev++) {
                        struct strata_runtime *rt;
                        struct strata_batch b;
                        struct strata_config c;
                        struct rig r;
                        size_t n;

                        rig_init(&r, 1);
                        c = r.cfg;
                        c.strategy.kind = STRATA_STRATEGY_DDP;
                        c.strategy.devices = 3;
                        c.train.allow_nonfinite = unchecked;
                        c.device.timeout_s = 5.0;
                        rt = stepped(&r, &c, &b);
                        cr_assert(strata__dev_split(rt, strata__multi(rt)), "not split");
                        n = strata__replica_view(strata__rep(rt, 0))->nparam;
                        cr_assert_leq(n, sizeof(before) / sizeof(before[0]));
                        memcpy(before, strata__replica_view(strata__rep(rt, 0))->params,
                               n * sizeof(float));
                        cr_assert_eq(strata__inject_failure(rt, dev, STRATA__EV_OPTIMIZER_STEP,
                                                            STRATA_EINJECTED), STRATA_OK);
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINJECTED);
                        for (int d = 0; d < 3; d++)
                                cr_assert_eq(memcmp(before,
                                                    strata__replica_view(strata__rep(rt, d))
                                                            ->params,
                                                    n * sizeof(float)), 0,
                                             "allow_nonfinite %d, device %d failed: replica %d "
                                             "changed", unchecked, dev, d);
                        cr_assert_eq(strata_teardown(rt), STRATA_OK);
                }
}
