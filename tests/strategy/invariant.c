/*
 * Invariant mode (cfg.strategy.invariant): the same run on every device count from 1 to 8
 * (threads oversubscribed on this machine; 3, 5, 6 and 7 hold uneven shares of the 8 chunks)
 * and on the single strategy gives bitwise the same parameters, training losses and
 * evaluation, for SGD with momentum, AdamW, synchronised BatchNorm with dropout,
 * accumulation, clipping by norm and by value, and bf16-mixed, and so do zero1, zero2 and
 * fsdp on 3 and 4 devices; a checkpoint written on 4
 * devices resumes on 2, then on 3, then on 8, bitwise the uninterrupted single run; more
 * devices than chunks, and strategies and options it does not run with, are refused with
 * the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"

#define IN 24
#define HID 40
#define CLASSES 5
#define BATCH 64
#define SAMPLES 512
#define STEPS 6
#define MAXP 4096

struct setup {
        int bn, dropout, adamw, accumulate;
        float clip_norm, clip_value;
        enum strata_precision prec;
        int each; /* accumulate_reduce each */
};

struct result {
        float p[MAXP];
        size_t n;
        double loss[4 * STEPS];
        struct strata_metrics eval;
};

static struct strata_module mods[6];
static struct strata_model model;
static struct strata_dataset ds;
static struct strata_arena data;
static struct strata_loader loader;
static _Alignas(4096) unsigned char data_mem[1 << 17];
static uint32_t order[SAMPLES];

static void build(const struct setup *s)
{
        int n = 0;

        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = HID };
        if (s->bn)
                mods[n++] = (struct strata_module){ .ops = &strata_batchnorm1d };
        mods[n++] = (struct strata_module){ .ops = &strata_relu };
        if (s->dropout)
                mods[n++] = (struct strata_module){ .ops = &strata_dropout, .p = 0.25f };
        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = CLASSES };
        model = (struct strata_model){ .in_features = IN, .nmodules = n, .modules = mods };
        cr_assert_eq(strata_arena_init(&data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&ds, &data, SAMPLES, IN, CLASSES, 3), STRATA_OK);
        cr_assert_eq(strata_loader_init(&loader, &data, &ds, BATCH, 1), STRATA_OK);
        for (uint32_t i = 0; i < SAMPLES; i++)
                order[i] = (i * 71u) % SAMPLES;
}

static struct strata_config cfg_of(const struct setup *s, enum strata_strategy_kind kind,
                                   int devices)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &model;
        c.batch = BATCH;
        c.classes = CLASSES;
        c.seed = 7;
        c.strategy.kind = kind;
        c.strategy.devices = devices;
        c.strategy.invariant = 1;
        c.strategy.sync_bn = s->bn;
        c.device.bind = STRATA_BIND_NONE; /* 8 devices on this machine's cores */
        c.optim.kind = s->adamw ? STRATA_OPTIM_ADAMW : STRATA_OPTIM_SGD;
        c.optim.lr = s->adamw ? 0.01f : 0.1f;
        c.train.accumulate = s->accumulate;
        c.train.clip_norm = s->clip_norm;
        c.train.clip_value = s->clip_value;
        c.train.accumulate_reduce = s->each ? STRATA_ACCUMULATE_REDUCE_EACH
                                            : STRATA_ACCUMULATE_REDUCE_WINDOW;
        c.precision.kind = s->prec;
        return c;
}

/* Training steps [from, to) of the data order, the losses into o. */
static void steps(struct strata_runtime *rt, int from, int to, struct result *o)
{
        struct strata_batch b;
        struct strata_metrics m;

        strata_loader_reset(&loader, order, SAMPLES);
        for (int s = 0; s < to; s++) {
                if (!strata_loader_next(&loader, &b)) { /* the next epoch, in the same order */
                        strata_loader_reset(&loader, order, SAMPLES);
                        cr_assert(strata_loader_next(&loader, &b));
                }
                if (s < from)
                        continue;
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s",
                             strata_last_error());
                o->loss[s] = m.loss;
        }
}

/* fsdp's parameters: each device's shard of each group, where it owns one. */
static void shards(struct strata_runtime *rt, int devices, struct result *o)
{
        struct strata_param p;
        int groups;

        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        o->n = 0;
        for (int d = 0; d < devices; d++)
                for (int g = 0; g < groups; g++) {
                        cr_assert_eq(strata_parameter(rt, d, g, &p), STRATA_OK);
                        if (!p.grad || p.shard_hi <= p.shard_lo)
                                continue;
                        cr_assert_leq(p.offset + p.shard_hi, MAXP);
                        memcpy(o->p + p.offset + p.shard_lo, p.value,
                               (p.shard_hi - p.shard_lo) * sizeof(float));
                        if (p.offset + p.shard_hi > o->n)
                                o->n = p.offset + p.shard_hi;
                }
}

