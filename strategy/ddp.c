/*
 * The `ddp` strategy: one worker per device, each with its own parameters and optimizer.
 * Parameters are broadcast from device 0 at connect; gradients are summed across devices in
 * buckets (reverse layer order, 25 MB cap) as soon as each bucket's gradients are complete
 * during backward, in bucket order; on accumulation micro-batches nothing is communicated
 * (no_sync). Every device then takes the same optimizer step on identical inputs.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int ddp_run(void *obj, int state, int event, void *arg)
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
                strata__multi_buckets(rt);
                return strata__multi_setup(rt);
        case STRATA_EV_BATCH_START:
        case STRATA_EV_VALIDATION_STEP:
        case STRATA_EV_TEST_STEP:
        case STRATA_EV_PREDICT_STEP:
                strata__multi_split(rt, rt->args.batch);
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

static int ddp_teardown(void *obj, int state)
{
        (void)state;
        strata__multi_stop(obj);
        return STRATA_OK;
}

#define S { NULL, ddp_run, NULL }
static const struct strata_sm_state ddp_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = S,       [STRATA_STATE_ENV_READY] = S,
        [STRATA_STATE_CONNECTED] = S,     [STRATA_STATE_READY] = S,
        [STRATA_STATE_IN_BATCH] = S,      [STRATA_STATE_FORWARD_DONE] = S,
        [STRATA_STATE_BACKWARD_DONE] = S, [STRATA_STATE_STEPPED] = S,
        [STRATA_STATE_ERROR] = S,
        [STRATA_STATE_TORNDOWN] = { ddp_teardown, NULL, NULL },
};

const struct strata__strategy strata__ddp = {
        .name = "ddp",
        .states = ddp_states,
};
