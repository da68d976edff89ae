/*
 * The `spawn` strategy (Lightning's DDPSpawn): in each process strata_spawn() started
 * (strategy/process.c), a runtime with strategy spawn is ddp across the devices of all of
 * them, joined by the shared region mapped before the fork (the spawn link,
 * drivers/shm/procs.c). Results equal ddp's with as many devices, bitwise.
 */
#include "strata/status.h"
#include "strategy/multi.h"

static int spawn_processes(const struct strata_config *c, int *procs)
{
        if (!strata__spawned()->region)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in the processes "
                                                   "strata_spawn() starts");
        return strata__procs_spawned(c, procs);
}

static int spawn_validate(const struct strata_config *c, const struct strata_device_ops *drv)
{
        if (strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy spawn on %s: device memory "
                                                    "across processes is not supported",
                                    drv->name);
        return strata__multi_validate(c, drv, "spawn");
}

static int spawn_environment(void *obj, int state, int event, void *arg)
{
        (void)state, (void)event, (void)arg;
        STRATA_TRY(strata__procs_join(obj, &strata__procs_net, strata__spawned()));
        return STRATA__SM_PARENT;
}

static const struct strata__sm_state spawn_states[STRATA_STATE_COUNT] =
        STRATA__PROCS_STATES(spawn_environment);

const struct strata__strategy strata__spawn = {
        .name = "spawn",
        .validate = spawn_validate,
        .layout = strata__procs_layout,
        .states = spawn_states,
        .collective = strata__multi_collective,
        .is_global_zero = strata__is_global_zero,
        .root_device = strata__root_device,
        .world_size = strata__world_size,
        .processes = spawn_processes,
        .stop_due = strata__procs_stop_due,
        .handles_gradient_accumulation = 1,
        .all_reduces_gradients = 1,
        .invariant = 1,
};
