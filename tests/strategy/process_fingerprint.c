/*
 * Processes of one job configured differently are refused at set-up (strata_init), each with
 * the same message naming the field, both values and the process, and nothing hangs: through
 * the API (spawn: another model, precision, device count or optimizer on rank 1; zero1: the
 * other stage, buckets, device count, model, precision or accumulate_reduce; fsdp: zero2 on
 * rank 1) and through strata-train under mpirun (two programs, two models); the collective
 * schedule's field says the world, the shards and the buckets, or fsdp's layers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strategy/process/fingerprint.h"
#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " SAN_QUIET

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct rig rig; /* set up by the parent: the children inherit it */
static struct strata_module narrow[3];
static struct strata_model narrow_model;

enum change { WIDTHS, PRECISION, DEVICES, OPTIMIZER, STAGE, BUCKETS, EACH, LR, LR_SEED_CLIP };

static enum strata_strategy_kind base = STRATA_STRATEGY_SPAWN; /* rank 0's strategy */

/* Rank 1's configuration differs from rank 0's by @p what. */
static struct strata_config cfg_of(int rank, enum change what)
{
        struct strata_config c = rig_cfg(&rig, base, 2, 0);

        c.device.timeout_s = 5.0;
        if (what == EACH)
                c.train.accumulate = 2;
        if (rank == 0)
                return c;
        if (what == EACH)
                c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
        if (what == STAGE)
                c.strategy.kind = STRATA_STRATEGY_ZERO2;
        if (what == BUCKETS)
                c.strategy.bucket_bytes = 256;
        if (what == WIDTHS)
                c.model = &narrow_model;
        if (what == PRECISION)
                c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        if (what == DEVICES)
                c.strategy.devices = 1;
        if (what == OPTIMIZER)
                c.optim.kind = STRATA_OPTIM_ADAMW;
        if (what == LR || what == LR_SEED_CLIP)
                c.optim.lr = 0.1f;
        if (what == LR_SEED_CLIP) {
                c.seed = 7;
                c.train.clip_norm = 1.5f;
        }
        c.verbose = rank; /* how a process runs may differ: not refused */
        c.device.timeout_s = 5.0 + rank;
        return c;
}

/* Exit 0 when strata_init() refused with STRATA_EINVAL; rank 0 returns the message. */
static int refused_child(int rank, int size, void *arg)
{
        struct strata_config c = cfg_of(rank, *(const enum change *)arg);
        struct strata_runtime *rt = NULL;
        const char *why;
        int rc;

        (void)size;
        rc = strata_init(&rt, &c);
        if (rc == STRATA_OK) {
                strata_teardown(rt);
                return 2;
        }
        why = strata_last_error();
        strata_spawn_return(why, strlen(why) + 1);
        return rc == STRATA_EINVAL ? 0 : 3;
}

static void refused(enum change what, const char *expect)
{
        static char why[1024];
        struct strata_spawn_result res;
        double t0 = now_s();
        int rc;

        memset(why, 0, sizeof(why));
        rc = strata_spawn(2, refused_child, &what, 10.0, why, sizeof(why) - 1, &res);
        cr_assert_eq(rc, STRATA_OK, "%s (rank %d: %s)", strata_last_error(), res.failed_rank,
                     res.why);
        cr_assert(strstr(why, expect), "expected '%s' in: %s", expect, why);
        cr_assert_lt(now_s() - t0, 10.0, "the refusal took %.1f s", now_s() - t0);
}

static void narrow_rig(void)
{
        rig_init(&rig, 0);
        narrow[0] = rig.mods[0];
        narrow[0].out = 8;
        narrow[1] = rig.mods[1];
        narrow[2] = rig.mods[2];
        narrow_model = rig.model;
        narrow_model.modules = narrow;
        narrow_model.nmodules = 3;
        cr_assert_eq(rig.model.nmodules, 3, "the rig is linear-relu-linear");
}

