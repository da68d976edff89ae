/*
 * The one bounded wait (kernel/wait.h): it returns at once when its condition holds and never
 * reads the clock while it spins; it times out near its deadline, one deadline across calls on
 * the same description; it returns when another thread sets its abort flag or its abort
 * function says so; it calls its stall callback once; a futex sleeper is woken by
 * strata__wake(), not by the end of its sleep.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "strata/status.h"
#include "kernel/wait.h"

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int holds(void *arg)
{
        return atomic_load((atomic_int *)arg);
}

/* Every form of condition, already true: OK at once, even with the abort flag set. */
Test(wait_bounded, returns_at_once_when_the_condition_holds)
{
        _Atomic uint64_t counter = 7, wrapped = 1;
        struct strata__futex word = { 3, 0 };
        atomic_int yes = 1, abort = 1;
        struct strata__wait w[] = {
                { .counter = &counter, .target = 7 },
                { .counter = &counter, .target = 5 },
                { .counter = &wrapped, .target = UINT64_MAX - 1 }, /* reached across the wrap */
                { .word = &word, .old = 2 },
                { .ready = holds, .ready_arg = &yes },
        };

        for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
                w[i].abort = &abort;
                cr_assert_eq(strata__wait(&w[i]), STRATA_OK, "form %zu", i);
                cr_assert_eq(w[i].started, 0, "form %zu read the clock", i);
        }
}

struct later {
        _Atomic uint64_t *counter;
        uint64_t value;
        atomic_int *flag;
        double after_s;
};

static void *set_later(void *arg)
{
        struct later *l = arg;

        usleep((useconds_t)(l->after_s * 1e6));
        if (l->counter)
                atomic_store(l->counter, l->value);
        if (l->flag)
                atomic_store(l->flag, 1);
        return NULL;
}

/* A wait that ends while it spins makes no system call: the clock is never read. */
Test(wait_bounded, spinning_never_reads_the_clock)
{
        _Atomic uint64_t counter = 0;
        struct later l = { .counter = &counter, .value = 1, .after_s = 0.02 };
        struct strata__wait w = { .counter = &counter, .target = 1, .timeout_s = 0.0,
                                  .spins = UINT32_MAX };
        pthread_t t;

        cr_assert_eq(pthread_create(&t, NULL, set_later, &l), 0);
        cr_assert_eq(strata__wait(&w), STRATA_OK);
        pthread_join(t, NULL);
        cr_assert_eq(w.started, 0, "a zero timeout would have ended a wait that read the clock");
}

/* Every form times out near its deadline, and a second call keeps the first one's deadline. */
Test(wait_bounded, times_out_near_its_deadline)
{
        _Atomic uint64_t counter = 0;
        struct strata__futex word = { 0, 0 };
        atomic_int no = 0;
        struct strata__wait w[] = {
                { .counter = &counter, .target = 1, .spins = 100, .clock_every = 64 },
                { .word = &word, .old = 0, .spins = 100 },
                { .ready = holds, .ready_arg = &no },
        };

        for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
                double t0 = now(), took;

                w[i].timeout_s = 0.2;
                cr_assert_eq(strata__wait(&w[i]), STRATA_ETIMEDOUT, "form %zu", i);
                took = now() - t0;
                cr_assert_geq(took, 0.2, "form %zu: %.3f s", i, took);
                cr_assert_lt(took, 1.5, "form %zu: %.3f s", i, took);
                cr_assert_eq(word.sleepers, 0, "form %zu left a sleeper counted", i);
                t0 = now();
                cr_assert_eq(strata__wait(&w[i]), STRATA_ETIMEDOUT, "form %zu again", i);
                cr_assert_lt(now() - t0, 0.1, "form %zu: the deadline was restarted", i);
        }
}

static atomic_int fn_flag;

static int fn_aborted(void *arg)
{
        return atomic_load((atomic_int *)arg);
}

/* Another thread's abort ends a wait without a deadline, spinning or asleep. */
Test(wait_bounded, returns_on_abort_from_another_thread)
{
        _Atomic uint64_t counter = 0;
        struct strata__futex word = { 0, 0 };
        atomic_int flag[3] = { 0, 0, 0 };
        struct strata__wait w[] = {
                { .counter = &counter, .target = 1, .abort = &flag[0], .spins = 1000 },
                { .word = &word, .abort = &flag[1] },
                { .counter = &counter, .target = 1, .aborted = fn_aborted,
                  .aborted_arg = &fn_flag },
        };

        for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
                struct later l = { .flag = i < 2 ? &flag[i] : &fn_flag, .after_s = 0.05 };
                double t0 = now(), took;
                pthread_t t;

                w[i].timeout_s = STRATA__WAIT_FOREVER;
                cr_assert_eq(pthread_create(&t, NULL, set_later, &l), 0);
                cr_assert_eq(strata__wait(&w[i]), STRATA_EABORTED, "form %zu", i);
                took = now() - t0;
                pthread_join(t, NULL);
                cr_assert_geq(took, 0.04, "form %zu ended before the abort: %.3f s", i, took);
                cr_assert_lt(took, 2.0, "form %zu: %.3f s", i, took);
        }
}

