/*
 * Parent states: a run action that returns STRATA__SM_PARENT (or is NULL) hands the event to
 * its parent; on a state change exits run from the old state up to the nearest shared
 * ancestor and entries from below it down to the new state; a failing parent action moves
 * the machine to its error state; chains that are too deep or loop are refused at init. The
 * expected traces are written here from that specification.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "strata/strata.h"
#include "kernel/sm.h"

/* A three-state machine; C is both its error and its final state. */
enum { A, B, C, NSTATES };

struct rec {
        char trace[256];
        int fail_parent_run; /* 1: the shared parent's run fails */
};

static void note(void *obj, const char *what)
{
        struct rec *r = obj;

        strncat(r->trace, what, sizeof(r->trace) - strlen(r->trace) - 1);
        strncat(r->trace, " ", sizeof(r->trace) - strlen(r->trace) - 1);
}

static int p_entry(void *o, int s)
{
        (void)s;
        note(o, "P.entry");
        return STRATA_OK;
}

static void p_exit(void *o, int s)
{
        (void)s;
        note(o, "P.exit");
}

static int p_run(void *o, int s, int e, void *arg)
{
        struct rec *r = o;

        (void)s, (void)arg;
        note(o, e == 0 ? "P.run0" : "P.run1");
        return r->fail_parent_run ? STRATA_EINJECTED : STRATA_OK;
}

static int g_entry(void *o, int s)
{
        (void)s;
        note(o, "G.entry");
        return STRATA_OK;
}

static void g_exit(void *o, int s)
{
        (void)s;
        note(o, "G.exit");
}

/* A's own run handles event 1 and hands event 0 up. */
static int a_run(void *o, int s, int e, void *arg)
{
        (void)s, (void)arg;
        note(o, e == 0 ? "A.run0" : "A.run1");
        return e == 0 ? STRATA__SM_PARENT : STRATA_OK;
}

static int a_entry(void *o, int s)
{
        (void)s;
        note(o, "A.entry");
        return STRATA_OK;
}

static void a_exit(void *o, int s)
{
        (void)s;
        note(o, "A.exit");
}

static int b_entry(void *o, int s)
{
        (void)s;
        note(o, "B.entry");
        return STRATA_OK;
}

static void b_exit(void *o, int s)
{
        (void)s;
        note(o, "B.exit");
}

static int c_entry(void *o, int s)
{
        (void)s;
        note(o, "C.entry");
        return STRATA_OK;
}

/* G is P's parent; A and B share P (and G); C is outside both. */
static const struct strata__sm_state G = { g_entry, NULL, g_exit, NULL };
static const struct strata__sm_state P = { p_entry, p_run, p_exit, &G };
static const struct strata__sm_state states[NSTATES] = {
        [A] = { a_entry, a_run, a_exit, &P },
        [B] = { b_entry, NULL, b_exit, &P }, /* no run: events go straight to P */
        [C] = { c_entry, NULL, NULL, NULL },
};
/* A: 0 -> B, 1 -> A (handled by A itself); B: 1 -> C; event 2 is exception and teardown. */
static const signed char next[NSTATES * 3] = { B, A, C, -1, C, C, -1, -1, -1 };
static const struct strata__sm_table table = {
        .states = states, .next = next, .nstates = NSTATES, .nevents = 3, .initial = A,
        .error = C, .final = C, .exception_event = 2, .teardown_event = 2,
};

Test(sm_hierarchy, run_goes_up_and_moves_cross_the_shared_ancestor)
{
        struct rec r = { 0 };
        struct strata__sm sm;

        cr_assert_eq(strata__sm_init(&sm, &table, &r), STRATA_OK);
        /* A handles 1 itself and stays: no exit, no entry. */
        cr_assert_eq(strata__sm_dispatch(&sm, 1, NULL), STRATA_OK);
        cr_assert_str_eq(r.trace, "A.run1 ");
        /* A hands 0 to P; A -> B shares P and G: only A exits, only B enters. */
        r.trace[0] = '\0';
        cr_assert_eq(strata__sm_dispatch(&sm, 0, NULL), STRATA_OK);
        cr_assert_str_eq(r.trace, "A.run0 P.run0 A.exit B.entry ");
        cr_assert_eq(strata__sm_state(&sm), B);
        /* B has no run: P handles 1; B -> C shares nothing: B, P, G exit inner first. */
        r.trace[0] = '\0';
        cr_assert_eq(strata__sm_dispatch(&sm, 1, NULL), STRATA_OK);
        cr_assert_str_eq(r.trace, "P.run1 B.exit P.exit G.exit C.entry ");
        cr_assert_eq(strata__sm_state(&sm), C);
}

Test(sm_hierarchy, entries_run_outer_first_from_outside)
{
        static const struct strata__sm_state two[2] = {
                { c_entry, NULL, NULL, NULL },
                { b_entry, NULL, b_exit, &P },
        };
        static const signed char nx[4] = { 1, -1, -1, -1 };
        struct strata__sm_table t = { .states = two, .next = nx, .nstates = 2, .nevents = 2,
                                     .initial = 0, .error = 0, .final = 1,
                                     .exception_event = 1, .teardown_event = 1 };
        struct rec r = { 0 };
        struct strata__sm sm;

        cr_assert_eq(strata__sm_init(&sm, &t, &r), STRATA_OK);
        cr_assert_eq(strata__sm_dispatch(&sm, 0, NULL), STRATA_OK);
        cr_assert_str_eq(r.trace, "G.entry P.entry B.entry ");
}

Test(sm_hierarchy, failing_parent_moves_to_error)
{
        struct rec r = { .fail_parent_run = 1 };
        struct strata__sm sm;

        cr_assert_eq(strata__sm_init(&sm, &table, &r), STRATA_OK);
        cr_assert_eq(strata__sm_dispatch(&sm, 0, NULL), STRATA_EINJECTED);
        cr_assert_str_eq(r.trace, "A.run0 P.run0 A.exit P.exit G.exit C.entry ");
        cr_assert_eq(strata__sm_state(&sm), C);
}

Test(sm_hierarchy, deep_or_looping_parents_refused)
{
        static struct strata__sm_state chain[STRATA__SM_MAX_DEPTH + 1];
        static struct strata__sm_state loop[2];
        struct strata__sm_table t = table;
        struct strata__sm sm = { 0 };
        struct rec r = { 0 };

        for (int i = 0; i < STRATA__SM_MAX_DEPTH; i++)
                chain[i].parent = &chain[i + 1];
        t.states = chain; /* state 0's chain is STRATA__SM_MAX_DEPTH + 1 long */
        cr_assert_eq(strata__sm_init(&sm, &t, &r), STRATA_EINVAL);
        cr_assert_null(sm.table, "a refused init changed the machine");
        t.states = &chain[1]; /* exactly STRATA__SM_MAX_DEPTH: accepted */
        cr_assert_eq(strata__sm_init(&sm, &t, &r), STRATA_OK, "%s", strata_last_error());
        loop[0].parent = &loop[1];
        loop[1].parent = &loop[0];
        t.states = loop;
        t.nstates = 2;
        t.initial = t.error = t.final = 0;
        cr_assert_eq(strata__sm_init(&sm, &t, &r), STRATA_EINVAL);
}
