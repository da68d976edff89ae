/*
 * Strategy inheritance: the lifecycle machine of every runtime runs these state actions, and
 * each hands the state's work to the runtime's strategy table or, where that table has no
 * action for it (or its run action hands the event up), to its parent, and so on up the chain
 * (single, dp -> multi; fsdp -> zero1 -> ddp -> multi; zero2 -> zero1; spawn, mpi -> ddp: the
 * chain is how devices synchronise, the runtime's job where they live). A strategy thus writes
 * only the states and hooks where it differs from its parent.
 */
#include <stddef.h>

#include "strata/status.h"
#include "strategy/internal.h"

/* Longest chain of strategies: the engine's bound on a state's parents. */
#define DEPTH STRATA__SM_MAX_DEPTH

unsigned strata__caps(const struct strata__strategy *st)
{
        return st ? (strata__caps(st->parent) & ~st->drops) | st->caps : 0u;
}

static const struct strata__sm_state *state_of(const struct strata__strategy *st, int state)
{
        return st->states ? &st->states[state] : NULL;
}

static int run(void *obj, int state, int event, void *arg)
{
        const struct strata_runtime *rt = obj;

        for (const struct strata__strategy *st = rt->strategy; st; st = st->parent) {
                const struct strata__sm_state *s = state_of(st, state);
                int rc;

                if (!s || !s->run)
                        continue;
                rc = s->run(obj, state, event, arg);
                if (rc != STRATA__SM_PARENT)
                        return rc;
        }
        return STRATA_OK; /* no strategy of the chain has work for this event */
}

/* Entering a state: the root's entry first, down to the runtime's strategy. */
static int entry(void *obj, int state)
{
        const struct strata_runtime *rt = obj;
        const struct strata__strategy *chain[DEPTH];
        int n = 0;

        for (const struct strata__strategy *st = rt->strategy; st && n < DEPTH; st = st->parent)
                chain[n++] = st;
        while (n-- > 0) {
                const struct strata__sm_state *s = state_of(chain[n], state);

                if (s && s->entry)
                        STRATA_TRY(s->entry(obj, state));
        }
        return STRATA_OK;
}

/* Leaving a state: the runtime's strategy's exit first, up to the root. */
static void leave(void *obj, int state)
{
        const struct strata_runtime *rt = obj;

        for (const struct strata__strategy *st = rt->strategy; st; st = st->parent) {
                const struct strata__sm_state *s = state_of(st, state);

                if (s && s->exit)
                        s->exit(obj, state);
        }
}

#define STATE { .entry = entry, .run = run, .exit = leave }
const struct strata__sm_state strata__strategy_states[STRATA_STATE_COUNT] = {
        STATE, STATE, STATE, STATE, STATE, STATE, STATE, STATE, STATE, STATE,
};
#undef STATE
_Static_assert(STRATA_STATE_COUNT == 10, "one STATE per lifecycle state");
