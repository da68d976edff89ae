/*
 * A small graph model (two adds, one of them reading the model's input, and a concat, over
 * smooth activations) has the gradients central finite differences of its loss give: the
 * runtime's gradient of every parameter (one micro-batch of a window of two: nothing stepped)
 * against (L(p + h) - L(p - h)) / 2h, L the evaluation loss of the same batch.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define ROWS 6
#define IN 5

static const struct strata_module mods[] = {
        { .ops = &strata_linear, .out = 5 },
        { .ops = &strata_tanh },
        { .ops = &strata_add, .from = -1 },     /* tanh(linear(x)) + x */
        { .ops = &strata_linear, .out = 4 },
        { .ops = &strata_sigmoid },
        { .ops = &strata_concat, .from = 2 },   /* 4 + 5 */
        { .ops = &strata_linear, .out = 5 },
        { .ops = &strata_add, .from = 2 },
        { .ops = &strata_linear, .out = 3 },
};

static double loss_at(struct strata_runtime *rt, const struct strata_batch *b)
{
        struct strata_metrics m;

        cr_assert_eq(strata_eval_step(rt, b, &m), STRATA_OK, "%s", strata_last_error());
        return m.loss;
}

Test(skip_gradcheck, every_parameter_matches_finite_differences)
{
        static float x[ROWS * IN], t[ROWS * 3], grad[1024];
        struct strata_model m = { .in_features = IN, .nmodules = 9, .modules = mods,
                                  .loss = &strata_mse };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_batch b = { .x = x, .rows = ROWS, .dim = IN, .t = t, .tdim = 3 };
        struct strata_runtime *rt;
        int groups, checked = 0;
        const float h = 1e-2f;

        for (int k = 0; k < ROWS * IN; k++)
                x[k] = sinf(0.9f * (float)k + 0.2f);
        for (int k = 0; k < ROWS * 3; k++)
                t[k] = 0.5f * cosf(1.7f * (float)k);
        c.model = &m;
        c.batch = ROWS;
        c.classes = 3;
        c.seed = 3;
        c.train.accumulate = 2;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        for (int g = 0; g < groups; g++) {
                struct strata_param p;

                cr_assert_eq(strata_parameter(rt, 0, g, &p), STRATA_OK);
                cr_assert_leq(p.offset + p.group.count, 1024);
                for (size_t i = 0; i < p.group.count; i++) /* 1 / accumulate */
                        grad[p.offset + i] = 2.0f * p.grad[i];
        }
        for (int g = 0; g < groups; g++) {
                struct strata_param p;

                cr_assert_eq(strata_parameter(rt, 0, g, &p), STRATA_OK);
                for (size_t i = 0; i < p.group.count; i++) {
                        float keep = p.value[i];
                        double up, down, num, an = grad[p.offset + i];

                        p.value[i] = keep + h;
                        up = loss_at(rt, &b);
                        p.value[i] = keep - h;
                        down = loss_at(rt, &b);
                        p.value[i] = keep;
                        num = (up - down) / (2.0 * h);
                        cr_assert(fabs(num - an) <= 1e-3 + 2e-2 * fabs(num),
                                  "%s[%zu]: analytic %g, numeric %g", p.name, i, an, num);
                        checked++;
                }
        }
        cr_assert_eq(checked, 5 * 5 + 5 + 5 * 4 + 4 + 9 * 5 + 5 + 5 * 3 + 3);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
