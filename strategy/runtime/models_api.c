/*
 * The public calls of several models on one runtime (decision 0069): declaring the models
 * beside the configuration's own (struct strata_models), and the calls that take a model's
 * index, each the one-model call run with that model active (models.c). Nothing of the
 * library calls these.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel/lifecycle.h"
#include "strata/status.h"
#include "base/base.h"
#include "strategy/internal.h"

static int in_use(const struct strata_models *s)
{
        int st = strata_state(s->in_use);

        return s->in_use && st >= 0 && st != STRATA_STATE_TORNDOWN;
}

/* Room for one more model in @p s, which no live runtime was planned from. */
static int can_add(const struct strata_models *s, const char *what)
{
        if (!s)
                return strata__fail(STRATA_EINVAL, "%s: models is NULL", what);
        if (in_use(s))
                return strata__fail(STRATA_EBADSTATE, "%s: runtime %p was planned from these "
                                    "models; a model is added before strata_init()", what,
                                    (const void *)s->in_use);
        if (s->count < 0 || s->count >= STRATA_MAX_MODELS - 1)
                return strata__fail(STRATA_EINVAL, "%s: %d models beside model 0 already; at "
                                    "most %d in all", what, s->count, STRATA_MAX_MODELS);
        return STRATA_OK;
}

int strata_models_add(struct strata_models *s, const struct strata_model *model, int classes,
                      const struct strata_optim *optim, int *index)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        STRATA_TRY(can_add(s, "models_add"));
        if (!model || !model->modules || model->nmodules <= 0 || model->in_features <= 0)
                return strata__fail(STRATA_EINVAL, "models_add: the model is NULL, empty or "
                                                   "has no input width");
        if (classes < 1)
                return strata__fail(STRATA_EINVAL, "models_add: classes %d: need >= 1",
                                    classes);
        if (optim)
                o = *optim;
        STRATA_TRY(strata_optim_check(&o));
        s->entry[s->count] = (struct strata_model_entry){ .model = model, .classes = classes,
                                                          .source = -1, .optim = o };
        if (index)
                *index = s->count + 1;
        s->count++;
        return STRATA_OK;
}

int strata_models_add_target(struct strata_models *s, int source, float tau, int *index)
{
        struct strata_model_entry e = { .source = source, .tau = tau };

        STRATA_TRY(can_add(s, "models_add_target"));
        if (source == s->count + 1)
                return strata__fail(STRATA_EINVAL, "models_add_target: model %d would be a "
                                                   "target of itself", source);
        if (source < 0 || source > s->count)
                return strata__fail(STRATA_EINVAL, "models_add_target: source %d not in [0, "
                                                   "%d] (the models declared so far)",
                                    source, s->count);
        if (!(tau > 0.0f && tau <= 1.0f))
                return strata__fail(STRATA_EINVAL, "models_add_target: tau %g not in (0, 1]",
                                    (double)tau);
        if (source > 0) { /* model 0's are the configuration's, taken at init */
                e.model = s->entry[source - 1].model;
                e.classes = s->entry[source - 1].classes;
        }
        s->entry[s->count] = e;
        if (index)
                *index = s->count + 1;
        s->count++;
        return STRATA_OK;
}

/* ---- the public calls on one model ---- */

static int model_arg(const struct strata_runtime *rt, int model, int trained)
{
        int n = strata__models_n(rt);

        if (model < 0 || model >= n)
                return strata__fail(STRATA_EINVAL, "model %d not in [0, %d)", model, n);
        if (trained && strata__models_source(rt, model) >= 0)
                return strata__fail(STRATA_EINVAL, "model %d is a target copy of model %d: it "
                                    "has no gradients and no optimizer; "
                                    "strata_model_polyak_update() moves it", model,
                                    strata__models_source(rt, model));
        return STRATA_OK;
}

/* A live runtime, a model @p model of it (a trained one when @p trained), made active. */
static int enter(struct strata_runtime *rt, int model, int trained)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(model_arg(rt, model, trained));
        return strata__models_enter(rt, model);
}

int strata_model_count(const struct strata_runtime *rt, int *n)
{
        STRATA_TRY(strata__check_rt(rt));
        if (!n)
                return strata__fail(STRATA_EINVAL, "model_count: n is NULL");
        *n = strata__models_n(rt);
        return STRATA_OK;
}

