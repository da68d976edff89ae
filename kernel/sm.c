/* The table-driven state-machine engine (contract in include/strata/sm.h). */
#include <stddef.h>

#include "strata/sm.h"
#include "strata/status.h"
#include "base/base.h"

int strata_sm_init(struct strata_sm *sm, const struct strata_sm_table *t, void *obj)
{
        if (!sm || !t || !t->states || !t->next)
                return strata__fail(STRATA_EINVAL, "state machine: NULL machine or table");
        if (t->initial >= t->nstates || t->error >= t->nstates || t->final >= t->nstates ||
            t->exception_event >= t->nevents || t->teardown_event >= t->nevents)
                return strata__fail(STRATA_EINVAL, "state machine: table indices out of range");
        sm->table = t;
        sm->obj = obj;
        sm->state = t->initial;
        return STRATA_OK;
}

static const char *state_name(const struct strata_sm_table *t, int s)
{
        return t->state_names ? t->state_names[s] : "?";
}

static const char *event_name(const struct strata_sm_table *t, int e)
{
        return t->event_names ? t->event_names[e] : "?";
}

/* exit(from), entry(to); returns the entry's status (exit cannot fail). */
static int move(struct strata_sm *sm, int to)
{
        const struct strata_sm_state *s = sm->table->states;
        int from = sm->state;

        if (s[from].exit)
                s[from].exit(sm->obj, from);
        sm->state = to;
        return s[to].entry ? s[to].entry(sm->obj, to) : STRATA_OK;
}

/* After a failed action: enter the error state unless already there; keep @p rc. */
static int fail_to_error(struct strata_sm *sm, int rc)
{
        if (sm->state != sm->table->error && sm->state != sm->table->final)
                (void)move(sm, sm->table->error);
        return rc;
}

int strata_sm_dispatch(struct strata_sm *sm, int event, void *arg)
{
        const struct strata_sm_table *t;
        const struct strata_sm_state *cur;
        int target, rc = STRATA_OK;

        if (!sm || !sm->table)
                return strata__fail(STRATA_EINVAL, "state machine is NULL or not initialised");
        t = sm->table;
        if (event < 0 || event >= t->nevents)
                return strata__fail(STRATA_EINVAL, "event %d out of range", event);
        target = sm->state == t->final ? -1 : t->next[sm->state * t->nevents + event];
        if (target < 0)
                return strata__fail(STRATA_EBADSTATE, "event %s not allowed in state %s",
                                    event_name(t, event), state_name(t, sm->state));
        cur = &t->states[sm->state];
        if (event != t->exception_event && event != t->teardown_event && cur->run) {
                rc = cur->run(sm->obj, sm->state, event, arg);
                if (rc != STRATA_OK)
                        return fail_to_error(sm, rc);
        }
        if (target != sm->state) {
                rc = move(sm, target);
                if (rc != STRATA_OK)
                        return fail_to_error(sm, rc);
        }
        return STRATA_OK;
}

int strata_sm_state(const struct strata_sm *sm)
{
        return sm && sm->table ? sm->state : -1;
}
