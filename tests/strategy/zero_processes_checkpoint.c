/*
 * Checkpoints of zero2 and fsdp across processes (strata_spawn(): 2 processes of 2 devices):
 * every process calls save, process 0 writes one consolidated file whose bytes after the
 * header are those of ddp's on 4 devices in one process (each shard, fsdp's trained values
 * among them, each device's running statistics and step count from the process that holds
 * it); resuming continues bit for bit as ddp continues, at the same layout and at another one
 * with as many devices (4 processes of 1); on another device count it loads resharded and says
 * so. A save process 0 cannot write fails on every process, with the reason, in bounded time.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "strategy/internal.h"
#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define STEPS 8
#define HALF 4
#define NP_MAX 2048
#define WORLD 4

struct shared {
        double loss[STEPS];
        float params[WORLD][NP_MAX];
        size_t np;
        int bitwise[WORLD];  /* each process's load: info.bitwise */
        int status[WORLD];   /* each process's save */
        char why[WORLD][256];
};

/* One part of a run: load @c load (if set), train [from, to), save @c save (if set). */
struct job {
        enum strata_strategy_kind kind;
        int devices, from, to;
        const char *load, *save;
};

static struct rig rig;
static struct shared *out; /* mapped before the fork: every process writes its part */

static struct strata_config config(const struct job *j)
{
        struct strata_config c;

        rig_init_full(&rig); /* BatchNorm (each device's own statistics) and dropout */
        rig.mods[0].out = 40;
        c = rig_cfg(&rig, j->kind, j->devices, 0);
        c.device.bind = STRATA_BIND_NONE;
        c.device.timeout_s = 20.0;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 2e-3f;
        c.train.clip_norm = 0.5f;
        return c;
}

static int steps(struct strata_runtime *rt, const struct job *j, int rank)
{
        struct strata_loader ld = rig.loader;
        struct strata_metrics m;
        struct strata_batch b;

        strata_loader_reset(&ld, rig.idx, 256);
        for (int s = 0; s < j->to; s++) {
                if (!strata_loader_next(&ld, &b))
                        return STRATA_EINVAL;
                if (s < j->from)
                        continue;
                STRATA_TRY(strata_train_step(rt, &b, &m));
                if (rank == 0)
                        out->loss[s] = m.loss;
        }
        return STRATA_OK;
}

/*
 * Device @p d's parameters into its copy in *out; fsdp's device holds its shard alone, which
 * goes to every device's copy (the job's processes fill the whole vectors together).
 */
static int params_out(struct strata_runtime *rt, int d, int global)
{
        struct strata_param p;
        const float *v;
        int n;

        STRATA_TRY(strata_parameters(rt, d, &v, &out->np));
        if (!strata__shard_own_params(strata__rep_shard(rt, d))) {
                if (out->np <= NP_MAX)
                        memcpy(out->params[global], v, out->np * sizeof(float));
                return STRATA_OK;
        }
        out->np = strata__repv(rt, d)->nparam;
        STRATA_TRY(strata_parameter_count(rt, &n));
        for (int g = 0; g < n && out->np <= NP_MAX; g++) {
                STRATA_TRY(strata_parameter(rt, d, g, &p));
                for (int e = 0; p.grad && p.shard_hi > p.shard_lo && e < WORLD; e++)
                        memcpy(out->params[e] + p.offset + p.shard_lo, p.value,
                               (p.shard_hi - p.shard_lo) * sizeof(float));
        }
        return STRATA_OK;
}

/* This process's part of job @p j; its parameters and statuses go to *out. */
static int part(const struct job *j, int rank)
{
        struct strata_config c = config(j);
        struct strata_runtime *rt = NULL;
        struct strata_ckpt_info info;
        int rc;

        rc = strata_init(&rt, &c);
        if (rc == STRATA_OK)
                rc = strata_connect(rt);
        if (rc == STRATA_OK && j->load) {
                rc = strata_load_checkpoint(rt, j->load, NULL, 0, NULL, &info);
                out->bitwise[rank] = info.bitwise;
        }
        if (rc == STRATA_OK)
                rc = steps(rt, j, rank);
        if (rc == STRATA_OK && j->save) {
                out->status[rank] = strata_save_checkpoint(rt, j->save, NULL, 0);
                snprintf(out->why[rank], sizeof(out->why[rank]), "%s", strata_last_error());
        }
        for (int d = 0; rc == STRATA_OK && d < c.strategy.devices; d++)
                rc = params_out(rt, d, rank * j->devices + d);
        if (rc != STRATA_OK)
                snprintf(out->why[rank], sizeof(out->why[rank]), "%s", strata_last_error());
        if (rt)
                strata_teardown(rt);
        return rc == STRATA_OK ? 0 : 1;
}

static int child(int rank, int size, void *arg)
{
        (void)size;
        return part(arg, rank);
}

/* Job @p j on @p procs processes (1: here), its results in *out. */
static void run(const struct job *j, int procs)
{
        struct strata_spawn_result res;

        memset(out, 0, sizeof(*out));
        if (procs == 1) {
                cr_assert_eq(part(j, 0), 0, "%s", out->why[0]);
                return;
        }
        cr_assert_eq(strata_spawn(procs, child, (void *)j, 60.0, NULL, 0, &res), STRATA_OK,
                     "%s (%s)", res.why, out->why[0]);
}

static void open_shared(void)
{
        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        out = mmap(NULL, sizeof(*out), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                   0);
        cr_assert_neq(out, MAP_FAILED);
}

