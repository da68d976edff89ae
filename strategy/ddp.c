/*
 * The `ddp` strategy: one worker per device, each with its own parameters and optimizer.
 * Parameters are broadcast from device 0 at connect; gradients are summed across devices in
 * buckets (reverse layer order, 25 MB cap) as soon as each bucket's gradients are complete
 * during backward, in bucket order; on accumulation micro-batches nothing is communicated
 * (no_sync). Every device then takes the same optimizer step on identical inputs.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int ddp_setup(struct strata_runtime *rt)
{
        strata__multi_buckets(rt);
        return STRATA_OK;
}

static const struct strata__multi_hooks ddp_hooks = { .setup = ddp_setup };

static int ddp_run(void *obj, int state, int event, void *arg)
{
        (void)state;
        (void)arg;
        return strata__multi_lifecycle(obj, event, &ddp_hooks);
}

#define S { NULL, ddp_run, NULL }
static const struct strata_sm_state ddp_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = S,       [STRATA_STATE_ENV_READY] = S,
        [STRATA_STATE_CONNECTED] = S,     [STRATA_STATE_READY] = S,
        [STRATA_STATE_IN_BATCH] = S,      [STRATA_STATE_FORWARD_DONE] = S,
        [STRATA_STATE_BACKWARD_DONE] = S, [STRATA_STATE_STEPPED] = S,
        [STRATA_STATE_ERROR] = S,
        [STRATA_STATE_TORNDOWN] = { strata__multi_teardown, NULL, NULL },
};

const struct strata__strategy strata__ddp = {
        .name = "ddp",
        .states = ddp_states,
};
