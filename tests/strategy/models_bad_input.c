/*
 * Several models on one runtime (decision 0069): every refusal, with its status and message,
 * and nothing changed (the set of models, every model's parameters).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel/lifecycle.h"
#include "strategy/internal.h"
#include "tests/support/rig.h"

#define NP 4096

static void refused(int rc, int status, const char *needle, const char *what)
{
        cr_assert_eq(rc, status, "%s: %s, not %s (%s)", what, strata_strerror(rc),
                     strata_strerror(status), strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), needle), "%s: %s", what,
                           strata_last_error());
}

Test(models_bad_input, declarations_refused_and_the_set_unchanged)
{
        struct strata_models s = STRATA_MODELS_INIT, before;
        struct strata_optim bad = STRATA_OPTIM_INIT;
        struct rig r;
        int index = -7;

        rig_init(&r, 0);
        refused(strata_models_add(NULL, &r.model, 4, NULL, &index), STRATA_EINVAL, "NULL",
                "NULL set");
        refused(strata_models_add(&s, NULL, 4, NULL, &index), STRATA_EINVAL, "model is NULL",
                "NULL model");
        refused(strata_models_add(&s, &r.model, 0, NULL, &index), STRATA_EINVAL, "classes 0",
                "no outputs");
        bad.lr = -1.0f;
        cr_assert_neq(strata_models_add(&s, &r.model, 4, &bad, &index), STRATA_OK,
                      "a negative learning rate");
        refused(strata_models_add_target(NULL, 0, 0.5f, &index), STRATA_EINVAL, "NULL",
                "NULL set");
        refused(strata_models_add_target(&s, 1, 0.5f, &index), STRATA_EINVAL, "target of itself",
                "a target of itself");
        refused(strata_models_add_target(&s, 2, 0.5f, &index), STRATA_EINVAL, "not in [0, 0]",
                "a later source");
        refused(strata_models_add_target(&s, -1, 0.5f, &index), STRATA_EINVAL, "not in [0, 0]",
                "a negative source");
        refused(strata_models_add_target(&s, 0, 0.0f, &index), STRATA_EINVAL, "tau 0",
                "tau 0");
        refused(strata_models_add_target(&s, 0, -0.5f, &index), STRATA_EINVAL, "tau -0.5",
                "tau < 0");
        refused(strata_models_add_target(&s, 0, 1.5f, &index), STRATA_EINVAL, "tau 1.5",
                "tau > 1");
        refused(strata_models_add_target(&s, 0, NAN, &index), STRATA_EINVAL, "not in (0, 1]",
                "tau NaN");
        cr_assert_eq(s.count, 0, "a refused declaration added a model");
        cr_assert_eq(index, -7, "a refused declaration wrote the index");
        cr_assert_eq(strata_models_add_target(&s, 0, 1.0f, &index), STRATA_OK, "tau 1 copies");
        cr_assert_eq(index, 1);
        for (int i = 1; i < STRATA_MAX_MODELS - 1; i++)
                cr_assert_eq(strata_models_add(&s, &r.model, 4, NULL, &index), STRATA_OK);
        cr_assert_eq(index, STRATA_MAX_MODELS - 1);
        before = s;
        refused(strata_models_add(&s, &r.model, 4, NULL, &index), STRATA_EINVAL, "at most 8",
                "one model too many");
        refused(strata_models_add_target(&s, 0, 0.5f, &index), STRATA_EINVAL, "at most 8",
                "one target too many");
        cr_assert(!memcmp(&before, &s, sizeof(s)));
}

/* The rig's model 0, a target of it (model 1) and model 2 (the rig's model again, AdamW). */
static void two_more(struct rig *r, struct strata_models *s)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        rig_init(r, 0);
        o.kind = STRATA_OPTIM_ADAMW;
        *s = (struct strata_models)STRATA_MODELS_INIT;
        cr_assert_eq(strata_models_add_target(s, 0, 0.5f, NULL), STRATA_OK);
        cr_assert_eq(strata_models_add(s, &r->model, RIG_CLASSES, &o, NULL), STRATA_OK);
        r->cfg.models = s;
}

Test(models_bad_input, configurations_refused_at_plan)
{
        struct strata_models s;
        struct rig r;

        two_more(&r, &s);
        r.cfg.strategy.devices = 2;
        r.cfg.strategy.kind = STRATA_STRATEGY_DP;
        rig_plan_refused(&r, STRATA_ENOTSUP, "dp", "not with dp");
        r.cfg.strategy.kind = STRATA_STRATEGY_FSDP;
        rig_plan_refused(&r, STRATA_ENOTSUP, "fsdp", "not with fsdp");
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.invariant = 1;
        rig_plan_refused(&r, STRATA_ENOTSUP, "invariant", "not with invariant mode");
        r.cfg.strategy.invariant = 0;
        s.entry[1].classes = 3; /* the rig's model outputs 4 */
        rig_plan_refused(&r, STRATA_EINVAL, "classes 3", "model 2 outputs 4 values per row");
        s.entry[1].classes = RIG_CLASSES;
        s.entry[0].tau = 2.0f; /* written past strata_models_add_target() */
        rig_plan_refused(&r, STRATA_EINVAL, "tau 2", "model 1: tau 2");
        s.entry[0].tau = 0.5f;
        s.entry[0].source = 1;
        rig_plan_refused(&r, STRATA_EINVAL, "a target of itself", "a target copies an earlier");
        s.entry[0].source = 0;
        s.count = STRATA_MAX_MODELS;
        rig_plan_refused(&r, STRATA_EINVAL, "count 8", "count 8 not in [0, 7]");
        s.count = 2;
        {
                struct strata_plan_info pl;

                cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        }
}

