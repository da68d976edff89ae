/*
 * Regression (float targets) through the runtime: dp and ddp reach single's parameters (bitwise
 * on one device, within 1e-5 on 2-3), runs repeat bitwise, f64 inputs and targets train
 * bitwise as their f32 values do, an in-memory set's indexed batches as its staged ones,
 * plan == used, eval's MSE/MAE match the predictions, the loss falls under every precision
 * with accumulation and clipping, and a bad target is refused with nothing changed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_OUT + RIG_OUT)
#define STEPS 20

static void equivalence(enum strata_strategy_kind kind)
{
        struct rig r;

        rig_init_regression(&r, &strata_mse);
        rig_equivalence(&r, kind, 3, NP, STEPS);
}

Test(regression, ddp_matches_single, .timeout = 120)
{
        equivalence(STRATA_STRATEGY_DDP);
}

Test(regression, dp_matches_single, .timeout = 120)
{
        equivalence(STRATA_STRATEGY_DP);
}

/* Train on explicit batches built by @p make from the rig's data set; parameters out. */
typedef void (*batch_fn)(struct rig *r, int step, struct strata_batch *b);

static void train_batches(struct rig *r, const struct strata_config *c, batch_fn make,
                          float *out)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t n;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        for (int s = 0; s < STEPS; s++) {
                make(r, s, &b);
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                             strata_last_error());
        }
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(out, p, NP * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static double x64[256 * RIG_IN], t64[256 * RIG_OUT];

/* Consecutive rows of the set as f32 (as the application holds them). */
static void rows_f32(struct rig *r, int step, struct strata_batch *b)
{
        size_t at = (size_t)(step % 16) * RIG_BATCH;

        *b = (struct strata_batch){ .x = (const float *)r->ds.x + at * RIG_IN,
                                    .rows = RIG_BATCH, .dim = RIG_IN,
                                    .t = (const float *)r->ds.t + at * RIG_OUT,
                                    .tdim = RIG_OUT };
}

/* The same rows as f64 copies of those values. */
static void rows_f64(struct rig *r, int step, struct strata_batch *b)
{
        size_t at = (size_t)(step % 16) * RIG_BATCH;

        (void)r;
        *b = (struct strata_batch){ .x = (const float *)(x64 + at * RIG_IN), .xtype = STRATA_F64,
                                    .rows = RIG_BATCH, .dim = RIG_IN,
                                    .t = t64 + at * RIG_OUT, .ttype = STRATA_F64,
                                    .tdim = RIG_OUT };
}

Test(regression, f64_inputs_train_as_their_f32_values, .timeout = 120)
{
        static float a[NP], b[NP];
        struct rig r;

        rig_init_regression(&r, &strata_huber);
        for (int i = 0; i < 256 * RIG_IN; i++)
                x64[i] = ((const float *)r.ds.x)[i];
        for (int i = 0; i < 256 * RIG_OUT; i++)
                t64[i] = ((const float *)r.ds.t)[i];
        for (int n = 1; n <= 2; n++) {
                struct strata_config c = rig_cfg(&r, n == 1 ? STRATA_STRATEGY_SINGLE
                                                            : STRATA_STRATEGY_DDP, n, 0);

                train_batches(&r, &c, rows_f32, a);
                train_batches(&r, &c, rows_f64, b);
                cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "%d devices: f64 differs from f32", n);
        }
}

/* An f64 arrays set walked by the loader: indexed batches train as its staged batches. */
Test(regression, indexed_arrays_batches_match_staged_ones, .timeout = 120)
{
        static float a[NP], b[NP];
        struct strata_runtime *rt;
        struct strata_dataset ds;
        struct strata_batch bt;
        struct rig r;

        rig_init_regression(&r, &strata_l1);
        for (int i = 0; i < 256 * RIG_IN; i++)
                x64[i] = ((const float *)r.ds.x)[i];
        cr_assert_eq(strata_dataset_arrays(&ds, x64, STRATA_F64, 256, RIG_IN, r.ds.t,
                                           STRATA_F32, RIG_OUT), STRATA_OK);
        r.ds = ds;
        for (int pass = 0; pass < 2; pass++) {
                struct strata_config c = rig_cfg(&r, STRATA_STRATEGY_DP, 2, 0);
                const float *p;
                size_t n;

                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK);
                cr_assert_eq(strata_loader_reset(&r.loader, r.idx, 256), STRATA_OK);
                while (pass ? strata_loader_next_indexed(&r.loader, &bt)
                            : strata_loader_next(&r.loader, &bt))
                        cr_assert_eq(strata_train_step(rt, &bt, NULL), STRATA_OK, "%s",
                                     strata_last_error());
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                memcpy(pass ? b : a, p, sizeof(a));
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "indexed batches differ from staged ones");
}

