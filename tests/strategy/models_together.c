/*
 * Several models on one batch in one call (decision 0082): strata_models_train_step() and
 * strata_models_predict_step() give bitwise what the calls on each model give (single, and ddp
 * on 2 devices), and every refusal has its status and message with nothing changed. The
 * agents' calls without an agreement (decision 0091) are the same calls, refusals included.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strategy/internal.h"
#include "tests/support/rig.h"

#define NP 4096

struct two {
        struct rig r;
        struct strata_module mods1[3];
        struct strata_model m1;
        struct strata_optim o1;
        struct strata_models set;
};

/* Model 0 the rig's, model 1 20-8-tanh-4 (AdamW), model 2 a target of model 1. */
static void two_init(struct two *t, enum strata_strategy_kind kind, int devices)
{
        rig_init(&t->r, 0);
        t->r.cfg.strategy.kind = kind;
        t->r.cfg.strategy.devices = devices;
        t->mods1[0] = (struct strata_module){ .ops = &strata_linear, .out = 8 };
        t->mods1[1] = (struct strata_module){ .ops = &strata_tanh };
        t->mods1[2] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        t->m1 = (struct strata_model){ .in_features = RIG_IN, .nmodules = 3,
                                       .modules = t->mods1 };
        t->o1 = (struct strata_optim)STRATA_OPTIM_INIT;
        t->o1.kind = STRATA_OPTIM_ADAMW;
        t->o1.lr = 0.01f;
        t->set = (struct strata_models)STRATA_MODELS_INIT;
        cr_assert_eq(strata_models_add(&t->set, &t->m1, RIG_CLASSES, &t->o1, NULL), STRATA_OK);
        cr_assert_eq(strata_models_add_target(&t->set, 1, 0.1f, NULL), STRATA_OK);
        t->r.cfg.models = &t->set;
}

/* Every model's parameters, on every device, one after the other into @p out. */
static size_t all_params(struct strata_runtime *rt, int devices, float *out)
{
        size_t at = 0;

        for (int k = 0; k < 3; k++)
                for (int d = 0; d < devices; d++) {
                        const float *p;
                        size_t n;

                        cr_assert_eq(strata_model_parameters(rt, k, d, &p, &n), STRATA_OK);
                        cr_assert_leq(at + n, NP);
                        memcpy(out + at, p, n * sizeof(float));
                        at += n;
                }
        return at;
}

/*
 * 8 steps: models 1 and 0 trained (in that order), model 2 averaged, then all three predict;
 * in one call each (@p together) or a call per model. Parameters into @p par, the last
 * predictions into @p pred, the metrics' losses into @p loss.
 */
static size_t run(struct two *t, int together, float *par, float *pred, double *loss)
{
        static const int trained[2] = { 1, 0 }, all[3] = { 0, 1, 2 };
        int devices = t->r.cfg.strategy.devices;
        struct strata_runtime *rt = rig_open(&t->r.cfg);
        struct strata_metrics m[2];
        struct strata_batch b;
        size_t n;

        strata_loader_reset(&t->r.loader, t->r.idx, 256);
        for (int s = 0; s < 8; s++) {
                cr_assert(strata_loader_next(&t->r.loader, &b));
                if (together) {
                        cr_assert_eq(strata_models_train_step(rt, trained, 2, &b, m), STRATA_OK,
                                     "%s", strata_last_error());
                } else {
                        cr_assert_eq(strata_model_train_step(rt, 1, &b, &m[0]), STRATA_OK);
                        cr_assert_eq(strata_model_train_step(rt, 0, &b, &m[1]), STRATA_OK);
                }
                loss[2 * s] = m[0].loss;
                loss[2 * s + 1] = m[1].loss;
                cr_assert_eq(strata_model_polyak_update(rt, 2), STRATA_OK);
        }
        if (together) {
                float *const out[3] = { pred, pred + RIG_BATCH * RIG_CLASSES,
                                        pred + 2 * RIG_BATCH * RIG_CLASSES };

                cr_assert_eq(strata_models_predict_step(rt, all, 3, &b, out,
                                                        RIG_BATCH * RIG_CLASSES),
                             STRATA_OK, "%s", strata_last_error());
        } else {
                for (int k = 0; k < 3; k++)
                        cr_assert_eq(strata_model_predict_step(rt, k, &b,
                                                               pred + k * RIG_BATCH *
                                                                              RIG_CLASSES,
                                                               RIG_BATCH * RIG_CLASSES),
                                     STRATA_OK);
        }
        n = all_params(rt, devices, par);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return n;
}

