/*
 * An inference-only runtime (cfg.inference_only): its plan holds no gradients, optimizer state
 * or activation gradients (the default MLP with AdamW at batch 1 plans less by at least those
 * bytes) and is exactly what it uses; weights load from an export and from a checkpoint of
 * another optimizer; predict and eval give bitwise a training runtime's outputs and metrics
 * for the same weights (a chain with BatchNorm and Dropout, a convolution whose ReLU runs in
 * its loop, a skip connection), with no heap call; every training call is refused with
 * STRATA_EBADSTATE, a message, and nothing changed; configurations it cannot run are refused.
 * Its Linears' weights packed once (decision 0078) give the same predictions at batch 1 and 16.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/drivers.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define NVAL 4096

static char dir[64], st[128], ck[128];

static void dir_init(void)
{
        snprintf(dir, sizeof(dir), "/tmp/strata-infer-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/w.safetensors", dir);
        snprintf(ck, sizeof(ck), "%s/run.ckpt", dir);
}

static void dir_fini(void)
{
        char cmd[160];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}

/* Every group of device 0's model, values concatenated into @p out; their count. */
static size_t all_values(struct strata_runtime *rt, float *out)
{
        struct strata_param p;
        size_t n = 0, k;

        for (int g = 0; strata_parameter(rt, 0, g, &p) == STRATA_OK; g++) {
                cr_assert_eq(strata_parameter_copy(rt, 0, g, out + n, NVAL - n, &k), STRATA_OK);
                n += k;
        }
        return n;
}

/* What an epoch of predict and eval gave. */
struct outputs {
        float logits[256 * RIG_CLASSES];
        double loss[16];
        int correct[16];
};

/* An epoch of @p r's data through predict and eval on @p rt; *calls gets the heap calls. */
static void epoch(struct rig *r, struct strata_runtime *rt, struct outputs *o, long *calls)
{
        struct strata_metrics m;
        struct strata_batch b;
        int k = 0;

        strata_loader_reset(&r->loader, r->idx, 256);
        strata_heapcount_start();
        while (strata_loader_next(&r->loader, &b)) {
                cr_assert_eq(strata_predict_step(rt, &b, o->logits + k * RIG_BATCH * r->cfg.classes,
                                                 (size_t)RIG_BATCH * r->cfg.classes),
                             STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
                o->loss[k] = m.loss;
                o->correct[k++] = m.correct;
        }
        *calls = strata_heapcount_stop();
}

/*
 * @p r trained 5 steps and exported (or checkpointed, @p ckpt); an inference runtime of the
 * same configuration loads it: its epoch is bitwise the training runtime's, without heap
 * calls, and it uses its plan to the byte.
 */
static void same_outputs(struct rig *r, int ckpt)
{
        static struct outputs want, got;
        struct strata_weights_info info;
        struct strata_memory_info mi;
        struct strata_plan_info pt, pi;
        struct strata_runtime *rt;
        struct strata_config c = r->cfg;
        long calls;

        dir_init();
        rt = rig_open(&r->cfg);
        rig_steps(r, rt, 5, NULL);
        if (ckpt)
                cr_assert_eq(strata_save_checkpoint(rt, ck, NULL, 0), STRATA_OK, "%s",
                             strata_last_error());
        else
                cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s",
                             strata_last_error());
        epoch(r, rt, &want, &calls);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        c.inference_only = 1;
        if (ckpt) /* the checkpoint's optimizer is not this one's: weights only */
                c.optim.kind = c.optim.kind == STRATA_OPTIM_ADAMW ? STRATA_OPTIM_SGD
                                                                  : STRATA_OPTIM_ADAMW;
        cr_assert_eq(strata_plan(&r->cfg, &pt), STRATA_OK);
        cr_assert_eq(strata_plan(&c, &pi), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(pi.optimizer_bytes, 0);
        cr_assert_lt(pi.bytes, pt.bytes);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_weights(rt, ckpt ? ck : st, STRATA_WEIGHTS_STRICT, &info),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_gt(info.loaded, 0);
        epoch(r, rt, &got, &calls);
        cr_assert(calls <= 0, "%ld heap calls during predict and eval", calls);
        cr_assert_eq(memcmp(want.logits, got.logits, sizeof(want.logits)), 0,
                     "predictions differ from the training runtime's");
        cr_assert_eq(memcmp(want.loss, got.loss, sizeof(want.loss)), 0, "eval losses differ");
        cr_assert_eq(memcmp(want.correct, got.correct, sizeof(want.correct)), 0);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "used %zu bytes, planned %zu", mi.used, mi.planned);
        cr_assert_eq(mi.planned, pi.bytes);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(inference_only, chain_with_batchnorm_and_dropout, .timeout = 60)
{
        struct rig r;

        rig_init_full(&r);
        same_outputs(&r, 0);
}

Test(inference_only, convolution_fused, .timeout = 60)
{
        struct rig r;

        rig_init_conv(&r);
        same_outputs(&r, 0);
}

Test(inference_only, skip_connection, .timeout = 60)
{
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_model_parse("linear(16) relu linear(16) add(from=1) relu linear(4)",
                                        r.mods, 6, &r.model), STRATA_OK, "%s",
                     strata_last_error());
        same_outputs(&r, 0);
}

