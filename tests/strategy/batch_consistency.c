/*
 * A batch whose fields contradict each other is refused by strata_train_step(),
 * strata_eval_step() and strata_predict_step() before any device runs, with a message naming
 * the contradiction, and changes nothing: x and images both set (without index it crashed
 * predict on a worker), images without index, index without nimages, nimages without index,
 * labels with float targets, tdim without t, and the other kind of targets than the loss's.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

struct bad {
        const char *what;      /* the case */
        const char *message;   /* a part of the refusal's message */
        int targets_only;      /* refused where targets are read (train, eval), not predict */
};

/* Case @p i applied to a copy of the good batch @p b (labels); the case list's length. */
static int make_bad(int i, const struct strata_batch *b, const uint8_t *images,
                    const uint32_t *index, const float *t, struct strata_batch *out,
                    struct bad *info)
{
        static const struct bad cases[] = {
                { "x and images, no index", "both x and images", 0 },
                { "x, images and index", "both x and images", 0 },
                { "images without index", "images without index", 0 },
                { "index without nimages", "index without nimages", 0 },
                { "nimages without index", "without index", 0 },
                { "labels and float targets", "both labels (y) and float targets (t)", 0 },
                { "tdim without t", "tdim 3 without float targets", 0 },
                { "float targets for labels", "takes labels (y); the batch has float", 1 },
                { "no inputs", "no inputs", 0 },
        };
        int n = (int)(sizeof(cases) / sizeof(cases[0]));

        if (i >= n)
                return n;
        *out = *b;
        *info = cases[i];
        switch (i) {
        case 0:
                out->images = images;
                break;
        case 1:
                out->images = images, out->index = index, out->nimages = 256;
                break;
        case 2:
                out->x = NULL, out->images = images;
                break;
        case 3:
                out->index = index;
                break;
        case 4:
                out->nimages = 256;
                break;
        case 5:
                out->t = t, out->tdim = RIG_CLASSES;
                break;
        case 6:
                out->tdim = 3;
                break;
        case 7:
                out->y = NULL, out->t = t, out->tdim = RIG_CLASSES;
                break;
        default:
                out->x = NULL;
                break;
        }
        return n;
}

/* Every case through the three steps on @p c: refused, named, parameters and state kept. */
static void refuse_all(struct rig *r, const struct strata_config *c)
{
        static float t[RIG_BATCH * RIG_CLASSES], out[RIG_BATCH * RIG_CLASSES + 1];
        static float before[1024];
        struct strata_runtime *rt = rig_open(c);
        struct strata_batch b, bad;
        struct bad info;
        const float *p;
        size_t np;
        int n = 1;

        rig_steps(r, rt, 1, &b);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        memcpy(before, p, np * sizeof(float));
        out[RIG_BATCH * RIG_CLASSES] = 42.0f;
        for (int i = 0; i < n; i++) {
                n = make_bad(i, &b, r->ds.images, r->idx, t, &bad, &info);
                cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL, "%s", info.what);
                cr_assert_not_null(strstr(strata_last_error(), info.message), "%s: %s",
                                   info.what, strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &bad, NULL), STRATA_EINVAL, "%s", info.what);
                if (info.targets_only)
                        continue;
                memset(out, 0, sizeof(float) * RIG_BATCH * RIG_CLASSES);
                cr_assert_eq(strata_predict_step(rt, &bad, out, RIG_BATCH * RIG_CLASSES),
                             STRATA_EINVAL, "%s", info.what);
                cr_assert_not_null(strstr(strata_last_error(), info.message), "%s: %s",
                                   info.what, strata_last_error());
                for (int k = 0; k < RIG_BATCH * RIG_CLASSES; k++)
                        cr_assert_eq(out[k], 0.0f, "%s: predict wrote", info.what);
        }
        cr_assert_eq(out[RIG_BATCH * RIG_CLASSES], 42.0f);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_eq(memcmp(before, p, np * sizeof(float)), 0, "a refused batch changed "
                                                              "the parameters");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "the good batch still goes: %s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(batch_consistency, single_refuses_every_contradiction)
{
        struct rig r;

        rig_init(&r, 0);
        refuse_all(&r, &r.cfg);
}

/* On workers: the gather that crashed runs there. */
Test(batch_consistency, ddp_refuses_every_contradiction_before_the_workers, .timeout = 60)
{
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        refuse_all(&r, &c);
}

/*
 * A regression model: labels for float targets are refused, no targets at all, and a target
 * width that is not the model's (issue 45's "targets are -1 wide" named what it is).
 */
Test(batch_consistency, regression_refuses_labels_and_missing_targets)
{
        static int32_t y[RIG_BATCH];
        struct strata_runtime *rt;
        struct strata_batch b, bad;
        struct rig r;

        rig_init_regression(&r, &strata_mse);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 1, &b);
        bad = b;
        bad.t = NULL, bad.tdim = 0, bad.y = y;
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "(mse) takes float targets (t, tdim); "
                                                       "the batch has labels (y)"),
                           "%s", strata_last_error());
        bad.y = NULL;
        cr_assert_eq(strata_eval_step(rt, &bad, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "the batch has none"), "%s",
                           strata_last_error());
        bad = b;
        bad.tdim = -1; /* a width, not a sample count: named as what it is */
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "tdim -1: set it to the targets' values "
                                                       "a row, the model's 3 outputs"),
                           "%s", strata_last_error());
        bad.tdim = 2;
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "targets are 2 values a row (tdim); the "
                                                       "model has 3 outputs"),
                           "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
