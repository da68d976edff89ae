/* The strategy registry: one line per strategy. */
#include <stddef.h>

#include "strategy/internal.h"

extern const struct strata__strategy strata__single;
extern const struct strata__strategy strata__dp;
extern const struct strata__strategy strata__ddp;

static const struct strata__strategy *const registry[STRATA_STRATEGY_COUNT] = {
        [STRATA_STRATEGY_SINGLE] = &strata__single,
        [STRATA_STRATEGY_DP] = &strata__dp,
        [STRATA_STRATEGY_DDP] = &strata__ddp,
};

const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind)
{
        return (unsigned)kind < STRATA_STRATEGY_COUNT ? registry[kind] : NULL;
}
