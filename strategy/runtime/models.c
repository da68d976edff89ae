/*
 * Several models on one runtime (decision 0069): the configuration's model is model 0; a
 * struct strata_models (cfg.models) declares the others, each a trained model (its modules,
 * outputs and optimizer) or a target copy of an earlier one (Polyak averaging, no gradients
 * and no optimizer state). The plan lays out every model's replicas in each device's arena
 * after model 0's, so one model plans what it always has; every model runs on the same
 * workers, communicators and job.
 *
 * What is one model's in the runtime (its replicas, module list, outputs, seed, optimizer,
 * step counters, loss scaler and checkpoint step counts) stays in struct strata_runtime,
 * where every step, checkpoint and export reads it: those fields are the *active* model's.
 * A call on model i swaps model i's fields in (its slot then holds model 0's), runs the
 * one-model call, and swaps them back. The strategy's per-model state (ddp's buckets) is
 * swapped with them: setup prepared every model's at init (decision 0082), so a swap is a
 * few hundred bytes copied and no setup runs on the step path. Between calls model 0 is
 * active.
 * The public calls are models_api.c's, above this file (no cycle between the two).
 */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "nn/loss.h"
#include "nn/precision.h"
#include "strategy/multi.h"

/* A model's part of the runtime, kept here while it is not the active one. */
struct model {
        struct strata__replica *replicas;
        const struct strata_model *model;
        int classes;
        int opt_parts;          /* its split steps' state (decision 0100), in classes' padding */
        uint64_t seed;
        struct strata_optim optim;
        uint64_t step;
        int micro, end_window;
        struct strata_grad_scaler scaler;
        uint64_t ckpt_steps[STRATA_MAX_DEVICES];
        _Alignas(16) unsigned char state[STRATA__MODEL_STATE_BYTES]; /* the strategy's */
};

struct strata__models {
        int n;                                          /* models, model 0 included */
        int active;                                     /* whose fields the runtime holds */
        int target;                                     /* the Polyak job's target */
        int source[STRATA_MAX_MODELS];                  /* a target's source; -1: trained */
        float tau[STRATA_MAX_MODELS];
        struct strata__replica *reps[STRATA_MAX_MODELS]; /* every model's replicas */
        struct model m[STRATA_MAX_MODELS];              /* model i's, while it is not active */
};

/* A target's optimizer: nothing to step, no state slot (SGD without momentum). */
static const struct strata_optim target_optim = { .kind = STRATA_OPTIM_SGD };

/* The seed of model @p i: model 0's is the configuration's, the others' follow from it. */
static uint64_t seed_of(const struct strata_config *c, int i)
{
        return c->seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
}

int strata__models_count(const struct strata_config *c)
{
        return c->models ? 1 + c->models->count : 1;
}

/* Model @p i's modules and outputs (a target's chain ends at a trained model or at model 0). */
static void model_of(const struct strata_config *c, int i, const struct strata_model **m,
                     int *classes)
{
        const struct strata_model_entry *e = i ? &c->models->entry[i - 1] : NULL;

        *m = e && e->model ? e->model : c->model;
        *classes = e && e->model ? e->classes : c->classes;
}

/* A trained model's loss settings and outputs, as config.c checks model 0's. */
static int check_entry(const struct strata_config *c, int i)
{
        const struct strata_model_entry *e = &c->models->entry[i - 1];
        const struct strata_model *m;
        int classes;

        if (e->source >= 0) {
                if (e->source >= i)
                        return strata__fail(STRATA_EINVAL, "model %d: a target of model %d; "
                                            "a target copies an earlier model", i, e->source);
                if (!(e->tau > 0.0f && e->tau <= 1.0f))
                        return strata__fail(STRATA_EINVAL, "model %d: tau %g not in (0, 1]", i,
                                            (double)e->tau);
                return STRATA_OK;
        }
        if (!e->model || !e->model->modules || e->model->nmodules <= 0 ||
            e->model->in_features <= 0)
                return strata__fail(STRATA_EINVAL, "model %d is missing, empty or has no input "
                                                   "width", i);
        model_of(c, i, &m, &classes);
        if ((unsigned)m->reduction >= STRATA_REDUCTION_COUNT || !(m->loss_beta >= 0.0f) ||
            !isfinite(m->loss_beta))
                return strata__fail(STRATA_EINVAL, "model %d: reduction %d or loss_beta %g "
                                    "out of range", i, (int)m->reduction, (double)m->loss_beta);
        if (classes < (strata__float_row(m) ? 1 : 2))
                return strata__fail(STRATA_EINVAL, "model %d: classes %d too few for its loss",
                                    i, classes);
        return strata_optim_check(&e->optim);
}

