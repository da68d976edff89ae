/* The table-driven hierarchical state-machine engine (contract in kernel/sm.h). */
#include <stddef.h>

#include "kernel/sm.h"
#include "strata/status.h"
#include "base/base.h"

/* Depth of @p s's chain of parents (itself included), or -1 past STRATA__SM_MAX_DEPTH. */
static int depth(const struct strata__sm_state *s)
{
        int d = 0;

        for (; s; s = s->parent)
                if (++d > STRATA__SM_MAX_DEPTH)
                        return -1;
        return d;
}

int strata__sm_init(struct strata__sm *sm, const struct strata__sm_table *t, void *obj)
{
        if (!sm || !t || !t->states || !t->next)
                return strata__fail(STRATA_EINVAL, "state machine: NULL machine or table");
        if (t->initial >= t->nstates || t->error >= t->nstates || t->final >= t->nstates ||
            t->exception_event >= t->nevents || t->teardown_event >= t->nevents)
                return strata__fail(STRATA_EINVAL, "state machine: table indices out of range");
        for (int s = 0; s < t->nstates; s++)
                if (depth(&t->states[s]) < 0)
                        return strata__fail(STRATA_EINVAL,
                                            "state machine: state %d has more than %d parents "
                                            "or a loop of parents", s, STRATA__SM_MAX_DEPTH - 1);
        sm->table = t;
        sm->obj = obj;
        sm->state = t->initial;
        return STRATA_OK;
}

static const char *state_name(const struct strata__sm_table *t, int s)
{
        return t->state_names ? t->state_names[s] : "?";
}

static const char *event_name(const struct strata__sm_table *t, int e)
{
        return t->event_names ? t->event_names[e] : "?";
}

static int is_ancestor(const struct strata__sm_state *a, const struct strata__sm_state *s)
{
        for (; s; s = s->parent)
                if (s == a)
                        return 1;
        return 0;
}

/*
 * exit from the old state up to the nearest shared ancestor, then entry from below it down to
 * the new state; returns the first failing entry's status (exit cannot fail).
 */
static int move(struct strata__sm *sm, int to)
{
        const struct strata__sm_state *from = &sm->table->states[sm->state];
        const struct strata__sm_state *dest = &sm->table->states[to], *chain[STRATA__SM_MAX_DEPTH];
        const struct strata__sm_state *s;
        int n = 0;

        for (s = from; s && !is_ancestor(s, dest); s = s->parent)
                if (s->exit)
                        s->exit(sm->obj, sm->state);
        for (const struct strata__sm_state *d = dest; d && d != s; d = d->parent)
                chain[n++] = d;
        sm->state = to;
        while (n-- > 0)
                if (chain[n]->entry) {
                        int rc = chain[n]->entry(sm->obj, to);

                        if (rc != STRATA_OK)
                                return rc;
                }
        return STRATA_OK;
}

/* After a failed action: enter the error state unless already there; keep @p rc. */
static int fail_to_error(struct strata__sm *sm, int rc)
{
        if (sm->state != sm->table->error && sm->state != sm->table->final)
                (void)move(sm, sm->table->error);
        return rc;
}

/* The run actions from the current state up its parents until one handles @p event. */
static int run(struct strata__sm *sm, int event, void *arg)
{
        for (const struct strata__sm_state *s = &sm->table->states[sm->state]; s; s = s->parent) {
                int rc = s->run ? s->run(sm->obj, sm->state, event, arg) : STRATA__SM_PARENT;

                if (rc != STRATA__SM_PARENT)
                        return rc;
        }
        return STRATA_OK; /* no ancestor has work for this event */
}

int strata__sm_dispatch(struct strata__sm *sm, int event, void *arg)
{
        const struct strata__sm_table *t;
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
        if (event != t->exception_event && event != t->teardown_event) {
                rc = run(sm, event, arg);
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

int strata__sm_state(const struct strata__sm *sm)
{
        return sm && sm->table ? sm->state : -1;
}
