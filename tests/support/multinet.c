/* The two-input, two-output model of the tests (tests/support/multinet.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/multinet.h"
#include "tools/heapcount.h"

static const struct strata_module mods[MULTINET_MODULES] = {
        { .ops = &strata_linear, .out = 5 },                            /* 0: input 0 */
        { .ops = &strata_tanh },                                        /* 1 */
        { .ops = &strata_linear, .out = 4, .from = -2, .branch = 1 },   /* 2: input 1 */
        { .ops = &strata_sigmoid },                                     /* 3 */
        { .ops = &strata_concat, .from = 1 },                           /* 4: 4 + 5 */
        { .ops = &strata_linear, .out = 6 },                            /* 5 */
        { .ops = &strata_tanh },                                        /* 6 */
        { .ops = &strata_add, .from = -1 },                             /* 7: + input 0 */
        { .ops = &strata_linear, .out = MULTINET_OUT0 },                /* 8: output 0 */
        { .ops = &strata_linear, .out = MULTINET_OUT1, .from = 7, .branch = 1 }, /* 9: 1 */
};

const struct strata_model multinet_model = {
        .in_features = MULTINET_IN, .nmodules = MULTINET_MODULES, .modules = mods,
        .ninputs = 2, .inputs = { { .features = MULTINET_IN0 }, { .features = MULTINET_IN1 } },
        .noutputs = 2,
        .outputs = { { .module = 8, .loss = &strata_mse, .weight = MULTINET_W0 },
                     { .module = 9, .loss = &strata_bce_with_logits, .weight = MULTINET_W1 } },
};

static const struct strata_module ce_mods[MULTINET_MODULES] = {
        { .ops = &strata_linear, .out = 5 },
        { .ops = &strata_tanh },
        { .ops = &strata_linear, .out = 4, .from = -2, .branch = 1 },
        { .ops = &strata_sigmoid },
        { .ops = &strata_concat, .from = 1 },
        { .ops = &strata_linear, .out = 6 },
        { .ops = &strata_tanh },
        { .ops = &strata_add, .from = -1 },
        { .ops = &strata_linear, .out = MULTINET_OUT0 },
        { .ops = &strata_linear, .out = MULTINET_CE_CLASSES, .from = 7, .branch = 1 },
};

const struct strata_model multinet_ce_model = {
        .in_features = MULTINET_IN, .nmodules = MULTINET_MODULES, .modules = ce_mods,
        .ninputs = 2, .inputs = { { .features = MULTINET_IN0 }, { .features = MULTINET_IN1 } },
        .noutputs = 2,
        .outputs = { { .module = 8, .loss = &strata_mse, .weight = MULTINET_W0 },
                     { .module = 9, .loss = &strata_softmax_cross_entropy,
                       .weight = MULTINET_W1 } },
};

static float xs[MULTINET_ROWS * MULTINET_IN], ts[MULTINET_ROWS * MULTINET_T];
static float tce[MULTINET_ROWS * MULTINET_CE_T];

static void data_once(void)
{
        static int done;

        if (done)
                return;
        for (int i = 0; i < MULTINET_ROWS * MULTINET_IN; i++)
                xs[i] = sinf(0.37f * (float)i + 0.1f);
        for (int i = 0; i < MULTINET_ROWS; i++)
                for (int j = 0; j < MULTINET_T; j++) {
                        float v = cosf(0.53f * (float)(i * MULTINET_T + j));

                        ts[i * MULTINET_T + j] = j < MULTINET_OUT0 ? v : 0.5f + 0.5f * v;
                        if (j < MULTINET_OUT0)
                                tce[i * MULTINET_CE_T + j] = v;
                }
        for (int i = 0; i < MULTINET_ROWS; i++) /* a class the inputs decide, roughly */
                tce[i * MULTINET_CE_T + MULTINET_OUT0] =
                        (float)((xs[i * MULTINET_IN] > 0.0f) +
                                2 * (xs[i * MULTINET_IN + 7] > 0.0f));
        done = 1;
}