/* Files a and b hold the same bytes after their headers. */
static void same_after_header(const char *a, const char *b)
{
        static unsigned char x[1 << 16], y[1 << 16];
        FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
        size_t na, nb;

        cr_assert(fa && fb);
        na = fread(x, 1, sizeof(x), fa);
        nb = fread(y, 1, sizeof(y), fb);
        fclose(fa);
        fclose(fb);
        cr_assert_lt(na, sizeof(x));
        cr_assert_eq(na, nb, "%s: %zu bytes, %s: %zu", a, na, b, nb);
        cr_assert_eq(memcmp(x + sizeof(struct strata__ckpt_header),
                            y + sizeof(struct strata__ckpt_header),
                            na - sizeof(struct strata__ckpt_header)), 0,
                     "%s and %s differ after the header", a, b);
}

/* The second half of @p got equals ddp's uninterrupted run @p ref on every device. */
static void continues(const struct shared *got, const struct shared *ref, const char *what)
{
        cr_assert_eq(memcmp(got->loss + HALF, ref->loss + HALF, sizeof(double) * HALF), 0,
                     "%s: losses after the resume differ from ddp's", what);
        for (int d = 0; d < WORLD; d++)
                cr_assert_eq(memcmp(got->params[d], ref->params[0], ref->np * sizeof(float)), 0,
                             "%s: device %d's parameters differ from ddp's", what, d);
}

/*
 * @p kind over 2 x 2 saves ddp's bytes, resumes bitwise as 2 x 2 and 4 x 1, and loads
 * resharded into @p other on 2 processes of 1 device.
 */
static void consolidated(enum strata_strategy_kind kind, enum strata_strategy_kind other)
{
        static struct shared ref;
        char dir[256], ddp_path[320], z_path[320], what[64];
        struct job ddp = { STRATA_STRATEGY_DDP, WORLD, 0, HALF, NULL, NULL };
        struct job rest = { STRATA_STRATEGY_DDP, WORLD, HALF, STEPS, NULL, NULL };
        struct job z = { kind, 2, 0, HALF, NULL, NULL };
        const char *name = strata_strategy_name(kind);

        open_shared();
        cli_mkdtemp(dir, sizeof(dir), "zproc-ckpt");
        snprintf(ddp_path, sizeof(ddp_path), "%s/ddp.ckpt", dir);
        snprintf(z_path, sizeof(z_path), "%s/%s.ckpt", dir, name);
        ddp.save = ddp_path;
        run(&ddp, 1);
        rest.load = ddp_path;
        run(&rest, 1);
        memcpy(ref.loss, out->loss + 0, sizeof(ref.loss)); /* the second half */
        ref.np = out->np;
        memcpy(ref.params, out->params, sizeof(ref.params));
        run(&ddp, 1);
        memcpy(ref.loss, out->loss, sizeof(double) * HALF); /* the first half */

        z.save = z_path;
        run(&z, 2);
        cr_assert_eq(out->status[0], STRATA_OK, "%s", out->why[0]);
        cr_assert_eq(out->status[1], STRATA_OK, "%s", out->why[1]);
        cr_assert_eq(memcmp(out->loss, ref.loss, sizeof(double) * HALF), 0);
        same_after_header(z_path, ddp_path);

        z = (struct job){ kind, 2, HALF, STEPS, z_path, NULL };
        run(&z, 2);
        cr_assert(out->bitwise[0] && out->bitwise[1], "2 x 2 from 2 x 2: resumed bitwise");
        snprintf(what, sizeof(what), "%s 2 x 2 resumed", name);
        continues(out, &ref, what);
        z.devices = 1;
        run(&z, 4);
        for (int p = 0; p < 4; p++)
                cr_assert(out->bitwise[p], "4 x 1 from 2 x 2: as many devices, bitwise");
        snprintf(what, sizeof(what), "%s 4 x 1 resumed", name);
        continues(out, &ref, what);
        z = (struct job){ other, 1, HALF, HALF + 1, z_path, NULL };
        run(&z, 2);
        cr_assert(!out->bitwise[0] && !out->bitwise[1], "%s on 2 devices: resharded",
                  strata_strategy_name(other));
        cli_rmtree(dir);
}

Test(zero_processes_checkpoint, consolidated_resumed_resharded, .timeout = 180)
{
        consolidated(STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_ZERO1);
}

Test(zero_processes_checkpoint, fsdp_consolidated_resumed_resharded, .timeout = 180)
{
        consolidated(STRATA_STRATEGY_FSDP, STRATA_STRATEGY_FSDP);
}

/* Process 0 cannot create the file: every process returns an error, none hangs. */
Test(zero_processes_checkpoint, unwritable_path_fails_everywhere, .timeout = 60)
{
        struct job z = { STRATA_STRATEGY_ZERO1, 1, 0, 1, NULL,
                         "/nonexistent-strata-dir/zero1.ckpt" };
        struct timespec t0, t1;

        open_shared();
        clock_gettime(CLOCK_MONOTONIC, &t0);
        run(&z, 2);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        cr_assert_neq(out->status[0], STRATA_OK);
        cr_assert_eq(out->status[1], out->status[0], "%s", out->why[1]);
        cr_assert(strstr(out->why[1], "process 0 could not write"), "%s", out->why[1]);
        cr_assert_lt((double)(t1.tv_sec - t0.tv_sec), 10.0);
}
