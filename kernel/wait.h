/*
 * The one bounded wait (internal): every blocking wait of the library goes through
 * strata__wait(). A wait spins with the arch pause for a while, then blocks round after round
 * (a timed sleep on its futex word; without one sched_yield twice, then a timed sleep on the
 * counter where its waker wakes sleepers, else naps that grow from 10 us to 640 us, so that a
 * waiter leaves the run queue to the late thread when other processes hold the cores: issue
 * 58, item 17), until its condition holds, its abort flag
 * is set or its deadline passes; once past its stall bound it calls its stall callback, once.
 *
 * The clock is first read when the wait starts to block, so a wait satisfied while spinning
 * makes no system call. The deadline and the stall bound count from that first reading and are
 * kept in the struct: a caller that waits for several things in turn (every rank's flag) reuses
 * one struct and so has one deadline for the whole. The result is a status the caller maps to
 * its own message: STRATA_OK, STRATA_ETIMEDOUT or STRATA_EABORTED (no message is set).
 */
#ifndef STRATA_KERNEL_WAIT_H
#define STRATA_KERNEL_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "arch/arch.h"

/** A futex word and the count of its sleepers: a waker makes a system call only for them. */
struct strata__futex {
        atomic_uint v;
        atomic_int sleepers;
};

/** Bound of a wait that has none (strata__wait.timeout_s). */
#define STRATA__WAIT_FOREVER (-1.0)

/**
 * What a wait waits for, what ends it early, how it spins. Set exactly one of counter, word and
 * ready; fields left out are zero (an initialiser), which the state below needs before the
 * first call.
 */
struct strata__wait {
        const _Atomic uint64_t *counter; /* until *counter reaches target (wrap-safe) */
        uint64_t target;
        atomic_uint *sleepers;           /* with counter: block by sleeping on the counter,
                                          * counted here; its waker calls
                                          * strata__wake_counter() (NULL: yield, then nap) */
        struct strata__futex *word;      /* until word->v != old; blocks by sleeping on it */
        unsigned old;
        int (*ready)(void *arg);         /* until ready(ready_arg) returns non-zero */
        void *ready_arg;
        const atomic_int *abort;         /* STRATA_EABORTED once non-zero; read every round */
        int (*aborted)(void *arg);       /* STRATA_EABORTED once non-zero; asked every 16 */
        void *aborted_arg;
        double timeout_s;                /* STRATA_ETIMEDOUT past it; < 0: never */
        double stall_s;                  /* stall(stall_arg, waited) once past it; 0: never */
        void (*stall)(void *arg, double waited_s);
        void *stall_arg;
        unsigned spins;                  /* rounds with a pause before blocking */
        unsigned clock_every;            /* blocking rounds per reading of the clock (0: 1) */
        long slice_ns;                   /* one sleep on the word (0: 2 ms) */
        /* state, kept across calls */
        double start;                    /* the first reading of the clock */
        int started;                     /* ...was taken */
        int stalled;                     /* the stall callback ran */
        unsigned yields;                 /* blocking rounds without a futex word so far */
};

/**
 * @brief The first rounds of a wait on a counter, inline for waits on a critical path (the
 *        communicator's meetings): up to @p spins rounds of the arch pause until @p counter
 *        reaches @p target (wrap-safe). No abort, no clock: a caller that gets 0 goes on with
 *        strata__wait(), which bounds the rest.
 * @return 1 when the counter reached the target, else 0.
 */
static inline int strata__spin_until(const _Atomic uint64_t *counter, uint64_t target,
                                     unsigned spins)
{
        for (unsigned r = 0; r < spins; r++) {
                if ((int64_t)(atomic_load_explicit(counter, memory_order_acquire) - target) >= 0)
                        return 1;
                strata__pause();
        }
        return (int64_t)(atomic_load_explicit(counter, memory_order_acquire) - target) >= 0;
}

/**
 * @brief Wait as @p w describes. The condition is tested first, so a condition that holds
 *        wins over an abort or a deadline already past.
 * @retval STRATA_OK the condition holds; STRATA_ETIMEDOUT; STRATA_EABORTED.
 */
int strata__wait(struct strata__wait *w);

/** @brief Wake every thread asleep on @p f, with no system call when none sleeps. */
void strata__wake(struct strata__futex *f);

/**
 * @brief Wake every thread asleep on @p counter (waits with .sleepers = @p sleepers), with no
 *        system call when none sleeps. Called after the counter's store; without a fence
 *        between the two a sleeper that counted itself in the same instant may be missed, and
 *        then wakes at the end of its slice.
 */
void strata__wake_counter(const _Atomic uint64_t *counter, atomic_uint *sleepers);

#endif /* STRATA_KERNEL_WAIT_H */
