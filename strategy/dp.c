/*
 * The `dp` strategy (DataParallel): one process, the master copy on device 0. Every step
 * replicates the master's parameters and running state to the other devices, runs every
 * module's replication callback (copy 0 first, when enabled), splits the batch along rows,
 * runs forward and backward on all devices in parallel, reduces the gradients to the master in
 * device order and steps the optimizer there only.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int replicate(struct strata_runtime *rt)
{
        STRATA_TRY(strata__multi_run(rt, STRATA__JOB_REPLICATE));
        return strata__multi_callbacks(rt);
}

static int dp_run(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        int rc;

        (void)state;
        (void)arg;
        switch (event) {
        case STRATA_EV_SETUP_ENVIRONMENT:
                return strata__multi_start(rt);
        case STRATA_EV_CONNECT:
                return strata__multi_run(rt, STRATA__JOB_INIT);
        case STRATA_EV_SETUP:
                return strata__multi_setup(rt);
        case STRATA_EV_BATCH_START:
        case STRATA_EV_VALIDATION_STEP:
        case STRATA_EV_TEST_STEP:
        case STRATA_EV_PREDICT_STEP:
                strata__multi_split(rt, rt->args.batch);
                STRATA_TRY(replicate(rt));
                break;
        default:
                break;
        }
        rc = strata__multi_event(rt, event);
        if (rc == STRATA_OK && (event == STRATA_EV_BATCH_END ||
                                event == STRATA_EV_VALIDATION_STEP || event == STRATA_EV_TEST_STEP))
                strata__multi_metrics(rt, rt->args.metrics);
        return rc;
}

static int dp_teardown(void *obj, int state)
{
        (void)state;
        strata__multi_stop(obj);
        return STRATA_OK;
}

#define S { NULL, dp_run, NULL }
static const struct strata_sm_state dp_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = S,       [STRATA_STATE_ENV_READY] = S,
        [STRATA_STATE_CONNECTED] = S,     [STRATA_STATE_READY] = S,
        [STRATA_STATE_IN_BATCH] = S,      [STRATA_STATE_FORWARD_DONE] = S,
        [STRATA_STATE_BACKWARD_DONE] = S, [STRATA_STATE_STEPPED] = S,
        [STRATA_STATE_ERROR] = S,
        [STRATA_STATE_TORNDOWN] = { dp_teardown, NULL, NULL },
};

const struct strata__strategy strata__dp = {
        .name = "dp",
        .states = dp_states,
};
