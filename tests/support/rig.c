/* The shared small-model rig. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/rig.h"
#include "tools/heapcount.h"

static _Alignas(4096) unsigned char data_mem[1 << 16];

void rig_init(struct rig *r, int bn)
{
        struct strata_config c = STRATA_CONFIG_INIT;
        int n = 0;

        memset(r, 0, sizeof(*r));
        r->mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        if (bn)
                r->mods[n++] = (struct strata_module){ .ops = &strata_batchnorm1d };
        r->mods[n++] = (struct strata_module){ .ops = &strata_relu };
        r->mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model = (struct strata_model){ .in_features = RIG_IN, .nmodules = n,
                                          .modules = r->mods };
        c.model = &r->model;
        c.batch = RIG_BATCH;
        c.classes = RIG_CLASSES;
        c.seed = 11;
        r->cfg = c;
        cr_assert_eq(strata_arena_init(&r->data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&r->ds, &r->data, 256, RIG_IN, RIG_CLASSES, 5),
                     STRATA_OK);
        cr_assert_eq(strata_loader_init(&r->loader, &r->data, &r->ds, RIG_BATCH, 1), STRATA_OK);
        for (uint32_t i = 0; i < 256; i++)
                r->idx[i] = (i * 37u) % 256u;
}

void rig_init_regression(struct rig *r, const struct strata_loss_ops *loss)
{
        rig_init(r, 0);
        r->mods[2].out = RIG_OUT;
        r->model.loss = loss;
        r->cfg.classes = RIG_OUT;
        cr_assert_eq(strata_arena_init(&r->data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic_regression(&r->ds, &r->data, 256, RIG_IN, RIG_OUT,
                                                         5),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_loader_init(&r->loader, &r->data, &r->ds, RIG_BATCH, 1), STRATA_OK);
}

void rig_init_conv(struct rig *r)
{
        int in = RIG_CONV_HW * RIG_CONV_HW;

        rig_init(r, 0);
        r->mods[0] = (struct strata_module){ .ops = &strata_conv2d, .out = 4, .kernel = { 3 },
                                             .padding = { 1 },
                                             .padding_mode = STRATA_PAD_CIRCULAR };
        r->model.in_features = in;
        r->model.in_dims = (struct strata_dims){ 1, 2, { RIG_CONV_HW, RIG_CONV_HW } };
        cr_assert_eq(strata_arena_init(&r->data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&r->ds, &r->data, 256, in, RIG_CLASSES, 5),
                     STRATA_OK);
        cr_assert_eq(strata_loader_init(&r->loader, &r->data, &r->ds, RIG_BATCH, 1), STRATA_OK);
}

void rig_plan_refused(const struct rig *r, int status, const char *what, const char *needle)
{
        struct strata_plan_info pl;

        cr_assert_eq(strata_plan(&r->cfg, &pl), status, "%s was not refused with %s", what,
                     strata_strerror(status));
        cr_assert_not_null(strstr(strata_last_error(), needle), "%s: %s", what,
                           strata_last_error());
}

void rig_init_full(struct rig *r)
{
        rig_init(r, 1);
        r->mods[4] = r->mods[3];
        r->mods[3] = (struct strata_module){ .ops = &strata_dropout, .p = 0.25f };
        r->model.nmodules = 5;
}

struct strata_runtime *rig_open(const struct strata_config *c)
{
        struct strata_runtime *rt = NULL;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

void rig_steps(struct rig *r, struct strata_runtime *rt, int steps, struct strata_batch *last)
{
        struct strata_batch b;

        strata_loader_reset(&r->loader, r->idx, 256);
        for (int s = 0; s < steps; s++) {
                if (!strata_loader_next(&r->loader, &b)) {
                        strata_loader_reset(&r->loader, r->idx, 256);
                        cr_assert(strata_loader_next(&r->loader, &b));
                }
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                             strata_last_error());
        }
        if (last)
                *last = b;
}

void rig_train(struct rig *r, int steps, float *out, size_t n)
{
        rig_train_cfg(r, &r->cfg, steps, out, n);
}

struct strata_config rig_cfg(const struct rig *r, enum strata_strategy_kind kind, int devices,
                             int sync_bn)
{
        struct strata_config c = r->cfg;

        c.strategy.kind = kind;
        c.strategy.devices = devices;
        c.strategy.sync_bn = sync_bn;
        if (sync_bn && kind == STRATA_STRATEGY_DP)
                cr_assert_eq(strata_patch_replication_callback(&c), STRATA_OK);
        return c;
}

struct strata_config rig_default_mlp(enum strata_strategy_kind kind, int devices)
{
        static struct strata_module mods[5];
        static struct strata_model m;
        struct strata_config c = STRATA_CONFIG_INIT;

        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 256 };
        mods[1] = (struct strata_module){ .ops = &strata_relu };
        mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 128 };
        mods[3] = (struct strata_module){ .ops = &strata_relu };
        mods[4] = (struct strata_module){ .ops = &strata_linear, .out = 10 };
        m = (struct strata_model){ .in_features = 784, .nmodules = 5, .modules = mods };
        c.model = &m;
        c.batch = 128;
        c.classes = 10;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.strategy.kind = kind;
        c.strategy.devices = devices;
        return c;
}

double rig_rel_diff(const float *a, const float *b, size_t n)
{
        double worst = 0.0;

        for (size_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));

                worst = d > worst ? d : worst;
        }
        return worst;
}

void rig_train_cfg(struct rig *r, const struct strata_config *cfg, int steps, float *out,
                   size_t n)
{
        struct strata_runtime *rt;
        const float *p;
        size_t np;

        cr_assert_eq(strata_init(&rt, cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, steps, NULL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_eq(np, n);
        memcpy(out, p, n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

void rig_equivalence(struct rig *r, enum strata_strategy_kind kind, int max_devices, size_t np,
                     int steps)
{
        static float ref[4096], a[4096], b[4096];

        cr_assert_leq(np, 4096);
        rig_train(r, steps, ref, np);
        for (int n = 1; n <= max_devices; n++) {
                struct strata_config c = rig_cfg(r, kind, n, 0);
                double d;

                rig_train_cfg(r, &c, steps, a, np);
                rig_train_cfg(r, &c, steps, b, np);
                cr_assert_eq(memcmp(a, b, np * sizeof(float)), 0, "%d devices: runs differ", n);
                d = rig_rel_diff(a, ref, np);
                if (n == 1)
                        cr_assert_eq(memcmp(a, ref, np * sizeof(float)), 0,
                                     "1 device must be bitwise single");
                else
                        cr_assert_leq(d, 1e-5, "%d devices: relative difference %g", n, d);
        }
}

static void write_f32(const char *path, const float *v, size_t n)
{
        FILE *f = fopen(path, "wb");

        cr_assert_not_null(f, "%s", path);
        cr_assert_eq(fwrite(v, sizeof(float), n, f), n);
        fclose(f);
}

void rig_pytorch_script(const char *script, const char *st, const float *x, int in,
                        const float *out, int outputs, int rows)
{
        char xin[512], lg[512], cmd[2048], line[256];
        int ok = 0;
        FILE *py;

        snprintf(xin, sizeof(xin), "%s.x.f32", st);
        snprintf(lg, sizeof(lg), "%s.out.f32", st);
        write_f32(xin, x, (size_t)rows * in);
        write_f32(lg, out, (size_t)rows * outputs);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/%s %s %s %s %d 2>&1",
                 STRATA_SOURCE_DIR, script, st, xin, lg, rows);
        py = popen(cmd, "r");
        cr_assert_not_null(py);
        while (fgets(line, sizeof(line), py)) {
                cr_log_info("%s", line);
                ok |= strncmp(line, "match", 5) == 0;
        }
        cr_assert_eq(pclose(py), 0, "PyTorch's predictions differ (see the log)");
        cr_assert(ok);
        remove(xin);
        remove(lg);
}

void rig_pytorch_matches(const char *st, const float *x, const float *out, int rows)
{
        rig_pytorch_script("load_safetensors.py", st, x, RIG_IN, out, RIG_CLASSES, rows);
}

void rig_no_heap(void (*setup)(struct rig *), enum strata_strategy_kind kind, int n,
                 enum strata_precision prec, int invariant)
{
        static float logits[RIG_BATCH * RIG_CLASSES];
        struct strata_runtime *rt;
        struct strata_memory_info mi;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        long calls;

        setup(&r);
        r.cfg.strategy.kind = kind;
        r.cfg.strategy.devices = n;
        r.cfg.strategy.invariant = invariant;
        r.cfg.precision.kind = prec;
        rt = rig_open(&r.cfg);
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_heapcount_start();
        while (strata_loader_next(&r.loader, &b)) {
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK);
                cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES),
                             STRATA_OK);
        }
        calls = strata_heapcount_stop();
        if (calls != -1) /* -1: a sanitizer owns malloc in this build, nothing counted */
                cr_assert_eq(calls, 0, "strategy %d on %d: %ld heap calls during training",
                             kind, n, calls);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "strategy %d: used %zu bytes, planned %zu", kind,
                     mi.used, mi.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

