/* The lifecycle transition table every strategy runs under (diagram in lifecycle.h). */
#include <stddef.h>

#include "kernel/lifecycle.h"
#include "strata/status.h"
#include "base/base.h"

/* Rows start all-refused and override single entries: that is the point of ROW(). */
#pragma GCC diagnostic ignored "-Woverride-init"

#define N STRATA__EV_COUNT

/* The tables below hold state indices in signed chars, and the engine's counts are bytes. */
_Static_assert(STRATA_STATE_COUNT <= 127 && N <= 255, "lifecycle too large for its tables");
#define R (-1) /* refused */

/* Rows list only what a state adds; exception and teardown are filled in by ROW(). */
#define ROW(...) { [0 ... N - 1] = R, [STRATA__EV_EXCEPTION] = STRATA_STATE_ERROR,               \
                   [STRATA__EV_TEARDOWN] = STRATA_STATE_TORNDOWN, __VA_ARGS__ }

static const signed char next[STRATA_STATE_COUNT][N] = {
        [STRATA_STATE_CREATED] = ROW([STRATA__EV_SETUP_ENVIRONMENT] = STRATA_STATE_ENV_READY),
        [STRATA_STATE_ENV_READY] = ROW([STRATA__EV_CONNECT] = STRATA_STATE_CONNECTED),
        [STRATA_STATE_CONNECTED] = ROW([STRATA__EV_SETUP] = STRATA_STATE_READY),
        [STRATA_STATE_READY] = ROW([STRATA__EV_BATCH_START] = STRATA_STATE_IN_BATCH,
                                   [STRATA__EV_VALIDATION_STEP] = STRATA_STATE_READY,
                                   [STRATA__EV_TEST_STEP] = STRATA_STATE_READY,
                                   [STRATA__EV_PREDICT_STEP] = STRATA_STATE_READY),
        [STRATA_STATE_IN_BATCH] = ROW([STRATA__EV_TRAINING_STEP] = STRATA_STATE_FORWARD_DONE),
        [STRATA_STATE_FORWARD_DONE] = ROW([STRATA__EV_BACKWARD] = STRATA_STATE_BACKWARD_DONE),
        [STRATA_STATE_BACKWARD_DONE] = ROW([STRATA__EV_OPTIMIZER_STEP] = STRATA_STATE_STEPPED,
                                           [STRATA__EV_BATCH_END] = STRATA_STATE_READY),
        [STRATA_STATE_STEPPED] = ROW([STRATA__EV_BATCH_END] = STRATA_STATE_READY),
        [STRATA_STATE_ERROR] = ROW(),
        [STRATA_STATE_TORNDOWN] = { [0 ... N - 1] = R },
};

static const char *const state_names[STRATA_STATE_COUNT] = {
        "CREATED",      "ENV_READY",     "CONNECTED", "READY", "IN_BATCH",
        "FORWARD_DONE", "BACKWARD_DONE", "STEPPED",   "ERROR", "TORNDOWN",
};

static const char *const event_names[N] = {
#define NAME(e, name, span) [STRATA__EV_##e] = name,
        STRATA__EVENTS(NAME)
#undef NAME
};

int strata__lifecycle_table(struct strata__sm_table *out, const struct strata__sm_state *states)
{
        if (!out || !states)
                return strata__fail(STRATA_EINVAL, "lifecycle table: NULL argument");
        *out = (struct strata__sm_table){
                .states = states,
                .next = &next[0][0],
                .state_names = state_names,
                .event_names = event_names,
                .nstates = STRATA_STATE_COUNT,
                .nevents = N,
                .initial = STRATA_STATE_CREATED,
                .error = STRATA_STATE_ERROR,
                .final = STRATA_STATE_TORNDOWN,
                .exception_event = STRATA__EV_EXCEPTION,
                .teardown_event = STRATA__EV_TEARDOWN,
        };
        return STRATA_OK;
}

int strata__lifecycle_next(int state, int event)
{
        if (state < 0 || state >= STRATA_STATE_COUNT || event < 0 || event >= N)
                return -1;
        return next[state][event];
}

const char *strata_state_name(int state)
{
        return state >= 0 && state < STRATA_STATE_COUNT ? state_names[state] : "?";
}

const char *strata__event_name(int event)
{
        return event >= 0 && event < N ? event_names[event] : "?";
}
