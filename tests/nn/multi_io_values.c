/*
 * A model with two inputs and two outputs (tests/support/multinet.h) computes what the same
 * graph computed in double from its parameters gives: the evaluation loss is 0.7 times the
 * MSE of the first head plus 1.5 times the BCE of the second, each head's own loss (the
 * evaluation's and a training step's metrics) is that MSE and that BCE, and a prediction's
 * row is the first head's values then the second's. The line MULTINET_LINE is the same model.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/multinet.h"

#define ROWS 8

struct lin {
        const float *w, *b;
        int in, out;
};

/* The Linear of module @p layer: its weight and bias from the runtime's groups. */
static struct lin linear_of(struct strata_runtime *rt, int layer)
{
        struct lin l = { 0 };
        int groups;

        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        for (int g = 0; g < groups; g++) {
                struct strata_param p;

                cr_assert_eq(strata_parameter(rt, 0, g, &p), STRATA_OK);
                if (p.layer != layer)
                        continue;
                if (!strcmp(p.group.name, "weight")) {
                        l.w = p.value;
                        l.out = (int)p.group.shape[0];
                        l.in = (int)p.group.shape[1];
                } else {
                        l.b = p.value;
                }
        }
        cr_assert(l.w && l.b, "module %d has no weight and bias", layer);
        return l;
}

static void affine(const struct lin *l, const double *x, double *y)
{
        for (int o = 0; o < l->out; o++) {
                double s = l->b[o];

                for (int i = 0; i < l->in; i++)
                        s += (double)l->w[o * l->in + i] * x[i];
                y[o] = s;
        }
}

/* The graph in double for row @p r: both heads' values into @p y (3 then 2). */
static void reference(const struct lin *L, const float *xr, double *y)
{
        double x0[MULTINET_IN0], x1[MULTINET_IN1], h1[5], h3[4], h4[9], h7[6];

        for (int i = 0; i < MULTINET_IN0; i++)
                x0[i] = xr[i];
        for (int i = 0; i < MULTINET_IN1; i++)
                x1[i] = xr[MULTINET_IN0 + i];
        affine(&L[0], x0, h1);
        for (int i = 0; i < 5; i++)
                h1[i] = tanh(h1[i]);
        affine(&L[2], x1, h3);
        for (int i = 0; i < 4; i++)
                h3[i] = 1.0 / (1.0 + exp(-h3[i]));
        memcpy(h4, h3, sizeof(h3)); /* concat: the previous module's values, then from's */
        memcpy(h4 + 4, h1, sizeof(h1));
        affine(&L[5], h4, h7);
        for (int i = 0; i < 6; i++)
                h7[i] = tanh(h7[i]) + x0[i];
        affine(&L[8], h7, y);
        affine(&L[9], h7, y + MULTINET_OUT0);
}