const float *multinet_x(int i)
{
        data_once();
        return xs + (size_t)i * MULTINET_IN;
}

const float *multinet_t(int i)
{
        data_once();
        return ts + (size_t)i * MULTINET_T;
}

struct strata_batch multinet_batch(int first, int rows)
{
        return (struct strata_batch){ .x = multinet_x(first), .rows = rows, .dim = MULTINET_IN,
                                      .t = multinet_t(first), .tdim = MULTINET_T };
}

const float *multinet_ce_t(int i)
{
        data_once();
        return tce + (size_t)i * MULTINET_CE_T;
}

struct strata_batch multinet_ce_batch(int first, int rows)
{
        return (struct strata_batch){ .x = multinet_x(first), .rows = rows, .dim = MULTINET_IN,
                                      .t = multinet_ce_t(first), .tdim = MULTINET_CE_T };
}

int multinet_np(const struct strata_model *m)
{
        return m == &multinet_ce_model ? MULTINET_CE_NP : MULTINET_NP;
}

struct strata_config multinet_cfg(enum strata_strategy_kind s, int devices)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &multinet_model;
        c.batch = MULTINET_BATCH;
        c.classes = MULTINET_T;
        c.seed = 9;
        c.optim.lr = 0.05f;
        c.strategy.kind = s;
        c.strategy.devices = devices;
        c.device.bind = STRATA_BIND_NONE;
        return c;
}

void multinet_params(struct strata_runtime *rt, const struct strata_config *c,
                     struct multinet_run *out)
{
        size_t at = 0, len = 0, n, np = (size_t)multinet_np(c->model);
        const float *p;

        if (c->strategy.kind != STRATA_STRATEGY_FSDP) {
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                cr_assert_geq(n, np, "zero1 and zero2 pad to whole shards");
                memcpy(out->p, p, np * sizeof(float));
                return;
        }
        for (int d = 0; d < c->strategy.devices && at < np; d++, at += len) {
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                len = d == 0 ? n : len;
                memcpy(out->p + at, p, sizeof(float) * (at + n > np ? np - at : n));
        }
}

void multinet_steps_of(const struct strata_model *model, struct strata_runtime *rt, int from,
                       int to, struct multinet_run *out)
{
        static float pred[MULTINET_BATCH * MULTINET_CE_OUT];
        int ce = model == &multinet_ce_model, width = ce ? MULTINET_CE_OUT : MULTINET_T;
        struct strata_metrics m, e;

        cr_assert_leq(to, MULTINET_STEPS_MAX);
        data_once();
        for (int s = from; s < to; s++) {
                int first = (s * MULTINET_BATCH) % MULTINET_ROWS;
                struct strata_batch b = ce ? multinet_ce_batch(first, MULTINET_BATCH)
                                           : multinet_batch(first, MULTINET_BATCH);

                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "step %d: %s", s,
                             strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &e), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_predict_step(rt, &b, pred, (size_t)MULTINET_BATCH * width),
                             STRATA_OK, "%s", strata_last_error());
                out->loss[s] = m.loss;
                out->model_correct[s] = m.correct;
                cr_assert_eq(m.noutputs, 2);
                cr_assert_eq(e.noutputs, 2);
                for (int k = 0; k < 2; k++) {
                        out->own[s][k] = m.losses[k];
                        out->own[s][2 + k] = e.losses[k];
                        out->correct[s][k] = m.corrects[k];
                        out->correct[s][2 + k] = e.corrects[k];
                }
        }
}

void multinet_steps(struct strata_runtime *rt, int from, int to, struct multinet_run *out)
{
        multinet_steps_of(&multinet_model, rt, from, to, out);
}

void multinet_train(const struct strata_config *c, int steps, struct multinet_run *out)
{
        struct strata_memory_info mi;
        struct strata_runtime *rt;

        memset(out, 0, sizeof(*out));
        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        strata_heapcount_start();
        multinet_steps_of(c->model, rt, 0, steps, out);
        out->heap_calls = strata_heapcount_stop();
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "used %zu bytes, planned %zu", mi.used, mi.planned);
        multinet_params(rt, c, out);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
