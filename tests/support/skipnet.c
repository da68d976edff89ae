/* Graph models with skip connections for the strategy tests (tests/support/skipnet.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/skipnet.h"
#include "tools/heapcount.h"

#define CONV(c) { .ops = &strata_conv2d, .out = (c), .kernel = { 3 }, .padding = { 1 } }

static const struct strata_module resnet[] = {
        CONV(4), { .ops = &strata_relu },                                       /* 0, 1 */
        CONV(4), { .ops = &strata_relu }, CONV(4), { .ops = &strata_add, .from = 1 }, /* 2-5 */
        { .ops = &strata_relu },                                                /* 6 */
        CONV(4), { .ops = &strata_relu }, CONV(4), { .ops = &strata_add, .from = 6 }, /* 7-10 */
        { .ops = &strata_relu }, { .ops = &strata_flatten },                    /* 11, 12 */
        { .ops = &strata_linear, .out = SKIPNET_CLASSES },                      /* 13 */
};

static const struct strata_module unet[] = {
        CONV(4), { .ops = &strata_relu }, { .ops = &strata_maxpool2d, .kernel = { 2 } }, /* 0-2 */
        CONV(8), { .ops = &strata_relu }, { .ops = &strata_upsample },          /* 3-5 */
        { .ops = &strata_concat, .from = 1 }, CONV(4), { .ops = &strata_relu }, /* 6-8 */
        { .ops = &strata_flatten }, { .ops = &strata_linear, .out = SKIPNET_CLASSES }, /* 9, 10 */
};

static const struct strata_module cnn[] = {
        CONV(4), { .ops = &strata_relu }, { .ops = &strata_maxpool2d, .kernel = { 2 } }, /* 0-2 */
        CONV(8), { .ops = &strata_relu }, { .ops = &strata_maxpool2d, .kernel = { 2 } }, /* 3-5 */
        { .ops = &strata_flatten }, { .ops = &strata_linear, .out = SKIPNET_CLASSES }, /* 6, 7 */
};

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct strata_model models[] = {
        [SKIPNET_RESNET] = { .in_features = SKIPNET_IN, .nmodules = N(resnet), .modules = resnet,
                             .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } },
        [SKIPNET_UNET] = { .in_features = SKIPNET_IN, .nmodules = N(unet), .modules = unet,
                           .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } },
        [SKIPNET_CNN] = { .in_features = SKIPNET_IN, .nmodules = N(cnn), .modules = cnn,
                          .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } },
};

/*
 * conv(1->4) 40, conv(4->4) 148 each, conv(4->8) 296, conv(12->4) 436, linear(144->4) 580,
 * linear(8->4) 36 (the CNN's 6 x 6 pooled to 3 x 3, then to 1 x 1)
 */
static const size_t nparams[] = { [SKIPNET_RESNET] = 40 + 4 * 148 + 580,
                                  [SKIPNET_UNET] = 40 + 296 + 436 + 580,
                                  [SKIPNET_CNN] = 40 + 296 + 36 };

static _Alignas(4096) unsigned char data_mem[1 << 16];
static struct strata_arena data;
static struct strata_dataset ds;
static struct strata_loader loader;
static uint32_t order[SKIPNET_SAMPLES];

static void data_once(void)
{
        static int done;

        if (done)
                return;
        cr_assert_eq(strata_arena_init(&data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&ds, &data, SKIPNET_SAMPLES, SKIPNET_IN,
                                              SKIPNET_CLASSES, 7),
                     STRATA_OK);
        cr_assert_eq(strata_loader_init(&loader, &data, &ds, SKIPNET_BATCH, 1), STRATA_OK);
        for (uint32_t i = 0; i < SKIPNET_SAMPLES; i++)
                order[i] = (i * 37u) % SKIPNET_SAMPLES;
        done = 1;
}

const struct strata_model *skipnet_model(enum skipnet_kind kind, size_t *np)
{
        if (np)
                *np = nparams[kind];
        return &models[kind];
}

struct strata_config skipnet_cfg(enum skipnet_kind kind, enum strata_strategy_kind s,
                                 int devices)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &models[kind];
        c.batch = SKIPNET_BATCH;
        c.classes = SKIPNET_CLASSES;
        c.seed = 5;
        c.strategy.kind = s;
        c.strategy.devices = devices;
        c.device.bind = STRATA_BIND_NONE;
        return c;
}

void skipnet_steps(struct strata_runtime *rt, int from, int to, struct skipnet_run *out)
{
        static float logits[SKIPNET_BATCH * SKIPNET_CLASSES];
        struct strata_metrics m, e;
        struct strata_batch b;

        cr_assert_leq(to, SKIPNET_STEPS_MAX);
        data_once();
        strata_loader_reset(&loader, order, SKIPNET_SAMPLES);
        for (int s = 0; s < to; s++) {
                if (!strata_loader_next(&loader, &b)) {
                        strata_loader_reset(&loader, order, SKIPNET_SAMPLES);
                        cr_assert(strata_loader_next(&loader, &b));
                }
                if (s < from)
                        continue;
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "step %d: %s", s,
                             strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &e), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_predict_step(rt, &b, logits, SKIPNET_BATCH * SKIPNET_CLASSES),
                             STRATA_OK, "%s", strata_last_error());
                out->loss[s] = m.loss;
        }
}

void skipnet_params(struct strata_runtime *rt, const struct strata_config *c,
                    struct skipnet_run *out)
{
        size_t np, at = 0, len = 0, n;
        const float *p;

        skipnet_model(c->model == &models[SKIPNET_UNET]  ? SKIPNET_UNET
                      : c->model == &models[SKIPNET_CNN] ? SKIPNET_CNN
                                                         : SKIPNET_RESNET, &np);
        out->np = np;
        if (c->strategy.kind != STRATA_STRATEGY_FSDP) {
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                cr_assert_geq(n, np, "zero1 and zero2 pad to whole shards");
                memcpy(out->p, p, np * sizeof(float));
                return;
        }
        for (int d = 0; d < c->strategy.devices && at < np; d++, at += len) { /* L apart */
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                len = d == 0 ? n : len;
                memcpy(out->p + at, p, sizeof(float) * (at + n > np ? np - at : n));
        }
}

void skipnet_train(const struct strata_config *c, int steps, struct skipnet_run *out)
{
        struct strata_memory_info mi;
        struct strata_runtime *rt;

        memset(out, 0, sizeof(*out));
        data_once();
        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        strata_heapcount_start();
        skipnet_steps(rt, 0, steps, out);
        out->heap_calls = strata_heapcount_stop();
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "used %zu bytes, planned %zu", mi.used, mi.planned);
        skipnet_params(rt, c, out);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
