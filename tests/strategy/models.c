/*
 * Several models on one runtime (decision 0069): model 0 (the rig's, SGD), model 1 (another
 * module list with AdamW) and model 2 (a Polyak target of model 0), trained together on the
 * same workers under single, ddp, zero1 and zero2 (decision 0116: bitwise ddp's, in one process
 * and in two). Each model is bitwise the run it would be alone, runs
 * repeat bitwise, the target is the host's average to the bit, the plan is exact with nothing
 * allocated during steps, and every model's checkpoint resumes it bitwise.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define TAU 0.05f
#define NP 4096 /* room for any model's parameters here */

struct three {
        struct rig r;
        struct strata_module mods1[3];
        struct strata_model m1;
        struct strata_optim o1;
        struct strata_models set;
};

/* The rig's model 0, model 1 (20-8-tanh-4, AdamW lr 0.01), model 2 a target of model 0. */
static void three_init(struct three *t, enum strata_strategy_kind kind, int devices)
{
        int i1 = 0, i2 = 0;

        rig_init(&t->r, 0);
        t->r.cfg.strategy.kind = kind;
        t->r.cfg.strategy.devices = devices;
        t->mods1[0] = (struct strata_module){ .ops = &strata_linear, .out = 8 };
        t->mods1[1] = (struct strata_module){ .ops = &strata_tanh };
        t->mods1[2] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        t->m1 = (struct strata_model){ .in_features = RIG_IN, .nmodules = 3,
                                       .modules = t->mods1 };
        t->o1 = (struct strata_optim)STRATA_OPTIM_INIT;
        t->o1.kind = STRATA_OPTIM_ADAMW;
        t->o1.lr = 0.01f;
        t->set = (struct strata_models)STRATA_MODELS_INIT;
        cr_assert_eq(strata_models_add(&t->set, &t->m1, RIG_CLASSES, &t->o1, &i1), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_models_add_target(&t->set, 0, TAU, &i2), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(i1, 1);
        cr_assert_eq(i2, 2);
        t->r.cfg.models = &t->set;
}

/* Model @p model's parameters on device @p dev into @p out; returns how many. */
static size_t params_of(struct strata_runtime *rt, int model, int dev, float *out)
{
        const float *p;
        size_t n;

        cr_assert_eq(strata_model_parameters(rt, model, dev, &p, &n), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_leq(n, NP);
        memcpy(out, p, n * sizeof(float));
        return n;
}

/* The next batch of the rig's loader, starting over at the end. */
static void next(struct rig *r, struct strata_batch *b)
{
        if (!strata_loader_next(&r->loader, b)) {
                strata_loader_reset(&r->loader, r->idx, 256);
                cr_assert(strata_loader_next(&r->loader, b));
        }
}

/*
 * One step of all three: model 0 and model 1 on batch @p b, then the target's average, which
 * @p ref (its host reference, n0 values) follows.
 */
static void step_all(struct strata_runtime *rt, const struct strata_batch *b, float *ref,
                     size_t n0)
{
        static float p0[NP];

        cr_assert_eq(strata_train_step(rt, b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_model_train_step(rt, 1, b, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_model_polyak_update(rt, 2), STRATA_OK, "%s", strata_last_error());
        params_of(rt, 0, 0, p0);
        for (size_t i = 0; i < n0; i++)
                ref[i] = (1.0f - TAU) * ref[i] + TAU * p0[i];
}

/* @p steps steps of all three models; each model's final parameters (device 0) into out[k]. */
static void run(struct three *t, int steps, float out[3][NP], size_t n[3])
{
        static float ref[NP], other[NP];
        struct strata_runtime *rt = rig_open(&t->r.cfg);
        struct strata_batch b;
        int count = 0;

        cr_assert_eq(strata_model_count(rt, &count), STRATA_OK);
        cr_assert_eq(count, 3);
        n[0] = params_of(rt, 0, 0, ref);
        n[2] = params_of(rt, 2, 0, out[2]);
        cr_assert_eq(n[2], n[0]);
        cr_assert(!memcmp(ref, out[2], n[0] * sizeof(float)), "the target starts as its source");
        strata_loader_reset(&t->r.loader, t->r.idx, 256);
        for (int s = 0; s < steps; s++) {
                next(&t->r, &b);
                step_all(rt, &b, ref, n[0]);
        }
        for (int k = 0; k < 3; k++) {
                n[k] = params_of(rt, k, 0, out[k]);
                for (int d = 1; d < t->r.cfg.strategy.devices; d++) {
                        cr_assert_eq(params_of(rt, k, d, other), n[k]);
                        cr_assert(!memcmp(other, out[k], n[k] * sizeof(float)),
                                  "model %d: device %d differs from device 0", k, d);
                }
        }
        cr_assert(!memcmp(ref, out[2], n[0] * sizeof(float)),
                  "the target is not the host's Polyak average");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Model @p model of @p t trained alone, as model 0 of a runtime of its own. */
static size_t alone(struct three *t, int model, int steps, float *out)
{
        struct strata_config c = t->r.cfg;
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t n;

        c.models = NULL;
        if (model == 1) { /* its seed: the configuration's + 1 x 0x9e3779b97f4a7c15 */
                c.model = &t->m1;
                c.optim = t->o1;
                c.seed += 0x9e3779b97f4a7c15ull;
        }
        rt = rig_open(&c);
        strata_loader_reset(&t->r.loader, t->r.idx, 256);
        for (int s = 0; s < steps; s++) {
                next(&t->r, &b);
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                             strata_last_error());
        }
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(out, p, n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return n;
}

static void together(enum strata_strategy_kind kind, int devices, int accumulate,
                     size_t bucket_bytes)
{
        static float a[3][NP], b[3][NP], solo[NP];
        size_t na[3], nb[3];
        struct three t;

        three_init(&t, kind, devices);
        t.r.cfg.train.accumulate = accumulate;
        t.r.cfg.strategy.bucket_bytes = bucket_bytes;
        run(&t, 12, a, na);
        run(&t, 12, b, nb);
        for (int k = 0; k < 3; k++) {
                cr_assert_eq(na[k], nb[k]);
                cr_assert(!memcmp(a[k], b[k], na[k] * sizeof(float)),
                          "model %d does not repeat bitwise", k);
        }
        for (int k = 0; k < 2; k++) {
                cr_assert_eq(alone(&t, k, 12, solo), na[k]);
                cr_assert(!memcmp(solo, a[k], na[k] * sizeof(float)),
                          "model %d differs from its run alone", k);
        }
        cr_assert(memcmp(a[0], a[2], na[0] * sizeof(float)), "the target did not lag");
}

Test(models, single_three_models_bitwise)
{
        together(STRATA_STRATEGY_SINGLE, 1, 0, 0);
}

Test(models, ddp_three_models_bitwise)
{
        together(STRATA_STRATEGY_DDP, 2, 0, 0);
}

/*
 * Model 0 (and its target) 20-16-relu-16-relu-16-relu-4: no layer holds half its parameters,
 * so zero2 alone would keep a shard of its reduced gradients alone (own-grads), which model
 * 1's sizes do not allow.
 */
static void deepen(struct three *t)
{
        static struct strata_module mods[7];
        static struct strata_model m;

        for (int i = 0; i < 6; i += 2) {
                mods[i] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
                mods[i + 1] = (struct strata_module){ .ops = &strata_relu };
        }
        mods[6] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        m = (struct strata_model){ .in_features = RIG_IN, .nmodules = 7, .modules = mods };
        t->r.cfg.model = &m;
}

/* A zero1 or zero2 case: its buckets, model 0 deepened, accumulation, clipping by norm. */
struct zcase {
        size_t bucket_bytes;
        int deep, accumulate, each;
        float clip;
        const char *variant; /* zero2's, with the three models */
};

static void zconf(struct three *t, const struct zcase *c)
{
        t->r.cfg.strategy.bucket_bytes = c->bucket_bytes;
        t->r.cfg.train.accumulate = c->accumulate;
        if (c->each)
                t->r.cfg.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
        t->r.cfg.train.clip_norm = c->clip;
        if (c->deep)
                deepen(t);
}

/*
 * zero1 and zero2 (decision 0116): each model's optimizer state sharded over the devices, its
 * gradients all-reduced (zero1) or reduce-scattered bucket by bucket (zero2): every model
 * bitwise ddp's under case @p c (and, with ddp's defaults, its run alone under the same
 * strategy); zero2 runs the variant the case names.
 */
static void sharded(enum strata_strategy_kind kind, const struct zcase *c)
{
        static float z[3][NP], d[3][NP];
        size_t nz[3], nd[3];
        const char *name = NULL;
        struct three t;

        if (!c->deep && !c->accumulate && !c->clip)
                together(kind, 2, 0, c->bucket_bytes);
        three_init(&t, kind, 2);
        zconf(&t, c);
        if (kind == STRATA_STRATEGY_ZERO2) {
                cr_assert_eq(strata_plan_sync(&t.r.cfg, &name), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_str_eq(name, c->variant);
        }
        run(&t, 12, z, nz);
        three_init(&t, STRATA_STRATEGY_DDP, 2);
        zconf(&t, c);
        run(&t, 12, d, nd);
        for (int k = 0; k < 3; k++) {
                cr_assert_eq(nz[k], nd[k]);
                cr_assert(!memcmp(z[k], d[k], nz[k] * sizeof(float)),
                          "model %d: %s differs from ddp", k, strata_strategy_name(kind));
        }
}

Test(models, zero1_three_models_bitwise_and_ddp)
{
        sharded(STRATA_STRATEGY_ZERO1, &(struct zcase){ 0 });
}

Test(models, zero2_three_models_bitwise_and_ddp)
{
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .variant = "buckets" });
}

/* zero2's reduce-scatter over each model's own buckets (one layer each). */
Test(models, zero2_small_buckets_each_model_its_own)
{
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .bucket_bytes = 64,
                                                        .variant = "buckets" });
}

/* Its other whole-gradient variants: accumulation, clipping by norm, each micro-batch. */
Test(models, zero2_accumulate_clip_and_each_are_ddp)
{
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .accumulate = 2, .variant = "buckets" });
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .clip = 0.5f,
                                                        .variant = "buckets-gather" });
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .accumulate = 2, .each = 1,
                                                        .variant = "each-whole" });
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .accumulate = 2, .each = 1,
                                                        .clip = 0.5f,
                                                        .variant = "each-gather" });
        sharded(STRATA_STRATEGY_ZERO1, &(struct zcase){ .accumulate = 2, .clip = 0.5f });
}

