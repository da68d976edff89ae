/*
 * The `spawn` strategy (Lightning's DDPSpawn): in each process strata_spawn() started
 * (strategy/process/launch.c), a runtime with strategy spawn is ddp across the devices of all
 * of them, joined by the shared region mapped before the fork (the spawn link,
 * drivers/shm/spawn_link.c). Results equal ddp's with as many devices, bitwise. Parent: the
 * process layer (strategy/process/layer.c); spawn adds how it counts and joins its processes.
 */
#include "strata/status.h"
#include "strategy/process/process.h"

static int spawn_processes(const struct strata_config *c, int *procs)
{
        if (!strata__spawned()->region)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in the processes "
                                                   "strata_spawn() starts");
        return strata__procs_spawned(c, procs);
}

static int spawn_join(struct strata_runtime *rt)
{
        return strata__procs_join(rt, &strata__shm_spawn_link, strata__spawned());
}

const struct strata__strategy strata__spawn = {
        .name = "spawn",
        .parent = &strata__procs,
        .ops = { .processes = spawn_processes, .join = spawn_join },
};