void rig_two_init(struct rig_two *t, const struct strata_loss_ops *loss)
{
        rig_init_regression(&t->r, loss);
        t->mods1[0] = (struct strata_module){ .ops = &strata_linear, .out = 8 };
        t->mods1[1] = (struct strata_module){ .ops = &strata_tanh };
        t->mods1[2] = (struct strata_module){ .ops = &strata_linear, .out = RIG_OUT };
        t->m1 = (struct strata_model){ .in_features = RIG_IN, .nmodules = 3,
                                       .modules = t->mods1, .loss = &strata_mse };
        t->o1 = (struct strata_optim)STRATA_OPTIM_INIT;
        t->o1.kind = STRATA_OPTIM_ADAMW;
        t->o1.lr = 0.01f;
        t->set = (struct strata_models)STRATA_MODELS_INIT;
        cr_assert_eq(strata_models_add(&t->set, &t->m1, RIG_OUT, &t->o1, NULL), STRATA_OK);
        t->r.cfg.models = &t->set;
}

static float first_x[RIG_BATCH * RIG_IN], first_t[RIG_BATCH * RIG_OUT];

struct strata_batch rig_first_batch(struct rig *r, float v)
{
        struct strata_batch b;

        strata_loader_reset(&r->loader, r->idx, 256);
        cr_assert(strata_loader_next(&r->loader, &b));
        memcpy(first_x, b.x, sizeof(first_x));
        memcpy(first_t, b.t, sizeof(first_t));
        if (v != 0.0f)
                first_t[(RIG_BATCH - 1) * RIG_OUT] = v;
        b.x = first_x;
        b.t = first_t;
        return b;
}
