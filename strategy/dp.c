/*
 * The `dp` strategy (DataParallel): one process, the master copy on device 0. Every step
 * replicates the master's parameters and running state to the other devices, runs every
 * module's replication callback (copy 0 first, when enabled), splits the batch along rows,
 * runs forward and backward on all devices in parallel, reduces the gradients to the master in
 * device order and steps the optimizer on the master's state only. Where the driver allows it
 * (host-visible memory, optim_range), every device's worker computes its own range of the
 * master's update, the range it has just reduced, into its own replica and then into every
 * other replica: the update is elementwise, so this is bitwise the master's step, and the
 * next replication finds every replica already holding the master's parameters.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int dp_replicate(struct strata_runtime *rt)
{
        STRATA_TRY(strata__multi_run(rt, STRATA__JOB_REPLICATE));
        rt->replicas_current = 1;
        return strata__multi_callbacks(rt);
}

static const struct strata__multi_hooks dp_hooks = { .before_batch = dp_replicate };

const struct strata__strategy strata__dp = {
        .name = "dp",
        .states = strata__multi_states,
        .hooks = &dp_hooks,
};
