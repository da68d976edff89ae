/*
 * zero1, zero2 and fsdp across processes are ddp with as many devices in one process, bit for
 * bit: 4 devices as 1 process x 4, 2 x 2 and 4 x 1 (strata_spawn()), on SGD with momentum and
 * Nesterov, AdamW, BatchNorm with and without SyncBatchNorm, accumulation, clipping by norm
 * and by value, bf16-mixed and 16-mixed with an injected skip, and every micro-batch reduced
 * (accumulate_reduce each, against ddp in that mode). Every process's step losses and
 * evaluation, every device's parameters (fsdp: the devices' shards side by side, each element
 * owned by one device of one process) and every shard of the optimizer state equal ddp's;
 * every device's arena is used as planned, and no process allocates during its steps. Across
 * processes a driver with memory of its own is refused with the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/strata.h"
#include "strategy/internal.h"
#include "strategy/internal.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define STEPS 6
#define NP_MAX 2048
#define WORLD 4

enum model_kind { PLAIN, BN, FULL };

struct conf {
        const char *name;
        enum model_kind model;
        int sync_bn, adamw, accumulate;
        float clip_norm, clip_value;
        size_t bucket_bytes;
        enum strata_precision precision;
        int inject; /* the last device's gradients count as non-finite at the third step */
        int each;   /* accumulate_reduce each: every micro-batch reduced (decision 0047) */
};

static const struct conf confs[] = {
        { "nesterov-bn", BN, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0, 0 },
        { "adamw-acc2-clipnorm-buckets", PLAIN, 0, 1, 2, 0.5f, 0.0f, 256, 0, 0, 0 },
        { "bf16-mixed-adamw-sync", BN, 1, 1, 0, 0.5f, 0.0f, 0, STRATA_PRECISION_BF16_MIXED, 0,
          0 },
        { "16-mixed-injected-clip", FULL, 0, 1, 2, 0.5f, 0.02f, 512, STRATA_PRECISION_16_MIXED,
          1, 0 },
        { "each-adamw-acc3-clipnorm", PLAIN, 0, 1, 3, 0.5f, 0.0f, 0, 0, 0, 1 },
        { "each-nesterov-acc2-clipnorm-every-step", BN, 0, 0, 2, 0.01f, 0.0f, 0, 0, 0, 1 },
        { "each-16-mixed-injected-acc2-clip", FULL, 0, 1, 2, 0.5f, 0.02f, 512,
          STRATA_PRECISION_16_MIXED, 1, 1 },
};

/* What a run leaves, written by every process of a job into memory they share. */
struct result {
        double loss[STEPS], eval_loss;
        int eval_correct;
        size_t np;
        float params[WORLD][NP_MAX];
        float opt[2 * NP_MAX];
        unsigned char owned[NP_MAX];
        uint64_t opt_t;
        long heap_calls[WORLD]; /* each process's during its steps (-1: not counted) */
        char why[256]; /* a process's failure */
};

static struct rig rig;         /* configured by the test: every process inherits it */
static struct result *shared;  /* mapped before the fork */

static void configure(const struct conf *k, enum strata_strategy_kind kind, int devices,
                      struct strata_config *c)
{
        if (k->model == FULL)
                rig_init_full(&rig);
        else
                rig_init(&rig, k->model == BN);
        rig.mods[0].out = 48; /* shards that cut through the first layer's weights */
        *c = rig_cfg(&rig, kind, devices, k->sync_bn);
        c->device.bind = STRATA_BIND_NONE;
        c->device.timeout_s = 30.0;
        c->train.accumulate = k->accumulate;
        c->train.clip_norm = k->clip_norm;
        c->train.clip_value = k->clip_value;
        c->strategy.bucket_bytes = k->bucket_bytes;
        c->train.accumulate_reduce = k->each ? STRATA_ACCUMULATE_REDUCE_EACH
                                             : STRATA_ACCUMULATE_REDUCE_WINDOW;
        c->precision.kind = k->precision;
        c->optim.nesterov = !k->adamw;
        c->optim.weight_decay = k->adamw ? 0.01f : 1e-3f;
        if (k->adamw) {
                c->optim.kind = STRATA_OPTIM_ADAMW;
                c->optim.lr = 2e-3f;
        }
}

/*
 * This process's devices' parameters and shards of the optimizer state into @p out; fsdp's
 * devices hold a shard of the parameters too, which goes to every device's copy (the job's
 * processes fill the whole vectors together).
 */