/* Every model's parameters on device 0, one after another, into @p out; returns how many. */
static size_t all_params(struct strata_runtime *rt, float *out)
{
        size_t at = 0;

        for (int k = 0; k < 3; k++) {
                const float *p;
                size_t n;

                cr_assert_eq(strata_model_parameters(rt, k, 0, &p, &n), STRATA_OK);
                cr_assert_leq(at + n, (size_t)NP);
                memcpy(out + at, p, n * sizeof(float));
                at += n;
        }
        return at;
}

Test(models_bad_input, runtime_calls_refused_and_nothing_changes)
{
        static float before[NP], after[NP], logits[RIG_BATCH * RIG_CLASSES];
        struct strata_models s;
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        const float *p;
        size_t n, got;
        int bad[] = { -1, 3 }, count = 0;

        two_more(&r, &s);
        rt = rig_open(&r.cfg);
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        n = all_params(rt, before);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int k = bad[i];
                char msg[32];

                snprintf(msg, sizeof(msg), "model %d not in [0, 3)", k);
                refused(strata_model_train_step(rt, k, &b, &m), STRATA_EINVAL, msg, "train");
                refused(strata_model_eval_step(rt, k, &b, &m), STRATA_EINVAL, msg, "eval");
                refused(strata_model_predict_step(rt, k, &b, logits, RIG_BATCH * RIG_CLASSES),
                        STRATA_EINVAL, msg, "predict");
                refused(strata_model_polyak_update(rt, k), STRATA_EINVAL, msg, "polyak");
                refused(strata_model_parameters(rt, k, 0, &p, &got), STRATA_EINVAL, msg,
                        "parameters");
                refused(strata_model_save_checkpoint(rt, k, "/nonexistent/x", NULL, 0),
                        STRATA_EINVAL, msg, "save");
                refused(strata_model_load_checkpoint(rt, k, "/nonexistent/x", NULL, 0, NULL,
                                                     NULL),
                        STRATA_EINVAL, msg, "load");
                refused(strata_model_export_safetensors(rt, k, "/nonexistent/x"), STRATA_EINVAL,
                        msg, "export");
                refused(strata_model_load_weights(rt, k, "/nonexistent/x", 0, NULL),
                        STRATA_EINVAL, msg, "load weights");
                refused(strata_model_input_grad(rt, k, &b, logits, RIG_BATCH * RIG_CLASSES,
                                                logits, RIG_BATCH * RIG_CLASSES),
                        STRATA_EINVAL, msg, "input gradient");
        }
        refused(strata_model_train_step(rt, 1, &b, &m), STRATA_EINVAL, "target copy of model 0",
                "an optimizer step of a target");
        refused(strata_model_end_accumulation_window(rt, 1), STRATA_EINVAL,
                "target copy of model 0", "a target's accumulation window");
        refused(strata_model_end_accumulation_window(rt, 3), STRATA_EINVAL,
                "model 3 not in [0, 3)", "an unknown model's window");
        refused(strata_model_polyak_update(rt, 0), STRATA_EINVAL, "model 0 is trained",
                "Polyak on model 0");
        refused(strata_model_polyak_update(rt, 2), STRATA_EINVAL, "model 2 is trained",
                "Polyak on a trained model");
        refused(strata_model_parameters(rt, 1, 2, &p, &got), STRATA_EINVAL, "device 2",
                "a device out of range");
        refused(strata_model_parameters(rt, 1, 0, NULL, &got), STRATA_EINVAL, "NULL", "NULL");
        refused(strata_model_count(rt, NULL), STRATA_EINVAL, "NULL", "count NULL");
        b.dim = RIG_IN + 1; /* a bad batch: refused by the model's own checks */
        refused(strata_model_train_step(rt, 2, &b, &m), STRATA_EINVAL, "wide", "a bad batch");
        b.dim = RIG_IN;
        refused(strata_models_add(&s, &r.model, RIG_CLASSES, NULL, NULL), STRATA_EBADSTATE,
                "before strata_init()", "a model added after init");
        refused(strata_models_add_target(&s, 0, 0.5f, NULL), STRATA_EBADSTATE,
                "before strata_init()", "a target added after init");
        cr_assert_eq(s.count, 2);
        cr_assert_eq(strata_model_count(rt, &count), STRATA_OK);
        cr_assert_eq(count, 3, "the runtime's models changed");
        cr_assert_eq(all_params(rt, after), n);
        cr_assert(!memcmp(before, after, n * sizeof(float)), "a refused call changed a model");
        /* A runtime in ERROR: a Polyak update is refused. */
        cr_assert_eq(strata__inject_failure(rt, 0, STRATA__EV_TRAINING_STEP, STRATA_EIO),
                     STRATA_OK);
        cr_assert_eq(strata_model_train_step(rt, 2, &b, &m), STRATA_EIO);
        refused(strata_model_polyak_update(rt, 1), STRATA_EBADSTATE, "not READY",
                "Polyak in ERROR");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        refused(strata_model_count(rt, &count), STRATA_EINVAL, "not live", "a dead runtime");
        refused(strata_model_polyak_update(rt, 1), STRATA_EINVAL, "not live", "a dead runtime");
        cr_assert_eq(strata_models_add_target(&s, 0, 0.5f, NULL), STRATA_OK,
                     "the set is free again after teardown: %s", strata_last_error());
}
