/*
 * Jobs of several processes: spawn and mpi give bitwise the parameters of ddp with as many
 * devices in one process, however the devices are split (4 = 1x4 = 2x2 = 4x1); a killed or
 * hung process ends the job in bounded time with the culprit named, leaving no process and
 * nothing in /dev/shm; launcher variables are read, bad ones refused; strata_spawn()'s
 * failures and misuse are reported.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
/*
 * Open MPI is not built with the sanitizers: under ASan its leaks at exit, under TSan its own
 * locks (lock-order reports inside MPI_Init) are not this library's, so its jobs run without
 * those reports. The same library code runs checked in the spawn jobs.
 */
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define SEED "424242" /* marks this file's jobs, to look for leftovers */

static char out[1 << 16];

static int have_mpi(void)
{
        return access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
               cli_sh("command -v mpirun", out, sizeof(out)) == 0;
}

/*
 * Jobs of this file run one at a time: their /dev/shm and process checks see only their own.
 * A test's timeout includes its wait for the others' jobs (long under the sanitizers).
 */
static void serial(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0); /* released when the test's process exits */
}

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Train one epoch with @p launch + strata-train + @p args, export the weights to dir/name. */
static void train(const char *dir, const char *name, const char *launch, const char *args)
{
        char cmd[1024];
        int rc;

        snprintf(cmd, sizeof(cmd), "%s%s --epochs 1 --quiet --seed " SEED " %s "
                 "--export-safetensors %s/%s 2>&1", launch, BIN, args, dir, name);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
}

Test(processes, layouts_bitwise_equal_threads, .timeout = 480)
{
        const char *m = "--model 784-64-10 --bn --sync-bn --dropout 0.1";
        char dir[256], args[256];

        serial();
        cli_mkdtemp(dir, sizeof(dir), "procs");
        snprintf(args, sizeof(args), "%s --strategy ddp --devices 4", m);
        train(dir, "ddp4", "", args);
        snprintf(args, sizeof(args), "%s --strategy spawn --devices 4", m);
        train(dir, "spawn4", "", args);
        cli_same_files(dir, "ddp4", "spawn4");
        snprintf(args, sizeof(args), "%s --strategy ddp --devices 2", m);
        train(dir, "ddp2", "", args);
        snprintf(args, sizeof(args), "%s --strategy spawn --devices 2", m);
        train(dir, "spawn2", "", args);
        cli_same_files(dir, "ddp2", "spawn2");
        if (have_mpi()) {
                snprintf(args, sizeof(args), "%s --strategy mpi --devices 2", m);
                train(dir, "mpi2x2", MPIRUN "-np 2 ", args);
                cli_same_files(dir, "ddp4", "mpi2x2");
                snprintf(args, sizeof(args), "%s --strategy mpi --devices 1", m);
                train(dir, "mpi4x1", MPIRUN "-np 4 ", args);
                cli_same_files(dir, "ddp4", "mpi4x1");
                train(dir, "mpi2x1", MPIRUN "-np 2 ", args);
                cli_same_files(dir, "ddp2", "mpi2x1");
                snprintf(args, sizeof(args), "%s --strategy mpi --devices 4", m);
                train(dir, "mpi1x4", MPIRUN "-np 1 ", args);
                cli_same_files(dir, "ddp4", "mpi1x4");
                /* The default MLP's 0.94 MB gradient: large all-reduces take the split path. */
                train(dir, "big-ddp4", "", "--strategy ddp --devices 4");
                train(dir, "big-mpi4x1", MPIRUN "-np 4 ", "--strategy mpi --devices 1");
                cli_same_files(dir, "big-ddp4", "big-mpi4x1");
                train(dir, "big-mpi2x2", MPIRUN "-np 2 ", "--strategy mpi --devices 2");
                cli_same_files(dir, "big-ddp4", "big-mpi2x2");
        } else {
                cr_log_warn("mpirun or libstrata-mpi.so missing: mpi layouts not run");
        }
        train(dir, "big-ddp3", "", "--strategy ddp --devices 3");
        train(dir, "big-spawn3", "", "--strategy spawn --devices 3");
        cli_same_files(dir, "big-ddp3", "big-spawn3");
        cli_rmtree(dir);
}

/* What a job leaves: processes of this file's seed, and /dev/shm entries. */
static void leftovers(char *shm, size_t n)
{
        cli_sh("ls /dev/shm | grep -v '^sem\\.' | sort", shm, n);
}

