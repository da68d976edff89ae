/*
 * Issue 58, item 18: a process whose CPU kernels libxsmm compiled holds no named
 * /tmp/.libxsmm.<uid> (libxsmm's lock, removed only by a clean exit): a SIGKILLed job leaves
 * nothing in /tmp. Checked on this process's own open files, so other processes' files on the
 * machine do not matter.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

/* How many of this process's descriptors name @p path and are not deleted. */
static int holds_named(const char *path)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        int n = 0;

        cr_assert_not_null(d);
        while ((e = readdir(d))) {
                char link[300], target[256];
                ssize_t len;

                snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
                len = readlink(link, target, sizeof(target) - 1);
                if (len <= 0)
                        continue;
                target[len] = '\0';
                n += !strcmp(target, path);
        }
        closedir(d);
        return n;
}

Test(libxsmm_lock_file, a_running_runtime_leaves_no_named_lock)
{
        struct strata_runtime *rt;
        struct strata_config c;
        char path[64];
        struct rig r;

        snprintf(path, sizeof(path), "/tmp/.libxsmm.%u", (unsigned)getuid());
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_SINGLE, 1, 0);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(&r, rt, 2, NULL);
        cr_assert_eq(holds_named(path), 0, "%s is open under its name: a SIGKILL leaves it",
                     path);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
