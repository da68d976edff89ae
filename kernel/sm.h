/*
 * Table-driven state machines (after Zephyr's SMF, made fully static).
 *
 * A machine is a `static const` array of states, each with entry, run and exit actions, and a
 * `static const` transition table next[state][event] (negative = event not allowed). One
 * dispatch:
 *   - an event the table does not allow (or any event after the final state) returns
 *     STRATA_EBADSTATE and runs nothing;
 *   - the exception event runs exit(current) then entry(error), without run;
 *   - the teardown event runs exit(current) then entry(final), without run;
 *   - any other allowed event runs run(current, event); then, if the target differs,
 *     exit(current) and entry(target).
 * When a run or entry action fails, the machine moves to the error state (exit, then
 * entry(error)) and the action's status is returned. Exit actions return nothing, so they
 * cannot fail or change the state.
 *
 * Parent states (Zephyr's hierarchical SMF): a state may name a parent, a state that holds
 * behaviour several states share and that need not be in the table (a strategy's states are
 * often children of a shared multi-device table's states). A run action that returns
 * STRATA__SM_PARENT hands the event to its parent's run action, and so on up the chain; a
 * NULL run action passes the event up too; an event no ancestor handles is done. On a state
 * change, exit actions run from the old state up to, not including, the nearest ancestor the
 * two states share, then entry actions from below that ancestor down to the new state.
 */
#ifndef STRATA_KERNEL_SM_H
#define STRATA_KERNEL_SM_H

#ifdef __cplusplus
extern "C" {
#endif

/** A run action's answer: not handled here, run the parent state's action. */
#define STRATA__SM_PARENT 1

/** Longest chain of parents a state may have (checked by strata__sm_init()). */
#define STRATA__SM_MAX_DEPTH 8

/** Entry action: may fail; a failure moves the machine to its error state. */
typedef int (*strata__sm_entry_fn)(void *obj, int state);
/** Run action: handles @p event in @p state with the caller's argument. */
typedef int (*strata__sm_run_fn)(void *obj, int state, int event, void *arg);
/** Exit action: cannot fail and cannot change the state. */
typedef void (*strata__sm_exit_fn)(void *obj, int state);

/** One state: any action may be NULL. */
struct strata__sm_state {
        strata__sm_entry_fn entry;
        strata__sm_run_fn run;
        strata__sm_exit_fn exit;
        const struct strata__sm_state *parent; /**< shared behaviour, or NULL */
};

/** A machine's constant description. */
struct strata__sm_table {
        const struct strata__sm_state *states; /**< nstates entries */
        const signed char *next;              /**< nstates * nevents targets, -1 = refused */
        const char *const *state_names;       /**< for messages */
        const char *const *event_names;       /**< for messages */
        unsigned char nstates;
        unsigned char nevents;
        unsigned char initial;
        unsigned char error;           /**< state reached on failure or exception */
        unsigned char final;           /**< terminal state: nothing is accepted after it */
        unsigned char exception_event; /**< event that leads to the error state */
        unsigned char teardown_event;  /**< event that leads to the final state */
};

/** A running machine: embed it in the object its actions receive. */
struct strata__sm {
        /* private */
        const struct strata__sm_table *table;
        void *obj;
        int state;
};

/**
 * @brief Start a machine in the table's initial state (no action runs).
 * @retval STRATA_OK, or STRATA_EINVAL for a NULL or inconsistent table (indices out of range,
 *         a chain of parents longer than STRATA__SM_MAX_DEPTH or looping).
 */
int strata__sm_init(struct strata__sm *sm, const struct strata__sm_table *table, void *obj);

/**
 * @brief Deliver one event (see the file comment for the exact order of actions).
 * @retval STRATA_OK          the event was handled.
 * @retval STRATA_EBADSTATE   the event is not allowed now; nothing ran, nothing changed.
 * @retval STRATA_EINVAL      NULL machine or event out of range; nothing changed.
 * @retval other              the status of the failing action; the machine is in error.
 */
int strata__sm_dispatch(struct strata__sm *sm, int event, void *arg);

/** @brief Current state index. */
int strata__sm_state(const struct strata__sm *sm);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_KERNEL_SM_H */
