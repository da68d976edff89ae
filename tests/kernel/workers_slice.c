/*
 * The device threads' scheduler slice (decision 0081): short while a pool of several devices
 * of one process computes (not with peer processes), the caller's own back between calls, a host's non-fair policy left alone, and a
 * bad STRATA_SCHED_SLICE_US refused at start.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "tests/support/pool.h"

struct attr { /* the kernel's struct sched_attr, first version */
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
};

static struct attr self_attr(void)
{
        struct attr a;

        memset(&a, 0, sizeof(a));
        cr_assert_eq(syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0), 0);
        return a;
}

/* Linux 6.12 took a fair thread's slice from sched_attr.sched_runtime and reports it back. */
static void need_custom_slices(void)
{
        struct utsname u;
        int major = 0, minor = 0;

        cr_assert_eq(uname(&u), 0);
        if (sscanf(u.release, "%d.%d", &major, &minor) != 2 || major * 100 + minor < 612)
                cr_skip_test("kernel %s has no custom fair slices (6.12 and later)", u.release);
}

static struct {
        uint64_t runtime[8];
        uint32_t policy[8];
} seen;

static int look(int dev, void *arg)
{
        struct attr a = self_attr();

        (void)arg;
        seen.runtime[dev] = a.runtime;
        seen.policy[dev] = a.policy;
        return STRATA_OK;
}

Test(workers_slice, short_while_computing_caller_restored)
{
        struct pool p;
        struct attr before;

        need_custom_slices();
        unsetenv("STRATA_SCHED_SLICE_US");
        before = self_attr();
        cr_assert_neq(before.runtime, 100000, "the test thread starts with the kernel's slice");
        pool_start(&p, 3, 0);
        for (int i = 0; i < 3; i++) {
                memset(&seen, 0, sizeof(seen));
                cr_assert_eq(strata__workers_run(p.w, look, NULL), STRATA_OK);
                for (int d = 0; d < 3; d++)
                        cr_expect_eq(seen.runtime[d], 100000, "device %d: slice %llu ns", d,
                                     (unsigned long long)seen.runtime[d]);
                cr_assert_eq(self_attr().runtime, before.runtime,
                             "the caller's own slice is back between calls");
        }
        pool_stop(&p);
        cr_assert_eq(self_attr().runtime, before.runtime);
}

Test(workers_slice, chosen_by_the_environment)
{
        struct pool p;

        need_custom_slices();
        cr_assert_eq(setenv("STRATA_SCHED_SLICE_US", "250", 1), 0);
        pool_start(&p, 2, 0);
        cr_assert_eq(strata__workers_run(p.w, look, NULL), STRATA_OK);
        cr_expect_eq(seen.runtime[0], 250000);
        cr_expect_eq(seen.runtime[1], 250000);
        pool_stop(&p);
}

Test(workers_slice, zero_and_one_device_keep_the_kernels)
{
        struct pool p;
        uint64_t given;

        need_custom_slices();
        given = self_attr().runtime;
        cr_assert_eq(setenv("STRATA_SCHED_SLICE_US", "0", 1), 0);
        pool_start(&p, 2, 0);
        cr_assert_eq(strata__workers_run(p.w, look, NULL), STRATA_OK);
        cr_expect_eq(seen.runtime[0], given);
        cr_expect_eq(seen.runtime[1], given, "a new thread starts with its creator's slice");
        pool_stop(&p);
        unsetenv("STRATA_SCHED_SLICE_US");
        pool_start(&p, 1, 0);
        cr_assert_eq(strata__workers_run(p.w, look, NULL), STRATA_OK);
        cr_expect_eq(seen.runtime[0], given, "one device waits for nobody");
        pool_stop(&p);
}

Test(workers_slice, a_pool_with_peer_processes_keeps_the_kernels)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata__workers *w = NULL;
        struct strata_arena a;
        uint64_t given;
        size_t b;

        need_custom_slices();
        unsetenv("STRATA_SCHED_SLICE_US");
        given = self_attr().runtime;
        wc.devices = 2;
        wc.peers = 1;
        cr_assert_eq(strata__workers_plan(&wc, &b), STRATA_OK);
        cr_assert_eq(strata_arena_map(&a, b, NULL), STRATA_OK);
        cr_assert_eq(strata__workers_start(&w, &a, &wc), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata__workers_run(w, look, NULL), STRATA_OK);
        cr_expect_eq(seen.runtime[0], given);
        cr_expect_eq(seen.runtime[1], given);
        cr_assert_eq(strata__workers_stop(w), STRATA_OK);
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
}

Test(workers_slice, a_hosts_idle_policy_is_left_alone)
{
        struct pool p;
        struct attr idle = self_attr();

        idle.size = sizeof(idle);
        idle.policy = SCHED_IDLE;
        idle.flags = 0;
        idle.runtime = 0;
        cr_assert_eq(syscall(SYS_sched_setattr, 0, &idle, 0), 0);
        unsetenv("STRATA_SCHED_SLICE_US");
        pool_start(&p, 2, 0);
        cr_assert_eq(strata__workers_run(p.w, look, NULL), STRATA_OK);
        cr_expect_eq(seen.policy[0], SCHED_IDLE, "device 0 is the caller's thread");
        cr_expect_eq(self_attr().policy, SCHED_IDLE);
        pool_stop(&p);
}

Test(workers_slice, bad_values_refused_at_start)
{
        static const char *bad[] = { "", "abc", "50", "99", "100001", "-1", "12x", "1e3" };
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_arena a;
        size_t b;

        wc.devices = 2;
        cr_assert_eq(strata__workers_plan(&wc, &b), STRATA_OK);
        cr_assert_eq(strata_arena_map(&a, b, NULL), STRATA_OK);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct strata__workers *w = NULL;

                cr_assert_eq(setenv("STRATA_SCHED_SLICE_US", bad[i], 1), 0);
                cr_expect_eq(strata__workers_start(&w, &a, &wc), STRATA_EINVAL, "'%s'", bad[i]);
                cr_expect_null(w);
                cr_expect(strstr(strata_last_error(), "STRATA_SCHED_SLICE_US") != NULL, "%s",
                          strata_last_error());
                cr_expect_eq(strata_arena_used(&a), 0, "'%s' took arena memory", bad[i]);
        }
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
}
