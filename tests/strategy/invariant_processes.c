/*
 * Invariant mode across processes and through strata-train: one device, 1x4 and 1x3 (ddp),
 * 4x1, 3x1 and 2x1 (spawn), 2x3 (zero1), 3x1 (fsdp), and 2x2 and 3x2 (mpi, where Open MPI
 * is installed) processes x devices train the same weights to the bit; a run checkpointed on
 * 4 devices, resumed on 2, then on 3 processes, ends where the uninterrupted single run does.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define JOB "--synthetic 1024 --quiet --seed 424243 --invariant --model 784-48-10 --bn " \
            "--sync-bn --dropout 0.1 --bind none"

static char out[1 << 16];

/*
 * One job of processes at a time (the lock tests/strategy/processes.c takes). The tests'
 * timeouts count the wait for it: under ASan a queue of other process tests held it past
 * 480 s once.
 */
static void serial(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
}

static void train(const char *dir, const char *name, const char *launch, const char *args)
{
        char a[1024];

        snprintf(a, sizeof(a), JOB " %s", args);
        cli_train_export(launch, a, dir, name);
}

/* A layout's run, the same bits as the one-device run "one". */
static void as_one(const char *dir, const char *name, const char *launch, const char *args)
{
        train(dir, name, launch, args);
        cli_same_files(dir, "one", name);
}

Test(invariant_processes, layouts_bitwise_equal_one_device, .timeout = 1200)
{
        char dir[256];

        serial();
        cli_mkdtemp(dir, sizeof(dir), "invprocs");
        train(dir, "one", "", "--epochs 1 --strategy single --devices 1");
        as_one(dir, "ddp1x4", "", "--epochs 1 --strategy ddp --devices 4");
        as_one(dir, "spawn4x1", "", "--epochs 1 --strategy spawn --devices 4");
        as_one(dir, "spawn2x1", "", "--epochs 1 --strategy spawn --devices 2");
        as_one(dir, "ddp1x3", "", "--epochs 1 --strategy ddp --devices 3");
        as_one(dir, "spawn3x1", "", "--epochs 1 --strategy spawn --devices 3");
        as_one(dir, "zero2x3", "", "--epochs 1 --strategy zero1 --processes 2 --devices 3");
        as_one(dir, "fsdp3x1", "", "--epochs 1 --strategy fsdp --processes 3 --devices 1");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
            cli_sh("command -v mpirun", out, sizeof(out)) == 0) {
                as_one(dir, "mpi2x2", MPIRUN "-np 2 ", "--epochs 1 --strategy mpi --devices 2");
                as_one(dir, "mpi3x2", MPIRUN "-np 3 ", "--epochs 1 --strategy mpi --devices 2");
        } else {
                cr_log_warn("mpirun or libstrata-mpi.so missing: the 2x2 and 3x2 layouts not run");
        }
        cli_rmtree(dir);
}

Test(invariant_processes, resume_at_another_device_count, .timeout = 1200)
{
        char dir[256], args[768];

        serial();
        cli_mkdtemp(dir, sizeof(dir), "invresume");
        train(dir, "straight", "", "--epochs 3 --strategy single --devices 1");
        snprintf(args, sizeof(args), "--epochs 1 --strategy ddp --devices 4 --ckpt-dir %s/ck",
                 dir);
        train(dir, "first", "", args);
        snprintf(args, sizeof(args), "--epochs 2 --strategy ddp --devices 2 --resume %s/ck "
                 "--ckpt-dir %s/ck", dir, dir);
        train(dir, "second", "", args);
        snprintf(args, sizeof(args), "--epochs 3 --strategy spawn --devices 3 --resume %s/ck",
                 dir);
        train(dir, "resumed", "", args);
        cli_same_files(dir, "straight", "resumed");
        cli_rmtree(dir);
}