int strata_model_train_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                            struct strata_metrics *m)
{
        int rc;

        STRATA_TRY(enter(rt, model, 1));
        rc = strata_train_step(rt, b, m);
        strata__models_leave(rt);
        return rc;
}

int strata_model_end_accumulation_window(struct strata_runtime *rt, int model)
{
        int rc;

        STRATA_TRY(enter(rt, model, 1));
        rc = strata_end_accumulation_window(rt);
        strata__models_leave(rt);
        return rc;
}

int strata_model_eval_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                           struct strata_metrics *m)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_eval_step(rt, b, m);
        strata__models_leave(rt);
        return rc;
}

int strata_model_predict_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                              float *out, size_t capacity)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_predict_step(rt, b, out, capacity);
        strata__models_leave(rt);
        return rc;
}

int strata_model_polyak_update(struct strata_runtime *rt, int target)
{
        int s;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(model_arg(rt, target, 0));
        if (strata__models_source(rt, target) < 0)
                return strata__fail(STRATA_EINVAL, "polyak_update: model %d is trained, not a "
                                                   "target copy", target);
        s = strata_state(rt);
        if (s != STRATA_STATE_READY)
                return strata__fail(STRATA_EBADSTATE, "polyak_update: runtime is %s, not READY",
                                    strata_state_name(s));
        return strata__models_polyak(rt, target);
}

int strata_model_parameters(const struct strata_runtime *rt, int model, int dev,
                            const float **p, size_t *n)
{
        int s;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(model_arg(rt, model, 0));
        if (dev < 0 || dev >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "device %d not in [0, %d)", dev,
                                    rt->nreplicas);
        if (!p || !n)
                return strata__fail(STRATA_EINVAL, "model_parameters: NULL output");
        s = strata_state(rt);
        if (s < STRATA_STATE_READY || s == STRATA_STATE_TORNDOWN)
                return strata__fail(STRATA_EBADSTATE, "runtime is %s: parameters not ready",
                                    strata_state_name(s));
        if (model == 0)
                return strata_parameters(rt, dev, p, n);
        *p = strata__models_params(rt, model, dev, n);
        return STRATA_OK;
}

int strata_model_save_checkpoint(struct strata_runtime *rt, int model, const char *path,
                                 const void *app, size_t app_bytes)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_save_checkpoint(rt, path, app, app_bytes);
        strata__models_leave(rt);
        return rc;
}

int strata_model_load_checkpoint(struct strata_runtime *rt, int model, const char *path,
                                 void *app, size_t app_cap, size_t *app_bytes,
                                 struct strata_ckpt_info *info)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_load_checkpoint(rt, path, app, app_cap, app_bytes, info);
        strata__models_leave(rt);
        return rc;
}

int strata_model_export_safetensors(struct strata_runtime *rt, int model, const char *path)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_export_safetensors(rt, path);
        strata__models_leave(rt);
        return rc;
}

int strata_model_input_grad(struct strata_runtime *rt, int model, const struct strata_batch *b,
                            const float *dout, size_t dout_count, float *dx, size_t capacity)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_input_grad(rt, b, dout, dout_count, dx, capacity);
        strata__models_leave(rt);
        return rc;
}

int strata_model_load_weights(struct strata_runtime *rt, int model, const char *path,
                              unsigned flags, struct strata_weights_info *info)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata_load_weights(rt, path, flags, info);
        strata__models_leave(rt);
        return rc;
}

/* ---- several models on one batch, one agreement (decision 0082) ---- */

/* @p n models @p models of @p rt: known, each once, trained ones when @p trained. */
static int models_arg(const struct strata_runtime *rt, const int *models, int n, int trained)
{
        if (!models)
                return strata__fail(STRATA_EINVAL, "models is NULL");
        if (n < 1 || n > strata__models_n(rt))
                return strata__fail(STRATA_EINVAL, "%d models; 1 to %d (the runtime's)", n,
                                    strata__models_n(rt));
        for (int k = 0; k < n; k++) {
                STRATA_TRY(model_arg(rt, models[k], trained));
                for (int j = 0; j < k; j++)
                        if (models[j] == models[k])
                                return strata__fail(STRATA_EINVAL, "model %d named twice "
                                                    "(entries %d and %d)", models[k], j, k);
        }
        return STRATA_OK;
}

