/*
 * The training lifecycle's states, as strata_state() reports them. Every strategy runs the
 * same transitions (the events are the runtime's public calls):
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

/** @brief Name of a state ("READY"), "?" when out of range. */
const char *strata_state_name(int state);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_LIFECYCLE_H */
