/* The strategy registry: one line per strategy. */
#include <stddef.h>

#include "strategy/internal.h"

extern const struct strata__strategy strata__single;

static const struct strata__strategy *const registry[STRATA_STRATEGY_COUNT] = {
        [STRATA_STRATEGY_SINGLE] = &strata__single,
};

const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind)
{
        return (unsigned)kind < STRATA_STRATEGY_COUNT ? registry[kind] : NULL;
}