static double bce(double x, double t)
{
        return (x > 0.0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
}

/*
 * Each output's own loss in @p e against the reference's (@p own: the head's MSE, the head's
 * BCE, unweighted), and the weighted sum of them the total up to rounding.
 */
static void check_own(const struct strata_metrics *e, const double *own, const char *what)
{
        double sum;

        cr_assert_eq(e->noutputs, 2, "%s: %d outputs", what, e->noutputs);
        for (int k = 0; k < 2; k++)
                cr_assert(fabs(e->losses[k] - own[k]) <= 1e-5 * own[k],
                          "%s: output %d's loss %.9g, reference %.9g", what, k, e->losses[k],
                          own[k]);
        for (int k = 2; k < STRATA_MAX_OUTPUTS; k++)
                cr_assert_eq(e->losses[k], 0.0, "%s: output %d past the model's", what, k);
        sum = (double)MULTINET_W0 * e->losses[0] + (double)MULTINET_W1 * e->losses[1];
        cr_assert(fabs(sum - e->loss) <= 1e-12 * e->loss, "%s: weighted sum %.17g, loss %.17g",
                  what, sum, e->loss);
}

static void check_model(const struct strata_model *m)
{
        static float pred[ROWS * MULTINET_T];
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        struct strata_batch b = multinet_batch(3, ROWS);
        struct strata_runtime *rt;
        struct strata_metrics e, mt;
        struct lin L[MULTINET_MODULES] = { { 0 } };
        double mse = 0.0, xent = 0.0, want, own[2];

        c.model = m;
        c.batch = ROWS;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        for (int i = 0; i < MULTINET_MODULES; i++)
                if (i == 0 || i == 2 || i == 5 || i == 8 || i == 9)
                        L[i] = linear_of(rt, i);
        cr_assert_eq(strata_eval_step(rt, &b, &e), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, pred, ROWS * MULTINET_T), STRATA_OK, "%s",
                     strata_last_error());
        for (int r = 0; r < ROWS; r++) {
                const float *t = multinet_t(3 + r);
                double y[MULTINET_T];

                reference(L, multinet_x(3 + r), y);
                for (int j = 0; j < MULTINET_T; j++)
                        cr_assert(fabs(pred[r * MULTINET_T + j] - y[j]) <= 1e-5 * (1 + fabs(y[j])),
                                  "row %d, value %d: predicted %g, reference %g", r, j,
                                  pred[r * MULTINET_T + j], y[j]);
                for (int j = 0; j < MULTINET_OUT0; j++)
                        mse += (y[j] - t[j]) * (y[j] - t[j]);
                for (int j = MULTINET_OUT0; j < MULTINET_T; j++)
                        xent += bce(y[j], t[j]);
        }
        want = (double)MULTINET_W0 * mse / (ROWS * MULTINET_OUT0) +
               (double)MULTINET_W1 * xent / (ROWS * MULTINET_OUT1);
        cr_assert(fabs(e.loss - want) <= 1e-5 * want, "loss %.9g, reference %.9g", e.loss, want);
        cr_assert_eq(e.rows, ROWS);
        own[0] = mse / (ROWS * MULTINET_OUT0);
        own[1] = xent / (ROWS * MULTINET_OUT1);
        check_own(&e, own, "evaluation");
        /* the training step's, before its update: the same parameters, the same losses */
        cr_assert_eq(strata_train_step(rt, &b, &mt), STRATA_OK, "%s", strata_last_error());
        check_own(&mt, own, "training step");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(multi_io_values, two_inputs_two_outputs_match_double)
{
        check_model(&multinet_model);
}

Test(multi_io_values, the_line_is_the_same_model)
{
        struct strata_module mods[MULTINET_MODULES + 2];
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse(MULTINET_LINE, mods, MULTINET_MODULES + 2, &m), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(m.nmodules, MULTINET_MODULES);
        cr_assert_eq(m.in_features, MULTINET_IN);
        cr_assert_eq(m.ninputs, 2);
        cr_assert_eq(m.noutputs, 2);
        for (int i = 0; i < MULTINET_MODULES; i++) {
                const struct strata_module *a = &mods[i], *b = &multinet_model.modules[i];

                cr_assert_eq(a->ops, b->ops, "module %d", i);
                cr_assert_eq(a->out, b->out, "module %d", i);
                cr_assert_eq(a->branch, b->branch, "module %d", i);
                if (a->branch || a->ops == &strata_add || a->ops == &strata_concat)
                        cr_assert_eq(a->from, b->from, "module %d", i);
        }
        for (int k = 0; k < 2; k++) {
                cr_assert_eq(m.inputs[k].features, multinet_model.inputs[k].features);
                cr_assert_eq(m.outputs[k].module, multinet_model.outputs[k].module);
                cr_assert_eq(m.outputs[k].loss, multinet_model.outputs[k].loss);
                cr_assert_eq(m.outputs[k].weight, multinet_model.outputs[k].weight);
        }
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, MULTINET_T, "a row of targets: both heads' values");
        cr_assert_eq(out.ndim, 0);
        check_model(&m);
}