/* The first line of @p after that @p before lacks (NULL: none). */
static const char *new_entry(const char *before, const char *after)
{
        static char line[256];

        for (const char *p = after; *p;) {
                size_t n = strcspn(p, "\n");

                snprintf(line, sizeof(line), "%.*s", (int)n, p);
                if (n && !strstr(before, line))
                        return line;
                p += n + (p[n] == '\n');
        }
        return NULL;
}

/*
 * Under TSan: a fork of a process that has threads (the test runner) cannot be followed, so
 * the API's spawn tests run in the other builds (strata-train's spawn, which forks from one
 * thread, runs in all); and an MPI job whose rank is killed or hangs did not end within the
 * test's bound (Open MPI's abort path in TSan-instrumented processes), so those two run in the
 * other builds too.
 */
static void skip_under_tsan(void)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (see above)");
}

static void fault(const char *launch, const char *strategy, const char *kind, double timeout,
                  const char *expect)
{
        char cmd[1024], before[4096], after[4096];
        double t0, took, bound = timeout + 1.0 + 8.0; /* + start-up and teardown of the job */
        int rc;

        serial();
        leftovers(before, sizeof(before));
        snprintf(cmd, sizeof(cmd), "%s%s --strategy %s --devices %s --epochs 1 --quiet --seed "
                 SEED " --timeout %g 2>&1", launch, BIN, strategy,
                 !strcmp(strategy, "spawn") ? "2" : "1", timeout);
        t0 = now_s();
        rc = cli_sh(cmd, out, sizeof(out));
        took = now_s() - t0;
        cr_assert_neq(rc, 0, "%s with a %s rank exited 0:\n%s", strategy, kind, out);
        cr_assert_lt(took, bound, "%s with a %s rank took %.1f s (bound %.1f)", strategy, kind,
                     took, bound);
        cr_assert(strstr(out, expect), "%s, %s rank: no '%s' in:\n%s", strategy, kind, expect,
                  out);
        for (int i = 0; i < 30; i++) { /* mpirun may return before its children are reaped */
                if (cli_sh("pgrep -f 'strata-trai[n].*seed " SEED " --timeout'", out,
                           sizeof(out)) != 0)
                        break;
                usleep(100000);
        }
        cr_assert_neq(cli_sh("pgrep -f 'strata-trai[n].*seed " SEED " --timeout'", out,
                             sizeof(out)), 0, "%s, %s rank: processes left: %s", strategy,
                      kind, out);
        for (int i = 0; i < 30; i++) { /* mpirun removes its segments as it finishes */
                leftovers(after, sizeof(after));
                if (!new_entry(before, after))
                        break;
                usleep(100000);
        }
        cr_assert_null(new_entry(before, after), "%s, %s rank: left in /dev/shm: %s", strategy,
                       kind, new_entry(before, after));
}

Test(processes, spawn_killed_rank, .timeout = 300)
{
        setenv("STRATA_TRAIN_FAULT", "kill:1:20", 1);
        fault("", "spawn", "killed", 30.0, "rank 1 was killed by signal 9");
}

Test(processes, spawn_hung_rank, .timeout = 300)
{
        setenv("STRATA_TRAIN_FAULT", "hang:1:20", 1);
        fault("", "spawn", "hung", 2.0, "process 1 has not arrived (hung or dead)");
}

Test(processes, mpi_killed_rank, .timeout = 300)
{
        skip_under_tsan();
        if (!have_mpi())
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        fault(MPIRUN "-x STRATA_TRAIN_FAULT=kill:1:20 -np 2 ", "mpi", "killed", 30.0,
              "process rank 1");
}

/* On one host the job steps over the shm link (decision 0105): its wait names the rank. */
Test(processes, mpi_hung_rank, .timeout = 300)
{
        skip_under_tsan();
        if (!have_mpi())
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        fault(MPIRUN "-x STRATA_TRAIN_FAULT=hang:1:20 -np 2 ", "mpi", "hung", 2.0,
              "process 1 has not arrived (hung or dead); ending the job (MPI_Abort)");
}

/* The same two faults over Open MPI's point-to-point (STRATA_MPI_LINK=mpi). */
Test(processes, mpi_link_killed_rank, .timeout = 300)
{
        skip_under_tsan();
        if (!have_mpi())
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        fault(MPIRUN "-x STRATA_MPI_LINK=mpi -x STRATA_TRAIN_FAULT=kill:1:20 -np 2 ", "mpi",
              "killed", 30.0, "process rank 1");
}

