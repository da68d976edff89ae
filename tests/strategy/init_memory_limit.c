/*
 * strata_init() compares the plan with what the process can get and refuses up front with
 * STRATA_ENOMEM and both numbers, instead of mapping a region the kernel cannot back: a plan
 * over RLIMIT_AS (in a child), a plan larger than the machine; a normal plan is accepted, and
 * a region the caller supplies is not second-guessed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/limit.h"
#include "tests/support/rig.h"

/* 1 when the message names both @p need and @p can (as decimal numbers). */
static int names_both(const char *msg, size_t need, size_t can)
{
        char a[32], b[32];

        snprintf(a, sizeof(a), "%zu", need);
        snprintf(b, sizeof(b), "%zu", can);
        return strstr(msg, a) && strstr(msg, b);
}

/* A model whose hidden layer is @p width wide. */
static void wide(struct rig *r, int width)
{
        rig_init(r, 0);
        r->mods[0].out = width;
}

Test(init_memory_limit, normal_plan_accepted)
{
        struct strata_runtime *rt;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Wider than the machine: parameters, gradients and momentum outgrow physical memory. */
Test(init_memory_limit, plan_beyond_the_machine_refused)
{
        struct strata_runtime *rt = (struct strata_runtime *)0x1;
        struct strata__memory_limit lim;
        struct strata_plan_info pl;
        double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        struct rig r;

        wide(&r, (int)(phys / (RIG_IN * 4.0)) + 1); /* its weights alone exceed the machine */
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_gt((double)pl.bytes, phys);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENOMEM, "%s", strata_last_error());
        strata__memory_limit(NULL, &lim);
        cr_assert(names_both(strata_last_error(), pl.bytes, lim.bytes), "%zu, %zu: %s",
                  pl.bytes, lim.bytes, strata_last_error());
        cr_assert_eq(rt, (struct strata_runtime *)0x1, "a refused init writes nothing");
}

/* The bytes this process has mapped (/proc/self/statm's first field). */
static size_t mapped(void)
{
        unsigned long long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");

        if (f) {
                if (fscanf(f, "%llu", &pages) != 1)
                        pages = 0;
                fclose(f);
        }
        return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* In a child: RLIMIT_AS leaves half the plan; init refuses, a caller's region is used. */
static int child_over_rlimit(void)
{
        struct strata_plan_info pl;
        struct strata_runtime *rt;
        struct rlimit rl;
        struct rig r;
        void *mem;

        wide(&r, 1 << 16);
        if (strata_plan(&r.cfg, &pl))
                return 10;
        mem = mmap(NULL, pl.bytes + pl.align, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                return 11;
        rl.rlim_cur = rl.rlim_max = (rlim_t)(mapped() + pl.bytes / 2);
        if (setrlimit(RLIMIT_AS, &rl))
                return 12;
        if (strata_init(&rt, &r.cfg) != STRATA_ENOMEM)
                return 13;
        if (!names_both(strata_last_error(), pl.bytes, (size_t)rl.rlim_cur) ||
            !strstr(strata_last_error(), "ulimit -v"))
                return 14;
        r.cfg.memory = mem;
        r.cfg.memory_size = pl.bytes + pl.align;
        if (strata_init(&rt, &r.cfg) != STRATA_OK || strata_teardown(rt) != STRATA_OK)
                return 15;
        return 0;
}

/*
 * In a child: RLIMIT_AS leaves the plan and 1.5 MiB, less than a huge page: init maps its
 * region without the huge page's alignment (its lead would not fit, decision 0112), trains
 * nothing, and tears down.
 */
static int child_room_for_the_plan_only(void)
{
        struct strata_plan_info pl;
        struct strata_runtime *rt;
        struct rlimit rl;
        struct rig r;

        wide(&r, 1 << 16);
        if (strata_plan(&r.cfg, &pl))
                return 10;
        if (pl.bytes < STRATA_ALIGN_HUGEPAGE)
                return 11;
        rl.rlim_cur = rl.rlim_max = (rlim_t)(mapped() + pl.bytes + STRATA_MIB(3) / 2);
        if (setrlimit(RLIMIT_AS, &rl))
                return 12;
        if (strata_init(&rt, &r.cfg) != STRATA_OK)
                return 13;
        if (strata_teardown(rt) != STRATA_OK)
                return 14;
        return 0;
}

/* @p child in a forked process (its RLIMIT_AS stays there), which must exit 0. */
static void in_a_child(int (*child)(void))
{
        int st;
        pid_t p;

        if (STRATA_SAN[0])
                cr_skip("a sanitizer reserves more address space than any such limit");
        p = fork();
        cr_assert_geq(p, 0);
        if (p == 0)
                _exit(child());
        cr_assert_eq(waitpid(p, &st, 0), p);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}

Test(init_memory_limit, plan_fits_without_room_for_a_huge_page)
{
        in_a_child(child_room_for_the_plan_only);
}

Test(init_memory_limit, plan_over_rlimit_as_refused_with_both_numbers)
{
        in_a_child(child_over_rlimit);
}