/* The parameters (fsdp on @p fsdp devices: from their shards), an evaluation, teardown. */
static void finish_as(struct strata_runtime *rt, int fsdp, struct result *o)
{
        struct strata_batch b;
        const float *p;

        if (fsdp) {
                shards(rt, fsdp, o);
        } else {
                cr_assert_eq(strata_parameters(rt, 0, &p, &o->n), STRATA_OK);
                cr_assert_leq(o->n, MAXP);
                memcpy(o->p, p, o->n * sizeof(float));
        }
        strata_loader_reset(&loader, order + 256, 64);
        cr_assert(strata_loader_next(&loader, &b));
        cr_assert_eq(strata_eval_step(rt, &b, &o->eval), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void finish(struct strata_runtime *rt, struct result *o)
{
        finish_as(rt, 0, o);
}

static struct strata_runtime *open_rt(const struct strata_config *c)
{
        struct strata_runtime *rt = NULL;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

static void run(const struct strata_config *c, int n, struct result *o)
{
        struct strata_runtime *rt = open_rt(c);

        memset(o, 0, sizeof(*o));
        steps(rt, 0, n, o);
        finish_as(rt, c->strategy.kind == STRATA_STRATEGY_FSDP ? c->strategy.devices : 0, o);
}

static void same(const struct result *a, const struct result *ref, int n, const char *what)
{
        cr_assert_eq(a->n, ref->n);
        cr_assert_eq(memcmp(a->p, ref->p, a->n * sizeof(float)), 0, "%s: parameters differ",
                     what);
        cr_assert_eq(memcmp(a->loss, ref->loss, (size_t)n * sizeof(double)), 0,
                     "%s: losses differ", what);
        cr_assert_eq(memcmp(&a->eval.loss, &ref->eval.loss, sizeof(double)), 0,
                     "%s: evaluation loss differs", what);
        cr_assert_eq(a->eval.correct, ref->eval.correct, "%s", what);
}

/* single, then ddp on 1 to 8 devices: every run bitwise the single one. */
static void invariant(const struct setup *s)
{
        static struct result ref, got;
        static const int devices[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
        struct strata_config c;

        build(s);
        c = cfg_of(s, STRATA_STRATEGY_SINGLE, 1);
        run(&c, STEPS, &ref);
        for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
                char what[32];

                snprintf(what, sizeof(what), "ddp on %d devices", devices[i]);
                c = cfg_of(s, STRATA_STRATEGY_DDP, devices[i]);
                run(&c, STEPS, &got);
                same(&got, &ref, STEPS, what);
        }
        for (int d = 3; d <= 4; d++) { /* the sharded stages: the same bits, state sharded */
                char what[32];

                snprintf(what, sizeof(what), "zero1 on %d devices", d);
                c = cfg_of(s, STRATA_STRATEGY_ZERO1, d);
                run(&c, STEPS, &got);
                same(&got, &ref, STEPS, what);
                snprintf(what, sizeof(what), "zero2 on %d devices", d);
                c = cfg_of(s, STRATA_STRATEGY_ZERO2, d);
                run(&c, STEPS, &got);
                same(&got, &ref, STEPS, what);
                snprintf(what, sizeof(what), "fsdp on %d devices", d);
                c = cfg_of(s, STRATA_STRATEGY_FSDP, d);
                run(&c, STEPS, &got);
                same(&got, &ref, STEPS, what);
        }
}

Test(invariant, sgd_momentum, .timeout = 120)
{
        invariant(&(struct setup){ 0 });
}

Test(invariant, adamw, .timeout = 120)
{
        invariant(&(struct setup){ .adamw = 1 });
}

Test(invariant, batchnorm_synced_and_dropout, .timeout = 120)
{
        invariant(&(struct setup){ .bn = 1, .dropout = 1 });
}

Test(invariant, accumulation, .timeout = 120)
{
        invariant(&(struct setup){ .accumulate = 2, .bn = 1 });
}

/*
 * accumulate_reduce each (decision 0047): the chunks' tree already sums every micro-batch
 * across devices and adds it into the window's sum, so invariant mode runs it as it is: every
 * strategy and device count gives the same bits, and they are those of the window order.
 */
Test(invariant, accumulation_each, .timeout = 120)
{
        static struct result each, window;
        struct setup s = { .accumulate = 3, .adamw = 1, .clip_norm = 0.5f, .each = 1 };
        struct strata_config c;

        invariant(&s);
        for (int d = 1; d <= 4; d += 3) {
                c = cfg_of(&s, STRATA_STRATEGY_ZERO2, d);
                run(&c, STEPS, &each);
                s.each = 0;
                c = cfg_of(&s, STRATA_STRATEGY_ZERO2, d);
                run(&c, STEPS, &window);
                s.each = 1;
                same(&each, &window, STEPS, "each against window");
        }
}

Test(invariant, clip_by_norm, .timeout = 120)
{
        invariant(&(struct setup){ .clip_norm = 0.05f });
}

Test(invariant, clip_by_value, .timeout = 120)
{
        invariant(&(struct setup){ .clip_value = 0.002f, .adamw = 1 });
}

Test(invariant, bf16_mixed, .timeout = 120)
{
        invariant(&(struct setup){ .prec = STRATA_PRECISION_BF16_MIXED, .dropout = 1 });
}

/* Save on @p rt after its steps, into @p path. */
static void save(struct strata_runtime *rt, const char *path)
{
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* A runtime of @p c that goes on from @p path: bitwise, as the loader says. */
static struct strata_runtime *resume(const struct strata_config *c, const char *path)
{
        struct strata_runtime *rt = open_rt(c);
        struct strata_ckpt_info info;

        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.bitwise, 1, "a resume at another device count must be bitwise");
        return rt;
}

Test(invariant, resume_on_other_device_counts, .timeout = 120)
{
        static struct result ref, got;
        const struct setup s = { .bn = 1, .dropout = 1, .adamw = 1 };
        struct strata_config c;
        struct strata_runtime *rt;
        char dir[] = "/tmp/strata-inv-XXXXXX", path[64];

        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.ckpt", dir);
        build(&s);
        c = cfg_of(&s, STRATA_STRATEGY_SINGLE, 1);
        run(&c, 4 * STEPS, &ref);
        memset(&got, 0, sizeof(got));
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 4);
        rt = open_rt(&c);
        steps(rt, 0, STEPS, &got);
        save(rt, path);
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 2);
        rt = resume(&c, path);
        steps(rt, STEPS, 2 * STEPS, &got);
        save(rt, path);
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 3);
        rt = resume(&c, path);
        steps(rt, 2 * STEPS, 3 * STEPS, &got);
        save(rt, path);
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 8);
        rt = resume(&c, path);
        steps(rt, 3 * STEPS, 4 * STEPS, &got);
        finish(rt, &got);
        same(&got, &ref, 4 * STEPS, "4, then 2, then 3, then 8 devices");
        unlink(path);
        rmdir(dir);
}

