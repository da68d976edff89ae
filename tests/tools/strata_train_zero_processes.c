/*
 * strata-train's zero1, zero2 and fsdp across processes: --processes P starts P processes of
 * --devices N each (spawn), mpirun's processes join by themselves, and both export the weights
 * of ddp on as many devices in one process, byte for byte (fsdp's export is written by process
 * 0 from every process's shards); with --ckpt-dir every process saves together (process 0
 * writes) and --resume continues as ddp's uninterrupted run, also where every micro-batch is
 * reduced (--accumulate-reduce each). --processes with another strategy is refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define ARGS "--model 784-32-10 --bn --dropout 0.1 --optim adamw --lr 0.002 --clip-norm 1 " \
             "--synthetic 1024 --batch 64 --quiet --seed 515151"

static char out[1 << 16];

static const char *extra = ""; /* options every run of a test adds */

/* @p launch strata-train ARGS @p args, its weights exported to dir/name. */
static void train(const char *dir, const char *name, const char *launch, const char *args)
{
        char a[1024];

        snprintf(a, sizeof(a), ARGS " %s %s", extra, args);
        cli_train_export(launch, a, dir, name);
}

/*
 * Strategies against ddp on 4 devices: @p a over 2 x 2 and @p b over 4 x 1 processes x
 * devices, @p ck stopped after an epoch and resumed from its checkpoint (2 x 2), and @p mpi
 * over mpirun's 2 processes of 2 devices.
 */
static void equal_ddp(const char *a, const char *b, const char *ck, const char *mpi)
{
        char dir[256], args[512];

        cli_mkdtemp(dir, sizeof(dir), "zproc-cli");
        train(dir, "ddp4", "", "--strategy ddp --devices 4 --epochs 2");
        snprintf(args, sizeof(args), "--strategy %s --processes 2 --devices 2 --epochs 2", a);
        train(dir, "2x2", "", args);
        cli_same_files(dir, "ddp4", "2x2");
        snprintf(args, sizeof(args), "--strategy %s --processes 4 --devices 1 --epochs 2", b);
        train(dir, "4x1", "", args);
        cli_same_files(dir, "ddp4", "4x1");
        snprintf(args, sizeof(args), "--strategy %s --processes 2 --devices 2 --epochs 1 "
                 "--ckpt-dir %s/ck", ck, dir);
        train(dir, "half", "", args);
        snprintf(args, sizeof(args), "--strategy %s --processes 2 --devices 2 --epochs 2 "
                 "--resume %s/ck", ck, dir);
        train(dir, "resumed", "", args);
        cli_same_files(dir, "ddp4", "resumed");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
            cli_sh("command -v mpirun", out, sizeof(out)) == 0) {
                snprintf(args, sizeof(args), "--strategy %s --devices 2 --epochs 2", mpi);
                train(dir, "mpi2x2", MPIRUN "-np 2 ", args);
                cli_same_files(dir, "ddp4", "mpi2x2");
        } else {
                cr_log_warn("mpirun or libstrata-mpi.so missing: the mpi layout not run");
        }
        cli_rmtree(dir);
}

Test(strata_train_zero_processes, layouts_and_resume_equal_ddp, .timeout = 240)
{
        equal_ddp("zero2", "zero1", "zero2", "zero1");
}

Test(strata_train_zero_processes, fsdp_layouts_and_resume_equal_ddp, .timeout = 240)
{
        equal_ddp("fsdp", "fsdp", "fsdp", "fsdp");
}

/*
 * --accumulate 3 --accumulate-reduce each (decision 0047): every micro-batch reduced, zero2
 * and fsdp holding their shard of the window's sum alone; against ddp in the same mode, over
 * processes, through a checkpoint and resume at an epoch's end (an accumulation window's end),
 * and over mpirun.
 */
Test(strata_train_zero_processes, each_layouts_and_resume_equal_ddp, .timeout = 240)
{
        extra = "--accumulate 3 --accumulate-reduce each";
        equal_ddp("zero2", "fsdp", "zero2", "zero2");
        equal_ddp("fsdp", "zero1", "fsdp", "fsdp");
}

Test(strata_train_zero_processes, processes_needs_zero)
{
        int rc = cli_sh(BIN " --strategy ddp --processes 2 --synthetic 64 2>&1", out,
                        sizeof(out));

        cr_assert_eq(rc, 2, "%s", out);
        cr_assert(strstr(out, "--processes N starts zero1, zero2 or fsdp over N processes"),
                  "%s", out);
}
