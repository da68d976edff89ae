/*
 * The `dp` strategy (DataParallel): one process, the master copy on device 0. Every step
 * replicates the master's parameters and running state to the other devices, runs every
 * module's replication callback (copy 0 first, when enabled), splits the batch along rows,
 * runs forward and backward on all devices in parallel, reduces the gradients to the master in
 * device order and steps the optimizer on the master's state only. Where the driver allows it
 * (its update_range kernel), every device's worker computes its own range of the
 * master's update, the range it has just reduced, into its own replica and then into every
 * other replica: the update is elementwise, so this is bitwise the master's step, and the
 * next replication finds every replica already holding the master's parameters.
 *
 * Parent: the multi-device parent (strategy/multi.c); dp aligns its replicas before every
 * batch and evaluation (align: replicate), overrides BACKWARD_DONE (the master's step), and
 * after backward reduces to the master.
 */
#include <string.h>

#include "strata/status.h"
#include "nn/shape.h"
#include "strategy/multi.h"

struct dp {
        struct strata__multi m;       /* first: the parents' state */
        void **layer_ctx;             /* per layer, the context its copies share */
        int replicas_current;         /* every replica holds the master's parameters */
};

static struct dp *dp_of(const struct strata_runtime *rt)
{
        return rt->priv;
}

static int dp_validate(const struct strata__strategy *st, const struct strata_config *c,
                       const struct strata_device_ops *drv)
{
        if (c->strategy.sync_bn && !c->strategy.replication_callbacks)
                return strata__fail(STRATA_EINVAL,
                                    "dp with sync_bn needs replication callbacks: call "
                                    "strata_patch_replication_callback() on the config");
        return strata__multi_validate(st, c, drv);
}

static int dp_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                     struct strata_arena *a, void **priv)
{
        struct strata__shape_walk w;
        struct dp *d;
        void *p, *q;

        STRATA_TRY(strata_arena_alloc(a, sizeof(*d), 64, &p));
        d = p;
        if (d)
                memset(d, 0, sizeof(*d));
        STRATA_TRY(strata__multi_layout(c, drv, a, d ? &d->m : NULL));
        STRATA_TRY(strata_arena_alloc(a, sizeof(void *) * (size_t)c->model->nmodules, 0, &p));
        if (d)
                d->layer_ctx = p;
        STRATA_TRY(strata__shape_start(c->model, &w));
        for (int i = 0; i < c->model->nmodules; i++) {
                const struct strata_module *mod = &c->model->modules[i];
                struct strata_layer l;
                struct strata_module_shape s;

                STRATA_TRY(strata__shape_step(c->model, i, &w, &l, &s));
                q = NULL;
                if (mod->ops->replicate && s.ctx_per_copy)
                        STRATA_TRY(strata_arena_alloc(a, s.ctx_per_copy *
                                                              (size_t)c->strategy.devices,
                                                      64, &q));
                if (d)
                        d->layer_ctx[i] = q;
        }
        *priv = d;
        return STRATA_OK;
}

/* Copy the master's running state, and its parameters unless every replica holds them. */
static int replicate_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        const struct strata__replica *src = strata__rep(rt, 0);
        const struct strata__replica_view *vs = strata__replica_view(src);
        struct strata__replica *dst = strata__rep(rt, dev);
        const struct strata__replica_view *vd = strata__replica_view(dst);

        if (dev == 0)
                return STRATA_OK;
        if (!((struct dp *)m)->replicas_current)
                rt->dev->kernels->copy(vd->params, vs->params, vs->nparam);
        for (int i = 0; i < vs->nlayers; i++)
                if (vs->layers[i].nstate)
                        rt->dev->kernels->copy(vd->layers[i].state, vs->layers[i].state,
                                               vs->layers[i].nstate);
        return STRATA_OK;
}

/* Every module's replication callback: copy 0 first, then the others. */
static int callbacks(struct strata_runtime *rt)
{
        const struct strata__replica_view *v0 = strata__repv(rt, 0);

        if (!rt->cfg.strategy.replication_callbacks)
                return STRATA_OK;
        for (int i = 0; i < v0->nlayers; i++) {
                const struct strata_module_ops *ops = v0->layers[i].desc->ops;

                if (!ops->replicate)
                        continue;
                for (int copy = 0; copy < rt->nreplicas; copy++)
                        STRATA_TRY(ops->replicate(&strata__repv(rt, copy)->layers[i],
                                                  dp_of(rt)->layer_ctx[i], copy, rt->nreplicas));
        }
        return STRATA_OK;
}

/* READY: replicate before every batch and evaluation, then the parent's work. */
static int dp_align(struct strata_runtime *rt, int event)
{
        (void)event;
        STRATA_TRY(strata__multi_run(rt, replicate_dev));
        dp_of(rt)->replicas_current = 1;
        return callbacks(rt);
}

/* After backward: the gradients reduced into the master's in device order. */
static int reduce_to_master(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        STRATA_TRY(strata_comm_reduce(m->dcomm, dev, v->grads, dev == 0 ? v->grads : NULL,
                                      v->nparam, STRATA_F32, STRATA_OP_SUM, 0));
        if (dev != 0)
                strata__replica_skip(r); /* consumed by the master */
        return STRATA_OK;
}

/* After backward where the layers were reduced every micro-batch: the copies' are used up. */
static int release_copies(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        (void)m;
        if (dev != 0)
                strata__replica_skip(strata__rep(rt, dev)); /* consumed by the master */
        return STRATA_OK;
}