/* A configuration refused at init with @p status and a message holding @p why. */
static void refused(const struct strata_config *c, int status, const char *why)
{
        struct strata_config before = *c;
        struct strata_runtime *rt = NULL;

        cr_assert_eq(strata_init(&rt, c), status, "%s", strata_last_error());
        cr_assert_null(rt);
        cr_assert(strstr(strata_last_error(), why), "'%s' lacks '%s'", strata_last_error(), why);
        cr_assert_eq(memcmp(&before, c, sizeof(before)), 0);
}

Test(invariant, refused_where_not_built, .timeout = 60)
{
        const struct setup s = { .bn = 1 };
        struct strata_config c;

        build(&s);
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 9);
        refused(&c, STRATA_EINVAL, "9 devices for 8 chunks would leave a device without rows");
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 4);
        c.strategy.chunks = 2;
        refused(&c, STRATA_EINVAL, "use at most 2 devices or more chunks");
        c.strategy.chunks = 6;
        refused(&c, STRATA_EINVAL, "chunks 6: a power of two");
        c = cfg_of(&s, STRATA_STRATEGY_DP, 2);
        cr_assert_eq(strata_patch_replication_callback(&c), STRATA_OK);
        refused(&c, STRATA_ENOTSUP, "not dp");
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 2);
        c.strategy.sync_bn = 0;
        refused(&c, STRATA_EINVAL, "synchronised BatchNorm");
        c = cfg_of(&s, STRATA_STRATEGY_SINGLE, 1);
        c.strategy.sync_bn = 0;
        refused(&c, STRATA_EINVAL, "synchronised BatchNorm");
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 2);
        c.strategy.grad_allreduce = STRATA_BF16;
        refused(&c, STRATA_EINVAL, "grad_allreduce bf16");
        c.strategy.grad_allreduce = STRATA_F32;
        c.strategy.invariant = 2;
        refused(&c, STRATA_EINVAL, "invariant 2");
}

/* 16 chunks cover 16 devices' tree and fewer rows than chunks leave some chunks empty. */
Test(invariant, more_chunks_and_empty_chunks, .timeout = 120)
{
        static struct result ref, got;
        const struct setup s = { .bn = 1 };
        struct strata_config c;

        build(&s);
        c = cfg_of(&s, STRATA_STRATEGY_SINGLE, 1);
        c.strategy.chunks = 128; /* 64 rows: every other chunk is empty */
        run(&c, STEPS, &ref);
        c = cfg_of(&s, STRATA_STRATEGY_DDP, 4);
        c.strategy.chunks = 128;
        run(&c, STEPS, &got);
        same(&got, &ref, STEPS, "128 chunks on 4 devices");
        c.strategy.devices = 16;
        run(&c, STEPS, &got);
        same(&got, &ref, STEPS, "128 chunks on 16 devices");
}