int strata__models_check(const struct strata_config *c, const struct strata__strategy *st,
                         const struct strata_device_ops *drv)
{
        const char *why = NULL;

        if (!c->models || c->models->count == 0)
                return STRATA_OK;
        if (c->models->count < 0 || c->models->count >= STRATA_MAX_MODELS)
                return strata__fail(STRATA_EINVAL, "models: count %d not in [0, %d]",
                                    c->models->count, STRATA_MAX_MODELS - 1);
        if (!(strata__caps(st) & STRATA__CAP_MODELS))
                why = st->name;
        else if (strata__own_memory(drv))
                why = drv->name;
        else if (c->strategy.invariant)
                why = "invariant mode";
        if (why)
                return strata__fail(STRATA_ENOTSUP, "several models (cfg.models) run under "
                                    "single, ddp, spawn, mpi, zero1 and zero2, in host "
                                    "memory, outside invariant mode; not with %s (decisions "
                                    "0069, 0116)", why);
        for (int i = 1; i < strata__models_count(c); i++)
                STRATA_TRY(check_entry(c, i));
        return STRATA_OK;
}

int strata__models_plan(const struct strata_config *c, int i, struct strata__replica_plan *p,
                        int *classes)
{
        const struct strata_model_entry *e = &c->models->entry[i - 1];

        model_of(c, i, &p->model, classes);
        p->optim = e->source >= 0 ? &target_optim : &e->optim;
        return STRATA_OK;
}

int strata__models_layers(const struct strata_config *c)
{
        int most = c->model->nmodules;

        for (int i = 1; i < strata__models_count(c); i++) {
                const struct strata_model *m;
                int classes;

                model_of(c, i, &m, &classes);
                most = m->nmodules > most ? m->nmodules : most;
        }
        return most;
}

int strata__models_metrics_width(const struct strata_config *c, int world)
{
        int most = strata__metrics_width(c, world);

        for (int i = 1; i < strata__models_count(c); i++) {
                struct strata_config one = *c;
                int w;

                model_of(c, i, &one.model, &one.classes);
                w = strata__metrics_width(&one, world);
                most = w > most ? w : most;
        }
        return most;
}

int strata__models_layout(const struct strata_config *c, struct strata_arena *a,
                          struct strata__models **out)
{
        struct strata__models *ms;
        int n = strata__models_count(c);
        void *p;

        *out = NULL;
        if (n == 1) /* one model: nothing more, the plan is what it was */
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*ms), 64, &p));
        ms = p;
        if (ms)
                memset(ms, 0, sizeof(*ms));
        for (int i = 1; i < n; i++) {
                STRATA_TRY(strata_arena_alloc(a, strata__replica_bytes *
                                                         (size_t)c->strategy.devices, 0, &p));
                if (!ms)
                        continue;
                ms->reps[i] = p;
                ms->source[i] = c->models->entry[i - 1].source;
                ms->tau[i] = c->models->entry[i - 1].tau;
                ms->m[i].replicas = p;
                model_of(c, i, &ms->m[i].model, &ms->m[i].classes);
                ms->m[i].seed = seed_of(c, i);
                ms->m[i].optim = ms->source[i] >= 0 ? target_optim : c->models->entry[i - 1].optim;
                strata__scaler_init(&ms->m[i].scaler, c->precision.loss_scale_init,
                                    (uint32_t)c->precision.loss_scale_interval);
        }
        if (ms) {
                ms->n = n;
                ms->source[0] = -1;
        }
        *out = ms;
        return STRATA_OK;
}

struct strata__replica *strata__models_replicas(const struct strata__models *ms, int i)
{
        return ms->reps[i];
}

void strata__models_bind(struct strata_runtime *rt, struct strata__models *ms)
{
        rt->models = ms;
        if (ms)
                ms->reps[0] = rt->replicas;
        if (rt->cfg.models)
                rt->cfg.models->in_use = rt;
}

/*
 * Exchange @p n bytes of @p a and @p b (a model's fields; inlined per field, vectorised), eight
 * at a time while eight are left.
 */
static void exchange(void *a, void *b, size_t n)
{
        unsigned char *x = a, *y = b;
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t s, t;

                memcpy(&s, x + i, 8);
                memcpy(&t, y + i, 8);
                memcpy(x + i, &t, 8);
                memcpy(y + i, &s, 8);
        }
        for (; i < n; i++) {
                unsigned char t = x[i];

                x[i] = y[i];
                y[i] = t;
        }
}