Test(processes, mpi_link_hung_rank, .timeout = 300)
{
        skip_under_tsan();
        if (!have_mpi())
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        fault(MPIRUN "-x STRATA_MPI_LINK=mpi -x STRATA_TRAIN_FAULT=hang:1:20 -np 2 ", "mpi",
              "hung", 2.0, "nothing came from process 1 (hung or dead); ending the job "
              "(MPI_Abort)");
}

static void env(const char *k, const char *v)
{
        setenv(k, v, 1);
}

Test(processes, launch_detect)
{
        struct strata_launch l;
        static const char *vars[] = { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                      "SLURM_NTASKS_PER_NODE", "PMI_RANK", "PMI_SIZE",
                                      "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE",
                                      "LOCAL_RANK", "LOCAL_WORLD_SIZE" };

        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                unsetenv(vars[i]);
        cr_assert_eq(strata_launch_detect(&l), STRATA_OK);
        cr_assert(l.rank == 0 && l.size == 1 && !strcmp(l.launcher, "none"));
        env("RANK", "3"), env("WORLD_SIZE", "8"), env("LOCAL_RANK", "1");
        env("LOCAL_WORLD_SIZE", "4");
        cr_assert_eq(strata_launch_detect(&l), STRATA_OK);
        cr_assert(l.rank == 3 && l.size == 8 && l.local_rank == 1 && l.local_size == 4 &&
                  !strcmp(l.launcher, "torchrun"));
        env("SLURM_PROCID", "5"), env("SLURM_NTASKS", "6"), env("SLURM_LOCALID", "2");
        env("SLURM_NTASKS_PER_NODE", "3(x2)");
        cr_assert_eq(strata_launch_detect(&l), STRATA_OK);
        cr_assert(l.rank == 5 && l.size == 6 && l.local_rank == 2 && l.local_size == 3 &&
                  !strcmp(l.launcher, "slurm"), "slurm: %d %d %d %d", l.rank, l.size,
                  l.local_rank, l.local_size);
        env("OMPI_COMM_WORLD_RANK", "1"), env("OMPI_COMM_WORLD_SIZE", "2");
        cr_assert_eq(strata_launch_detect(&l), STRATA_OK);
        cr_assert(l.rank == 1 && l.size == 2 && l.local_size == 2 &&
                  !strcmp(l.launcher, "openmpi"), "openmpi first");
        /* Bad values: refused, naming the variable; *out unchanged. */
        env("OMPI_COMM_WORLD_RANK", "2");
        l.rank = 77;
        cr_assert_eq(strata_launch_detect(&l), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "OMPI_COMM_WORLD_RANK") && l.rank == 77);
        env("OMPI_COMM_WORLD_RANK", "x1");
        cr_assert_eq(strata_launch_detect(&l), STRATA_EINVAL);
        env("OMPI_COMM_WORLD_RANK", "0"), env("OMPI_COMM_WORLD_SIZE", "99999999999");
        cr_assert_eq(strata_launch_detect(&l), STRATA_EINVAL);
        cr_assert_eq(strata_launch_detect(NULL), STRATA_EINVAL);
}

/* ---- strata_spawn() through the API ---- */

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

static struct rig spawn_rig; /* set up by the parent: the children inherit it */

/*
 * A spawned process: ddp over the processes on the rig's data; rank 0 returns its parameters.
 * No Criterion assertion here: a child's would be reported to the runner as the test's.
 */
static int rig_child(int rank, int size, void *arg)
{
        struct strata_config c = rig_cfg(&spawn_rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t np;

        (void)rank, (void)size, (void)arg;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&spawn_rig.loader, spawn_rig.idx, 256);
        for (int s = 0; s < 12; s++)
                if (!strata_loader_next(&spawn_rig.loader, &b) ||
                    strata_train_step(rt, &b, NULL) != STRATA_OK)
                        return 11;
        if (strata_parameters(rt, 0, &p, &np) || strata_spawn_return(p, np * sizeof(*p)))
                return 12;
        return strata_teardown(rt) == STRATA_OK ? 0 : 13;
}

