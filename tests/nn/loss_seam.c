/*
 * The loss seam: a model's loss is a const table the runtime calls after the last module.
 * A table of the application's own replaces softmax cross-entropy (its value is the step's
 * loss, its gradient drives backward), the default is softmax cross-entropy bit for bit,
 * targets are validated by the model's loss, and an incomplete table is refused.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP 1024

static atomic_int forwards, checks;

/* Softmax cross-entropy through the application's own table, counting calls. */
static int counted_check(const struct strata_batch *b, int outputs)
{
        atomic_fetch_add(&checks, 1);
        return strata_softmax_cross_entropy.check(b, outputs);
}

static double counted_forward(const struct strata_step_ctx *c, const float *out,
                              const void *targets, int rows, int outputs, float *dout,
                              int *correct)
{
        atomic_fetch_add(&forwards, 1);
        return strata_softmax_cross_entropy.forward(c, out, targets, rows, outputs, dout,
                                                    correct);
}

static const struct strata_loss_ops counted = { "counted", counted_check, counted_forward, 0 };

/* A loss that is 7 per row with a zero gradient: training must not move the parameters. */
static double flat_forward(const struct strata_step_ctx *c, const float *out,
                           const void *targets, int rows, int outputs, float *dout,
                           int *correct)
{
        (void)targets, (void)out;
        if (dout)
                c->k->fill(dout, 0.0f, (size_t)rows * outputs);
        if (correct)
                *correct = 0;
        return 7.0 * rows;
}

static const struct strata_loss_ops flat = { "flat", counted_check, flat_forward, 0 };

static size_t nparams(struct rig *r)
{
        struct strata_runtime *rt = NULL;
        const float *p;
        size_t n;

        cr_assert_eq(strata_init(&rt, &r->cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        strata_teardown(rt);
        cr_assert_leq(n, NP);
        return n;
}

Test(loss_seam, default_is_softmax_cross_entropy_bitwise)
{
        static float a[NP], b[NP];
        struct rig r;
        size_t n;

        rig_init(&r, 1);
        n = nparams(&r);
        rig_train(&r, 12, a, n);
        r.model.loss = &counted;
        atomic_store(&forwards, 0);
        atomic_store(&checks, 0);
        rig_train(&r, 12, b, n);
        cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "the named loss changed the result");
        cr_assert_eq(atomic_load(&forwards), 12, "forward called %d times",
                     atomic_load(&forwards));
        cr_assert_eq(atomic_load(&checks), 12, "check called %d times", atomic_load(&checks));
}

Test(loss_seam, application_loss_drives_value_and_gradient)
{
        static float before[NP], after[NP];
        struct strata_runtime *rt = NULL;
        struct strata_metrics m;
        struct strata_batch b;
        const float *p;
        size_t n;
        struct rig r;

        rig_init(&r, 0);
        r.model.loss = &flat;
        r.cfg.optim.weight_decay = 0.0f;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, n * sizeof(float));
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
        cr_assert_float_eq(m.loss, 7.0, 1e-12, "loss %g", m.loss);
        cr_assert_eq(m.correct, 0);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(after, p, n * sizeof(float));
        cr_assert_eq(memcmp(before, after, n * sizeof(float)), 0,
                     "a zero loss gradient moved the parameters");
        strata_teardown(rt);
}

Test(loss_seam, targets_are_checked_by_the_loss)
{
        struct strata_runtime *rt = NULL;
        struct strata_batch b;
        int32_t y[RIG_BATCH];
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        memcpy(y, b.y, sizeof(y));
        y[3] = RIG_CLASSES;
        b.y = y;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "label 4 of row 3 not in [0, 4)"), "%s",
                  strata_last_error());
        strata_teardown(rt);
}

Test(loss_seam, incomplete_loss_is_refused)
{
        static const struct strata_loss_ops no_forward = { "half", counted_check, NULL, 0 };
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;
        struct rig r;

        rig_init(&r, 0);
        r.model.loss = &no_forward;
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "half"), "%s", strata_last_error());
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_EINVAL);
        cr_assert_null(rt);
}