Test(process_fingerprint, spawn_refused_at_init, .timeout = 120)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        narrow_rig();
        refused(WIDTHS, "process 1 has model widths 20-8-4, process 0 20-16-4");
        refused(PRECISION, "process 1 has precision bf16-mixed, process 0 32");
        refused(DEVICES, "process 1 has devices per process 1, process 0 2");
        refused(OPTIMIZER, "process 1 has optimizer adamw, process 0 sgd");
}

/*
 * Issue 58: every numeric setting that must match is compared by value (learning rate, seed,
 * clipping, ...), each difference named with both values; how a process runs (verbose, its
 * timeout) may differ. A refusal every process makes alike ends no process: each gets its
 * status (the spawn's children exit by themselves, 0 when init returned STRATA_EINVAL).
 */
Test(process_fingerprint, settings_compared_by_value, .timeout = 120)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        rig_init(&rig, 0);
        base = STRATA_STRATEGY_SPAWN;
        refused(LR, "process 1 has optim.lr 0.1, process 0 0.05 (every process");
        refused(LR_SEED_CLIP, "process 1 has seed 7, process 0 11; optim.lr 0.1, process 0 "
                "0.05; clip_norm 1.5, process 0 0");
}

/* Every field settable by name that is not about one process's running fits a fingerprint. */
Test(process_fingerprint, every_shared_setting_fits)
{
        int n = strata__config_shared_count(), lr = 0, verbose = 0;
        uint64_t bits;

        cr_assert_gt(n, 20);
        cr_assert_leq(n, STRATA__FINGERPRINT_SETTINGS, "%d shared settings, room for %d", n,
                      STRATA__FINGERPRINT_SETTINGS);
        for (int i = 0; i < n; i++) {
                const char *name = strata__config_shared(NULL, i, &bits);

                cr_assert_not_null(name);
                lr += !strcmp(name, "optim.lr");
                verbose += !strcmp(name, "verbose") || !strcmp(name, "timeout_s");
        }
        cr_assert_eq(lr, 1);
        cr_assert_eq(verbose, 0);
        cr_assert_null(strata__config_shared(NULL, n, &bits));
}

/*
 * zero1 across two processes: a difference in stage, buckets, devices, model, precision or
 * the order micro-batches are reduced in (accumulate_reduce) is refused.
 */
Test(process_fingerprint, zero_refused_at_init, .timeout = 120)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        narrow_rig();
        base = STRATA_STRATEGY_ZERO1;
        refused(STAGE, "process 1 has strategy zero2, process 0 zero1");
        refused(BUCKETS, "process 1 has bucket bytes 256, process 0 26214400");
        refused(DEVICES, "process 1 has devices per process 1, process 0 2");
        refused(WIDTHS, "process 1 has model widths 20-8-4, process 0 20-16-4");
        refused(PRECISION, "process 1 has precision bf16-mixed, process 0 32");
        refused(EACH, "process 1 has accumulate 2 each, process 0 2");
}

/* fsdp across two processes, zero2 on the second: refused at init, the strategy named. */
Test(process_fingerprint, fsdp_and_zero2_refused_at_init, .timeout = 60)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        rig_init(&rig, 0);
        base = STRATA_STRATEGY_FSDP;
        refused(STAGE, "process 1 has strategy zero2, process 0 fsdp");
}

