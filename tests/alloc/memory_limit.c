/*
 * What the process can get (alloc/limit.h): the cgroup's limit read for this process's cgroup
 * and its ancestors, v2 (memory.max, "max" is none) and v1 (memory.limit_in_bytes, a huge
 * value is none); the least limit wins and is named with its figure.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/limit.h"

static void put(const char *root, const char *rel, const char *text)
{
        char path[512], cmd[600];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
        cr_assert_eq(system(cmd), 0);
        f = fopen(path, "w");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
}

/* A fake /sys/fs/cgroup and /proc/self/cgroup in a temporary directory. */
static void tree(char *dir, const char *self)
{
        cr_assert_not_null(mkdtemp(dir));
        put(dir, "self", self);
        put(dir, "statm", "1 1 1 1 0 1 0\n");
}

Test(memory_limit, cgroup_v2_ancestor_limit_wins)
{
        char dir[] = "/tmp/strata-limit-XXXXXX", self[64], root[64], cmd[128];
        struct strata__limit_files f = { self, root, NULL };
        struct strata__memory_limit lim;

        tree(dir, "0::/job/step\n");
        snprintf(self, sizeof(self), "%s/self", dir);
        snprintf(root, sizeof(root), "%s/cg", dir);
        put(dir, "cg/job/step/memory.max", "max\n");
        put(dir, "cg/job/memory.max", "1048576\n");
        put(dir, "cg/memory.max", "2097152\n");
        strata__memory_limit(&f, &lim);
        cr_assert_eq(lim.bytes, 1048576u, "%zu: %s", lim.bytes, lim.why);
        cr_assert_not_null(strstr(lim.why, "cgroup's memory limit is 1048576 bytes"), "%s",
                           lim.why);
        cr_assert_not_null(strstr(lim.why, "cg/job/memory.max"), "%s", lim.why);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)!system(cmd);
}

Test(memory_limit, cgroup_v1_memory_controller_and_unlimited_values)
{
        char dir[] = "/tmp/strata-limit-XXXXXX", self[64], root[64], cmd[128];
        struct strata__limit_files f = { self, root, NULL };
        struct strata__memory_limit lim;

        tree(dir, "5:cpu,memory:/batch/42\n3:cpuset:/\n0::/\n");
        snprintf(self, sizeof(self), "%s/self", dir);
        snprintf(root, sizeof(root), "%s/cg", dir);
        put(dir, "cg/memory/batch/42/memory.limit_in_bytes", "3145728\n");
        put(dir, "cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
        put(dir, "cg/unified/memory.max", "max\n");
        strata__memory_limit(&f, &lim);
        cr_assert_eq(lim.bytes, 3145728u, "%zu: %s", lim.bytes, lim.why);
        /* No cgroup limit anywhere: physical memory is the limit. */
        put(dir, "cg/memory/batch/42/memory.limit_in_bytes", "9223372036854771712\n");
        strata__memory_limit(&f, &lim);
        cr_assert_eq(lim.bytes, (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE),
                     "%s", lim.why);
        cr_assert_not_null(strstr(lim.why, "the machine has"), "%s", lim.why);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)!system(cmd);
}

/* Unreadable or malformed sources are skipped, never fatal. */
Test(memory_limit, missing_and_malformed_files_are_skipped)
{
        struct strata__limit_files f = { "/nonexistent/self", "/nonexistent", "/nonexistent" };
        char dir[] = "/tmp/strata-limit-XXXXXX", self[64], root[64], cmd[128];
        struct strata__memory_limit lim;

        strata__memory_limit(&f, &lim);
        cr_assert_gt(lim.bytes, 0u);
        tree(dir, "garbage without colons\n7:memory\n0::\n");
        snprintf(self, sizeof(self), "%s/self", dir);
        snprintf(root, sizeof(root), "%s/cg", dir);
        put(dir, "cg/memory.max", "not a number\n");
        f = (struct strata__limit_files){ self, root, NULL };
        strata__memory_limit(&f, &lim);
        cr_assert_not_null(strstr(lim.why, "the machine has"), "%s", lim.why);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)!system(cmd);
}