/* A model without inputs and outputs, and one naming its only output, give the same run. */
Test(multi_io_values, one_output_named_is_the_default_bitwise)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 5 }, { .ops = &strata_tanh },
                { .ops = &strata_linear, .out = MULTINET_T },
        };
        struct strata_model plain = { .in_features = MULTINET_IN, .nmodules = 3, .modules = mods,
                                      .loss = &strata_mse };
        struct strata_model named = plain;
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        float p[2][128];

        named.loss = NULL;
        named.noutputs = 1;
        named.outputs[0] = (struct strata_model_output){ .module = 2, .loss = &strata_mse };
        for (int k = 0; k < 2; k++) {
                struct strata_runtime *rt;
                const float *v;
                size_t n;

                c.model = k ? &named : &plain;
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
                for (int s = 0; s < 4; s++) {
                        struct strata_batch b = multinet_batch(16 * s, MULTINET_BATCH);
                        struct strata_metrics mt;

                        memset(&mt, 0xff, sizeof(mt));
                        cr_assert_eq(strata_train_step(rt, &b, &mt), STRATA_OK, "%s",
                                     strata_last_error());
                        /* the named output reports its loss, the total; the plain none */
                        cr_assert_eq(mt.noutputs, k);
                        cr_assert_eq(mt.losses[0], k ? mt.loss : 0.0, "step %d", s);
                        for (int j = 1; j < STRATA_MAX_OUTPUTS; j++)
                                cr_assert_eq(mt.losses[j], 0.0);
                }
                cr_assert_eq(strata_parameters(rt, 0, &v, &n), STRATA_OK);
                cr_assert_eq(n, 9 * 5 + 5 + 5 * 5 + 5);
                memcpy(p[k], v, n * sizeof(float));
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_eq(memcmp(p[0], p[1], (9 * 5 + 5 + 5 * 5 + 5) * sizeof(float)), 0);
}

/* PyTorch's cross_entropy of logits @p z (@p n classes) for class @p label, in double. */
static double xent_of(const double *z, int n, int label)
{
        double mx = z[0], s = 0.0;

        for (int j = 1; j < n; j++)
                mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < n; j++)
                s += exp(z[j] - mx);
        return log(s) + mx - z[label];
}

/* The first largest logit (the kernel's argmax). */
static int argmax_of(const double *z, int n)
{
        int a = 0;

        for (int j = 1; j < n; j++)
                a = z[j] > z[a] ? j : a;
        return a;
}

/*
 * A cross-entropy head among the two outputs (its target one float of the row, the class
 * index) against double: the weighted loss, each output's own loss, the CE output's rows
 * predicted right (and the model's correct, the first label output's), the MSE output's mse,
 * every predicted value; the line with output(ce) is the same model.
 */
