/*
 * The host's placement is respected: device threads stay inside the CPU set the process (its
 * calling thread) was given, the caller gets its own mask back at teardown, `bind = none`
 * pins nothing, and two processes confined to different cores each stay on their own.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static void need_two_cpus(void)
{
        cpu_set_t s;

        if (sched_getaffinity(0, sizeof(s), &s) != 0 || !CPU_ISSET(0, &s) || !CPU_ISSET(1, &s))
                cr_skip("needs CPUs 0 and 1");
}

static void set_mask(int cpu0, int cpu1)
{
        cpu_set_t s;

        CPU_ZERO(&s);
        if (cpu0)
                CPU_SET(0, &s);
        if (cpu1)
                CPU_SET(1, &s);
        cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof(s), &s), 0);
}

/* Bit 0: CPU 0 allowed, bit 1: CPU 1 allowed, for a cpu_set_t. */
static int bits(const cpu_set_t *s)
{
        return (CPU_ISSET(0, s) ? 1 : 0) | (CPU_ISSET(1, s) ? 2 : 0);
}

static int my_mask(void)
{
        cpu_set_t s;

        cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof(s), &s), 0);
        return bits(&s);
}

/* Threads of the test harness that exist before the runtime: not the runtime's to place. */
static int before[64], nbefore;

static void note_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;

        cr_assert_not_null(d);
        nbefore = 0;
        while ((e = readdir(d)) && nbefore < 64)
                if (sscanf(e->d_name, "%d", &before[nbefore]) == 1 && before[nbefore] != gettid())
                        nbefore++;
        closedir(d);
}

static int harness(int tid)
{
        for (int i = 0; i < nbefore; i++)
                if (before[i] == tid)
                        return 1;
        return 0;
}

/* The masks of the caller and the runtime's threads, as bits(): how many had each. */
static int thread_masks(int count[4])
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int n = 0;

        cr_assert_not_null(d);
        memset(count, 0, 4 * sizeof(int));
        while ((e = readdir(d))) {
                cpu_set_t s;
                int tid;

                if (sscanf(e->d_name, "%d", &tid) != 1 || harness(tid))
                        continue;
                if (sched_getaffinity(tid, sizeof(s), &s) != 0)
                        continue;
                count[bits(&s) & 3]++;
                n++;
        }
        closedir(d);
        return n;
}

static struct strata_runtime *start(struct rig *r, enum strata_bind bind)
{
        struct strata_runtime *rt;
        struct strata_config c;

        note_threads();
        rig_init(r, 0);
        c = rig_cfg(r, STRATA_STRATEGY_DDP, 2, 0);
        c.device.bind = bind;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(r, rt, 3, NULL);
        return rt;
}

Test(cpuset, confined_to_one_core_every_thread_stays_inside)
{
        struct strata_runtime *rt;
        struct rig r;
        int count[4], n;

        need_two_cpus();
        set_mask(1, 0); /* as `taskset -c 0` would */
        rt = start(&r, STRATA_BIND_CORES);
        n = thread_masks(count);
        cr_assert_geq(n, 2);
        cr_assert_eq(count[1], n, "every thread on CPU 0 only: %d of %d (cpu1-only %d, both %d)",
                     count[1], n, count[2], count[3]);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(my_mask(), 1, "the caller keeps the mask it was given");
}

static void *probe(void *arg)
{
        *(int *)arg = my_mask();
        return NULL;
}

/*
 * Issue 58, item 13: the caller (device 0 of ddp) is on its core only inside the runtime's
 * calls; between them it has the set it was given, and so has a thread it creates then (an
 * OpenMP pool started beside a running runtime). The runtime's own threads stay pinned.
 */
Test(cpuset, caller_gets_its_mask_back_and_later_threads_are_not_pinned)
{
        struct strata_runtime *rt;
        struct rig r;
        pthread_t t;
        int inherited = 0, count[4], n;

        need_two_cpus();
        set_mask(1, 1);
        rt = start(&r, STRATA_BIND_CORES);
        cr_assert_eq(my_mask(), 3, "the caller is left pinned between calls");
        cr_assert_eq(pthread_create(&t, NULL, probe, &inherited), 0);
        pthread_join(t, NULL);
        cr_assert_eq(inherited, 3, "a thread created while the runtime lives inherits one core");
        n = thread_masks(count);
        cr_assert_eq(count[3], 1, "only the caller has both CPUs: %d of %d", count[3], n);
        rig_steps(&r, rt, 2, NULL);
        cr_assert_eq(my_mask(), 3, "the caller is left pinned after a step");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(my_mask(), 3);
        cr_assert_eq(pthread_create(&t, NULL, probe, &inherited), 0);
        pthread_join(t, NULL);
        cr_assert_eq(inherited, 3, "a thread created after teardown inherits the full set");
}

Test(cpuset, bind_none_pins_nothing)
{
        struct strata_runtime *rt;
        struct rig r;
        int count[4], n;

        need_two_cpus();
        set_mask(1, 1);
        rt = start(&r, STRATA_BIND_NONE);
        n = thread_masks(count);
        cr_assert_eq(count[3], n, "no thread pinned: %d of %d", count[3], n);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(cpuset, bad_bind_value_is_refused)
{
        struct strata_plan_info pl;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.device.bind = (enum strata_bind)7;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "bind"), "%s", strata_last_error());
}

/* Two strata-train processes under taskset -c 0 and -c 1: each places both devices on its own. */
Test(cpuset, two_confined_processes_do_not_share_a_core)
{
        const char *args = " --strategy ddp --devices 2 --synthetic 2048 --epochs 1 --verbose "
                           "--quiet 2>&1";
        char cmd[2][512], line[256];
        FILE *p[2];

        need_two_cpus();
        for (int i = 0; i < 2; i++) {
                snprintf(cmd[i], sizeof(cmd[i]), "taskset -c %d %s%s", i, BIN, args);
                p[i] = popen(cmd[i], "r");
                cr_assert_not_null(p[i]);
        }
        for (int i = 0; i < 2; i++) {
                int placed = 0;

                while (fgets(line, sizeof(line), p[i])) {
                        int dev, core, pu;

                        if (sscanf(line, "strata: device %d -> core %d (PU %d", &dev, &core,
                                   &pu) == 3) {
                                cr_assert_eq(pu, i, "process on CPU %d placed: %s", i, line);
                                placed++;
                        }
                }
                cr_assert_eq(pclose(p[i]), 0, "%s", cmd[i]);
                cr_assert_eq(placed, 2, "%s", cmd[i]);
        }
}
