/*
 * The two-input, two-output model (tests/support/multinet.h) under every strategy, as the
 * graph models are held (skip_parallel.c): ddp on 1 device bitwise single, on 2 repeating
 * bitwise and within 1e-5 of single; zero1, zero2 and fsdp on 2 bitwise ddp on 2; dp on 2
 * within 1e-5 of single; in invariant mode single, ddp on 2, 3 and 4 and fsdp on 2 bitwise the
 * same run (parameters, losses and each output's own losses). Every run: planned == used, no
 * heap call during steps, and the outputs' own losses weighted sum to the loss. The same
 * with a cross-entropy head (its label one float of the targets row), its rows predicted
 * right too. Also: bf16-mixed and 16-mixed with accumulation and clipping, and a
 * checkpoint's resume.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/multinet.h"
#include "tests/support/rig.h"

#define STEPS 8

static struct multinet_run ref, a, b;

static void run_model(const struct strata_model *m, enum strata_strategy_kind s, int devices,
                      int invariant, struct multinet_run *out)
{
        struct strata_config c = multinet_cfg(s, devices);

        c.model = m;
        c.classes = m == &multinet_ce_model ? MULTINET_CE_OUT : MULTINET_T;
        c.strategy.invariant = invariant;
        multinet_train(&c, STEPS, out);
        cr_assert(out->heap_calls <= 0, "%s on %d: %ld heap calls during steps",
                  strata_strategy_name(s), devices, out->heap_calls);
        for (int t = 0; t < STEPS; t++) { /* the outputs' own losses weighted: the total */
                double sum = (double)MULTINET_W0 * out->own[t][0] +
                             (double)MULTINET_W1 * out->own[t][1];

                cr_assert(out->own[t][0] > 0.0 && out->own[t][1] > 0.0, "step %d", t);
                cr_assert(fabs(sum - out->loss[t]) <= 1e-12 * out->loss[t],
                          "%s on %d, step %d: weighted sum %.17g, loss %.17g",
                          strata_strategy_name(s), devices, t, sum, out->loss[t]);
        }
}

static void run(enum strata_strategy_kind s, int devices, int invariant,
                struct multinet_run *out)
{
        run_model(&multinet_model, s, devices, invariant, out);
}

static int same(const struct multinet_run *x, const struct multinet_run *y)
{
        return !memcmp(x->p, y->p, sizeof(x->p));
}

/* The same per-output losses, training steps' and evaluations', to the bit. */
static int same_own(const struct multinet_run *x, const struct multinet_run *y)
{
        return !memcmp(x->own, y->own, sizeof(x->own));
}

Test(multi_io_parallel, ddp_sharded_dp, .timeout = 240)
{
        static const enum strata_strategy_kind sharded[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };
        double d;

        run(STRATA_STRATEGY_SINGLE, 1, 0, &ref);
        cr_assert(ref.loss[STEPS - 1] < ref.loss[0], "the weighted loss falls: %g -> %g",
                  ref.loss[0], ref.loss[STEPS - 1]);
        run(STRATA_STRATEGY_DDP, 1, 0, &a);
        cr_assert(same(&a, &ref), "ddp on 1 device is not bitwise single");
        run(STRATA_STRATEGY_DDP, 2, 0, &a);
        run(STRATA_STRATEGY_DDP, 2, 0, &b);
        cr_assert(same(&a, &b), "ddp on 2 devices: runs differ");
        cr_assert(same_own(&a, &b), "ddp on 2 devices: the outputs' losses differ");
        for (int t = 0; t < STEPS; t++)
                for (int k = 0; k < 4; k++)
                        cr_assert(fabs(a.own[t][k] - ref.own[t][k]) <= 1e-5 * ref.own[t][k],
                                  "ddp on 2, step %d, loss %d: %.9g, single %.9g", t, k,
                                  a.own[t][k], ref.own[t][k]);
        d = rig_rel_diff(a.p, ref.p, MULTINET_NP);
        cr_assert_leq(d, 1e-5, "ddp on 2: %g from single", d);
        for (size_t i = 0; i < sizeof(sharded) / sizeof(sharded[0]); i++) {
                run(sharded[i], 2, 0, &b);
                cr_assert(same(&b, &a), "%s on 2 devices is not bitwise ddp",
                          strata_strategy_name(sharded[i]));
                cr_assert(same_own(&b, &a), "%s on 2 devices: the outputs' losses differ",
                          strata_strategy_name(sharded[i]));
        }
        run(STRATA_STRATEGY_DP, 2, 0, &b);
        d = rig_rel_diff(b.p, ref.p, MULTINET_NP);
        cr_assert_leq(d, 1e-5, "dp on 2: %g from single", d);
}

