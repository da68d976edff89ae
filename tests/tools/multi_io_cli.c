/*
 * strata-train --model with two inputs and two outputs: the line trains a regression set in
 * invariant mode on one device, spawn's 2 processes, fsdp over 2 processes and (where Open
 * MPI is installed) mpi's 2 processes, to the same bits; and outputs written wrong are refused
 * (exit 2) by name before anything trains.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define LINE "'input(6) input(4) linear(16) tanh linear(8,from=input1) relu concat(from=1) " \
             "linear(3) output(mse) linear(2,from=4) output(huber,weight=0.5)'"
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
