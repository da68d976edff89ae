/*
 * A model of spatial modules through the public API: (2, 8, 8) samples through MaxPool2d(2),
 * Upsample(2, bilinear), LayerNorm over (2, 8, 8), Flatten and Linear(4) on synthetic data.
 * It trains (the loss falls), its plan is the memory it uses, nothing allocates during steps,
 * LayerNorm's groups keep PyTorch's shape (in the safetensors export too), dp, ddp, zero1,
 * zero2 and fsdp on 2 devices reach single's parameters, a checkpoint resumes bitwise,
 * invariant mode gives bitwise the same run on 1, 2 and 4 devices, 16-mixed and bf16-mixed
 * train, and the same model written as a line parses to the same description.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"
#include "tools/heapcount.h"

#define IN 128
#define CLASSES 4
#define BATCH 32
#define SAMPLES 256
#define STEPS 40
#define NP (2 * IN + IN * CLASSES + CLASSES)

static const struct strata_module mods[5] = {
        { .ops = &strata_maxpool2d, .kernel = { 2 } },
        { .ops = &strata_upsample, .mode = STRATA_UPSAMPLE_LINEAR },
        { .ops = &strata_layernorm },
        { .ops = &strata_flatten },
        { .ops = &strata_linear, .out = CLASSES },
};
static const struct strata_model model = { .in_features = IN, .nmodules = 5, .modules = mods,
                                           .in_dims = { 2, 2, { 8, 8 } } };
static struct strata_dataset ds;
static struct strata_arena data;
static struct strata_loader loader;
static _Alignas(4096) unsigned char data_mem[1 << 17];
static uint32_t order[SAMPLES];

struct run {
        float p[NP];
        double loss[STEPS];
};

static void setup(void)
{
        cr_assert_eq(strata_arena_init(&data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&ds, &data, SAMPLES, IN, CLASSES, 3), STRATA_OK);
        cr_assert_eq(strata_loader_init(&loader, &data, &ds, BATCH, 1), STRATA_OK);
        for (uint32_t i = 0; i < SAMPLES; i++)
                order[i] = (i * 71u) % SAMPLES;
}

static struct strata_config cfg_of(enum strata_strategy_kind kind, int devices, int invariant,
                                   enum strata_precision prec)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &model;
        c.batch = BATCH;
        c.classes = CLASSES;
        c.seed = 5;
        c.strategy.kind = kind;
        c.strategy.devices = devices;
        c.strategy.invariant = invariant;
        c.device.bind = STRATA_BIND_NONE;
        c.precision.kind = prec;
        return c;
}

/* Steps [from, to) of the data order on @p rt, their losses into @p o. */
static void steps(struct strata_runtime *rt, int from, int to, struct run *o)
{
        struct strata_batch b;
        struct strata_metrics m;

        strata_loader_reset(&loader, order, SAMPLES);
        for (int s = 0; s < to; s++) {
                if (!strata_loader_next(&loader, &b)) {
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

/* @p rt's parameters (under fsdp gathered from the shards) into @p o; planned == used. */
static void finish(struct strata_runtime *rt, const struct strata_config *c, struct run *o)
{
        struct strata_memory_info mem;
        const float *p;
        size_t n;

        cr_assert_eq(strata_memory(rt, &mem), STRATA_OK);
        cr_assert_eq(mem.planned, mem.used);
        if (c->strategy.kind == STRATA_STRATEGY_FSDP) { /* each device its shard, L apart */
                size_t at = 0, len = 0;

                for (int d = 0; d < c->strategy.devices; d++, at += len) {
                        cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                        len = d == 0 ? n : len;
                        memcpy(o->p + at, p, sizeof(float) * (at + n > NP ? NP - at : n));
                }
        } else {
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                cr_assert_geq(n, (size_t)NP, "zero1 pads to whole shards");
                memcpy(o->p, p, sizeof(o->p));
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* STEPS steps of @p c into @p o with no heap call in them; the runtime's status. */
static int train(const struct strata_config *c, struct run *o)
{
        struct strata_runtime *rt = NULL;
        long calls;
        int rc;

        if ((rc = strata_init(&rt, c)) != STRATA_OK)
                return rc;
        if ((rc = strata_connect(rt)) != STRATA_OK) {
                strata_teardown(rt);
                return rc;
        }
        strata_heapcount_start();
        steps(rt, 0, STEPS, o);
        calls = strata_heapcount_stop();
        cr_assert(calls <= 0, "%ld heap calls during the steps", calls);
        finish(rt, c, o);
        return STRATA_OK;
}

/* The mean loss of the last 5 steps is below that of the first 5, every value finite. */
static void learns(const struct run *o, const char *what)
{
        double first = 0.0, last = 0.0;

        for (int s = 0; s < 5; s++) {
                first += o->loss[s];
                last += o->loss[STEPS - 1 - s];
        }
        for (int i = 0; i < NP; i++)
                cr_assert(isfinite(o->p[i]), "%s: parameter %d not finite", what, i);
        cr_assert_lt(last, 0.9 * first, "%s: loss %g -> %g", what, first / 5, last / 5);
}

Test(spatial_model, trains_within_its_plan, .init = setup, .timeout = 120)
{
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_32);
        struct strata_plan_info pl;
        static struct run a, b;

        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(train(&c, &a), STRATA_OK, "%s", strata_last_error());
        learns(&a, "fp32");
        cr_assert_eq(train(&c, &b), STRATA_OK);
        cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "two runs differ");
}

/* The safetensors export names LayerNorm's weight as PyTorch's LayerNorm([2, 8, 8]) does. */
static void exported_as_pytorch(struct strata_runtime *rt)
{
        char dir[] = "/tmp/strata-spatial-XXXXXX", path[128], head[4096];
        unsigned char len[8];
        uint64_t n = 0;
        FILE *f;

        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/model.safetensors", dir);
        cr_assert_eq(strata_export_safetensors(rt, path), STRATA_OK, "%s", strata_last_error());
        cr_assert_not_null(f = fopen(path, "rb"));
        cr_assert_eq(fread(len, 1, 8, f), 8);
        for (int i = 7; i >= 0; i--)
                n = n << 8 | len[i];
        cr_assert_lt(n, sizeof(head));
        cr_assert_eq(fread(head, 1, n, f), n);
        head[n] = '\0';
        fclose(f);
        cr_assert(strstr(head, "\"layers.2.weight\":{\"dtype\":\"F32\",\"shape\":[2,8,8]"),
                  "%s", head);
        cr_assert(strstr(head, "\"layers.4.weight\":{\"dtype\":\"F32\",\"shape\":[4,128]"),
                  "%s", head);
        unlink(path);
        rmdir(dir);
}

Test(spatial_model, layernorm_groups_keep_their_shape, .init = setup)
{
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_32);
        struct strata_runtime *rt;
        struct strata_param p;
        int groups;

        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        cr_assert_eq(groups, 4);
        cr_assert_eq(strata_parameter(rt, 0, 0, &p), STRATA_OK);
        cr_assert_str_eq(p.name, "layers.2.weight");
        cr_assert_eq(p.group.ndim, 3);
        cr_assert_eq(p.group.shape[0], 2);
        cr_assert_eq(p.group.shape[1], 8);
        cr_assert_eq(p.group.shape[2], 8);
        cr_assert_eq(p.value[0], 1.0f);
        cr_assert_eq(strata_parameter(rt, 0, 1, &p), STRATA_OK);
        cr_assert_str_eq(p.name, "layers.2.bias");
        exported_as_pytorch(rt);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Every strategy sums the same gradients in its own order: within 1e-5 of single. */
Test(spatial_model, strategies_agree, .init = setup, .timeout = 240)
{
        static const enum strata_strategy_kind kinds[] = {
                STRATA_STRATEGY_DP, STRATA_STRATEGY_DDP, STRATA_STRATEGY_ZERO1,
                STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP };
        static struct run one, two;
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_32);

        cr_assert_eq(train(&c, &one), STRATA_OK, "%s", strata_last_error());
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                double worst = 0.0;

                c = cfg_of(kinds[k], 2, 0, STRATA_PRECISION_32);
                cr_assert_eq(train(&c, &two), STRATA_OK, "%s: %s", strata_strategy_name(kinds[k]),
                             strata_last_error());
                for (int i = 0; i < NP; i++) {
                        double d = fabs(two.p[i] - one.p[i]) / (1.0 + fabs(one.p[i]));

                        worst = d > worst ? d : worst;
                }
                cr_assert_leq(worst, 1e-5, "%s on 2 devices: relative difference %g",
                              strata_strategy_name(kinds[k]), worst);
        }
}

/* A checkpoint after half the steps resumes bitwise: the 3-D LayerNorm groups included. */
Test(spatial_model, resumes_bitwise, .init = setup, .timeout = 120)
{
        static struct run whole, half;
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_32);
        char dir[] = "/tmp/strata-spatial-XXXXXX", path[128];
        struct strata_runtime *rt;

        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 0.01f;
        cr_assert_eq(train(&c, &whole), STRATA_OK, "%s", strata_last_error());
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.ckpt", dir);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        steps(rt, 0, STEPS / 2, &half);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        steps(rt, STEPS / 2, STEPS, &half);
        finish(rt, &c, &half);
        cr_assert_eq(memcmp(&whole, &half, sizeof(whole)), 0, "the resumed run differs");
        unlink(path);
        rmdir(dir);
}

