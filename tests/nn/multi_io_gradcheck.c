/*
 * The two-input, two-output model (tests/support/multinet.h) has the gradients central finite
 * differences of its weighted loss give: the runtime's gradient of every parameter (one
 * micro-batch of a window of two: nothing stepped) against (L(p + h) - L(p - h)) / 2h, L the
 * evaluation loss of the same batch (0.7 MSE + 1.5 BCE, checked against double in
 * multi_io_values.c); and with a cross-entropy head instead. Each output's weighted gradient, the branches' gradients into their
 * sources and the merges' all reach the parameters.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/multinet.h"

#define ROWS 6

static double loss_at(struct strata_runtime *rt, const struct strata_batch *b)
{
        struct strata_metrics m;

        cr_assert_eq(strata_eval_step(rt, b, &m), STRATA_OK, "%s", strata_last_error());
        return m.loss;
}

static void gradcheck(const struct strata_model *m)
{
        static float grad[MULTINET_NP_MAX];
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        int ce = m == &multinet_ce_model;
        struct strata_batch b = ce ? multinet_ce_batch(5, ROWS) : multinet_batch(5, ROWS);
        struct strata_runtime *rt;
        int groups, checked = 0;
        const float h = 1e-2f;

        c.model = m;
        c.classes = ce ? MULTINET_CE_OUT : MULTINET_T;
        c.batch = ROWS;
        c.train.accumulate = 2;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        for (int g = 0; g < groups; g++) {
                struct strata_param p;

                cr_assert_eq(strata_parameter(rt, 0, g, &p), STRATA_OK);
                cr_assert_leq(p.offset + p.group.count, (size_t)multinet_np(m));
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
        cr_assert_eq(checked, multinet_np(m));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(multi_io_gradcheck, every_parameter_matches_finite_differences)
{
        gradcheck(&multinet_model);
}

/* The same with the cross-entropy head (0.7 MSE + 1.5 CE, its labels from the targets row). */
Test(multi_io_gradcheck, with_a_cross_entropy_output)
{
        gradcheck(&multinet_ce_model);
}
