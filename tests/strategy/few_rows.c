/*
 * Any batch size on any device count: the devices past a batch's rows take part with none.
 * Evaluation and prediction of 1, 2 and 7 rows on 3 and 4 devices under dp and ddp equal the
 * single device's (rows and correct count exactly, loss and logits within 1e-6); a training
 * step on such a batch reaches single's parameters (within 1e-5, the reduction order
 * differs), with SyncBatchNorm too (its statistics over the global rows).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP_BN (RIG_IN * 16 + 16 + 2 * 16 + 16 * RIG_CLASSES + RIG_CLASSES)

static const int rows[] = { 1, 2, 7 };

static struct strata_runtime *start(const struct strata_config *c)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

/* The rig's first batch, cut to @p n rows. */
static struct strata_batch first(struct rig *r, int n)
{
        struct strata_batch b;

        strata_loader_reset(&r->loader, r->idx, 256);
        cr_assert(strata_loader_next(&r->loader, &b));
        b.rows = n;
        return b;
}

/* Loss, correct and rows of an evaluation, then the logits of a prediction, of @p n rows. */
static void evaluate(struct rig *r, const struct strata_config *c, int n,
                     struct strata_metrics *m, float *logits)
{
        struct strata_runtime *rt = start(c);
        struct strata_batch b = first(r, n);

        cr_assert_eq(strata_eval_step(rt, &b, m), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, logits, (size_t)n * RIG_CLASSES), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(few_rows, evaluation_equals_single, .timeout = 120)
{
        static float ref[RIG_BATCH * RIG_CLASSES], got[RIG_BATCH * RIG_CLASSES];
        struct strata_metrics ms, m;
        struct rig r;

        rig_init(&r, 1); /* BatchNorm in evaluation: the running statistics */
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                int n = rows[i];

                evaluate(&r, &r.cfg, n, &ms, ref);
                for (int kind = STRATA_STRATEGY_DP; kind <= STRATA_STRATEGY_DDP; kind++) {
                        for (int dev = 3; dev <= 4; dev++) {
                                struct strata_config c = rig_cfg(&r, kind, dev, 0);

                                evaluate(&r, &c, n, &m, got);
                                cr_assert_eq(m.rows, n);
                                cr_assert_eq(m.correct, ms.correct, "%d rows, %d devices", n,
                                             dev);
                                cr_assert_leq(fabs(m.loss - ms.loss), 1e-6 * fabs(ms.loss),
                                              "%d rows, %d devices: loss %.9g, single %.9g", n,
                                              dev, m.loss, ms.loss);
                                cr_assert_leq(rig_rel_diff(got, ref, (size_t)n * RIG_CLASSES),
                                              1e-6, "%d rows, %d devices: logits", n, dev);
                        }
                }
        }
}

/* Two full steps, one of @p n rows, one full: the parameters of device 0. */
static void train(struct rig *r, const struct strata_config *c, int n, float *out, size_t np)
{
        struct strata_runtime *rt = start(c);
        struct strata_batch b;
        const float *p;
        size_t got;

        rig_steps(r, rt, 2, NULL);
        b = first(r, n);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, 1, NULL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &got), STRATA_OK);
        cr_assert_eq(got, np);
        memcpy(out, p, np * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Under dp and ddp on 3 devices, with BatchNorm synchronised (@p bn) or no BatchNorm. */
static void training_equals_single(int bn)
{
        static float ref[NP_BN], got[NP_BN];
        size_t np = bn ? NP_BN : NP_BN - 2 * 16;
        struct rig r;

        rig_init(&r, bn);
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                int n = rows[i];

                if (bn && n < 2)
                        continue; /* BatchNorm trains on 2 rows or more */
                train(&r, &r.cfg, n, ref, np);
                for (int kind = STRATA_STRATEGY_DP; kind <= STRATA_STRATEGY_DDP; kind++) {
                        struct strata_config c = rig_cfg(&r, kind, 3, bn);
                        double d;

                        train(&r, &c, n, got, np);
                        d = rig_rel_diff(got, ref, np);
                        cr_assert_leq(d, 1e-5, "%s, %d rows on 3 devices: %g",
                                      kind == STRATA_STRATEGY_DP ? "dp" : "ddp", n, d);
                }
        }
}

Test(few_rows, training_step_equals_single, .timeout = 120)
{
        training_equals_single(0);
}

Test(few_rows, training_step_sync_batchnorm_equals_single, .timeout = 120)
{
        training_equals_single(1);
}