Test(multi_io_parallel, invariant_on_any_device_count, .timeout = 240)
{
        run(STRATA_STRATEGY_SINGLE, 1, 1, &ref);
        for (int n = 2; n <= 4; n *= 2) {
                run(STRATA_STRATEGY_DDP, n, 1, &a);
                cr_assert(same(&a, &ref), "invariant mode on %d devices differs from 1", n);
                cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
                cr_assert(same_own(&a, &ref), "invariant mode on %d devices: the outputs' "
                          "losses differ from 1", n);
        }
        run(STRATA_STRATEGY_FSDP, 2, 1, &a);
        cr_assert(same(&a, &ref), "invariant fsdp on 2 devices differs");
        cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
        cr_assert(same_own(&a, &ref), "invariant fsdp on 2: the outputs' losses differ");
        run(STRATA_STRATEGY_DDP, 3, 1, &a); /* gathered blocks: 3 is no power of two */
        cr_assert(same(&a, &ref), "invariant mode on 3 devices differs from 1");
        cr_assert(same_own(&a, &ref), "invariant mode on 3: the outputs' losses differ");
}

/* The same rows predicted right by each output, training steps' and evaluations'. */
static int same_correct(const struct multinet_run *x, const struct multinet_run *y)
{
        return !memcmp(x->correct, y->correct, sizeof(x->correct)) &&
               !memcmp(x->model_correct, y->model_correct, sizeof(x->model_correct));
}

/*
 * The cross-entropy head's counts: the MSE output none, the CE output's in [0, rows], the
 * model's correct the CE output's.
 */
static void check_counts(const struct multinet_run *x, const char *what)
{
        int some = 0;

        for (int t = 0; t < STEPS; t++)
                some += x->correct[t][1] + x->correct[t][3];
        cr_assert_gt(some, 0, "%s: the CE output predicted no row right in %d steps", what, STEPS);
        for (int t = 0; t < STEPS; t++) {
                cr_assert_eq(x->correct[t][0], 0, "%s, step %d: the MSE output counts", what, t);
                cr_assert_eq(x->correct[t][2], 0, "%s, step %d: the MSE output counts", what, t);
                cr_assert(x->correct[t][1] >= 0 && x->correct[t][1] <= MULTINET_BATCH &&
                                  x->correct[t][3] >= 0 && x->correct[t][3] <= MULTINET_BATCH,
                          "%s, step %d: %d and %d correct", what, t, x->correct[t][1],
                          x->correct[t][3]);
                cr_assert_eq(x->model_correct[t], x->correct[t][1], "%s, step %d", what, t);
        }
}

/* A cross-entropy output among the two: every strategy as the float heads' (above). */
Test(multi_io_parallel, labels_ddp_sharded_dp, .timeout = 240)
{
        static const enum strata_strategy_kind sharded[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };
        const struct strata_model *m = &multinet_ce_model;
        double d;

        run_model(m, STRATA_STRATEGY_SINGLE, 1, 0, &ref);
        check_counts(&ref, "single");
        cr_assert(ref.loss[STEPS - 1] < ref.loss[0], "the weighted loss falls: %g -> %g",
                  ref.loss[0], ref.loss[STEPS - 1]);
        cr_assert(ref.own[STEPS - 1][3] < ref.own[0][3], "the CE head's loss falls: %g -> %g",
                  ref.own[0][3], ref.own[STEPS - 1][3]);
        run_model(m, STRATA_STRATEGY_DDP, 1, 0, &a);
        cr_assert(same(&a, &ref) && same_own(&a, &ref) && same_correct(&a, &ref),
                  "ddp on 1 device is not bitwise single");
        run_model(m, STRATA_STRATEGY_DDP, 2, 0, &a);
        run_model(m, STRATA_STRATEGY_DDP, 2, 0, &b);
        cr_assert(same(&a, &b) && same_own(&a, &b) && same_correct(&a, &b),
                  "ddp on 2 devices: runs differ");
        check_counts(&a, "ddp on 2");
        for (int t = 0; t < STEPS; t++)
                for (int k = 0; k < 4; k++)
                        cr_assert(fabs(a.own[t][k] - ref.own[t][k]) <= 1e-5 * ref.own[t][k],
                                  "ddp on 2, step %d, loss %d: %.9g, single %.9g", t, k,
                                  a.own[t][k], ref.own[t][k]);
        d = rig_rel_diff(a.p, ref.p, MULTINET_CE_NP);
        cr_assert_leq(d, 1e-5, "ddp on 2: %g from single", d);
        for (size_t i = 0; i < sizeof(sharded) / sizeof(sharded[0]); i++) {
                run_model(m, sharded[i], 2, 0, &b);
                cr_assert(same(&b, &a), "%s on 2 devices is not bitwise ddp",
                          strata_strategy_name(sharded[i]));
                cr_assert(same_own(&b, &a) && same_correct(&b, &a), "%s on 2 devices: the "
                          "outputs' losses or counts differ", strata_strategy_name(sharded[i]));
        }
        run_model(m, STRATA_STRATEGY_DP, 2, 0, &b);
        d = rig_rel_diff(b.p, ref.p, MULTINET_CE_NP);
        cr_assert_leq(d, 1e-5, "dp on 2: %g from single", d);
}

