/*
 * The one bounded wait (contract in kernel/wait.h). A wait is a loop of rounds: each tests the
 * condition, then the abort flag (and every 16th round the abort function: a call through a
 * table, which on every round delayed noticing the condition), then pauses while the wait
 * still spins, or else reads the clock every clock_every rounds and blocks. A futex wait
 * blocks in timed sleeps (slice_ns), so an abort or a deadline is seen even if a wake is
 * missed; sleepers are counted so that a waker's fast path makes no system call.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "strata/status.h"
#include "arch/arch.h"
#include "base/base.h"
#include "kernel/wait.h"

#define SLICE_NS 2000000L /* default sleep: aborts are seen within 2 ms */
#define ASK_EVERY 16      /* rounds between two calls of the abort function */

static long futex(atomic_uint *addr, int op, unsigned val, const struct timespec *ts)
{
        return syscall(SYS_futex, (unsigned *)addr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

void strata__wake(struct strata__futex *f)
{
        if (atomic_load_explicit(&f->sleepers, memory_order_seq_cst) > 0)
                futex(&f->v, FUTEX_WAKE, INT_MAX, NULL);
}

/* A counter's futex word is its low half (the value a sleeper saw, truncated, is what the
 * kernel compares), which little-endian machines keep at its address. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "a counter's low half at its address");

static atomic_uint *low_half(const _Atomic uint64_t *counter)
{
        return (atomic_uint *)(uintptr_t)counter;
}

void strata__wake_counter(const _Atomic uint64_t *counter, atomic_uint *sleepers)
{
        if (atomic_load_explicit(sleepers, memory_order_seq_cst) > 0)
                futex(low_half(counter), FUTEX_WAKE, INT_MAX, NULL);
}

static int satisfied(const struct strata__wait *w)
{
        if (w->counter)
                return (int64_t)(atomic_load_explicit(w->counter, memory_order_acquire) -
                                 w->target) >= 0;
        if (w->word)
                return atomic_load_explicit(&w->word->v, memory_order_acquire) != w->old;
        return w->ready(w->ready_arg);
}

static int aborted(const struct strata__wait *w, uint64_t round)
{
        if (w->abort && atomic_load_explicit(w->abort, memory_order_acquire))
                return 1;
        return w->aborted && round % ASK_EVERY == ASK_EVERY - 1 && w->aborted(w->aborted_arg);
}

/* A reading of the clock: the first starts the bounds, later ones check them. */
static int check_clock(struct strata__wait *w)
{
        int stall = w->stall && w->stall_s > 0.0 && !w->stalled;
        double now;

        if (w->timeout_s < 0.0 && !stall)
                return STRATA_OK; /* nothing to bound: no system call */
        now = strata__now_s();
        if (!w->started) {
                w->start = now;
                w->started = 1;
                return STRATA_OK;
        }
        if (w->timeout_s >= 0.0 && now > w->start + w->timeout_s)
                return STRATA_ETIMEDOUT;
        if (stall && now - w->start > w->stall_s) {
                w->stalled = 1;
                w->stall(w->stall_arg, now - w->start);
        }
        return STRATA_OK;
}

/*
 * A blocking round of a wait with no futex word: the first YIELDS (2) yield the core (a peer of
 * this process may be waiting for it), the next ones nap, each twice the last up to NAP_MAX_NS.
 * A yielding thread stays on the run queue and takes a share of its core from every other
 * thread there; with other processes holding the cores (a simulation's own threads) the late
 * device then gets a third of a core instead of half. A nap leaves the queue.
 */
#define YIELDS 2
#define NAP_MIN_NS 10000L
#define NAP_MAX_NS 640000L

static void yield_or_nap(struct strata__wait *w)
{
        unsigned naps = w->yields < YIELDS ? 0 : w->yields - YIELDS;
        long ns = naps >= 6 ? NAP_MAX_NS : NAP_MIN_NS << naps;
        struct timespec t = { 0, ns };

        if (w->yields++ < YIELDS)
                sched_yield();
        else
                nanosleep(&t, NULL);
}

/*
 * The blocking rounds of a wait on a counter whose waker wakes sleepers, after its yields:
 * each sleeps up to a slice, so the clock is read every round (clock_every is for rounds that
 * cost a yield), or a stall report and a deadline would come clock_every slices late.
 */
static int sleeps_on_counter(const struct strata__wait *w)
{
        return !w->word && w->counter && w->sleepers && w->yields >= YIELDS;
}

/* A timed sleep on the counter unless it moved; counted, so that its waker wakes it. */
static void sleep_on_counter(struct strata__wait *w, const struct timespec *slice)
{
        uint64_t seen;

        atomic_fetch_add(w->sleepers, 1);
        seen = atomic_load_explicit(w->counter, memory_order_seq_cst);
        if ((int64_t)(seen - w->target) < 0 && !(w->abort && atomic_load(w->abort)))
                futex(low_half(w->counter), FUTEX_WAIT, (unsigned)seen, slice);
        atomic_fetch_sub(w->sleepers, 1);
}

/*
 * One blocking round: a timed sleep on the futex word unless it changed; on a counter whose
 * waker wakes, two yields (the peer may be about to arrive on this core) then timed sleeps;
 * else yield_or_nap().
 */
static void block(struct strata__wait *w)
{
        struct strata__futex *f = w->word;
        long ns = w->slice_ns > 0 ? w->slice_ns : SLICE_NS;
        struct timespec slice = { ns / 1000000000L, ns % 1000000000L };

        if (sleeps_on_counter(w)) {
                sleep_on_counter(w, &slice);
                return;
        }
        if (!f) {
                yield_or_nap(w);
                return;
        }
        atomic_fetch_add(&f->sleepers, 1);
        if (atomic_load_explicit(&f->v, memory_order_seq_cst) == w->old &&
            !(w->abort && atomic_load(w->abort)))
                futex(&f->v, FUTEX_WAIT, w->old, &slice);
        atomic_fetch_sub(&f->sleepers, 1);
}

int strata__wait(struct strata__wait *w)
{
        uint64_t every = w->clock_every ? w->clock_every : 1;
        int rc;

        for (uint64_t round = 0;; round++) {
                if (satisfied(w))
                        return STRATA_OK;
                if (aborted(w, round))
                        return STRATA_EABORTED;
                if (round < w->spins) {
                        strata__pause();
                        continue;
                }
                if (((round - w->spins) % every == 0 || sleeps_on_counter(w)) &&
                    (rc = check_clock(w)) != STRATA_OK)
                        return rc;
                block(w);
        }
}