static int collect(struct strata_runtime *rt, int shards, struct result *out)
{
        int fsdp = strata__shard_own_params(strata__rep_shard(rt, 0));
        struct strata_param p;
        const float *v;
        size_t np; /* out->np is shared: the other processes read it while this one writes */
        int n;

        STRATA_TRY(strata_parameter_count(rt, &n));
        for (int d = 0; d < rt->nreplicas; d++) {
                STRATA_TRY(strata_parameters(rt, d, &v, &np));
                np = fsdp ? strata__repv(rt, 0)->nparam : np; /* fsdp: v is the shard */
                if (np > NP_MAX)
                        return STRATA_EOVERFLOW;
                out->np = np;
                if (!fsdp)
                        memcpy(out->params[rt->rank0 + d], v, np * sizeof(float));
                for (int g = 0; g < n && d < shards; g++) {
                        size_t lo, len;

                        STRATA_TRY(strata_parameter(rt, d, g, &p));
                        if (!p.grad || p.shard_hi == p.shard_lo) /* not in this shard */
                                continue;
                        lo = p.offset + p.shard_lo;
                        len = (p.shard_hi - p.shard_lo) * sizeof(float);
                        for (size_t i = p.shard_lo; i < p.shard_hi; i++)
                                out->owned[p.offset + i]++;
                        for (int j = 0; j < p.opt_slots; j++)
                                memcpy(out->opt + np * (size_t)j + lo, p.opt_state[j], len);
                        for (int e = 0; fsdp && e < WORLD; e++)
                                memcpy(out->params[e] + lo, p.value, len);
                }
        }
        return STRATA_OK;
}

/* Each device's arena is used to the byte as planned, and the region as a whole. */
static int as_planned(struct strata_runtime *rt, const struct strata_config *c)
{
        struct strata_plan_info pl;
        struct strata_memory_info mi;

        STRATA_TRY(strata_plan(c, &pl));
        STRATA_TRY(strata_memory(rt, &mi));
        for (int d = 0; d < rt->nreplicas; d++)
                if (strata_arena_used(strata__replica_arena(strata__rep(rt, d))) != pl.per_device)
                        return STRATA_EINVAL;
        return mi.used == mi.planned && mi.refusals == 0 ? STRATA_OK : STRATA_EINVAL;
}

/* Train STEPS steps (heap calls counted), evaluate, collect; the first failure's status. */
static int train(struct strata_runtime *rt, const struct conf *k, int last_dev,
                 struct result *out, long *heap)
{
        struct strata_loader ld = rig.loader;
        struct strata_metrics m;
        struct strata_batch b;
        int micro = k->accumulate > 1 ? k->accumulate : 1;

        strata_loader_reset(&ld, rig.idx, 256);
        strata_heapcount_start();
        for (int s = 0; s < STEPS; s++) {
                if (k->inject && s == 3 * micro - 1 && last_dev >= 0)
                        STRATA_TRY(strata__inject_nonfinite_grad(rt, last_dev));
                if (!strata_loader_next(&ld, &b))
                        return STRATA_EINVAL;
                STRATA_TRY(strata_train_step(rt, &b, &m));
                out->loss[s] = m.loss;
        }
        *heap = strata_heapcount_stop();
        if (!strata_loader_next(&ld, &b))
                return STRATA_EINVAL;
        STRATA_TRY(strata_eval_step(rt, &b, &m));
        out->eval_loss = m.loss;
        out->eval_correct = m.correct;
        out->opt_t = strata__replica_steps(strata__rep(rt, 0));
        return STRATA_OK;
}

/* One process's run of @p k: its results go to the shared memory (losses from rank 0). */
static int run_here(const struct conf *k, enum strata_strategy_kind kind, int devices,
                    int rank, int procs, struct result *out)
{
        struct strata_runtime *rt = NULL;
        struct strata_config c;
        struct result mine;
        int rc;

        configure(k, kind, devices, &c);
        memset(&mine, 0, sizeof(mine));
        rc = strata_init(&rt, &c);
        if (rc == STRATA_OK)
                rc = strata_connect(rt);
        if (rc == STRATA_OK)
                rc = train(rt, k, rank == procs - 1 ? devices - 1 : -1, &mine,
                           &out->heap_calls[rank]);
        if (rc == STRATA_OK)
                rc = collect(rt, kind == STRATA_STRATEGY_DDP ? 1 : devices, out);
        if (rc == STRATA_OK)
                rc = as_planned(rt, &c);
        if (rc != STRATA_OK)
                snprintf(out->why, sizeof(out->why), "%s, process %d: %s (%s)", k->name, rank,
                         strata_status_name(rc), strata_last_error());
        if (rt)
                strata_teardown(rt);
        if (rank == 0 && rc == STRATA_OK) {
                memcpy(out->loss, mine.loss, sizeof(mine.loss));
                out->eval_loss = mine.eval_loss;
                out->eval_correct = mine.eval_correct;
                out->opt_t = mine.opt_t;
        }
        return rc == STRATA_OK ? 0 : 1;
}

struct job {
        const struct conf *k;
        enum strata_strategy_kind kind;
        int devices;
};

static int child(int rank, int size, void *arg)
{
        const struct job *j = arg;

        return run_here(j->k, j->kind, j->devices, rank, size, shared);
}