Test(multi_io_parallel, labels_invariant_on_any_device_count, .timeout = 240)
{
        const struct strata_model *m = &multinet_ce_model;

        run_model(m, STRATA_STRATEGY_SINGLE, 1, 1, &ref);
        check_counts(&ref, "invariant single");
        for (int n = 2; n <= 4; n++) {
                run_model(m, STRATA_STRATEGY_DDP, n, 1, &a);
                cr_assert(same(&a, &ref), "invariant mode on %d devices differs from 1", n);
                cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
                cr_assert(same_own(&a, &ref) && same_correct(&a, &ref), "invariant mode on %d "
                          "devices: the outputs' losses or counts differ from 1", n);
        }
        run_model(m, STRATA_STRATEGY_FSDP, 2, 1, &a);
        check_counts(&a, "invariant fsdp on 2");
        cr_assert(same(&a, &ref), "invariant fsdp on 2 devices differs");
        cr_assert_eq(memcmp(a.loss, ref.loss, sizeof(a.loss)), 0, "losses differ");
        cr_assert(same_own(&a, &ref) && same_correct(&a, &ref), "invariant fsdp on 2: the "
                  "outputs' losses or counts differ");
}

/*
 * Mixed precision and accumulation with clipping: the outputs and the branches' sources stay
 * f32, the model trains within its plan without heap, and ddp on 2 under 16-mixed repeats.
 */
Test(multi_io_parallel, mixed_precision_and_accumulation, .timeout = 240)
{
        static const enum strata_precision kinds[] = { STRATA_PRECISION_BF16_MIXED,
                                                       STRATA_PRECISION_16_MIXED };

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                struct strata_config c = multinet_cfg(STRATA_STRATEGY_DDP, 2);

                c.precision.kind = kinds[i];
                c.train.accumulate = 2;
                c.train.clip_norm = 1.0f;
                multinet_train(&c, STEPS, &a);
                multinet_train(&c, STEPS, &b);
                cr_assert(same(&a, &b), "%s: runs differ", strata_precision_name(kinds[i]));
                cr_assert(a.heap_calls <= 0, "%s: %ld heap calls", strata_precision_name(kinds[i]),
                          a.heap_calls);
                for (int s = 0; s < STEPS; s++)
                        cr_assert(isfinite(a.loss[s]) && a.loss[s] > 0.0, "%s step %d: loss %g",
                                  strata_precision_name(kinds[i]), s, a.loss[s]);
        }
}

/* A checkpoint taken halfway (AdamW, fsdp on 2 devices) resumes the model bitwise. */
Test(multi_io_parallel, resumes_bitwise, .timeout = 120)
{
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_FSDP, 2);
        char dir[] = "/tmp/strata-mio-XXXXXX", path[128];
        struct strata_runtime *rt;

        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.momentum = 0.0f;
        c.optim.lr = 0.01f;
        multinet_train(&c, STEPS, &ref);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.ckpt", dir);
        memset(&a, 0, sizeof(a));
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        multinet_steps(rt, 0, STEPS / 2, &a);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        multinet_steps(rt, STEPS / 2, STEPS, &a);
        multinet_params(rt, &c, &a);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(memcmp(ref.loss, a.loss, sizeof(a.loss)), 0, "losses differ");
        cr_assert(same(&a, &ref), "the resumed run differs");
        unlink(path);
        rmdir(dir);
}

/*
 * A batch of fewer rows than devices with the cross-entropy head: the devices past its rows
 * take part with none; the step's losses and counts are single's (the counts exactly).
 */
Test(multi_io_parallel, labels_fewer_rows_than_devices, .timeout = 120)
{
        struct strata_metrics m[2];

        for (int k = 0; k < 2; k++) {
                struct strata_config c = multinet_cfg(k ? STRATA_STRATEGY_DDP
                                                        : STRATA_STRATEGY_SINGLE, k ? 4 : 1);
                struct strata_batch two = multinet_ce_batch(40, 2);
                struct strata_runtime *rt;

                c.model = &multinet_ce_model;
                c.classes = MULTINET_CE_OUT;
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_train_step(rt, &two, &m[k]), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_eq(m[1].rows, 2);
        cr_assert_eq(m[1].corrects[1], m[0].corrects[1]);
        cr_assert_eq(m[1].correct, m[0].correct);
        for (int k = 0; k < 2; k++)
                cr_assert(fabs(m[1].losses[k] - m[0].losses[k]) <= 1e-6 * m[0].losses[k],
                          "output %d: %.9g on 4 devices, %.9g on 1", k, m[1].losses[k],
                          m[0].losses[k]);
}
