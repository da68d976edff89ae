/*
 * strata-train's stop signals in a job of several processes: the parent of a spawn job
 * forwards SIGINT and SIGTERM and exits as a single process does (130, 143 with a checkpoint);
 * a signal to one process stops every process at the same step, and the checkpoint written
 * then resumes to the epoch an uninterrupted run gives.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define JOB BIN " --strategy spawn --devices 2 --model 784-64-10 --synthetic 8000 --json"

static char out[1 << 16];

/* One job of the process tests at a time (tests/strategy/processes.c takes the same lock). */
static void serial(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0); /* released when the test's process exits */
}

/*
 * Run the spawn job @p args (epochs enough to outlast 2.5 s on any machine) in the background,
 * send @p sig after 2.5 s to its parent (@p who
 * "parent") or to its rank 1 (the parent's second child, "rank1"); its exit status.
 */
static int signalled(const char *args, const char *sig, const char *who)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), JOB " %s 2>&1 & p=$!; sleep 2.5; "
                 "t=$p; [ %s = rank1 ] && t=$(ps -o pid= --ppid $p | sort -n | sed -n 2p); "
                 "kill -%s $t; wait $p", args, who, sig);
        return cli_sh(cmd, out, sizeof(out));
}

/* Every "<signal> at epoch E, step S" line of @p o names the same place; it is returned. */
static void same_step(const char *o, const char *sig, char *at, size_t n)
{
        char key[64];
        const char *p;
        int lines = 0;

        snprintf(key, sizeof(key), "%s at epoch ", sig);
        at[0] = '\0';
        for (p = strstr(o, key); p; p = strstr(p + 1, key), lines++) {
                size_t len = strcspn(p, "\n:;");

                if (!at[0])
                        snprintf(at, n, "%.*s", (int)len, p);
                cr_assert(!strncmp(p, at, strlen(at)) && len == strlen(at),
                          "processes stopped at different steps:\n%s", o);
        }
        cr_assert_eq(lines, 2, "one line per process expected:\n%s", o);
}

Test(strata_train_job_stop, sigint_to_the_spawn_parent_exits_130, .timeout = 120)
{
        char at[128];

        serial();
        cr_assert_eq(signalled("--epochs 2000", "INT", "parent"), 130, "%s", out);
        cr_assert_not_null(strstr(out, "\"stopped\":\"INT\""), "%s", out);
        same_step(out, "Interrupt", at, sizeof(at));
}

Test(strata_train_job_stop, sigterm_to_one_rank_stops_all_at_one_step, .timeout = 240)
{
        char dir[256], args[512], at[128], name[128] = "", a[512], b[512];
        int e;

        serial();
        cli_mkdtemp(dir, sizeof(dir), "job-stop");
        snprintf(args, sizeof(args), "--epochs 2000 --ckpt-dir %s", dir);
        cr_assert_eq(signalled(args, "TERM", "rank1"), 143, "%s", out);
        same_step(out, "Terminated", at, sizeof(at));
        cr_assert_not_null(strstr(out, "checkpoint saved"), "%s", out);
        e = cli_resume_epoch(dir, name, sizeof(name));
        snprintf(args, sizeof(args), JOB " --epochs %d 2>&1", e);
        cr_assert_eq(cli_sh(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, e, a, sizeof(a));
        snprintf(args, sizeof(args), JOB " --epochs %d --resume %s 2>&1", e, dir);
        cr_assert_eq(cli_sh(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, e, b, sizeof(b));
        cr_assert_str_eq(a, b, "resumed after SIGTERM to rank 1 (%s)", at);
        cli_rmtree(dir);
}