/* @p k under @p kind on @p procs processes of @p devices devices each, into *shared. */
static void run(const struct conf *k, enum strata_strategy_kind kind, int procs, int devices)
{
        struct job j = { k, kind, devices };
        struct strata_spawn_result res;
        int rc;

        memset(shared, 0, sizeof(*shared));
        if (procs == 1) {
                rc = run_here(k, kind, devices, 0, 1, shared);
                cr_assert_eq(rc, 0, "%s", shared->why);
                return;
        }
        rc = strata_spawn(procs, child, &j, 60.0, NULL, 0, &res);
        cr_assert_eq(rc, STRATA_OK, "%s %dx%d: %s (%s)", k->name, procs, devices, res.why,
                     shared->why);
}

static void same(const struct conf *k, const char *what, const struct result *a,
                 const struct result *ddp, int world)
{
        cr_assert_eq(a->np, ddp->np);
        cr_assert_eq(memcmp(a->loss, ddp->loss, sizeof(a->loss)), 0, "%s, %s: step losses "
                     "differ from ddp's", k->name, what);
        cr_assert_eq(memcmp(&a->eval_loss, &ddp->eval_loss, sizeof(double)), 0,
                     "%s, %s: evaluation loss", k->name, what);
        cr_assert_eq(a->eval_correct, ddp->eval_correct);
        for (int d = 0; d < world; d++)
                cr_assert_eq(memcmp(a->params[d], ddp->params[0], a->np * sizeof(float)), 0,
                             "%s, %s: device %d's parameters differ from ddp's", k->name, what,
                             d);
        for (size_t i = 0; i < a->np; i++)
                cr_assert_eq(a->owned[i], 1, "%s, %s: element %zu owned by %d devices", k->name,
                             what, i, a->owned[i]);
        cr_assert_eq(memcmp(a->opt, ddp->opt, sizeof(a->opt)), 0, "%s, %s: optimizer state "
                     "differs from ddp's", k->name, what);
        cr_assert_eq(a->opt_t, ddp->opt_t);
        for (int p = 0; p < world; p++)
                cr_assert_leq(a->heap_calls[p], 0, "%s, %s: process %d: %ld heap calls during "
                              "steps", k->name, what, p, a->heap_calls[p]);
}

static const enum strata_strategy_kind sharded[] = { STRATA_STRATEGY_ZERO1,
                                                     STRATA_STRATEGY_ZERO2,
                                                     STRATA_STRATEGY_FSDP };

/*
 * Every configuration under ddp on @p world devices, then zero1, zero2 and fsdp as @p procs
 * processes of world / procs devices.
 */
static void layout(int procs, int world)
{
        static struct result ddp;
        char what[64];

        if (procs > 1 && !strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
        cr_assert_neq(shared, MAP_FAILED);
        for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
                run(&confs[i], STRATA_STRATEGY_DDP, 1, world);
                ddp = *shared;
                for (size_t z = 0; z < sizeof(sharded) / sizeof(sharded[0]); z++) {
                        snprintf(what, sizeof(what), "%s, %d x %d",
                                 strata_strategy_name(sharded[z]), procs, world / procs);
                        run(&confs[i], sharded[z], procs, world / procs);
                        same(&confs[i], what, shared, &ddp, world);
                }
        }
        munmap(shared, sizeof(*shared));
}

Test(zero_processes, one_process_of_four, .timeout = 120)
{
        layout(1, WORLD);
}

Test(zero_processes, two_processes_of_two, .timeout = 120)
{
        layout(2, WORLD);
}

Test(zero_processes, four_processes_of_one, .timeout = 120)
{
        layout(4, WORLD);
}

/*
 * The sum of squares for clipping by norm gathered layer by layer (the library does from 64
 * shards over processes; here from 2) instead of chained shard by shard: the same bits.
 */
Test(zero_processes, gathered_sum_of_squares, .timeout = 120)
{
        strata__sumsq_gather_from = 2;
        layout(2, WORLD);
        layout(4, WORLD);
        strata__sumsq_gather_from = 64;
}

/* Two processes of one device: a reduce rooted in the other process writes nothing here. */
Test(zero_processes, two_processes_of_one, .timeout = 120)
{
        layout(2, 2);
}

/*
 * Bad input: across processes the link moves host buffers, so a driver with memory of its own
 * is refused at plan time with the reason (in one process it runs); a negative process count
 * is refused too.
 */
Test(zero_processes, refused_with_a_reason)
{
        struct strata_plan_info pl;
        struct strata_config c;

        rig_init(&rig, 0);
        c = rig_cfg(&rig, STRATA_STRATEGY_ZERO2, 2, 0);
        c.device.driver = devsim_driver();
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "one process: %s", strata_last_error());
        c.process.count = 2;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "strategy zero2 across 2 processes on devsim: "
                                              "device memory across processes is not "
                                              "supported"), "%s", strata_last_error());
        c.device.driver = NULL;
        c.process.count = -1;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "processes -1 < 0"), "%s", strata_last_error());
}