struct stalls {
        int calls;
        double waited_s;
};

static void count_stall(void *arg, double waited_s)
{
        struct stalls *s = arg;

        s->calls++;
        s->waited_s = waited_s;
}

/* Past its stall bound a wait calls back once, then goes on to its end. */
Test(wait_bounded, calls_the_stall_callback_once)
{
        _Atomic uint64_t counter = 0;
        struct stalls s = { 0, 0.0 };
        struct strata__wait w = { .counter = &counter, .target = 1, .timeout_s = 0.5,
                                  .stall_s = 0.1, .stall = count_stall, .stall_arg = &s };
        struct later l = { .counter = &counter, .value = 1, .after_s = 0.3 };
        pthread_t t;

        cr_assert_eq(strata__wait(&w), STRATA_ETIMEDOUT);
        cr_assert_eq(s.calls, 1);
        cr_assert(s.waited_s > 0.1 && s.waited_s < 0.5, "waited %.3f s", s.waited_s);

        /* A wait that ends well after its stall bound: OK, one report. */
        s = (struct stalls){ 0, 0.0 };
        w = (struct strata__wait){ .counter = &counter, .target = 1, .timeout_s = 5.0,
                                   .stall_s = 0.05, .stall = count_stall, .stall_arg = &s };
        cr_assert_eq(pthread_create(&t, NULL, set_later, &l), 0);
        cr_assert_eq(strata__wait(&w), STRATA_OK);
        pthread_join(t, NULL);
        cr_assert_eq(s.calls, 1);

        /* A stall bound past the deadline: the deadline comes first, no report. */
        s = (struct stalls){ 0, 0.0 };
        w = (struct strata__wait){ .counter = &counter, .target = 2, .timeout_s = 0.1,
                                   .stall_s = 1.0, .stall = count_stall, .stall_arg = &s };
        cr_assert_eq(strata__wait(&w), STRATA_ETIMEDOUT);
        cr_assert_eq(s.calls, 0);
}

struct sleeper {
        struct strata__futex *word;
        int rc;
        double woke;
};

static void *sleep_on_word(void *arg)
{
        struct sleeper *s = arg;
        struct strata__wait w = { .word = s->word, .old = 0, .timeout_s = 60.0,
                                  .slice_ns = 20000000000L };

        s->rc = strata__wait(&w);
        s->woke = now();
        return NULL;
}

/* A sleeper whose single sleep lasts 20 s returns as soon as the word changes and is woken. */
Test(wait_bounded, futex_wake_ends_a_sleep)
{
        struct strata__futex word = { 0, 0 };
        struct sleeper s = { .word = &word, .rc = -1 };
        double t0 = now(), woken;
        pthread_t t;

        cr_assert_eq(pthread_create(&t, NULL, sleep_on_word, &s), 0);
        while (atomic_load(&word.sleepers) == 0 && now() - t0 < 5.0)
                usleep(1000);
        cr_assert_eq(atomic_load(&word.sleepers), 1, "the waiter never went to sleep");
        usleep(20000); /* well inside its futex sleep */
        atomic_fetch_add(&word.v, 1);
        woken = now();
        strata__wake(&word);
        pthread_join(t, NULL);
        cr_assert_eq(s.rc, STRATA_OK);
        cr_assert_lt(s.woke - woken, 5.0, "slept %.3f s after the wake", s.woke - woken);
        cr_assert_eq(atomic_load(&word.sleepers), 0);
}

struct bump {
        _Atomic uint64_t *counter;
        atomic_uint *sleepers;
        int wake;
};

static void *bump_later(void *arg)
{
        struct bump *b = arg;

        usleep(50000);
        atomic_store(b->counter, 5);
        if (b->wake)
                strata__wake_counter(b->counter, b->sleepers);
        return NULL;
}

/*
 * A wait on a counter with a sleepers count sleeps on the counter (counted while asleep) and
 * is woken by strata__wake_counter() long before its 3 s slice ends; without the wake it
 * sleeps the slice out (what a missed wake costs).
 */
Test(wait_bounded, a_counter_sleeper_is_woken_by_its_waker, .timeout = 30)
{
        for (int wake = 1; wake >= 0; wake--) {
                _Atomic uint64_t counter = 4;
                atomic_uint sleepers = 0;
                struct bump b = { &counter, &sleepers, wake };
                struct strata__wait w = { .counter = &counter, .target = 5,
                                          .sleepers = &sleepers, .timeout_s = 20.0,
                                          .slice_ns = 3000000000L };
                pthread_t t;
                double t0 = now(), took;

                cr_assert_eq(pthread_create(&t, NULL, bump_later, &b), 0);
                cr_assert_eq(strata__wait(&w), STRATA_OK);
                took = now() - t0;
                pthread_join(t, NULL);
                cr_assert_eq(atomic_load(&sleepers), 0, "the sleeper uncounted itself");
                if (wake)
                        cr_assert_lt(took, 2.0, "woken after %.3f s, not by the waker", took);
                else
                        cr_assert_geq(took, 2.9, "without a wake it sleeps its slice: %.3f s",
                                      took);
        }
}