static void check_ce_model(const struct strata_model *m)
{
        enum { R = 16 };
        static float pred[R * MULTINET_CE_OUT];
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        struct strata_batch b = multinet_ce_batch(5, R);
        struct strata_runtime *rt;
        struct strata_metrics e, mt;
        struct lin L[MULTINET_MODULES] = { { 0 } };
        double mse = 0.0, xent = 0.0, want, own[2];
        int right = 0, tv;

        c.model = m;
        c.batch = R;
        c.classes = MULTINET_CE_OUT;
        cr_assert_eq(strata_model_targets(m, &tv, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(tv, MULTINET_CE_T, "a row of targets: 3 floats and a class index");
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        for (int s = 0; s < 6; s++) { /* trained a while: some rows right, some wrong */
                struct strata_batch tb = multinet_ce_batch(24 + 16 * s, R);

                cr_assert_eq(strata_train_step(rt, &tb, NULL), STRATA_OK, "%s",
                             strata_last_error());
        }
        for (int i = 0; i < MULTINET_MODULES; i++)
                if (i == 0 || i == 2 || i == 5 || i == 8 || i == 9)
                        L[i] = linear_of(rt, i);
        cr_assert_eq(L[9].out, MULTINET_CE_CLASSES);
        cr_assert_eq(strata_eval_step(rt, &b, &e), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, pred, R * MULTINET_CE_OUT), STRATA_OK, "%s",
                     strata_last_error());
        for (int r = 0; r < R; r++) {
                const float *t = multinet_ce_t(5 + r);
                int label = (int)t[MULTINET_OUT0];
                double y[MULTINET_CE_OUT];

                reference(L, multinet_x(5 + r), y);
                for (int j = 0; j < MULTINET_CE_OUT; j++)
                        cr_assert(fabs(pred[r * MULTINET_CE_OUT + j] - y[j]) <=
                                          1e-5 * (1 + fabs(y[j])),
                                  "row %d, value %d: predicted %g, reference %g", r, j,
                                  pred[r * MULTINET_CE_OUT + j], y[j]);
                for (int j = 0; j < MULTINET_OUT0; j++)
                        mse += (y[j] - t[j]) * (y[j] - t[j]);
                xent += xent_of(y + MULTINET_OUT0, MULTINET_CE_CLASSES, label);
                right += argmax_of(y + MULTINET_OUT0, MULTINET_CE_CLASSES) == label;
        }
        own[0] = mse / (R * MULTINET_OUT0);
        own[1] = xent / R; /* CrossEntropyLoss's mean: over the rows */
        want = (double)MULTINET_W0 * own[0] + (double)MULTINET_W1 * own[1];
        cr_assert(fabs(e.loss - want) <= 1e-5 * want, "loss %.9g, reference %.9g", e.loss, want);
        check_own(&e, own, "evaluation");
        cr_assert(right > 0 && right < R, "the data should leave some rows right and some wrong "
                  "(%d of %d)", right, R);
        cr_assert_eq(e.corrects[1], right, "CE output: %d right, reference %d", e.corrects[1],
                     right);
        cr_assert_eq(e.corrects[0], 0, "the MSE output counts nothing");
        cr_assert_eq(e.correct, right, "the model's correct: its first label output's");
        cr_assert(fabs(e.mse - own[0]) <= 1e-6 * own[0], "mse %.9g: the float output's %.9g",
                  e.mse, own[0]);
        cr_assert_eq(strata_train_step(rt, &b, &mt), STRATA_OK, "%s", strata_last_error());
        check_own(&mt, own, "training step");
        cr_assert_eq(mt.corrects[1], right);
        cr_assert_eq(mt.correct, right);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(multi_io_values, a_cross_entropy_output_matches_double)
{
        check_ce_model(&multinet_ce_model);
}

Test(multi_io_values, the_ce_line_is_the_same_model)
{
        struct strata_module mods[MULTINET_MODULES + 2];
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse(MULTINET_CE_LINE, mods, MULTINET_MODULES + 2, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.noutputs, 2);
        cr_assert_eq(m.outputs[1].loss, &strata_softmax_cross_entropy);
        cr_assert_eq(mods[9].out, MULTINET_CE_CLASSES);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, MULTINET_CE_OUT, "a row of predictions: both heads' values");
        check_ce_model(&m);
}

/*
 * One output with cross-entropy named is the model without outputs: its labels are the
 * batch's y, and the run is the same to the bit (the output reporting its loss and count).
 */
Test(multi_io_values, one_ce_output_named_is_the_default_bitwise)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 5 }, { .ops = &strata_tanh },
                { .ops = &strata_linear, .out = 4 },
        };
        static int32_t y[MULTINET_ROWS];
        struct strata_model plain = { .in_features = MULTINET_IN, .nmodules = 3, .modules = mods };
        struct strata_model named = plain;
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        float p[2][128];
        int tv;

        for (int i = 0; i < MULTINET_ROWS; i++)
                y[i] = (int32_t)multinet_ce_t(i)[MULTINET_OUT0];
        named.noutputs = 1;
        named.outputs[0] = (struct strata_model_output){ .module = 2 };
        cr_assert_eq(strata_model_targets(&named, &tv, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(tv, 1, "one label a row");
        c.classes = 4;
        for (int k = 0; k < 2; k++) {
                struct strata_runtime *rt;
                const float *v;
                size_t n;

                c.model = k ? &named : &plain;
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
                for (int s = 0; s < 4; s++) {
                        struct strata_batch b = { .x = multinet_x(16 * s), .y = y + 16 * s,
                                                  .rows = MULTINET_BATCH, .dim = MULTINET_IN };
                        struct strata_metrics mt;

                        cr_assert_eq(strata_train_step(rt, &b, &mt), STRATA_OK, "%s",
                                     strata_last_error());
                        cr_assert_eq(mt.noutputs, k);
                        cr_assert_eq(mt.losses[0], k ? mt.loss : 0.0, "step %d", s);
                        cr_assert_eq(mt.corrects[0], k ? mt.correct : 0, "step %d", s);
                }
                cr_assert_eq(strata_parameters(rt, 0, &v, &n), STRATA_OK);
                cr_assert_eq(n, 9 * 5 + 5 + 5 * 4 + 4);
                memcpy(p[k], v, n * sizeof(float));
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_eq(memcmp(p[0], p[1], (9 * 5 + 5 + 5 * 4 + 4) * sizeof(float)), 0);
}
