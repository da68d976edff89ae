/*
 * Every (state, event) pair of the lifecycle: which actions run, in which order, and where the
 * machine ends up. The expected behaviour is written here from the lifecycle's specification,
 * independently of the table in kernel/lifecycle.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "strata/strata.h"
#include "kernel/lifecycle.h"

struct rec {
        char trace[256];
        int fail_run_event; /* event whose run action fails, -1 = none */
        int fail_entry;     /* state whose entry fails, -1 = none */
};

static void note(struct rec *r, const char *what, int state, int event)
{
        char one[48];

        if (event >= 0)
                snprintf(one, sizeof(one), "%s(%s,%s) ", what, strata_state_name(state),
                         strata__event_name(event));
        else
                snprintf(one, sizeof(one), "%s(%s) ", what, strata_state_name(state));
        strncat(r->trace, one, sizeof(r->trace) - strlen(r->trace) - 1);
}

static int on_entry(void *obj, int state)
{
        struct rec *r = obj;

        note(r, "entry", state, -1);
        return state == r->fail_entry ? STRATA_EINJECTED : STRATA_OK;
}

static int on_run(void *obj, int state, int event, void *arg)
{
        struct rec *r = obj;

        (void)arg;
        note(r, "run", state, event);
        return event == r->fail_run_event ? STRATA_EINJECTED : STRATA_OK;
}

static void on_exit_(void *obj, int state)
{
        note(obj, "exit", state, -1);
}

#define REC { on_entry, on_run, on_exit_, NULL }
static const struct strata__sm_state rec_states[STRATA_STATE_COUNT] = {
        REC, REC, REC, REC, REC, REC, REC, REC, REC, REC,
};

/* The specification: legal (state, event) -> target, besides exception and teardown. */
static const struct {
        int state, event, target;
} legal[] = {
        { STRATA_STATE_CREATED, STRATA__EV_SETUP_ENVIRONMENT, STRATA_STATE_ENV_READY },
        { STRATA_STATE_ENV_READY, STRATA__EV_CONNECT, STRATA_STATE_CONNECTED },
        { STRATA_STATE_CONNECTED, STRATA__EV_SETUP, STRATA_STATE_READY },
        { STRATA_STATE_READY, STRATA__EV_BATCH_START, STRATA_STATE_IN_BATCH },
        { STRATA_STATE_READY, STRATA__EV_VALIDATION_STEP, STRATA_STATE_READY },
        { STRATA_STATE_READY, STRATA__EV_TEST_STEP, STRATA_STATE_READY },
        { STRATA_STATE_READY, STRATA__EV_PREDICT_STEP, STRATA_STATE_READY },
        { STRATA_STATE_IN_BATCH, STRATA__EV_TRAINING_STEP, STRATA_STATE_FORWARD_DONE },
        { STRATA_STATE_FORWARD_DONE, STRATA__EV_BACKWARD, STRATA_STATE_BACKWARD_DONE },
        { STRATA_STATE_BACKWARD_DONE, STRATA__EV_OPTIMIZER_STEP, STRATA_STATE_STEPPED },
        { STRATA_STATE_BACKWARD_DONE, STRATA__EV_BATCH_END, STRATA_STATE_READY },
        { STRATA_STATE_STEPPED, STRATA__EV_BATCH_END, STRATA_STATE_READY },
};

/* A path of events from CREATED to each state. */
static const int paths[STRATA_STATE_COUNT][8] = {
        [STRATA_STATE_CREATED] = { -1 },
        [STRATA_STATE_ENV_READY] = { STRATA__EV_SETUP_ENVIRONMENT, -1 },
        [STRATA_STATE_CONNECTED] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT, -1 },
        [STRATA_STATE_READY] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT, STRATA__EV_SETUP,
                                 -1 },
        [STRATA_STATE_IN_BATCH] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT,
                                    STRATA__EV_SETUP, STRATA__EV_BATCH_START, -1 },
        [STRATA_STATE_FORWARD_DONE] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT,
                                        STRATA__EV_SETUP, STRATA__EV_BATCH_START,
                                        STRATA__EV_TRAINING_STEP, -1 },
        [STRATA_STATE_BACKWARD_DONE] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT,
                                         STRATA__EV_SETUP, STRATA__EV_BATCH_START,
                                         STRATA__EV_TRAINING_STEP, STRATA__EV_BACKWARD, -1 },
        [STRATA_STATE_STEPPED] = { STRATA__EV_SETUP_ENVIRONMENT, STRATA__EV_CONNECT,
                                   STRATA__EV_SETUP, STRATA__EV_BATCH_START,
                                   STRATA__EV_TRAINING_STEP, STRATA__EV_BACKWARD,
                                   STRATA__EV_OPTIMIZER_STEP, -1 },
        [STRATA_STATE_ERROR] = { STRATA__EV_EXCEPTION, -1 },
        [STRATA_STATE_TORNDOWN] = { STRATA__EV_TEARDOWN, -1 },
};

static void start_in(struct strata__sm *sm, struct strata__sm_table *t, struct rec *r, int state)
{
        memset(r, 0, sizeof(*r));
        r->fail_run_event = -1;
        r->fail_entry = -1;
        cr_assert_eq(strata__lifecycle_table(t, rec_states), STRATA_OK);
        cr_assert_eq(strata__sm_init(sm, t, r), STRATA_OK);
        for (int i = 0; paths[state][i] >= 0; i++)
                cr_assert_eq(strata__sm_dispatch(sm, paths[state][i], NULL), STRATA_OK);
        cr_assert_eq(strata__sm_state(sm), state);
        r->trace[0] = '\0';
}

