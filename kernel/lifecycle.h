/*
 * The lifecycle's machine (internal to the library): its events and the one transition table
 * every strategy shares (drawn in strata/lifecycle.h). A strategy supplies a `static const`
 * array of STRATA_STATE_COUNT state actions (entry/run/exit) and runs it under this table
 * with strata__lifecycle_table().
 */
#ifndef STRATA_KERNEL_LIFECYCLE_H
#define STRATA_KERNEL_LIFECYCLE_H

#include "strata/lifecycle.h"
#include "kernel/sm.h"

/** Lifecycle events. */
enum strata__event {
        STRATA__EV_SETUP_ENVIRONMENT = 0,
        STRATA__EV_CONNECT,
        STRATA__EV_SETUP,
        STRATA__EV_BATCH_START,
        STRATA__EV_TRAINING_STEP,
        STRATA__EV_BACKWARD,
        STRATA__EV_OPTIMIZER_STEP,
        STRATA__EV_BATCH_END,
        STRATA__EV_VALIDATION_STEP,
        STRATA__EV_TEST_STEP,
        STRATA__EV_PREDICT_STEP,
        STRATA__EV_EXCEPTION,
        STRATA__EV_TEARDOWN,
        STRATA__EV_COUNT
};

/**
 * @brief Build the lifecycle machine description for a strategy's state actions.
 * @param out    Filled with the shared transitions and @p states.
 * @param states STRATA_STATE_COUNT actions, usually a strategy's `static const` array.
 * @retval STRATA_OK, or STRATA_EINVAL on NULL.
 */
int strata__lifecycle_table(struct strata__sm_table *out, const struct strata__sm_state *states);

/** @brief Target of @p event in @p state, or -1 when the lifecycle refuses it. */
int strata__lifecycle_next(int state, int event);

/** @brief Name of an event ("training_step"), "?" when out of range. */
const char *strata__event_name(int event);

#endif /* STRATA_KERNEL_LIFECYCLE_H */