#define SWAP(a, b) exchange(&(a), &(b), sizeof(a) == sizeof(b) ? sizeof(a) : 0)

/* Exchange the runtime's one-model fields, and the strategy's model state, with slot @p m. */
static void swap(struct strata_runtime *rt, struct model *m)
{
        void *(*state)(struct strata_runtime *, size_t *) =
                STRATA__INHERITED(rt->strategy, ops.model_state);
        size_t n = 0;

        if (state) {
                void *s = state(rt, &n);

                exchange(s, m->state, n <= sizeof(m->state) ? n : 0);
        }
        SWAP(rt->replicas, m->replicas);
        SWAP(rt->cfg.model, m->model);
        SWAP(rt->cfg.classes, m->classes);
        SWAP(rt->cfg.seed, m->seed);
        SWAP(rt->cfg.optim, m->optim);
        SWAP(rt->step, m->step);
        SWAP(rt->micro, m->micro);
        SWAP(rt->end_window, m->end_window);
        SWAP(rt->opt_parts, m->opt_parts);
        SWAP(rt->scaler, m->scaler);
        /* the runtime's devices' entries only: no call reads one past them (decision 0110) */
        exchange(rt->ckpt_steps, m->ckpt_steps, sizeof(rt->ckpt_steps[0]) *
                                                        (size_t)rt->nreplicas);
}

int strata__models_enter(struct strata_runtime *rt, int i)
{
        struct strata__models *ms = rt->models;

        if (i == 0)
                return STRATA_OK;
        swap(rt, &ms->m[i]);
        ms->active = i;
        return STRATA_OK;
}

void strata__models_leave(struct strata_runtime *rt)
{
        struct strata__models *ms = rt->models;

        if (!ms || ms->active == 0)
                return;
        swap(rt, &ms->m[ms->active]);
        ms->active = 0;
}

void *strata__models_state(struct strata_runtime *rt, int i)
{
        return rt->models->m[i].state;
}

/* One device's Polyak step of the target ms->target. */
static int polyak_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__models *ms = rt->models;
        int t = ms->target;

        (void)m;
        strata__replica_polyak(strata__replica_at(ms->reps[t], dev),
                               strata__replica_at(ms->reps[ms->source[t]], dev), ms->tau[t]);
        return STRATA_OK;
}

/* Target @p t's parameters moved towards its source's by @p tau (1: copied) on every device. */
static int polyak(struct strata_runtime *rt, int t, float tau)
{
        float keep = rt->models->tau[t];
        int rc;

        rt->models->target = t;
        rt->models->tau[t] = tau;
        rc = strata__multi_run(rt, polyak_dev);
        rt->models->tau[t] = keep;
        return rc;
}

int strata__models_polyak(struct strata_runtime *rt, int t)
{
        return polyak(rt, t, rt->models->tau[t]);
}

int strata__models_source(const struct strata_runtime *rt, int i)
{
        return rt->models && i > 0 && i < rt->models->n ? rt->models->source[i] : -1;
}

void strata__models_info(const struct strata_runtime *rt, int i, const struct strata_model **m,
                         const struct strata_optim **o, int *source, float *tau)
{
        const struct model *k = &rt->models->m[i];

        *m = k->model;
        *o = &k->optim;
        *source = rt->models->source[i];
        *tau = rt->models->tau[i];
}

int strata__models_n(const struct strata_runtime *rt)
{
        return rt->models ? rt->models->n : 1;
}

const float *strata__models_params(const struct strata_runtime *rt, int i, int dev, size_t *n)
{
        const struct strata__replica_view *v =
                strata__replica_view(strata__replica_at(rt->models->reps[i], dev));

        *n = v->nparam;
        return v->params;
}

int strata__models_connect(struct strata_runtime *rt)
{
        struct strata__models *ms = rt->models;

        for (int i = 1; ms && i < ms->n; i++) {
                int rc;

                STRATA_TRY(strata__models_enter(rt, i));
                rc = strata__multi_connect(rt);
                strata__models_leave(rt);
                STRATA_TRY(rc);
                if (ms->source[i] >= 0) /* a target starts as its source */
                        STRATA_TRY(polyak(rt, i, 1.0f));
                for (int d = 0; d < rt->nreplicas; d++)
                        strata_arena_seal(strata__replica_arena(strata__replica_at(ms->reps[i],
                                                                                   d)));
        }
        return STRATA_OK;
}