/* Expected (target, trace) from the specification; target -1 = refused. */
static int expect(int s, int e, char *trace, size_t n)
{
        char names[2][96];
        int target = -1;

        trace[0] = '\0';
        if (s == STRATA_STATE_TORNDOWN)
                return -1;
        if (e == STRATA__EV_EXCEPTION || e == STRATA__EV_TEARDOWN) {
                target = e == STRATA__EV_EXCEPTION ? STRATA_STATE_ERROR : STRATA_STATE_TORNDOWN;
                if (target != s)
                        snprintf(trace, n, "exit(%s) entry(%s) ", strata_state_name(s),
                                 strata_state_name(target));
                return target;
        }
        for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
                if (legal[i].state == s && legal[i].event == e)
                        target = legal[i].target;
        if (target < 0)
                return -1;
        snprintf(names[0], sizeof(names[0]), "run(%s,%s) ", strata_state_name(s),
                 strata__event_name(e));
        names[1][0] = '\0';
        if (target != s)
                snprintf(names[1], sizeof(names[1]), "exit(%s) entry(%s) ",
                         strata_state_name(s), strata_state_name(target));
        snprintf(trace, n, "%s%s", names[0], names[1]);
        return target;
}

Test(lifecycle_trace, every_state_event_pair)
{
        int checked = 0;

        for (int s = 0; s < STRATA_STATE_COUNT; s++) {
                for (int e = 0; e < STRATA__EV_COUNT; e++) {
                        struct strata__sm_table t;
                        struct strata__sm sm;
                        struct rec r;
                        char want[256];
                        int target = expect(s, e, want, sizeof(want));
                        int rc;

                        start_in(&sm, &t, &r, s);
                        rc = strata__sm_dispatch(&sm, e, NULL);
                        if (target < 0) {
                                cr_assert_eq(rc, STRATA_EBADSTATE, "%s/%s",
                                             strata_state_name(s), strata__event_name(e));
                                cr_assert_eq(strata__sm_state(&sm), s, "refused event moved");
                                cr_assert_str_empty(r.trace, "refused event ran %s", r.trace);
                        } else {
                                cr_assert_eq(rc, STRATA_OK, "%s/%s", strata_state_name(s),
                                             strata__event_name(e));
                                cr_assert_eq(strata__sm_state(&sm), target);
                                cr_assert_str_eq(r.trace, want, "%s/%s",
                                                 strata_state_name(s), strata__event_name(e));
                        }
                        cr_assert_eq(strata__lifecycle_next(s, e), target,
                                     "table disagrees with spec at %s/%s",
                                     strata_state_name(s), strata__event_name(e));
                        checked++;
                }
        }
        cr_assert_eq(checked, STRATA_STATE_COUNT * STRATA__EV_COUNT);
}

Test(lifecycle_trace, teardown_only_once)
{
        struct strata__sm_table t;
        struct strata__sm sm;
        struct rec r;

        start_in(&sm, &t, &r, STRATA_STATE_ERROR);
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_TEARDOWN, NULL), STRATA_OK);
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_TEARDOWN, NULL), STRATA_EBADSTATE);
        cr_assert_str_eq(r.trace, "exit(ERROR) entry(TORNDOWN) ");
}

Test(lifecycle_trace, failing_run_moves_to_error)
{
        struct strata__sm_table t;
        struct strata__sm sm;
        struct rec r;

        start_in(&sm, &t, &r, STRATA_STATE_IN_BATCH);
        r.fail_run_event = STRATA__EV_TRAINING_STEP;
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_TRAINING_STEP, NULL), STRATA_EINJECTED);
        cr_assert_eq(strata__sm_state(&sm), STRATA_STATE_ERROR);
        cr_assert_str_eq(r.trace,
                         "run(IN_BATCH,training_step) exit(IN_BATCH) entry(ERROR) ");
        r.trace[0] = '\0';
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_BATCH_START, NULL), STRATA_EBADSTATE);
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_TEARDOWN, NULL), STRATA_OK);
}

Test(lifecycle_trace, failing_entry_moves_to_error)
{
        struct strata__sm_table t;
        struct strata__sm sm;
        struct rec r;

        start_in(&sm, &t, &r, STRATA_STATE_CONNECTED);
        r.fail_entry = STRATA_STATE_READY;
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_SETUP, NULL), STRATA_EINJECTED);
        cr_assert_eq(strata__sm_state(&sm), STRATA_STATE_ERROR);
        cr_assert_str_eq(r.trace, "run(CONNECTED,setup) exit(CONNECTED) entry(READY) "
                                  "exit(READY) entry(ERROR) ");
}

Test(lifecycle_trace, bad_arguments)
{
        struct strata__sm_table t = { 0 };
        struct strata__sm sm;
        struct rec r;

        cr_assert_eq(strata__sm_init(NULL, &t, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__sm_init(&sm, NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__lifecycle_table(NULL, rec_states), STRATA_EINVAL);
        cr_assert_eq(strata__lifecycle_table(&t, NULL), STRATA_EINVAL);
        start_in(&sm, &t, &r, STRATA_STATE_READY);
        cr_assert_eq(strata__sm_dispatch(&sm, STRATA__EV_COUNT, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__sm_dispatch(&sm, -1, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__sm_dispatch(NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__sm_state(&sm), STRATA_STATE_READY);
        cr_assert_str_empty(r.trace);
        cr_assert_str_eq(strata_state_name(99), "?");
        cr_assert_str_eq(strata__event_name(-3), "?");
}
