/*
 * The strategy registry: one line per strategy kind, the only map from a kind or name to its
 * strategy table (how its devices synchronise) and its job (where its ranks live: this process,
 * strata_spawn()'s processes, an MPI launcher's, or whichever this process belongs to).
 * `spawn` and `mpi` are ddp in a job of processes: a name over ddp's table, and their job.
 */
#include <stddef.h>
#include <string.h>

#include "strata/status.h"

#include "strategy/job.h"

extern const struct strata__strategy strata__single;
extern const struct strata__strategy strata__dp;
extern const struct strata__strategy strata__ddp;
extern const struct strata__strategy strata__zero1;
extern const struct strata__strategy strata__zero2;
extern const struct strata__strategy strata__fsdp;

static const struct strata__strategy spawn = { .name = "spawn", .parent = &strata__ddp };
static const struct strata__strategy mpi = { .name = "mpi", .parent = &strata__ddp };

static const struct {
        const struct strata__strategy *strategy;
        const struct strata__job_ops *job;
} registry[STRATA_STRATEGY_COUNT] = {
        [STRATA_STRATEGY_SINGLE] = { &strata__single, &strata__job_none },
        [STRATA_STRATEGY_DP] = { &strata__dp, &strata__job_none },
        [STRATA_STRATEGY_DDP] = { &strata__ddp, &strata__job_none },
        [STRATA_STRATEGY_SPAWN] = { &spawn, &strata__job_spawn },
        [STRATA_STRATEGY_MPI] = { &mpi, &strata__job_mpi },
        [STRATA_STRATEGY_ZERO1] = { &strata__zero1, &strata__job_auto },
        [STRATA_STRATEGY_ZERO2] = { &strata__zero2, &strata__job_auto },
        [STRATA_STRATEGY_FSDP] = { &strata__fsdp, &strata__job_auto },
};

const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind)
{
        return (unsigned)kind < STRATA_STRATEGY_COUNT ? registry[kind].strategy : NULL;
}

const struct strata__job_ops *strata__strategy_job(enum strata_strategy_kind kind)
{
        return (unsigned)kind < STRATA_STRATEGY_COUNT ? registry[kind].job : NULL;
}

int strata_strategy_from_name(const char *name, enum strata_strategy_kind *out)
{
        for (int k = 0; name && out && k < STRATA_STRATEGY_COUNT; k++)
                if (registry[k].strategy && !strcmp(registry[k].strategy->name, name)) {
                        *out = (enum strata_strategy_kind)k;
                        return STRATA_OK;
                }
        return strata__fail(STRATA_EINVAL, "strategy '%s' unknown", name ? name : "(null)");
}

const char *strata_strategy_name(enum strata_strategy_kind kind)
{
        const struct strata__strategy *st = strata__strategy_get(kind);

        return st ? st->name : "?";
}