/*
 * Every model's replica is laid out with model 0's shard choice: with several models zero2
 * keeps whole gradients (buckets) where model 0 alone would keep its shard alone, and trains
 * bitwise ddp's.
 */
Test(models, zero2_several_models_keep_whole_gradients)
{
        struct three t;
        const char *name = NULL;

        three_init(&t, STRATA_STRATEGY_ZERO2, 2);
        deepen(&t);
        t.r.cfg.models = NULL;
        cr_assert_eq(strata_plan_sync(&t.r.cfg, &name), STRATA_OK, "%s", strata_last_error());
        cr_assert_str_eq(name, "own-grads");
        sharded(STRATA_STRATEGY_ZERO2, &(struct zcase){ .deep = 1, .variant = "buckets" });
}

/*
 * Buckets of one layer each (64 bytes): the two trained models' buckets differ in number and
 * offsets, each prepared once at init and swapped in with its model (decision 0082); a
 * model run on another's buckets would leave devices apart or differ from its run alone.
 */
Test(models, ddp_small_buckets_each_model_its_own)
{
        together(STRATA_STRATEGY_DDP, 2, 0, 64);
}

/* Each model its own accumulation window (ddp's buckets the active model's at its end). */
Test(models, ddp_accumulate_two_bitwise)
{
        together(STRATA_STRATEGY_DDP, 2, 2, 0);
}

