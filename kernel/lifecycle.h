/*
 * The lifecycle's machine (internal to the library): its events and the one transition table
 * every strategy shares (drawn in strata/lifecycle.h). The runtime runs its strategy's
 * state actions (strategy/inherit.c) under this table with strata__lifecycle_table().
 */
#ifndef STRATA_KERNEL_LIFECYCLE_H
#define STRATA_KERNEL_LIFECYCLE_H

#include "strata/lifecycle.h"
#include "kernel/sm.h"

/**
 * Every lifecycle event, once: X(NAME, message name, span name), the span name being what a
 * device's track calls its share of the event. It makes the enum, the names and the spans.
 */
#define STRATA__EVENTS(X)                                                                      \
        X(SETUP_ENVIRONMENT, "setup_environment", "setup_environment")                         \
        X(CONNECT, "connect", "connect")                                                       \
        X(SETUP, "setup", "setup")                                                             \
        X(BATCH_START, "batch_start", "batch_start")                                           \
        X(TRAINING_STEP, "training_step", "training_step")                                     \
        X(BACKWARD, "backward", "backward_pass")                                               \
        X(OPTIMIZER_STEP, "optimizer_step", "optimizer_step")                                  \
        X(BATCH_END, "batch_end", "batch_end")                                                 \
        X(VALIDATION_STEP, "validation_step", "validation_step")                               \
        X(TEST_STEP, "test_step", "test_step")                                                 \
        X(PREDICT_STEP, "predict_step", "predict_step")                                        \
        X(EXCEPTION, "exception", "exception")                                                 \
        X(TEARDOWN, "teardown", "teardown")

/** Lifecycle events. */
enum strata__event {
#define STRATA__EV_ENUM(e, name, span) STRATA__EV_##e,
        STRATA__EVENTS(STRATA__EV_ENUM)
#undef STRATA__EV_ENUM
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