/* Rows are independent: invariant mode runs the modules per chunk, on any device count. */
Test(spatial_model, invariant_on_any_device_count, .init = setup, .timeout = 240)
{
        static struct run one, more;
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_32);

        cr_assert_eq(train(&c, &one), STRATA_OK, "%s", strata_last_error());
        learns(&one, "invariant");
        for (int d = 2; d <= 4; d += 2) {
                c = cfg_of(STRATA_STRATEGY_DDP, d, 1, STRATA_PRECISION_32);
                cr_assert_eq(train(&c, &more), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(memcmp(&one, &more, sizeof(one)), 0,
                             "invariant ddp on %d devices differs from single", d);
        }
}

/* strata_model_parse() gives the same modules, and strata_model_output() the logits' layout. */
Test(spatial_model, written_as_a_line)
{
        struct strata_module line[8];
        struct strata_model m;
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(2,8,8) maxpool2d(2) upsample(2,mode=bilinear) "
                                        "layernorm flatten linear(4)", line, 8, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.nmodules, model.nmodules);
        cr_assert_eq(m.in_features, IN);
        cr_assert_eq(memcmp(&m.in_dims, &model.in_dims, sizeof(m.in_dims)), 0);
        for (int i = 0; i < m.nmodules; i++) {
                cr_assert_eq(line[i].ops, mods[i].ops, "module %d", i);
                cr_assert_eq(line[i].kernel[0], mods[i].kernel[0], "module %d", i);
                cr_assert_eq(line[i].mode, mods[i].mode, "module %d", i);
                cr_assert_eq(line[i].out, mods[i].out, "module %d", i);
        }
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, CLASSES);
        cr_assert_eq(out.ndim, 0);
}

/* The spatial modules keep f32 activations: the mixed precisions train the model too. */
Test(spatial_model, mixed_precision_trains, .init = setup, .timeout = 120)
{
        static struct run o;
        struct strata_config c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_16_MIXED);

        cr_assert_eq(train(&c, &o), STRATA_OK, "%s", strata_last_error());
        learns(&o, "16-mixed");
        c = cfg_of(STRATA_STRATEGY_SINGLE, 1, 0, STRATA_PRECISION_BF16_MIXED);
        cr_assert_eq(train(&c, &o), STRATA_OK, "%s", strata_last_error());
        learns(&o, "bf16-mixed");
}