/*
 * accumulate_reduce each: layer @p layer's gradients of this micro-batch, in the layer buffer,
 * reduced into the master's in device order; the master adds them into the window's sum (the
 * other devices add their own, which nothing reads; decision 0047).
 */
static int layer_to_master(void *h, struct strata__replica *r, int layer)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        const struct strata_layer *l = &v->layers[layer];

        if (!l->nparam)
                return STRATA_OK;
        return strata_comm_reduce(strata__multi(h)->dcomm, v->dev, l->grad,
                                  v->dev == 0 ? l->grad : NULL, l->nparam, STRATA_F32,
                                  STRATA_OP_SUM, 0);
}

/*
 * dp's variants: master, every device's gradients reduced into the master's at the window's
 * end; each (accumulate_reduce each), every micro-batch's layers reduced into it.
 */
static const struct strata__sync sync_master = {
        .name = "master",
        .after_backward = reduce_to_master,
};
static const struct strata__sync sync_each = {
        .name = "each",
        .hooks = { .ready = layer_to_master, .micro = layer_to_master },
        .after_backward = release_copies,
        .shard = STRATA__SHARD_EACH,
};

static const struct strata__sync *dp_pick(const struct strata_config *c,
                                          const struct strata_device_ops *drv,
                                          const struct strata__shard_sizes *z,
                                          const struct strata_runtime *rt)
{
        (void)drv, (void)z, (void)rt;
        return strata__accumulate_each(c) ? &sync_each : &sync_master;
}

/* The split step needs the driver's range updates; otherwise the master steps alone. */
static int split_step(const struct strata_runtime *rt)
{
        return rt->nreplicas > 1 && rt->dev->kernels->update_range;
}

static int master_step_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *master = strata__rep(rt, 0);

        (void)m;
        if (dev == 0) {
                strata__replica_clip(master, rt->cfg.train.clip_norm, rt->cfg.train.clip_value);
                strata__replica_step(master, &rt->cfg.optim);
        }
        return STRATA_OK;
}

/*
 * The split step: each device computes the range of the master's update that matches the
 * slice of the reduce it computed (the gradients and the optimizer state of that range are
 * already in its cache), after the master has clipped by the global norm; it writes the new
 * parameters into its own replica, which held the master's values, and then into every other
 * replica (the master included): stores into a peer's lines drain in the background, where
 * reading them would stall. After a barrier every replica holds the master's new parameters,
 * each range crossed between cores once, and the next replication has no parameters to copy.
 */
static int split_step_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        static const struct strata__span span_range = { "optimizer step (range)", "compute",
                                                       "elements", 0 };
        struct strata__replica *master = strata__rep(rt, 0), *mine = strata__rep(rt, dev);
        const struct strata__replica_view *vme = strata__replica_view(mine);
        const struct strata__replica_view *vm = strata__replica_view(master);
        uint64_t t0;
        size_t lo, hi;

        if (rt->cfg.train.clip_norm > 0.0f) {
                if (dev == 0)
                        strata__replica_clip(master, rt->cfg.train.clip_norm, 0.0f);
                STRATA_TRY(strata__workers_barrier(m->workers, dev));
        }
        strata_comm_slice(m->dcomm, vm->nparam, sizeof(float), dev, &lo, &hi);
        if (rt->cfg.train.clip_value > 0.0f)
                vm->k->clamp(vm->grads + lo, rt->cfg.train.clip_value, hi - lo);
        /* The coordinator counted the step (opt_t) before posting it. */
        t0 = strata__track_begin(vme->track, &span_range, NULL);
        strata__replica_step_range(master, &rt->cfg.optim, vme->params, lo, hi);
        strata__track_end(vme->track, t0, (int64_t)(hi - lo));
        for (int e = 0; e < rt->nreplicas; e++)
                if (e != dev)
                        memcpy(strata__repv(rt, e)->params + lo, vme->params + lo,
                               (hi - lo) * sizeof(float));
        STRATA_TRY(strata__workers_barrier(m->workers, dev));
        if (dev == 0)
                strata__replica_skip(master); /* the next backward overwrites them */
        return STRATA_OK;
}

/* optimizer_step: the master's, split across the devices where possible. */
static int dp_backward_done(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__replica *master = strata__rep(rt, 0);
        struct dp *d = dp_of(rt);
        int skip;

        (void)state;
        if (event != STRATA__EV_OPTIMIZER_STEP)
                return STRATA__SM_PARENT;
        /* Only the master's gradients were reduced: it decides, on this (device 0's) thread. */
        STRATA_TRY(strata__unscale_step(rt, 0, NULL, arg, &skip));
        if (skip)
                return STRATA_OK; /* parameters unchanged: replicas_current still holds */
        d->replicas_current = 0; /* until every device has finished the step */
        if (!split_step(rt))
                return strata__multi_post(rt, event, arg, master_step_dev, 1);
        /* one step number for every device's range */
        strata__replica_set_steps(master, strata__replica_steps(master) + 1);
        STRATA_TRY(strata__multi_post(rt, event, arg, split_step_dev, 0));
        d->replicas_current = 1; /* the split step left the master's in every replica */
        return STRATA_OK;
}

static const struct strata__sm_state dp_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_BACKWARD_DONE] = { .run = dp_backward_done },
};

const struct strata__strategy strata__dp = {
        .name = "dp",
        .parent = &strata__multi_parent,
        .caps = STRATA__CAP_REPLICATE,
        .ops = { .validate = dp_validate, .layout = dp_layout, .align = dp_align,
                 .pick = dp_pick },
        .states = dp_states,
};
