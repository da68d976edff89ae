/*
 * The `dp` strategy (DataParallel): one process, the master copy on device 0. Every step
 * replicates the master's parameters and running state to the other devices, runs every
 * module's replication callback (copy 0 first, when enabled), splits the batch along rows,
 * runs forward and backward on all devices in parallel, reduces the gradients to the master in
 * device order and steps the optimizer there only.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int dp_replicate(struct strata_runtime *rt)
{
        STRATA_TRY(strata__multi_run(rt, STRATA__JOB_REPLICATE));
        return strata__multi_callbacks(rt);
}

static const struct strata__multi_hooks dp_hooks = { .before_batch = dp_replicate };

static int dp_run(void *obj, int state, int event, void *arg)
{
        (void)state;
        (void)arg;
        return strata__multi_lifecycle(obj, event, &dp_hooks);
}

#define S { NULL, dp_run, NULL }
static const struct strata_sm_state dp_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = S,       [STRATA_STATE_ENV_READY] = S,
        [STRATA_STATE_CONNECTED] = S,     [STRATA_STATE_READY] = S,
        [STRATA_STATE_IN_BATCH] = S,      [STRATA_STATE_FORWARD_DONE] = S,
        [STRATA_STATE_BACKWARD_DONE] = S, [STRATA_STATE_STEPPED] = S,
        [STRATA_STATE_ERROR] = S,
        [STRATA_STATE_TORNDOWN] = { strata__multi_teardown, NULL, NULL },
};

const struct strata__strategy strata__dp = {
        .name = "dp",
        .states = dp_states,
};