Test(inference_only, weights_of_another_optimizers_checkpoint, .timeout = 60)
{
        struct rig r;

        rig_init(&r, 1);
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        r.cfg.optim.momentum = 0.0f;
        r.cfg.optim.lr = 1e-3f;
        same_outputs(&r, 1);
}

/*
 * The default MLP with AdamW at batch 1 (issue 54): the inference plan holds no optimizer
 * state, and saves at least the optimizer state, the gradients and the activation gradients
 * a training plan holds; the region it plans is the one init needs, to the byte.
 */
Test(inference_only, default_mlp_batch_1_plan, .timeout = 60)
{
        struct strata_config t = rig_default_mlp(STRATA_STRATEGY_SINGLE, 1), c;
        struct strata_plan_info pt, pi;
        struct strata_memory_info mi;
        struct strata_runtime *rt;
        size_t grads, dbuf, packed;
        static unsigned char region[4 << 20];
        const struct strata_kernel_ops *k = strata__cpu_driver.kernels;

        t.batch = 1;
        c = t;
        c.inference_only = 1;
        cr_assert_eq(strata_plan(&t, &pt), STRATA_OK);
        cr_assert_eq(strata_plan(&c, &pi), STRATA_OK, "%s", strata_last_error());
        grads = pt.params * sizeof(float);
        dbuf = 2 * 784 * sizeof(float); /* two rows of the widest layer: the input */
        /* the Linears' weights packed once (decision 0078): what the inference plan adds */
        packed = sizeof(float) * (k->gemm_pack_floats(256, 784) +
                                  k->gemm_pack_floats(128, 256) + k->gemm_pack_floats(10, 128));
        cr_log_info("default MLP, AdamW, batch 1: training plan %zu bytes (optimizer %zu), "
                    "inference plan %zu", pt.bytes, pt.optimizer_bytes, pi.bytes);
        cr_assert_eq(pi.optimizer_bytes, 0);
        cr_assert_gt(pt.optimizer_bytes, 0);
        cr_assert_eq(pi.params, pt.params);
        cr_assert_geq(pi.per_device, packed + pi.params * sizeof(float));
        cr_assert_leq(pi.per_device + pt.optimizer_bytes + grads + dbuf, pt.per_device + packed,
                      "inference %zu, training %zu per device", pi.per_device, pt.per_device);
        cr_assert_leq(pi.bytes + pi.align, sizeof(region));
        c.memory = region;
        c.memory_size = pi.bytes + (pi.align - (uintptr_t)region % pi.align) % pi.align;
        c.memory_size -= 1;
        cr_assert_eq(strata_init(&rt, &c), STRATA_ENOMEM, "one byte short is refused");
        c.memory_size += 1;
        rt = rig_open(&c);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Every call that trains or carries training state: refused, nothing changed. */
Test(inference_only, training_calls_refused, .timeout = 60)
{
        static float before[NVAL], after[NVAL], l0[RIG_BATCH * RIG_CLASSES],
                l1[RIG_BATCH * RIG_CLASSES];
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        size_t n;

        dir_init();
        rig_init(&r, 1);
        r.cfg.inference_only = 1;
        rt = rig_open(&r.cfg);
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_predict_step(rt, &b, l0, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        n = all_values(rt, before);
        {
                struct strata_param p;
                const float *state;
                size_t ns = 1;

                cr_assert_eq(strata_parameter(rt, 0, 0, &p), STRATA_OK);
                cr_assert_null(p.grad, "no gradient");
                cr_assert_eq(p.opt_slots, 0, "no optimizer slot");
                cr_assert_eq(strata_optimizer_state(rt, 0, &state, &ns, &(uint64_t){ 0 }),
                             STRATA_OK);
                cr_assert_eq(ns, 0, "no optimizer state");
        }
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "train_step: this runtime is inference "
                                  "only"), "%s", strata_last_error());
        cr_assert_eq(strata_end_accumulation_window(rt), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "inference only"));
        cr_assert_eq(strata_save_checkpoint(rt, ck, NULL, 0), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "save_checkpoint"));
        cr_assert_neq(access(ck, F_OK), 0, "no checkpoint written");
        cr_assert_eq(strata_load_checkpoint(rt, ck, NULL, 0, NULL, NULL), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "load_weights"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(all_values(rt, after), n);
        cr_assert_eq(memcmp(before, after, n * sizeof(float)), 0, "parameters unchanged");
        cr_assert_eq(strata_predict_step(rt, &b, l1, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        cr_assert_eq(memcmp(l0, l1, sizeof(l0)), 0, "predicts as before");
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

/* What it cannot run is refused at plan and init, naming why. */
Test(inference_only, configurations_refused, .timeout = 60)
{
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        r.cfg.inference_only = 2;
        rig_plan_refused(&r, STRATA_EINVAL, "inference_only 2", "inference_only 2: 0 or 1");
        r.cfg.inference_only = 1;
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.devices = 2;
        rig_plan_refused(&r, STRATA_ENOTSUP, "ddp", "strategy single");
        r.cfg.strategy.kind = STRATA_STRATEGY_SINGLE;
        r.cfg.strategy.devices = 1;
        r.cfg.precision.kind = STRATA_PRECISION_BF16_MIXED;
        rig_plan_refused(&r, STRATA_ENOTSUP, "bf16-mixed", "precision 32");
        r.cfg.precision.kind = STRATA_PRECISION_32;
        r.cfg.strategy.invariant = 1;
        rig_plan_refused(&r, STRATA_ENOTSUP, "invariant", "invariant mode");
        r.cfg.strategy.invariant = 0;
        {
                static struct strata_models more = STRATA_MODELS_INIT;

                cr_assert_eq(strata_models_add_target(&more, 0, 0.5f, NULL), STRATA_OK);
                r.cfg.models = &more;
                rig_plan_refused(&r, STRATA_ENOTSUP, "cfg.models", "declares 1 more");
                r.cfg.models = NULL;
        }
        r.cfg.strategy.invariant = 1;
        c = r.cfg;
        c.strategy.invariant = 0;
        c.inference_only = 0;
        cr_assert_eq(strata_config_set(&c, "inference_only", 1), STRATA_OK);
        cr_assert_eq(c.inference_only, 1, "settable by name");
        cr_assert_eq(strata_init(&(struct strata_runtime *){ NULL }, &r.cfg), STRATA_ENOTSUP);
}

/* @p rows rows of @p x through @p rt's predict into @p out. */
static void predict_rows(struct strata_runtime *rt, const float *x, int rows, float *out)
{
        struct strata_batch b = { .x = x, .rows = rows, .dim = 784 };

        cr_assert_eq(strata_predict_step(rt, &b, out, (size_t)rows * 10), STRATA_OK, "%s",
                     strata_last_error());
}

/*
 * The default MLP at batch 1 and 16 (issue 54, decision 0078): the inference runtime's
 * Linears read their weights packed once, a training runtime's pack them per call; the
 * predictions are bitwise the same, with the initial weights (packed at connect) and after
 * load_weights brings another run's (packed anew: the old packing would give other values).
 */
Test(inference_only, packed_weights_batch_1_and_16, .timeout = 60)
{
        struct strata_config t = rig_default_mlp(STRATA_STRATEGY_SINGLE, 1), c, o;
        static float x[16 * 784], want[16 * 10], got[16 * 10];
        struct strata_runtime *tr, *ir;
        static const int rows[] = { 1, 16 };

        for (int i = 0; i < 16 * 784; i++)
                x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        t.batch = 16;
        c = t;
        c.inference_only = 1;
        o = t;
        o.seed = t.seed + 1;
        dir_init();
        tr = rig_open(&t);
        ir = rig_open(&c);
        for (size_t r = 0; r < 2; r++) {
                predict_rows(tr, x, rows[r], want);
                predict_rows(ir, x, rows[r], got);
                cr_assert_eq(memcmp(want, got, sizeof(float) * 10 * (size_t)rows[r]), 0,
                             "initial weights, %d rows", rows[r]);
        }
        cr_assert_eq(strata_teardown(tr), STRATA_OK);
        tr = rig_open(&o);
        cr_assert_eq(strata_export_safetensors(tr, st), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_load_weights(ir, st, STRATA_WEIGHTS_STRICT, NULL), STRATA_OK, "%s",
                     strata_last_error());
        for (size_t r = 0; r < 2; r++) {
                predict_rows(tr, x, rows[r], want);
                predict_rows(ir, x, rows[r], got);
                cr_assert_eq(memcmp(want, got, sizeof(float) * 10 * (size_t)rows[r]), 0,
                             "loaded weights, %d rows", rows[r]);
        }
        cr_assert_eq(strata_teardown(tr), STRATA_OK);
        cr_assert_eq(strata_teardown(ir), STRATA_OK);
        dir_fini();
}
