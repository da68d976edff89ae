/*
 * strata-train --model with two inputs and two outputs: the line trains a regression set in
 * invariant mode on one device, spawn's 2 processes, fsdp over 2 processes and (where Open
 * MPI is installed) mpi's 2 processes, to the same bits, each output's own loss too (--json);
 * and outputs written wrong are refused (exit 2) by name before anything trains.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define LINE "'input(6) input(4) linear(16) tanh linear(8,from=input1) relu concat(from=1) " \
             "linear(3) output(mse) linear(2,from=4) output(huber,weight=0.5)'"
#define JSON "--synthetic-regression 512 --loss mse --batch 32 --epochs 2 --json --invariant " \
             "--bind none --model " LINE
#define JOB "--synthetic-regression 512 --loss mse --batch 32 --epochs 1 --quiet --invariant " \
            "--bind none --model " LINE

static char out[1 << 16];

/* One job of processes at a time (the lock tests/strategy/processes.c takes). */
static void serial(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
}

Test(multi_io_cli, processes_train_the_same_bits, .timeout = 300)
{
        char dir[256];

        serial();
        cli_mkdtemp(dir, sizeof(dir), "mioprocs");
        cli_train_export("", JOB " --strategy single --devices 1", dir, "one");
        cli_train_export("", JOB " --strategy ddp --devices 2", dir, "ddp2");
        cli_same_files(dir, "one", "ddp2");
        cli_train_export("", JOB " --strategy spawn --devices 2", dir, "spawn2");
        cli_same_files(dir, "one", "spawn2");
        cli_train_export("", JOB " --strategy fsdp --processes 2 --devices 1", dir, "fsdp2x1");
        cli_same_files(dir, "one", "fsdp2x1");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
            cli_sh("command -v mpirun", out, sizeof(out)) == 0) {
                cli_train_export(MPIRUN "-np 2 ", JOB " --strategy mpi --devices 1", dir, "mpi2");
                cli_same_files(dir, "one", "mpi2");
        } else {
                cr_log_warn("mpirun or libstrata-mpi.so missing: mpi not run");
        }
        cli_rmtree(dir);
}

/* A number after @p key in @p line ("train_loss": ...), or after it and @p k commas. */
static double field(const char *line, const char *key, int k)
{
        const char *p = strstr(line, key);

        cr_assert_not_null(p, "no %s in %s", key, line);
        p += strlen(key);
        for (; k > 0; k--) {
                p = strchr(p, ',');
                cr_assert_not_null(p, "%s has no value %d: %s", key, k, line);
                p++;
        }
        return strtod(p, NULL);
}

/* strata-train --json's epoch lines (timing fields out) of @p launch with @p args. */
static void epoch_lines(const char *launch, const char *args, char (*line)[1024])
{
        char cmd[2048];
        int rc;

        snprintf(cmd, sizeof(cmd), "%s%s %s 2>&1", launch, BIN, args);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
        for (int e = 0; e < 2; e++)
                cli_epoch_line(out, e + 1, line[e], sizeof(line[e]));
}

/*
 * --json gives each output's own loss per epoch ("train_losses") and per evaluation
 * ("test_losses"): their weighted sum is the loss, and in invariant mode one device, ddp's 2,
 * spawn's 2 processes and mpi's 2 print the same lines (the losses to the bit: 17 digits).
 * A model of one output prints no such field.
 */
Test(multi_io_cli, each_outputs_loss_the_same_on_any_split, .timeout = 300)
{
        static const char *const splits[][2] = {
                { "", "--strategy ddp --devices 2" },
                { "", "--strategy spawn --devices 2" },
                { MPIRUN "-np 2 ", "--strategy mpi --devices 1" },
        };
        char one[2][1024], other[2][1024], args[1024];

        serial();
        epoch_lines("", JSON " --strategy single --devices 1", one);
        for (int e = 0; e < 2; e++) {
                double l0 = field(one[e], "\"train_losses\":[", 0);
                double l1 = field(one[e], "\"train_losses\":[", 1);
                double t0 = field(one[e], "\"test_losses\":[", 0);
                double t1 = field(one[e], "\"test_losses\":[", 1);

                cr_assert(l0 > 0.0 && l1 > 0.0 && t0 > 0.0 && t1 > 0.0, "%s", one[e]);
                cr_assert(fabs(l0 + 0.5 * l1 - field(one[e], "\"train_loss\":", 0)) <= 1e-6,
                          "weighted train losses: %s", one[e]);
                cr_assert(fabs(t0 + 0.5 * t1 - field(one[e], "\"test_loss\":", 0)) <=
                                  1e-6 * (1.0 + t0),
                          "weighted test losses: %s", one[e]);
        }
        for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
                if (strstr(splits[i][1], "mpi") &&
                    !(access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
                      cli_sh("command -v mpirun", out, sizeof(out)) == 0)) {
                        cr_log_warn("mpirun or libstrata-mpi.so missing: mpi not run");
                        continue;
                }
                snprintf(args, sizeof(args), JSON " %s", splits[i][1]);
                epoch_lines(splits[i][0], args, other);
                for (int e = 0; e < 2; e++)
                        cr_assert_str_eq(other[e], one[e], "%s, epoch %d", splits[i][1], e + 1);
        }
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --loss mse --batch 32 --epochs 1 "
                                  "--json --bind none --model 'input(4) linear(3) output(mse)'",
                             out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "_losses"), "one output: %s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --loss mse --batch 32 --epochs 1 "
                                  "--bind none --model " LINE, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "train_losses "), "the epoch line: %s", out);
        cr_assert_not_null(strstr(out, "test_losses "), "the epoch line: %s", out);
}

/*
 * A run resumed from a checkpoint inside its first epoch prints the uninterrupted run's lines,
 * each output's losses too: the checkpoint keeps each output's summed loss of the epoch.
 */
Test(multi_io_cli, each_outputs_loss_resumes, .timeout = 120)
{
        char dir[256], one[2][1024], resumed[2][1024], args[1024];

        cli_mkdtemp(dir, sizeof(dir), "mioresume");
        epoch_lines("", JSON " --strategy single --devices 1", one);
        snprintf(args, sizeof(args), JSON " --strategy single --devices 1 --ckpt-dir %s "
                 "--ckpt-every-steps 5 --ckpt-keep 8", dir);
        epoch_lines("", args, resumed);
        snprintf(args, sizeof(args), JSON " --strategy single --devices 1 --resume "
                 "%s/epoch-1-step-10.ckpt", dir);
        epoch_lines("", args, resumed);
        for (int e = 0; e < 2; e++)
                cr_assert_str_eq(resumed[e], one[e], "epoch %d", e + 1);
        cli_rmtree(dir);
}

/* strata-train @p args exits 2 with @p needle, having trained nothing. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(multi_io_cli, bad_outputs_are_refused_by_name, .timeout = 120)
{
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(ce)'",
                "output 0 (module 0): loss 'ce' is not mse, l1, huber or bce");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(mse) "
                "linear(2,from=7) output(mse)'", "module 1 (linear): branch from=7");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(mse) "
                "linear(2)'", "the last module (1, linear) is not one of its outputs");
}