Test(processes, spawn_api_equals_ddp, .timeout = 60)
{
        static float ref[NP], got[NP];
        struct strata_spawn_result res;
        struct strata_config c;

        skip_under_tsan();
        rig_init(&spawn_rig, 0);
        cr_assert_eq(strata_spawn(3, rig_child, NULL, 10.0, got, sizeof(got), &res), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(res.failed_rank, -1);
        cr_assert_eq(res.bytes, sizeof(got));
        c = rig_cfg(&spawn_rig, STRATA_STRATEGY_DDP, 3, 0);
        rig_train_cfg(&spawn_rig, &c, 12, ref, NP);
        cr_assert_eq(memcmp(ref, got, sizeof(ref)), 0, "spawn 3 != ddp 3");
}

static int exit3(int rank, int size, void *arg)
{
        (void)size, (void)arg;
        if (rank == 2)
                return 3;
        sleep(30); /* must be stopped by the parent, not waited for */
        return 0;
}

static int killed(int rank, int size, void *arg)
{
        (void)size, (void)arg;
        if (rank == 1)
                raise(SIGKILL);
        return 0;
}

Test(processes, spawn_failures, .timeout = 60)
{
        struct strata_spawn_result res;
        double t0 = now_s();

        skip_under_tsan();
        cr_assert_eq(strata_spawn(3, exit3, NULL, 5.0, NULL, 0, &res), STRATA_EABORTED);
        cr_assert_eq(res.failed_rank, 2);
        cr_assert_eq(res.status, 3);
        cr_assert(strstr(strata_last_error(), "rank 2 exited with status 3"), "%s",
                  strata_last_error());
        cr_assert_lt(now_s() - t0, 5.0, "the sleeping ranks were not stopped");
        cr_assert_eq(strata_spawn(2, killed, NULL, 5.0, NULL, 0, &res), STRATA_EABORTED);
        cr_assert(res.failed_rank == 1 && res.status == 128 + SIGKILL);
}

Test(processes, spawn_bad_input)
{
        struct strata_config c;
        struct strata_runtime *rt = NULL;
        struct rig r;
        char buf[4];

        cr_assert_eq(strata_spawn(1, killed, NULL, 1.0, NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_spawn(1025, killed, NULL, 1.0, NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_spawn(2, NULL, NULL, 1.0, NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_spawn(2, killed, NULL, 1.0, NULL, 4, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_spawn_return(buf, sizeof(buf)), STRATA_EINVAL);
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_SPAWN, 1, 0);
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "strata_spawn()"), "%s", strata_last_error());
        cr_assert_null(rt);
        /* A running runtime: its workers would not exist in the children. */
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK);
        cr_assert_eq(strata_spawn(2, killed, NULL, 1.0, NULL, 0, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "strata_init"), "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(processes, mpi_plugin_missing)
{
        struct strata_config c;
        struct strata_runtime *rt = NULL;
        struct rig r;

        setenv("STRATA_MPI_PLUGIN", "/nonexistent/libstrata-mpi.so", 1);
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_MPI, 1, 0);
        cr_assert_eq(strata_init(&rt, &c), STRATA_ENODEV);
        cr_assert(strstr(strata_last_error(), "libstrata-mpi.so"), "%s", strata_last_error());
        cr_assert_null(rt);
}

Test(processes, comm_plan_config)
{
        struct strata_comm_config cc = STRATA_COMM_CONFIG_INIT;
        size_t one, two;

        cr_assert_eq(strata_comm_plan_config(NULL, &one), STRATA_EINVAL);
        cc.world_size = 2;
        cc.local_size = 2;
        cr_assert_eq(strata_comm_plan_config(&cc, &one), STRATA_OK);
        cc.world_size = 4;
        cr_assert_eq(strata_comm_plan_config(&cc, &two), STRATA_OK);
        cr_assert_eq(two - one, 128 + (size_t)64 * 3 * (64 + 7936 + 64) + ((size_t)6 << 20),
                     "the net transport's state, the link's staging, then 6 MiB: packed data, "
                     "3 MiB landing (3 peers of a direct step), partial sums, result (%zu)",
                     two - one);
        cc.world_size = 5; /* not a multiple of the processes' ranks */
        cr_assert_eq(strata_comm_plan_config(&cc, &two), STRATA_EINVAL);
        /* 16 384 processes of one rank: the same staging, planned, not refused (issue 46). */
        cc.world_size = 16384;
        cc.local_size = 1;
        cr_assert_eq(strata_comm_plan_config(&cc, &two), STRATA_OK);
        cc.world_size = 1;
        cr_assert_eq(strata_comm_plan_config(&cc, &one), STRATA_OK);
        cr_assert_eq(two - one, 128 + (size_t)64 * 3 * (64 + 7936 + 64) + ((size_t)6 << 20));
        cr_assert_leq(two, (size_t)64 << 20, "staging per process at 16 384 processes");
}