/* The collective schedule's field of a runtime of configuration @p c is @p expect. */
static void schedule_is(const struct strata_config *c, const char *expect)
{
        static unsigned char fp[STRATA__FINGERPRINT_BYTES];
        const struct strata__fingerprint *f = (const void *)fp;
        struct strata_runtime *rt = rig_open(c);

        strata__fingerprint_make(rt, fp);
        cr_assert_str_eq(f->schedule, expect, "%s", f->schedule);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * The collective schedule's field: the world, the shards and ddp's buckets in the order they
 * are reduced (here 2 devices of one process; 256-byte buckets split the rig's layers); under
 * fsdp the layers it gathers and reduces, in forward order.
 */
Test(process_fingerprint, collective_schedule_field)
{
        struct strata_config c;

        rig_init(&rig, 0);
        c = rig_cfg(&rig, STRATA_STRATEGY_ZERO1, 2, 0);
        schedule_is(&c, "world 2, 2 shards of 208, buckets 0-404");
        c.strategy.bucket_bytes = 256;
        c.strategy.kind = STRATA_STRATEGY_DDP;
        schedule_is(&c, "world 2, 1 shards of 404, buckets 336-404 0-336");
        c.strategy.kind = STRATA_STRATEGY_FSDP;
        schedule_is(&c, "world 2, 2 shards of 208, layers 0-336 336-404");
}

Test(process_fingerprint, mpi_models_differ, .timeout = 120)
{
        static char out[1 << 16];
        const char *a = " --strategy mpi --devices 1 --synthetic 2000 --epochs 1 --quiet "
                        "--timeout 10";
        char cmd[1024];
        double t0 = now_s();
        int rc;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (Open MPI's abort path, see processes.c)");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) != 0 ||
            cli_sh("command -v mpirun", out, sizeof(out)) != 0)
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        snprintf(cmd, sizeof(cmd),
                 MPIRUN "-np 1 %s%s --model 784-64-10 : " SAN_QUIET "-np 1 %s%s --model "
                 "784-128-10 2>&1", BIN, a, BIN, a);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_neq(rc, 0, "different models, exit 0:\n%s", out);
        cr_assert(strstr(out, "process 1 has model widths 784-128-10, process 0 784-64-10"),
                  "%s", out);
        cr_assert_lt(now_s() - t0, 60.0, "took %.1f s", now_s() - t0);
}

/* Issue 58: another learning rate is refused on both processes, and nothing calls MPI_Abort. */
Test(process_fingerprint, mpi_settings_differ_without_abort, .timeout = 120)
{
        static char out[1 << 16];
        const char *a = " --strategy mpi --devices 1 --synthetic 2000 --epochs 1 --quiet "
                        "--timeout 10";
        char cmd[1024];
        int rc;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (Open MPI's abort path, see processes.c)");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) != 0 ||
            cli_sh("command -v mpirun", out, sizeof(out)) != 0)
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        snprintf(cmd, sizeof(cmd), MPIRUN "-np 1 %s%s : " SAN_QUIET "-np 1 %s%s --lr 0.1 2>&1",
                 BIN, a, BIN, a);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_neq(rc, 0, "different learning rates, exit 0:\n%s", out);
        cr_assert(strstr(out, "process 1 has optim.lr 0.1, process 0 0.05"), "%s", out);
        cr_assert_null(strstr(out, "MPI_Abort"), "the job was aborted:\n%s", out);
        cr_assert_null(strstr(out, "MPI_ABORT"), "the job was aborted:\n%s", out);
}

/*
 * Issue 58, item 3: strata-train's own options that decide the steps (--epochs here) are
 * compared too: another --epochs is refused on both processes at once instead of a hang.
 */
Test(process_fingerprint, mpi_other_epochs_refused_not_hung, .timeout = 120)
{
        static char out[1 << 16];
        const char *a = " --strategy mpi --devices 1 --synthetic 2000 --quiet --timeout 20";
        char cmd[1024];
        double t0 = now_s();
        int rc;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (Open MPI's abort path, see processes.c)");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) != 0 ||
            cli_sh("command -v mpirun", out, sizeof(out)) != 0)
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        snprintf(cmd, sizeof(cmd),
                 MPIRUN "-np 1 %s%s --epochs 2 : " SAN_QUIET "-np 1 %s%s --epochs 3 2>&1", BIN,
                 a, BIN, a);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_neq(rc, 0, "different --epochs, exit 0:\n%s", out);
        cr_assert(strstr(out, "--epochs is 2 in some and 3 in others, 2 in this one"), "%s",
                  out);
        cr_assert(strstr(out, "--epochs is 2 in some and 3 in others, 3 in this one"), "%s",
                  out);
        cr_assert_lt(now_s() - t0, 15.0, "took %.1f s: a wait ran into its timeout",
                     now_s() - t0);
}