static void same_bits(enum strata_strategy_kind kind, int devices)
{
        static float pa[NP], pb[NP], qa[3 * RIG_BATCH * RIG_CLASSES],
                qb[3 * RIG_BATCH * RIG_CLASSES];
        double la[16], lb[16];
        struct two t;
        size_t na, nb;

        two_init(&t, kind, devices);
        na = run(&t, 1, pa, qa, la);
        nb = run(&t, 0, pb, qb, lb);
        cr_assert_eq(na, nb);
        cr_assert(!memcmp(pa, pb, na * sizeof(float)), "the parameters differ");
        cr_assert(!memcmp(qa, qb, sizeof(qa)), "the predictions differ");
        cr_assert(!memcmp(la, lb, sizeof(la)), "the metrics differ");
}

Test(models_together, single_bitwise_the_calls_per_model)
{
        same_bits(STRATA_STRATEGY_SINGLE, 1);
}

Test(models_together, ddp_bitwise_the_calls_per_model)
{
        same_bits(STRATA_STRATEGY_DDP, 2);
}

static void refused(int rc, int status, const char *needle, const char *what)
{
        cr_assert_eq(rc, status, "%s: %s, not %s (%s)", what, strata_strerror(rc),
                     strata_strerror(status), strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), needle), "%s: %s", what,
                           strata_last_error());
}

