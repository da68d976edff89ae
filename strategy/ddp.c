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

const struct strata__strategy strata__ddp = {
        .name = "ddp",
        .states = strata__multi_states,
        .hooks = &ddp_hooks,
};
