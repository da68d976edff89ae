/* The strategy registry: one line per strategy; the only map from a kind or name to a table. */
#include <stddef.h>
#include <string.h>

#include "strata/status.h"

#include "strategy/internal.h"

extern const struct strata__strategy strata__single;
extern const struct strata__strategy strata__dp;
extern const struct strata__strategy strata__ddp;
extern const struct strata__strategy strata__spawn;
extern const struct strata__strategy strata__mpi;
extern const struct strata__strategy strata__zero1;
extern const struct strata__strategy strata__zero2;
extern const struct strata__strategy strata__fsdp;

static const struct strata__strategy *const registry[STRATA_STRATEGY_COUNT] = {
        [STRATA_STRATEGY_SINGLE] = &strata__single,
        [STRATA_STRATEGY_DP] = &strata__dp,
        [STRATA_STRATEGY_DDP] = &strata__ddp,
        [STRATA_STRATEGY_SPAWN] = &strata__spawn,
        [STRATA_STRATEGY_MPI] = &strata__mpi,
        [STRATA_STRATEGY_ZERO1] = &strata__zero1,
        [STRATA_STRATEGY_ZERO2] = &strata__zero2,
        [STRATA_STRATEGY_FSDP] = &strata__fsdp,
};

const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind)
{
        return (unsigned)kind < STRATA_STRATEGY_COUNT ? registry[kind] : NULL;
}

int strata_strategy_from_name(const char *name, enum strata_strategy_kind *out)
{
        for (int k = 0; name && out && k < STRATA_STRATEGY_COUNT; k++)
                if (registry[k] && !strcmp(registry[k]->name, name)) {
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