/* Eval's MSE and MAE are those of predict's outputs against the targets (in double). */
Test(regression, eval_reports_mse_and_mae, .timeout = 60)
{
        float pred[RIG_BATCH * RIG_OUT];
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        double se = 0.0, ae = 0.0;

        rig_init_regression(&r, &strata_mse);
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.devices = 2;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(&r, rt, 5, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, pred, RIG_BATCH * RIG_OUT), STRATA_OK);
        for (int i = 0; i < RIG_BATCH * RIG_OUT; i++) {
                double d = (double)pred[i] - ((const float *)b.t)[i];

                se += d * d;
                ae += fabs(d);
        }
        se /= RIG_BATCH * RIG_OUT;
        ae /= RIG_BATCH * RIG_OUT;
        cr_assert(fabs(m.mse - se) <= 1e-6 * se && fabs(m.mae - ae) <= 1e-6 * ae,
                  "mse %g (want %g), mae %g (want %g)", m.mse, se, m.mae, ae);
        cr_assert(fabs(m.loss - m.mse) <= 1e-6 * se, "MSE loss %g, mse %g", m.loss, m.mse);
        cr_assert_eq(m.correct, 0);
        cr_assert_eq(m.rows, RIG_BATCH);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The loss of the first and of the last of 60 steps under @p c. */
static void loss_falls(struct rig *r, const struct strata_config *c, const char *what)
{
        struct strata_runtime *rt;
        struct strata_metrics first, last;
        struct strata_memory_info mi;
        struct strata_plan_info pi;
        struct strata_batch b;

        cr_assert_eq(strata_plan(c, &pi), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s: %s", what, strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(r, rt, 1, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &first), STRATA_OK);
        rig_steps(r, rt, 60, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &last), STRATA_OK);
        cr_assert(isfinite(last.loss) && last.loss < 0.7 * first.loss,
                  "%s: loss %g then %g", what, first.loss, last.loss);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "%s: used %zu, planned %zu", what, mi.used,
                     mi.planned);
        cr_assert_eq(mi.planned, pi.bytes);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(regression, learns_under_every_precision_with_accumulation_and_clipping, .timeout = 240)
{
        static const enum strata_precision prec[] = { STRATA_PRECISION_32,
                                                      STRATA_PRECISION_BF16_MIXED,
                                                      STRATA_PRECISION_16_MIXED };
        struct rig r;

        rig_init_regression(&r, &strata_mse);
        for (int i = 0; i < 3; i++) {
                struct strata_config c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);

                c.precision.kind = prec[i];
                c.train.accumulate = 2;
                c.train.clip_norm = 1.0f;
                loss_falls(&r, &c, strata_precision_name(prec[i]));
        }
        rig_init_regression(&r, &strata_huber);
        r.model.reduction = STRATA_REDUCTION_SUM;
        r.cfg.optim.lr = 0.05f / RIG_BATCH;
        loss_falls(&r, &r.cfg, "huber, sum reduction");
        r.cfg.strategy.kind = STRATA_STRATEGY_DP;
        r.cfg.strategy.devices = 3;
        loss_falls(&r, &r.cfg, "huber, sum reduction, dp on 3");
}

/* Regression plans differ from classification only by the targets' staging. */
Test(regression, plan_stages_outputs_floats_per_row)
{
        struct strata_plan_info pc, pr;
        struct rig r;

        rig_init_regression(&r, &strata_mse);
        r.model.loss = NULL;
        cr_assert_eq(strata_plan(&r.cfg, &pc), STRATA_OK, "%s", strata_last_error());
        r.model.loss = &strata_mse;
        cr_assert_eq(strata_plan(&r.cfg, &pr), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(pr.per_device, pc.per_device + RIG_BATCH * (RIG_OUT - 1) * sizeof(float),
                      "classification %zu, regression %zu", pc.per_device, pr.per_device);
}

Test(regression, bad_targets_change_nothing, .timeout = 60)
{
        float t[RIG_BATCH * RIG_OUT], before[NP], logits[RIG_BATCH * RIG_OUT];
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t n;
        struct rig r;

        rig_init_regression(&r, &strata_bce_with_logits);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rows_f32(&r, 0, &b);
        for (int i = 0; i < RIG_BATCH * RIG_OUT; i++)
                t[i] = 0.5f + 0.4f * sinf((float)i);
        b.t = t;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, sizeof(before));
        t[7] = NAN;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "row 2, column 1"), "%s", strata_last_error());
        t[7] = 1.5f;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        t[7] = 0.5f;
        b.tdim = RIG_OUT + 1;
        cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "tdim"), "%s", strata_last_error());
        b.tdim = RIG_OUT;
        b.t = NULL;
        b.y = (const int32_t *)t;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "float targets"), "%s", strata_last_error());
        b.xtype = STRATA_BF16;
        cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_OUT), STRATA_EINVAL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(memcmp(before, p, sizeof(before)), 0, "a refused step changed parameters");
        b.xtype = STRATA_F32;
        b.t = t;
        b.y = NULL;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
