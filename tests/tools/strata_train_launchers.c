/*
 * strata-train under launchers and terminals (issue 45, items 5-7): a launcher that started
 * several processes (Open MPI, Slurm, PMI, torchrun variables) never gets N independent copies
 * of the job: by default they train as one mpi job, a strategy that trains within one process
 * is refused naming --strategy mpi; no progress drawing under a launcher (its terminal may
 * not be the user's) nor off a terminal; a job strata-train spawns prints a usage error once
 * and exits 2.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 1024 --model 784-16-10 --batch 64 --epochs 1 "

static char out[1 << 15];

/* The launchers' variables for process 0 of 2. */
static const char *const launchers[] = {
        "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0",
        "SLURM_NTASKS=2 SLURM_PROCID=0",
        "PMI_SIZE=2 PMI_RANK=0",
        "WORLD_SIZE=2 RANK=0",
};

/* Occurrences of @p s in @p text. */
static int count(const char *text, const char *s)
{
        int n = 0;

        for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
                n++;
        return n;
}

Test(launchers, a_strategy_within_one_process_is_refused)
{
        char cmd[512];

        for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
                snprintf(cmd, sizeof(cmd), "env %s " BIN " " RUN "--strategy ddp 2>&1",
                         launchers[i]);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", cmd, out);
                cr_assert_not_null(strstr(out, "started 2 processes, and --strategy ddp"),
                                   "%s: %s", cmd, out);
                cr_assert_not_null(strstr(out, "Use --strategy mpi"), "%s: %s", cmd, out);
                cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
        }
        snprintf(cmd, sizeof(cmd), "env %s " BIN " " RUN "--strategy spawn 2>&1", launchers[0]);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--strategy spawn trains within one process"), "%s", out);
}

/* The default under a launcher is mpi: --plan shows it without starting anything. */
Test(launchers, the_default_becomes_mpi)
{
        char cmd[512];

        for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
                snprintf(cmd, sizeof(cmd), "env %s " BIN " " RUN "--devices 1 --plan --json "
                         "2>&1", launchers[i]);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s: %s", cmd, out);
                cr_assert_not_null(strstr(out, "they train as one job (--strategy mpi"), "%s",
                                   out);
                cr_assert_not_null(strstr(out, "\"strategy\":\"mpi\",\"processes\":2,"), "%s",
                                   out);
        }
}

/* Under mpirun -np 2: one job, one result over both processes' devices. */
Test(launchers, mpirun_trains_one_job, .timeout = 120)
{
        if (!cli_have_mpi())
                cr_skip("no Open MPI here");
        cr_assert_eq(cli_sh(CLI_MPIRUN_2 BIN " " RUN "--devices 1 --json 2>/dev/null", out,
                            sizeof(out)), 0, "%s", out);
        cr_assert_eq(count(out, "{\"final\":true"), 1, "one result: %s", out);
        cr_assert_eq(count(out, "{\"epoch\":1,"), 1, "%s", out);
        cr_assert_not_null(strstr(out, "\"devices\":2,"), "both processes: %s", out);
}

/* A launcher's process may have a terminal of its own: plain lines, no \r or ESC[K. */
Test(launchers, no_progress_drawing_under_a_launcher, .timeout = 60)
{
        cr_assert_eq(cli_run_tty("env OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 " BIN,
                                 RUN "--synthetic 20000", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "epoch   1  train_loss"), "%s", out);
        cr_assert_null(strchr(out, '\033'), "no ESC: %s", out);
        cr_assert_null(strstr(out, "\repoch"), "no bar: %s", out);
        cr_assert_eq(cli_run_tty(BIN, RUN "--synthetic 20000", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\repoch 1/1 ["), "a terminal alone draws: %s", out);
}

/* A job strata-train spawns says a usage error once, as it is, and exits 2. */
Test(launchers, processes_print_a_usage_error_once, .timeout = 60)
{
        static const char *const jobs[] = { "--strategy zero1 --processes 2 --devices 1",
                                            "--strategy spawn --devices 2" };
        char args[512];

        for (size_t i = 0; i < 2; i++) {
                snprintf(args, sizeof(args), RUN "%s --resume /nonexistent-ckpt", jobs[i]);
                cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s: %s", args, out);
                cr_assert_eq(count(out, "cannot open '/nonexistent-ckpt'"), 1, "%s", out);
                cr_assert_eq(count(out, "strata-train:"), 2, "the header and the error: %s",
                             out);
                cr_assert_null(strstr(out, "aborted"), "%s", out);
                snprintf(args, sizeof(args), RUN "%s --lr-schedule bogus", jobs[i]);
                cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s: %s", args, out);
                cr_assert_eq(count(out, "strata-train:"), 1, "%s", out);
                cr_assert_eq(count(out, "--lr-schedule: 'bogus'"), 1, "%s", out);
        }
}
