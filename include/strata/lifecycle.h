/*
 * The training lifecycle shared by every strategy: its states, its events, and the one
 * transition table. A strategy supplies a `static const` array of STRATA_STATE_COUNT state
 * actions (entry/run/exit) and runs it under this table with strata_lifecycle_table().
 *
 *   CREATED --setup_environment--> ENV_READY --connect--> CONNECTED --setup--> READY
 *   READY --batch_start--> IN_BATCH --training_step--> FORWARD_DONE --backward--> BACKWARD_DONE
 *   BACKWARD_DONE --optimizer_step--> STEPPED --batch_end--> READY
 *   BACKWARD_DONE --batch_end--> READY            (gradient accumulation: no optimizer step)
 *   READY --validation_step | test_step | predict_step--> READY
 *   any state but TORNDOWN --exception--> ERROR,  --teardown--> TORNDOWN (once; final)
 */
#ifndef STRATA_LIFECYCLE_H
#define STRATA_LIFECYCLE_H

#include "strata/sm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Lifecycle states. */
enum strata_state {
        STRATA_STATE_CREATED = 0,
        STRATA_STATE_ENV_READY,
        STRATA_STATE_CONNECTED,
        STRATA_STATE_READY,
        STRATA_STATE_IN_BATCH,
        STRATA_STATE_FORWARD_DONE,
        STRATA_STATE_BACKWARD_DONE,
        STRATA_STATE_STEPPED,
        STRATA_STATE_ERROR,
        STRATA_STATE_TORNDOWN,
        STRATA_STATE_COUNT
};

/** Lifecycle events. */
enum strata_event {
        STRATA_EV_SETUP_ENVIRONMENT = 0,
        STRATA_EV_CONNECT,
        STRATA_EV_SETUP,
        STRATA_EV_BATCH_START,
        STRATA_EV_TRAINING_STEP,
        STRATA_EV_BACKWARD,
        STRATA_EV_OPTIMIZER_STEP,
        STRATA_EV_BATCH_END,
        STRATA_EV_VALIDATION_STEP,
        STRATA_EV_TEST_STEP,
        STRATA_EV_PREDICT_STEP,
        STRATA_EV_EXCEPTION,
        STRATA_EV_TEARDOWN,
        STRATA_EV_COUNT
};

/**
 * @brief Build the lifecycle machine description for a strategy's state actions.
 * @param out    Filled with the shared transitions and @p states.
 * @param states STRATA_STATE_COUNT actions, usually a strategy's `static const` array.
 * @retval STRATA_OK, or STRATA_EINVAL on NULL.
 */
int strata_lifecycle_table(struct strata_sm_table *out, const struct strata_sm_state *states);

/** @brief Target of @p event in @p state, or -1 when the lifecycle refuses it. */
int strata_lifecycle_next(int state, int event);

/** @brief Name of a state ("READY"), "?" when out of range. */
const char *strata_state_name(int state);

/** @brief Name of an event ("training_step"), "?" when out of range. */
const char *strata_event_name(int event);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_LIFECYCLE_H */
