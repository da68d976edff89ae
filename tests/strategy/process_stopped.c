/*
 * A process of a job that stops (SIGSTOP: every thread of it) is the one named, whatever the
 * devices per process: with 2 processes x 2 devices, the waits of a process's other devices
 * behind its coordinator's cross-process wait do not mask the process that did not arrive.
 * Through the API (spawn, 2 x 2) and through strata-train under mpirun (2 x 2); the job ends in
 * bounded time and leaves no process (a stopped one is continued and killed by the test).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define SEED "424243" /* marks this file's jobs */

static char out[1 << 16];

/* Forking a threaded runner cannot be followed under TSan, nor Open MPI's abort path. */
static void skip_under_tsan(void)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (see tests/strategy/processes.c)");
}

static struct rig rig; /* set up by the parent: the children inherit it */

static void stop_self(int sig)
{
        (void)sig;
        raise(SIGSTOP);
}

/*
 * A spawned process of two devices; rank 1 stops itself 1 ms into step 5, wherever its
 * devices then are. Rank 0 hands the parent the message its failed step returned.
 */
static int stopping_child(int rank, int size, void *arg)
{
        struct strata_config c = rig_cfg(&rig, STRATA_STRATEGY_SPAWN, 2, 0);
        struct strata_runtime *rt;
        struct strata_batch b;

        (void)size, (void)arg;
        c.device.timeout_s = 2.0;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&rig.loader, rig.idx, 256);
        for (int s = 0; s < 40; s++) {
                if (rank == 1 && s == 5) {
                        signal(SIGALRM, stop_self);
                        setitimer(ITIMER_REAL, &(struct itimerval){ .it_value = { 0, 1000 } },
                                  NULL);
                }
                if (!strata_loader_next(&rig.loader, &b))
                        strata_loader_reset(&rig.loader, rig.idx, 256);
                else if (strata_train_step(rt, &b, NULL) != STRATA_OK) {
                        const char *why = strata_last_error();

                        strata_spawn_return(why, strlen(why) + 1);
                        return 1;
                }
        }
        strata_teardown(rt);
        return 0;
}

Test(process_stopped, spawn_2x2_names_the_process, .timeout = 120)
{
        static char why[1024];
        struct strata_spawn_result res;
        double t0;
        int rc;

        skip_under_tsan();
        cli_serial_jobs();
        rig_init(&rig, 0);
        t0 = cli_now_s();
        rc = strata_spawn(2, stopping_child, NULL, 10.0, why, sizeof(why) - 1, &res);
        cr_assert_eq(rc, STRATA_EABORTED, "%s", strata_last_error());
        cr_assert_lt(cli_now_s() - t0, 30.0, "the job took %.1f s", cli_now_s() - t0);
        cr_assert_eq(res.failed_rank, 1, "culprit %d: %s", res.failed_rank, res.why);
        cr_assert(strstr(why, "process 1 has not arrived"), "rank 0 said: %s", why);
        cr_assert_null(strstr(why, "for rank 0"), "a local wait was reported: %s", why);
}

/*
 * Whether a line of process 0 (the one that kept running) contains @p what. Process 1's own
 * lines are not evidence: stopped for the whole wait, it may print what its clock saw when the
 * job's end continues it (CI: "rank 1 waited 3 s for rank 0" from process 1, behind the right
 * line of process 0).
 */
static int process0_says(const char *what)
{
        for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *end = strchr(l, '\n'), *hit;

                if (strncmp(l, "strata: process 0:", sizeof("strata: process 0:") - 1))
                        continue;
                hit = strstr(l, what);
                if (hit && (!end || hit < end))
                        return 1;
        }
        return 0;
}

/* A job of 2 x 2 devices under mpirun (@p env: its variables) whose process 1 stops. */
static void mpi_stopped(const char *env, const char *expect)
{
        char cmd[1024];
        double t0, took;
        int rc;

        skip_under_tsan();
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) != 0 ||
            cli_sh("command -v mpirun", out, sizeof(out)) != 0)
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        cli_serial_jobs();
        snprintf(cmd, sizeof(cmd), MPIRUN "%s-x STRATA_TRAIN_FAULT=stop:1:20 -np 2 " BIN
                 " --strategy mpi --devices 2 --synthetic 4000 --epochs 1 --quiet --timeout 3 "
                 "--seed " SEED " 2>&1", env);
        t0 = cli_now_s();
        rc = cli_sh(cmd, out, sizeof(out));
        took = cli_now_s() - t0;
        cli_kill_jobs(SEED);
        cr_assert_neq(rc, 0, "a stopped rank, exit 0:\n%s", out);
        cr_assert_lt(took, 3.0 + 1.0 + 20.0, "took %.1f s", took);
        cr_assert(process0_says(expect), "process 1 not named ('%s'):\n%s", expect, out);
        cr_assert(!process0_says("for rank"), "process 0 reported a local wait:\n%s", out);
}

/* On one host, the shm link (decision 0105); then Open MPI's point-to-point. */
Test(process_stopped, mpi_2x2_names_the_process, .timeout = 300)
{
        mpi_stopped("", "process 1 has not arrived (hung or dead)");
}

Test(process_stopped, mpi_link_2x2_names_the_process, .timeout = 300)
{
        mpi_stopped("-x STRATA_MPI_LINK=mpi ", "nothing came from process 1");
}