/*
 * A model's window ended early is its own: model 1's partial window, model 0's full ones,
 * the same bits as model 1 alone with the same call.
 */
Test(models, end_accumulation_window_per_model)
{
        static float got[NP], solo[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct three t;
        size_t n;

        three_init(&t, STRATA_STRATEGY_SINGLE, 1);
        t.r.cfg.train.accumulate = 3;
        for (int alone_run = 0; alone_run < 2; alone_run++) {
                struct strata_config c = t.r.cfg;

                if (alone_run) {
                        c.models = NULL;
                        c.model = &t.m1;
                        c.optim = t.o1;
                        c.seed += 0x9e3779b97f4a7c15ull;
                }
                rt = rig_open(&c);
                strata_loader_reset(&t.r.loader, t.r.idx, 256);
                for (int s = 0; s < 5; s++) {
                        next(&t.r, &b);
                        if (s == 1) /* model 1's window ends at its second micro-batch */
                                cr_assert_eq(alone_run ? strata_end_accumulation_window(rt)
                                             : strata_model_end_accumulation_window(rt, 1),
                                             STRATA_OK, "%s", strata_last_error());
                        if (!alone_run)
                                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
                        cr_assert_eq(alone_run ? strata_train_step(rt, &b, NULL)
                                     : strata_model_train_step(rt, 1, &b, NULL), STRATA_OK,
                                     "%s", strata_last_error());
                }
                n = alone_run ? params_of(rt, 0, 0, solo) : params_of(rt, 1, 0, got);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert(!memcmp(got, solo, n * sizeof(float)), "model 1's partial window differs");
}

/* One model plans what it did; more models plan more, exactly what they use, with no heap. */
static void exact(enum strata_strategy_kind kind, int devices)
{
        static float logits[RIG_BATCH * RIG_CLASSES], ref[NP];
        struct strata_plan_info none, empty, three;
        struct strata_memory_info mi;
        struct strata_models nothing = STRATA_MODELS_INIT;
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct three t;
        size_t n0;
        long calls;

        three_init(&t, kind, devices);
        cr_assert_eq(strata_plan(&t.r.cfg, &three), STRATA_OK, "%s", strata_last_error());
        t.r.cfg.models = NULL;
        cr_assert_eq(strata_plan(&t.r.cfg, &none), STRATA_OK);
        t.r.cfg.models = &nothing;
        cr_assert_eq(strata_plan(&t.r.cfg, &empty), STRATA_OK);
        cr_assert_eq(empty.bytes, none.bytes, "an empty set of models costs %zu bytes",
                     empty.bytes - none.bytes);
        cr_assert_eq(empty.per_device, none.per_device);
        cr_assert_gt(three.bytes, none.bytes);
        cr_assert_gt(three.per_device, none.per_device);
        cr_assert_eq(three.params, none.params, "params reports model 0's");
        t.r.cfg.models = &t.set;
        rt = rig_open(&t.r.cfg);
        n0 = params_of(rt, 0, 0, ref);
        strata_loader_reset(&t.r.loader, t.r.idx, 256);
        strata_heapcount_start();
        while (strata_loader_next(&t.r.loader, &b)) {
                step_all(rt, &b, ref, n0);
                for (int k = 0; k < 3; k++) {
                        cr_assert_eq(strata_model_eval_step(rt, k, &b, &m), STRATA_OK);
                        cr_assert_eq(strata_model_predict_step(rt, k, &b, logits,
                                                               RIG_BATCH * RIG_CLASSES),
                                     STRATA_OK);
                }
        }
        calls = strata_heapcount_stop();
        if (calls != -1) /* -1: a sanitizer owns malloc in this build, nothing counted */
                cr_assert_eq(calls, 0, "%ld heap calls during the steps of three models", calls);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "used %zu bytes, planned %zu", mi.used, mi.planned);
        cr_assert_eq(mi.planned, three.bytes);
        cr_assert_eq(mi.refusals, 0u);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(models, single_exact_plan_no_heap)
{
        exact(STRATA_STRATEGY_SINGLE, 1);
}

Test(models, ddp_exact_plan_no_heap)
{
        exact(STRATA_STRATEGY_DDP, 2);
}

Test(models, zero2_exact_plan_no_heap)
{
        exact(STRATA_STRATEGY_ZERO2, 2);
}

/* A path in a directory of this test's own. */
static const char *path_in(char *dir, const char *name, char *buf, size_t n)
{
        snprintf(buf, n, "%s/%s", dir, name);
        return buf;
}

/*
 * Every model saved after 4 steps of all three; 4 more steps; every model loaded back and the
 * same 4 steps again: each model's parameters are bitwise those of the first time.
 */
static void resume(enum strata_strategy_kind kind, int devices)
{
        static float first[3][NP], again[NP], ref[NP];
        char dir[] = "/tmp/strata-models-XXXXXX", path[3][128];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct three t;
        size_t n[3], n0;

        cr_assert_not_null(mkdtemp(dir));
        three_init(&t, kind, devices);
        rt = rig_open(&t.r.cfg);
        n0 = params_of(rt, 0, 0, ref);
        strata_loader_reset(&t.r.loader, t.r.idx, 256);
        for (int s = 0; s < 4; s++) {
                next(&t.r, &b);
                step_all(rt, &b, ref, n0);
        }
        for (int k = 0; k < 3; k++) {
                char name[32];

                snprintf(name, sizeof(name), "model%d.ckpt", k % 10);
                path_in(dir, name, path[k], sizeof(path[k]));
                cr_assert_eq(strata_model_save_checkpoint(rt, k, path[k], "app", 3), STRATA_OK,
                             "%s", strata_last_error());
        }
        for (int s = 0; s < 4; s++) {
                next(&t.r, &b);
                step_all(rt, &b, ref, n0);
        }
        for (int k = 0; k < 3; k++)
                n[k] = params_of(rt, k, 0, first[k]);
        for (int k = 0; k < 3; k++) {
                char app[8];
                size_t got = 0;

                cr_assert_eq(strata_model_load_checkpoint(rt, k, path[k], app, sizeof(app), &got,
                                                          NULL),
                             STRATA_OK, "model %d: %s", k, strata_last_error());
                cr_assert_eq(got, 3u);
        }
        params_of(rt, 0, 0, ref);
        strata_loader_reset(&t.r.loader, t.r.idx, 256);
        for (int s = 0; s < 8; s++) { /* the same batches as the first time */
                next(&t.r, &b);
                if (s >= 4)
                        step_all(rt, &b, ref, n0);
        }
        for (int k = 0; k < 3; k++) {
                cr_assert_eq(params_of(rt, k, 0, again), n[k]);
                cr_assert(!memcmp(again, first[k], n[k] * sizeof(float)),
                          "model %d did not resume bitwise", k);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        for (int k = 0; k < 3; k++)
                unlink(path[k]);
        rmdir(dir);
}

Test(models, single_checkpoint_every_model)
{
        resume(STRATA_STRATEGY_SINGLE, 1);
}

Test(models, ddp_checkpoint_every_model)
{
        resume(STRATA_STRATEGY_DDP, 2);
}

/* Each model's sharded optimizer state gathered into its file and scattered back. */
Test(models, zero2_checkpoint_every_model)
{
        resume(STRATA_STRATEGY_ZERO2, 2);
}

/* The safetensors header of @p path, without spaces, into @p out. */
static void header_of(const char *path, char *out, size_t cap)
{
        FILE *f = fopen(path, "rb");
        unsigned long long len = 0;
        size_t got;

        cr_assert_not_null(f);
        cr_assert_eq(fread(&len, 8, 1, f), 1u);
        cr_assert_lt(len, cap);
        got = fread(out, 1, (size_t)len, f);
        out[got] = '\0';
        fclose(f);
}

Test(models, export_a_chosen_model_and_load_it_back)
{
        char dir[] = "/tmp/strata-models-XXXXXX", p1[128], p2[128], h[4096];
        static float e1[NP], w0[NP], w1[NP];
        struct strata_runtime *rt;
        struct three t;
        size_t n1;

        cr_assert_not_null(mkdtemp(dir));
        three_init(&t, STRATA_STRATEGY_SINGLE, 1);
        rt = rig_open(&t.r.cfg);
        path_in(dir, "model1.safetensors", p1, sizeof(p1));
        path_in(dir, "model2.safetensors", p2, sizeof(p2));
        n1 = params_of(rt, 1, 0, e1);
        cr_assert_eq(strata_model_export_safetensors(rt, 1, p1), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_model_export_safetensors(rt, 2, p2), STRATA_OK, "%s",
                     strata_last_error());
        header_of(p1, h, sizeof(h)); /* model 1: 20-8-tanh-4 */
        cr_assert_not_null(strstr(h, "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[8,20]"),
                           "%s", h);
        header_of(p2, h, sizeof(h)); /* model 2, model 0's target: 20-16-relu-4 */
        cr_assert_not_null(strstr(h, "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[16,20]"),
                           "%s", h);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        /* model 1's export loads back into model 1 of another runtime (another seed) */
        t.r.cfg.seed = 12345;
        rt = rig_open(&t.r.cfg);
        params_of(rt, 1, 0, w0);
        cr_assert_eq(strata_model_load_weights(rt, 2, p1, STRATA_WEIGHTS_STRICT, NULL),
                     STRATA_EINVAL, "model 1's weights fit model 2: %s", strata_last_error());
        cr_assert_eq(strata_model_load_weights(rt, 1, p1, STRATA_WEIGHTS_STRICT, NULL),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(params_of(rt, 1, 0, w1), n1);
        cr_assert(!memcmp(w1, e1, n1 * sizeof(float)), "model 1's weights did not load");
        cr_assert(memcmp(w0, e1, n1 * sizeof(float)), "the seeds gave the same values");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(p1);
        unlink(p2);
        rmdir(dir);
}

/* What each process of a spawn job leaves: every model's parameters on its device. */
struct spawned {
        size_t n[3];
        float params[3][2][NP];
        char why[256];
};

static struct spawned *shared;
static struct three spawn_three; /* configured before the fork: every process inherits it */
static char spawn_dir[64];       /* where every model's checkpoint goes (the job's, ddp's) */

/* Model @p k's checkpoint @p who ("job" or "ddp") in spawn_dir. */
static const char *spawn_ckpt(const char *who, int k, char *buf, size_t n)
{
        snprintf(buf, n, "%s/%s%d.ckpt", spawn_dir, who, k % 10);
        return buf;
}

/* One process's run of all three models (no assertion in a child: a status). */
static int child(int rank, int size, void *arg)
{
        struct strata_runtime *rt = NULL;
        struct strata_batch b;
        int rc;

        (void)size, (void)arg;
        rc = strata_init(&rt, &spawn_three.r.cfg);
        if (rc == STRATA_OK)
                rc = strata_connect(rt);
        strata_loader_reset(&spawn_three.r.loader, spawn_three.r.idx, 256);
        for (int s = 0; s < 6 && rc == STRATA_OK; s++) {
                if (!strata_loader_next(&spawn_three.r.loader, &b))
                        rc = STRATA_EINVAL;
                if (rc == STRATA_OK)
                        rc = strata_train_step(rt, &b, NULL);
                if (rc == STRATA_OK)
                        rc = strata_model_train_step(rt, 1, &b, NULL);
                if (rc == STRATA_OK)
                        rc = strata_model_polyak_update(rt, 2);
        }
        for (int k = 0; k < 3 && rc == STRATA_OK; k++) {
                const float *p;
                char path[128];

                rc = strata_model_parameters(rt, k, 0, &p, &shared->n[k]);
                if (rc == STRATA_OK)
                        memcpy(shared->params[k][rank], p, shared->n[k] * sizeof(float));
                if (rc == STRATA_OK) /* every process saves each model; process 0 writes */
                        rc = strata_model_save_checkpoint(rt, k, spawn_ckpt("job", k, path,
                                                                            sizeof(path)),
                                                          NULL, 0);
        }
        if (rc != STRATA_OK)
                snprintf(shared->why, sizeof(shared->why), "process %d: %s (%s)", rank,
                         strata_status_name(rc), strata_last_error());
        if (rt)
                strata_teardown(rt);
        return rc == STRATA_OK ? 0 : 1;
}

/*
 * Two processes of one device under strategy @p kind (spawn: ddp over a job of processes;
 * zero1, zero2: their shards one a process) are ddp on two devices: every model's parameters,
 * and under zero1 and zero2 every model's checkpoint, which process 0 writes from the job's
 * shards, holds ddp's bytes after the header (which names the strategy).
 */
static void spawned_are_ddp(enum strata_strategy_kind kind)
{
        static float ddp[3][NP], ref[NP];
        static unsigned char a[1 << 17], d[1 << 17];
        struct strata_spawn_result res;
        struct strata_runtime *rt;
        struct strata_batch b;
        char path[128];
        size_t n[3];

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        snprintf(spawn_dir, sizeof(spawn_dir), "/tmp/strata-models-XXXXXX");
        cr_assert_not_null(mkdtemp(spawn_dir));
        three_init(&spawn_three, STRATA_STRATEGY_DDP, 2);
        spawn_three.r.cfg.device.bind = STRATA_BIND_NONE;
        rt = rig_open(&spawn_three.r.cfg);
        params_of(rt, 0, 0, ref);
        strata_loader_reset(&spawn_three.r.loader, spawn_three.r.idx, 256);
        for (int s = 0; s < 6; s++) {
                next(&spawn_three.r, &b);
                step_all(rt, &b, ref, 0);
        }
        for (int k = 0; k < 3; k++) {
                n[k] = params_of(rt, k, 0, ddp[k]);
                cr_assert_eq(strata_model_save_checkpoint(rt, k, spawn_ckpt("ddp", k, path,
                                                                            sizeof(path)),
                                                          NULL, 0),
                             STRATA_OK, "%s", strata_last_error());
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
        cr_assert_neq(shared, MAP_FAILED);
        memset(shared, 0, sizeof(*shared));
        spawn_three.r.cfg.strategy.kind = kind;
        spawn_three.r.cfg.strategy.devices = 1;
        spawn_three.r.cfg.device.timeout_s = 30.0;
        cr_assert_eq(strata_spawn(2, child, NULL, 60.0, NULL, 0, &res), STRATA_OK, "%s (%s)",
                     res.why, shared->why);
        for (int k = 0; k < 3; k++) {
                cr_assert_eq(shared->n[k], n[k]);
                for (int rank = 0; rank < 2; rank++)
                        cr_assert(!memcmp(shared->params[k][rank], ddp[k], n[k] * sizeof(float)),
                                  "model %d, process %d: not ddp's parameters", k, rank);
        }
        munmap(shared, sizeof(*shared));
        /* spawn's process 0 writes its own device's records; zero1 and zero2 gather each
         * device's into ddp's consolidated file */
        for (int k = 0; k < 3 && kind != STRATA_STRATEGY_SPAWN; k++) {
                long na = cli_slurp(spawn_ckpt("job", k, path, sizeof(path)), a, sizeof(a));
                long nd = cli_slurp(spawn_ckpt("ddp", k, path, sizeof(path)), d, sizeof(d));
                size_t h = sizeof(struct strata__ckpt_header);

                cr_assert_eq(na, nd, "model %d: the job's checkpoint holds %ld bytes, ddp's %ld",
                             k, na, nd);
                cr_assert_lt(nd, (long)sizeof(d));
                cr_assert_gt(nd, (long)h);
                cr_assert(!memcmp(a + h, d + h, (size_t)nd - h),
                          "model %d: the job's checkpoint is not ddp's after the header", k);
        }
        for (int k = 0; k < 3; k++) {
                unlink(spawn_ckpt("job", k, path, sizeof(path)));
                unlink(spawn_ckpt("ddp", k, path, sizeof(path)));
        }
        rmdir(spawn_dir);
}

Test(models, spawn_two_processes_are_ddp, .timeout = 120)
{
        spawned_are_ddp(STRATA_STRATEGY_SPAWN);
}

Test(models, zero1_two_processes_are_ddp, .timeout = 120)
{
        spawned_are_ddp(STRATA_STRATEGY_ZERO1);
}

Test(models, zero2_two_processes_are_ddp, .timeout = 120)
{
        spawned_are_ddp(STRATA_STRATEGY_ZERO2);
}

/* Exit 0 when strata_init() refused with STRATA_EINVAL; rank 0 returns the message. */
static int differ_child(int rank, int size, void *arg)
{
        struct strata_runtime *rt = NULL;
        const char *why;
        int rc;

        (void)size, (void)arg;
        if (rank == 1) /* another tau for the target */
                spawn_three.set.entry[1].tau = 0.5f;
        rc = strata_init(&rt, &spawn_three.r.cfg);
        if (rc == STRATA_OK) {
                strata_teardown(rt);
                return 2;
        }
        why = strata_last_error();
        strata_spawn_return(why, strlen(why) + 1);
        return rc == STRATA_EINVAL ? 0 : 3;
}

/* Processes whose other models differ are refused at init, the fingerprint naming them. */
Test(models, spawn_other_models_differ_refused, .timeout = 120)
{
        static char why[1024];
        struct strata_spawn_result res;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        three_init(&spawn_three, STRATA_STRATEGY_SPAWN, 1);
        spawn_three.r.cfg.device.bind = STRATA_BIND_NONE;
        spawn_three.r.cfg.device.timeout_s = 5.0;
        memset(why, 0, sizeof(why));
        cr_assert_eq(strata_spawn(2, differ_child, NULL, 10.0, why, sizeof(why) - 1, &res),
                     STRATA_OK, "%s (rank %d: %s)", strata_last_error(), res.failed_rank,
                     res.why);
        cr_assert_not_null(strstr(why, "process 1 has modules"), "%s", why);
        cr_assert_not_null(strstr(why, "+ 2 models #"), "%s", why);
}