Test(models_together, refusals_change_nothing)
{
        static float before[NP], after[NP], q0[RIG_BATCH * RIG_CLASSES],
                q1[RIG_BATCH * RIG_CLASSES];
        static const int two[2] = { 0, 1 }, twice[2] = { 1, 1 }, target[2] = { 0, 2 },
                         unknown[2] = { 0, 3 }, four[4] = { 0, 1, 2, 0 };
        float *const out[2] = { q0, q1 }, *const half[2] = { q0, NULL };
        const size_t cap = RIG_BATCH * RIG_CLASSES;
        struct strata_runtime *rt;
        struct strata_batch b;
        struct two t;
        size_t n;

        two_init(&t, STRATA_STRATEGY_SINGLE, 1);
        rt = rig_open(&t.r.cfg);
        strata_loader_reset(&t.r.loader, t.r.idx, 256);
        cr_assert(strata_loader_next(&t.r.loader, &b));
        n = all_params(rt, 1, before);
        memset(q0, 0x5a, sizeof(q0));
        memset(q1, 0x5a, sizeof(q1));
        refused(strata_models_train_step(rt, NULL, 2, &b, NULL), STRATA_EINVAL, "NULL", "NULL");
        refused(strata_models_train_step(rt, two, 0, &b, NULL), STRATA_EINVAL, "0 models",
                "no model");
        refused(strata_models_train_step(rt, four, 4, &b, NULL), STRATA_EINVAL, "4 models",
                "more than the runtime's");
        refused(strata_models_train_step(rt, twice, 2, &b, NULL), STRATA_EINVAL,
                "model 1 named twice", "a model twice");
        refused(strata_models_train_step(rt, target, 2, &b, NULL), STRATA_EINVAL,
                "target copy of model 1", "a target trained");
        refused(strata_models_train_step(rt, unknown, 2, &b, NULL), STRATA_EINVAL,
                "model 3 not in [0, 3)", "an unknown model");
        refused(strata_models_train_step(rt, two, 2, NULL, NULL), STRATA_EINVAL,
                "model 0: batch pointer is NULL", "a NULL batch");
        refused(strata_models_predict_step(rt, two, 2, &b, NULL, cap), STRATA_EINVAL,
                "out is NULL", "no outputs");
        refused(strata_models_predict_step(rt, two, 2, &b, half, cap), STRATA_EINVAL,
                "model 1: predict: out is NULL", "one output NULL");
        refused(strata_models_predict_step(rt, two, 2, &b, out, cap - 1), STRATA_EINVAL,
                "model 0: predict: out holds", "too little room");
        refused(strata_models_predict_step(rt, unknown, 2, &b, out, cap), STRATA_EINVAL,
                "model 3 not in [0, 3)", "an unknown model's prediction");
        b.dim = RIG_IN + 1;
        refused(strata_models_train_step(rt, two, 2, &b, NULL), STRATA_EINVAL, "model 0:",
                "a bad batch");
        b.dim = RIG_IN;
        cr_assert_eq(all_params(rt, 1, after), n);
        cr_assert(!memcmp(before, after, n * sizeof(float)), "a refused call changed a model");
        for (size_t i = 0; i < cap; i++)
                cr_assert(((const unsigned char *)&q0[i])[0] == 0x5a &&
                                  ((const unsigned char *)&q1[i])[0] == 0x5a,
                          "a refused prediction wrote its outputs");
        cr_assert_eq(strata_models_train_step(rt, two, 2, &b, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        refused(strata_models_train_step(rt, two, 2, &b, NULL), STRATA_EINVAL, "not live",
                "a dead runtime");
        refused(strata_models_predict_step(rt, two, 2, &b, out, cap), STRATA_EINVAL,
                "not live", "a dead runtime's prediction");
}

/*
 * strata__models_predict_alike() and strata__models_input_grad_alike() (the agents' calls with
 * no agreement between processes, decision 0091): bitwise the public calls' outputs under ddp
 * on 2 devices, and the same refusals, nothing written.
 */
Test(models_together, alike_calls_are_the_public_calls)
{
        static float qa[2][RIG_BATCH * RIG_CLASSES], qb[2][RIG_BATCH * RIG_CLASSES],
                dout[RIG_BATCH * RIG_CLASSES], dxa[RIG_BATCH * RIG_IN], dxb[RIG_BATCH * RIG_IN];
        static const int two[2] = { 1, 2 }, unknown[2] = { 1, 3 };
        float *const a[2] = { qa[0], qa[1] }, *const b2[2] = { qb[0], qb[1] };
        const size_t cap = RIG_BATCH * RIG_CLASSES;
        struct strata_runtime *rt;
        struct strata_batch b;
        struct two t;

        two_init(&t, STRATA_STRATEGY_DDP, 2);
        rt = rig_open(&t.r.cfg);
        strata_loader_reset(&t.r.loader, t.r.idx, 256);
        cr_assert(strata_loader_next(&t.r.loader, &b));
        cr_assert_eq(strata_models_train_step(rt, (const int[]){ 1 }, 1, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_models_predict_step(rt, two, 2, &b, a, cap), STRATA_OK);
        cr_assert_eq(strata__models_predict_alike(rt, two, 2, &b, b2, cap), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert(!memcmp(qa, qb, sizeof(qa)), "the predictions differ");
        for (size_t i = 0; i < cap; i++)
                dout[i] = (float)(i % 7) - 3.0f;
        cr_assert_eq(strata_model_input_grad(rt, 1, &b, dout, cap, dxa, RIG_BATCH * RIG_IN),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata__models_input_grad_alike(rt, 1, &b, dout, cap, dxb,
                                                     RIG_BATCH * RIG_IN),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert(!memcmp(dxa, dxb, sizeof(dxa)), "the input gradients differ");
        memset(qb, 0x5a, sizeof(qb));
        memset(dxb, 0x5a, sizeof(dxb));
        refused(strata__models_predict_alike(rt, two, 2, &b, b2, cap - 1), STRATA_EINVAL,
                "model 1: predict: out holds", "too little room");
        refused(strata__models_predict_alike(rt, unknown, 2, &b, b2, cap), STRATA_EINVAL,
                "model 3 not in [0, 3)", "an unknown model");
        refused(strata__models_predict_alike(rt, two, 2, &b, NULL, cap), STRATA_EINVAL,
                "out is NULL", "no outputs");
        refused(strata__models_input_grad_alike(rt, 1, &b, dout, cap, dxb, RIG_IN),
                STRATA_EINVAL, "dx holds", "too little room for dx");
        refused(strata__models_input_grad_alike(rt, 2, NULL, dout, cap, dxb,
                                                RIG_BATCH * RIG_IN),
                STRATA_EINVAL, "NULL", "a NULL batch");
        for (size_t i = 0; i < sizeof(qb); i++)
                cr_assert(((const unsigned char *)qb)[i] == 0x5a, "a refusal wrote outputs");
        for (size_t i = 0; i < sizeof(dxb); i++)
                cr_assert(((const unsigned char *)dxb)[i] == 0x5a, "a refusal wrote dx");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