/* Refusal @p rc of a batch by model @p model, saying which. */
static int name_model(int rc, int model)
{
        char msg[512];

        snprintf(msg, sizeof(msg), "%s", strata__last_reason(rc));
        return strata__fail(rc, "model %d: %s", model, msg);
}

/*
 * The arguments, READY, then every model's verdict on batch @p b (the first refusal's),
 * agreed between the processes once (unless @p alike: strata__models_predict_alike()), with
 * *@p hold (NULL: none) made every process's (strata__api_agreed()).
 * @p out: the predictions' arrays (NULL: training).
 */
static int check_all(struct strata_runtime *rt, const int *models, int n,
                     const struct strata_batch *b, float *const *out, size_t capacity,
                     int alike, int *hold)
{
        int rc = STRATA_OK;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(models_arg(rt, models, n, !out));
        STRATA_TRY(strata__api_ready(rt, !out));
        for (int k = 0; k < n && rc == STRATA_OK; k++) {
                STRATA_TRY(strata__models_enter(rt, models[k]));
                rc = strata__api_check(rt, b, out != NULL, out ? out[k] : NULL, capacity);
                strata__models_leave(rt);
                if (rc != STRATA_OK && n > 1)
                        rc = name_model(rc, models[k]);
        }
        /* an index's bounds are values read: agreed (the agents' batches have none) */
        return alike && !(b && b->index) ? rc : strata__api_agreed(rt, rc, b, hold);
}

/*
 * Whether a call's losses may be judged together after its last step, as far as the job's
 * configuration goes: the loss's sums are each device's own (not invariant mode's tree). The
 * caller's metrics (it reads each model's) are the call's own and differ between processes:
 * the batch's agreement makes them every process's. A trace does not enter: a held step
 * records this process's loss.
 */
static int may_hold(const struct strata_runtime *rt)
{
        return !strata__invariant_chunks(&rt->cfg);
}

/*
 * The first of @p held's models (bits of @p models' indices), each stepped at @p steps, as
 * the call's verdict; @p rc: the status of model @p at's step (STRATA_OK, or what ended the
 * call there: its refused gradient, a loss not finite, a stop request), said after it.
 */
static int held_loss(const int *models, unsigned held, const unsigned long long *steps,
                     int at, int rc)
{
        char then[512] = "";
        int k = 0;

        while (!(held & 1u << k))
                k++;
        if (rc == STRATA_OK)
                snprintf(then, sizeof(then), "those of the call's later models were taken");
        else
                snprintf(then, sizeof(then), "then model %d: %s", models[at],
                         strata__last_reason(rc));
        return strata__fail(STRATA_ENONFINITE, "model %d: step %llu: the loss is not finite on "
                                               "a device; training diverged (its step was "
                                               "taken; lower the learning rate or clip "
                                               "gradients; allow_nonfinite goes on); %s",
                            models[k], steps[k], then);
}

/*
 * Each model's step in turn, the batch checked. With @p hold (every process's call passes no
 * metrics; the callers pass 0 with @p m, and the batch's agreement only clears it) the losses
 * of all but the last model are held: judged with the last step's exchange of metrics (one
 * where n make n), which carries the held losses that were not finite on each process
 * (decision 0097). A gradient that is not finite at a held model is the job's verdict at once,
 * as before (the earlier held losses, this process's alone, are not said). Held losses are the
 * verdict in preference to the last model's refusal (named after them) and to a stop request
 * between the models (one process only: across processes a stop is the job's at an exchange,
 * which a held step does not make; the request stays).
 */
static int train_all(struct strata_runtime *rt, const int *models, int n,
                     const struct strata_batch *b, struct strata_metrics *m, int hold)
{
        unsigned long long steps[STRATA_MAX_MODELS];
        unsigned held = 0;

        hold = hold && may_hold(rt);
        for (int k = 0; k < n; k++) {
                int last = k == n - 1, rc;

                STRATA_TRY(strata__models_enter(rt, models[k]));
                rc = strata__api_train(rt, b, m ? &m[k] : NULL, hold && !last,
                                       hold && last ? &held : NULL);
                steps[k] = (unsigned long long)(rt->step - 1);
                if (rc == STRATA_OK && hold && !last && !rt->cfg.train.allow_nonfinite &&
                    !strata__metrics_loss_finite(rt))
                        held |= 1u << k;
                strata__models_leave(rt);
                if (held && (rc == STRATA_ESTOPPED || (last && (rc == STRATA_OK ||
                                                                rc == STRATA_ENONFINITE))))
                        return held_loss(models, held, steps, k, rc);
                STRATA_TRY(rc);
        }
        return STRATA_OK;
}

int strata_models_train_step(struct strata_runtime *rt, const int *models, int n,
                             const struct strata_batch *b, struct strata_metrics *m)
{
        int hold = !m;

        STRATA_TRY(check_all(rt, models, n, b, NULL, 0, 0, &hold));
        return train_all(rt, models, n, b, m, hold);
}

/*
 * Whether every value of the active model's training batch that its checks would refuse (an
 * input or a target that is not finite) makes a gradient that is not finite instead, which
 * every process learns at the step (decision 0091): a model whose shape carries such a value
 * into a weight gradient (strata__loss_values_in_gradients()), in fp32 (no loss scaler skips
 * a step) and without allow_nonfinite (the gradients are checked).
 */
static int values_in_gradients(const struct strata_runtime *rt)
{
        return strata__loss_values_in_gradients(rt->cfg.model) &&
               rt->cfg.precision.kind == STRATA_PRECISION_32 && !rt->cfg.train.allow_nonfinite;
}

/*
 * The models' verdicts on @p b's sizes where every process passes the same (no value or
 * index read, nothing exchanged): STRATA_ENOTSUP where a value could be refused (the public
 * call then decides), else the first refusal of the sizes, or STRATA_OK.
 */
static int sizes_all(struct strata_runtime *rt, const int *models, int n,
                     const struct strata_batch *b)
{
        int rc = STRATA_OK;

        STRATA_TRY(models_arg(rt, models, n, 1));
        STRATA_TRY(strata__api_ready(rt, 1));
        if (b && b->index)
                return STRATA_ENOTSUP;
        for (int k = 0; k < n && rc == STRATA_OK; k++) {
                STRATA_TRY(strata__models_enter(rt, models[k]));
                rc = values_in_gradients(rt) ? strata__api_check_sizes(rt, b) : STRATA_ENOTSUP;
                strata__models_leave(rt);
                if (rc != STRATA_OK && rc != STRATA_ENOTSUP && n > 1)
                        rc = name_model(rc, models[k]);
        }
        return rc;
}

int strata__models_train_alike(struct strata_runtime *rt, const int *models, int n,
                               const struct strata_batch *b)
{
        int rc;

        STRATA_TRY(strata__check_rt(rt));
        if (rt->world == rt->nreplicas) /* one process: the public call exchanges nothing */
                return strata_models_train_step(rt, models, n, b, NULL);
        rc = sizes_all(rt, models, n, b);
        if (rc == STRATA_ENOTSUP)
                return strata_models_train_step(rt, models, n, b, NULL);
        STRATA_TRY(rc);
        return train_all(rt, models, n, b, NULL, 1);
}

/* strata_models_predict_step(), its verdict agreed unless @p alike. */
static int predict_all(struct strata_runtime *rt, const int *models, int n,
                       const struct strata_batch *b, float *const *out, size_t capacity,
                       int alike)
{
        if (!out)
                return strata__fail(STRATA_EINVAL, "models_predict_step: out is NULL");
        STRATA_TRY(check_all(rt, models, n, b, out, capacity, alike, NULL));
        for (int k = 0; k < n; k++) {
                int rc;

                STRATA_TRY(strata__models_enter(rt, models[k]));
                rc = strata__api_predict(rt, b, out[k]);
                strata__models_leave(rt);
                STRATA_TRY(rc);
        }
        return STRATA_OK;
}

int strata_models_predict_step(struct strata_runtime *rt, const int *models, int n,
                               const struct strata_batch *b, float *const *out,
                               size_t capacity)
{
        return predict_all(rt, models, n, b, out, capacity, 0);
}

int strata__models_predict_alike(struct strata_runtime *rt, const int *models, int n,
                                 const struct strata_batch *b, float *const *out,
                                 size_t capacity)
{
        return predict_all(rt, models, n, b, out, capacity, 1);
}

int strata__models_input_grad_alike(struct strata_runtime *rt, int model,
                                    const struct strata_batch *b, const float *dout,
                                    size_t dout_count, float *dx, size_t capacity)
{
        int rc;

        STRATA_TRY(enter(rt, model, 0));
        rc = strata__api_input_grad(rt, b, dout, dout_count, dx, capacity, 0);
        strata__models_leave(rt);
        return rc;
}
