/*
 * What the multi-device strategies (dp, ddp) share: the worker pool and communicator, the
 * per-device work of every lifecycle event, the batch split, gradient buckets and metrics.
 * The coordinator (the caller's thread, which is also device 0) posts one job per event; each
 * device does its share on its pinned thread.
 */
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "strategy/internal.h"

int strata__multi_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, struct strata_runtime *rt)
{
        struct strata_workers_config wc = STRATA_WORKERS_CONFIG_INIT;
        size_t pool, comm;
        void *p, *q, *dq = NULL;

        wc.devices = c->devices;
        STRATA_TRY(strata_workers_plan(&wc, &pool));
        STRATA_TRY(strata_comm_plan(c->devices, &comm));
        STRATA_TRY(strata_arena_alloc(a, pool, STRATA_ALIGN_PAGE, &p));
        STRATA_TRY(strata_arena_alloc(a, comm, 64, &q));
        if (!drv->host_visible)
                STRATA_TRY(strata_arena_alloc(a, comm, 64, &dq));
        if (rt) {
                rt->pool_mem = p;
                rt->pool_bytes = pool;
                rt->comm_mem = q;
                rt->dcomm_mem = dq;
                rt->comm_bytes = comm;
        }
        STRATA_TRY(strata_arena_alloc(a, sizeof(void *) * (size_t)c->model->nmodules, 0, &p));
        if (rt)
                rt->layer_ctx = p;
        for (int i = 0, w = c->model->in_features; i < c->model->nmodules; i++) {
                const struct strata_module *m = &c->model->modules[i];
                struct strata_layer l = { .desc = m, .index = i, .in = w };
                struct strata_module_shape s;

                STRATA_TRY(m->ops->shape(&l, w, &s));
                q = NULL;
                if (c->strategy == STRATA_STRATEGY_DP && m->ops->replicate && s.ctx_per_copy)
                        STRATA_TRY(strata_arena_alloc(a, s.ctx_per_copy * (size_t)c->devices, 64,
                                                      &q));
                if (rt)
                        rt->layer_ctx[i] = q;
                w = s.out;
        }
        STRATA_TRY(strata_arena_alloc(a, 2 * sizeof(size_t) * (size_t)c->model->nmodules, 0, &p));
        STRATA_TRY(strata_arena_alloc(a, sizeof(int) * (size_t)c->model->nmodules, 0, &q));
        if (rt) {
                rt->bucket_lo = p;
                rt->bucket_hi = (size_t *)p + c->model->nmodules;
                rt->bucket_close = q;
        }
        return STRATA_OK;
}

int strata__multi_start(struct strata_runtime *rt)
{
        struct strata_workers_config wc = STRATA_WORKERS_CONFIG_INIT;
        struct strata_placement near[STRATA_MAX_DEVICES];
        struct strata_arena pool, comm;

        wc.devices = rt->nreplicas;
        wc.timeout_s = rt->cfg.timeout_s;
        /* A device with local cores (a GPU's PCIe root) gets a worker on one of them. */
        if (rt->dev->local_pus) {
                STRATA_TRY(strata_topology_place_near(rt->nreplicas, rt->dev->local_pus, near));
                wc.placement = near;
        }
        STRATA_TRY(strata_arena_init(&pool, rt->pool_mem, rt->pool_bytes, NULL));
        STRATA_TRY(strata_arena_init(&comm, rt->comm_mem, rt->comm_bytes, NULL));
        STRATA_TRY(strata_workers_start(&rt->workers, &pool, &wc));
        /* Each device's memory goes to the NUMA node of the core its worker is pinned to. */
        for (int d = 0; d < rt->nreplicas; d++) {
                const struct strata_placement *pl = strata_workers_placement(rt->workers, d);
                const char *why = NULL;

                STRATA_TRY(strata_arena_bind_numa(&rt->replicas[d].arena, pl->numa_node, &why));
                if (rt->cfg.verbose && d == 0 && why)
                        fprintf(stderr, "strata: device memory not bound: %s\n", why);
        }
        STRATA_TRY(strata_comm_init(&rt->comm, &comm, rt->workers));
        rt->dcomm = rt->comm;
        if (!rt->dcomm_mem)
                return STRATA_OK;
        STRATA_TRY(strata_arena_init(&comm, rt->dcomm_mem, rt->comm_bytes, NULL));
        return strata_comm_init_device(&rt->dcomm, &comm, rt->workers, rt->dev);
}

void strata__multi_stop(struct strata_runtime *rt)
{
        if (rt->workers)
                (void)strata_workers_stop(rt->workers);
        rt->workers = NULL;
}

static int all_sum(const struct strata_step_ctx *c, float *buf, size_t n)
{
        struct strata_runtime *rt = c->h;

        return strata_comm_all_reduce(rt->dcomm, c->rank, buf, buf, n, STRATA_F32, STRATA_OP_SUM);
}

static int barrier(const struct strata_step_ctx *c)
{
        struct strata_runtime *rt = c->h;

        return strata_workers_barrier(rt->workers, c->rank);
}

struct strata_step_ctx strata__multi_ctx(struct strata_runtime *rt, int dev, int train)
{
        struct strata_step_ctx c = strata__ctx(rt, train, rt->args.batch->rows);

        c.rank = dev;
        c.world = rt->nreplicas;
        c.row0 = rt->replicas[dev].row0;
        c.sync = rt->cfg.sync_bn && train;
        c.all_sum = rt->cfg.strategy == STRATA_STRATEGY_DDP ? all_sum : NULL;
        c.barrier = barrier;
        if (!rt->dev->host_visible) {
                /* The dp copies' shared context is host memory: device statistics are summed
                 * with the device communicator instead, in the same device order. */
                c.all_sum = all_sum;
                c.barrier = NULL;
        }
        c.h = rt;
        return c;
}

void strata__multi_split(struct strata_runtime *rt, const struct strata_batch *b)
{
        int n = rt->nreplicas;

        for (int d = 0; d < n; d++) {
                struct strata__replica *r = &rt->replicas[d];
                int lo = (int)((long)b->rows * d / n), hi = (int)((long)b->rows * (d + 1) / n);

                /* Each device loads its own rows when it starts computing on them (on_event). */
                r->rows = hi - lo;
                r->row0 = lo;
        }
}

void strata__multi_metrics(struct strata_runtime *rt, struct strata_metrics *m)
{
        double loss = 0.0;
        int correct = 0, rows = 0;

        for (int d = 0; d < rt->nreplicas; d++) {
                loss += rt->replicas[d].loss;
                correct += rt->replicas[d].correct;
                rows += rt->replicas[d].rows;
        }
        if (m)
                *m = (struct strata_metrics){ .loss = loss / rows, .correct = correct,
                                              .rows = rows };
}

void strata__multi_buckets(struct strata_runtime *rt)
{
        const struct strata__replica *r = &rt->replicas[0];
        size_t cap = rt->cfg.bucket_bytes ? rt->cfg.bucket_bytes : (size_t)25 << 20;
        size_t hi = r->nparam, bytes = 0;

        rt->nbuckets = 0;
        for (int i = r->nlayers - 1; i >= 0; i--) {
                bytes += r->layers[i].nparam * sizeof(float);
                if (bytes >= cap || i == 0) {
                        size_t lo = strata__replica_param_offset(r, i);

                        if (hi > lo) {
                                rt->bucket_lo[rt->nbuckets] = lo;
                                rt->bucket_hi[rt->nbuckets] = hi;
                                rt->bucket_close[rt->nbuckets] = i;
                                rt->nbuckets++;
                        }
                        hi = lo;
                        bytes = 0;
                }
        }
}

int strata__multi_callbacks(struct strata_runtime *rt)
{
        if (!rt->cfg.replication_callbacks)
                return STRATA_OK;
        for (int i = 0; i < rt->replicas[0].nlayers; i++) {
                const struct strata_module_ops *ops = rt->replicas[0].layers[i].desc->ops;

                if (!ops->replicate)
                        continue;
                for (int copy = 0; copy < rt->nreplicas; copy++)
                        STRATA_TRY(ops->replicate(&rt->replicas[copy].layers[i], rt->layer_ctx[i],
                                                  copy, rt->nreplicas));
        }
        return STRATA_OK;
}

/* ddp: all-reduce every bucket whose last layer's gradients just became ready. */
static int bucket_ready(void *h, struct strata__replica *r, int layer)
{
        struct strata_runtime *rt = h;

        if (!rt->sync_grads)
                return STRATA_OK; /* no_sync: an accumulation micro-batch */
        for (int k = 0; k < rt->nbuckets; k++)
                if (rt->bucket_close[k] == layer)
                        STRATA_TRY(strata_comm_all_reduce(rt->dcomm, r->dev,
                                                          r->grads + rt->bucket_lo[k],
                                                          r->grads + rt->bucket_lo[k],
                                                          rt->bucket_hi[k] - rt->bucket_lo[k],
                                                          STRATA_F32, STRATA_OP_SUM));
        return STRATA_OK;
}

static void copy_floats(const struct strata_device_ops *dev, float *dst, const float *src,
                        size_t n)
{
        if (dev->host_visible)
                memcpy(dst, src, n * sizeof(float));
        else
                dev->copy(dst, src, n); /* the master's memory, on this device's queue */
}

static void copy_state(const struct strata_device_ops *dev, struct strata__replica *dst,
                       const struct strata__replica *src, int params)
{
        if (params)
                copy_floats(dev, dst->params, src->params, src->nparam);
        for (int i = 0; i < src->nlayers; i++)
                if (src->layers[i].nstate)
                        copy_floats(dev, dst->layers[i].state, src->layers[i].state,
                                    src->layers[i].nstate);
}

/*
 * dp's optimizer step: the master's. Split, each device computes the range of the master's
 * update that matches the slice of the reduce it computed (the gradients and the optimizer
 * state of that range are already in its cache), after the master has clipped by the global
 * norm; it writes the new parameters into its own replica, which held the master's values,
 * and then into every other replica (the master included): stores into a peer's lines drain
 * in the background, where reading them would stall. After a barrier every replica holds the
 * master's new parameters, each range crossed between cores once, and the next replication
 * has no parameters to copy. Elementwise updates: bitwise the master's step alone. Otherwise
 * the master's device steps alone.
 */
static int dp_split_step(const struct strata_runtime *rt)
{
        return rt->cfg.strategy == STRATA_STRATEGY_DP && rt->nreplicas > 1 &&
               rt->dev->host_visible && rt->dev->update_range;
}

static int dp_step(struct strata_runtime *rt, int dev)
{
        struct strata__replica *m = &rt->replicas[0], *mine = &rt->replicas[dev];
        size_t lo, hi;

        if (!dp_split_step(rt)) {
                if (dev == 0) {
                        strata__replica_clip(m, rt->cfg.clip_norm, rt->cfg.clip_value);
                        strata__replica_step(m, &rt->cfg.optim);
                }
                return STRATA_OK;
        }
        if (rt->cfg.clip_norm > 0.0f) {
                if (dev == 0)
                        strata__replica_clip(m, rt->cfg.clip_norm, 0.0f);
                STRATA_TRY(strata_workers_barrier(rt->workers, dev));
        }
        strata__comm_slice(m->nparam, sizeof(float), rt->nreplicas, dev, &lo, &hi);
        if (rt->cfg.clip_value > 0.0f)
                m->drv->clamp(m->grads + lo, rt->cfg.clip_value, hi - lo);
        /* The coordinator counted the step (opt_t) before posting it. */
        strata__replica_step_range(m, &rt->cfg.optim, mine->params, lo, hi);
        for (int e = 0; e < rt->nreplicas; e++)
                if (e != dev)
                        memcpy(rt->replicas[e].params + lo, mine->params + lo,
                               (hi - lo) * sizeof(float));
        STRATA_TRY(strata_workers_barrier(rt->workers, dev));
        for (int i = 0; dev == 0 && i < m->nlayers; i++)
                m->layers[i].grad_fresh = 1;
        return STRATA_OK;
}

static int on_event(struct strata_runtime *rt, struct strata__replica *r, int dev)
{
        int dp = rt->cfg.strategy == STRATA_STRATEGY_DP;
        const struct strata_batch *b = rt->args.batch;
        struct strata_step_ctx c;

        /* batch_to_device: each device loads its own rows when it starts computing on them. */
        if (rt->event == STRATA_EV_TRAINING_STEP || rt->event == STRATA_EV_VALIDATION_STEP ||
            rt->event == STRATA_EV_TEST_STEP || rt->event == STRATA_EV_PREDICT_STEP)
                strata__replica_load(r, b, r->row0, r->rows,
                                     rt->event != STRATA_EV_PREDICT_STEP);
        switch (rt->event) {
        case STRATA_EV_TRAINING_STEP:
                c = strata__multi_ctx(rt, dev, 1);
                STRATA_TRY(strata__replica_forward(r, &c));
                strata__replica_loss(r, &c, 1);
                return STRATA_OK;
        case STRATA_EV_BACKWARD:
                c = strata__multi_ctx(rt, dev, 1);
                STRATA_TRY(strata__replica_backward(r, &c, dp ? NULL : bucket_ready, rt));
                if (dp && rt->sync_grads) {
                        STRATA_TRY(strata_comm_reduce(rt->dcomm, dev, r->grads,
                                                      dev == 0 ? r->grads : NULL, r->nparam,
                                                      STRATA_F32, STRATA_OP_SUM, 0));
                        for (int i = 0; dev != 0 && i < r->nlayers; i++)
                                r->layers[i].grad_fresh = 1; /* consumed by the master */
                }
                return STRATA_OK;
        case STRATA_EV_OPTIMIZER_STEP:
                if (dp)
                        return dp_step(rt, dev);
                strata__replica_clip(r, rt->cfg.clip_norm, rt->cfg.clip_value);
                strata__replica_step(r, &rt->cfg.optim);
                return STRATA_OK;
        case STRATA_EV_VALIDATION_STEP:
        case STRATA_EV_TEST_STEP:
        case STRATA_EV_PREDICT_STEP:
                c = strata__multi_ctx(rt, dev, 0);
                STRATA_TRY(strata__replica_forward(r, &c));
                if (rt->event == STRATA_EV_PREDICT_STEP) {
                        int k = r->layers[r->nlayers - 1].out;

                        float *out = rt->args.logits + (size_t)r->row0 * k;
                        size_t bytes = sizeof(float) * (size_t)r->rows * k;

                        if (rt->dev->host_visible)
                                memcpy(out, r->y[r->nlayers - 1], bytes);
                        else
                                rt->dev->to_host(out, r->y[r->nlayers - 1], bytes);
                } else {
                        strata__replica_loss(r, &c, 0);
                }
                return STRATA_OK;
        default:
                return STRATA_OK; /* batch_start, batch_end: the coordinator does the work */
        }
}

static int on_coll(struct strata_runtime *rt, int dev)
{
        struct strata_coll op = rt->coll;

        op.recv = rt->coll_bufs ? rt->coll_bufs[dev] : NULL;
        op.send = rt->coll_send ? rt->coll_send[dev] : op.recv;
        return strata_comm_run(rt->comm, dev, &op);
}

static int device_job(struct strata_runtime *rt, int dev)
{
        struct strata__replica *r = &rt->replicas[dev];

        switch (rt->job) {
        case STRATA__JOB_INIT:
                strata__replica_init(r, rt->cfg.seed);
                if (rt->cfg.strategy == STRATA_STRATEGY_DP)
                        return STRATA_OK;
                /* ddp: rank 0's parameters and running state become everyone's. */
                STRATA_TRY(strata_comm_broadcast(rt->dcomm, dev, r->params, r->nparam, STRATA_F32,
                                                 0));
                for (int i = 0; i < r->nlayers; i++)
                        if (r->layers[i].nstate)
                                STRATA_TRY(strata_comm_broadcast(rt->dcomm, dev, r->layers[i].state,
                                                                 r->layers[i].nstate, STRATA_F32,
                                                                 0));
                return STRATA_OK;
        case STRATA__JOB_REPLICATE:
                if (dev != 0)
                        copy_state(rt->dev, r, &rt->replicas[0], !rt->replicas_current);
                return STRATA_OK;
        case STRATA__JOB_WARMUP:
                strata__replica_warm_up(r);
                return STRATA_OK;
        case STRATA__JOB_COLL:
                return on_coll(rt, dev);
        case STRATA__JOB_EVENT:
                if (dev == rt->inj_dev && rt->event == rt->inj_event)
                        return strata__fail(rt->inj_status, "device %d: injected failure in %s",
                                            dev, strata_event_name(rt->event));
                return on_event(rt, r, dev);
        }
        return strata__fail(STRATA_EINVAL, "unknown job %d", (int)rt->job);
}

/*
 * One job on one device. A device that queues work (not host-visible) runs on its own
 * device (bind) and drains its queue before reporting: the next job may read what this one
 * wrote on another device's queue (dp's replicas read the master), and errors surface here.
 */
static int device_fn(int dev, void *arg)
{
        struct strata_runtime *rt = arg;
        const struct strata_device_ops *d = rt->dev;
        int rc;

        if (d->host_visible)
                return device_job(rt, dev);
        if (d->bind)
                STRATA_TRY(d->bind(dev));
        rc = device_job(rt, dev);
        if (d->sync) {
                int s = d->sync();

                if (rc == STRATA_OK)
                        rc = s;
        }
        return rc;
}

static int multi_action(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        const struct strata__multi_hooks *h = rt->strategy->hooks;
        int rc;

        (void)state;
        (void)arg;
        switch (event) {
        case STRATA_EV_SETUP_ENVIRONMENT:
                return strata__multi_start(rt);
        case STRATA_EV_CONNECT:
                return strata__multi_run(rt, STRATA__JOB_INIT);
        case STRATA_EV_SETUP:
                if (h->setup)
                        STRATA_TRY(h->setup(rt));
                return strata__multi_setup(rt);
        case STRATA_EV_BATCH_START:
        case STRATA_EV_VALIDATION_STEP:
        case STRATA_EV_TEST_STEP:
        case STRATA_EV_PREDICT_STEP:
                strata__multi_split(rt, rt->args.batch);
                if (h->before_batch)
                        STRATA_TRY(h->before_batch(rt));
                break;
        default:
                break;
        }
        rc = strata__multi_event(rt, event);
        if (rc == STRATA_OK && (event == STRATA_EV_BATCH_END ||
                                event == STRATA_EV_VALIDATION_STEP || event == STRATA_EV_TEST_STEP))
                strata__multi_metrics(rt, rt->args.metrics);
        return rc;
}

static int multi_teardown(void *obj, int state)
{
        (void)state;
        strata__multi_stop(obj);
        return STRATA_OK;
}

#define S { NULL, multi_action, NULL }
const struct strata_sm_state strata__multi_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = S,       [STRATA_STATE_ENV_READY] = S,
        [STRATA_STATE_CONNECTED] = S,     [STRATA_STATE_READY] = S,
        [STRATA_STATE_IN_BATCH] = S,      [STRATA_STATE_FORWARD_DONE] = S,
        [STRATA_STATE_BACKWARD_DONE] = S, [STRATA_STATE_STEPPED] = S,
        [STRATA_STATE_ERROR] = S,
        [STRATA_STATE_TORNDOWN] = { multi_teardown, NULL, NULL },
};
#undef S

int strata__multi_setup(struct strata_runtime *rt)
{
        STRATA_TRY(strata__reserve_blas(rt));
        return strata__multi_run(rt, STRATA__JOB_WARMUP);
}

int strata__multi_event(struct strata_runtime *rt, int event)
{
        int dp_opt = event == STRATA_EV_OPTIMIZER_STEP && rt->cfg.strategy == STRATA_STRATEGY_DP;
        int split = dp_opt && dp_split_step(rt);
        int idle = event == STRATA_EV_BATCH_START || event == STRATA_EV_BATCH_END ||
                   (dp_opt && !split);

        rt->event = event;
        if (dp_opt) {
                rt->replicas_current = 0; /* until every device has finished the step */
                if (split)
                        rt->replicas[0].opt_t++; /* one step number for every device's range */
        }
        /* An event without work on the other devices is not posted to them (one sync point
         * less per step), unless a test injects a failure there. */
        if (idle && rt->inj_dev < 0) {
                rt->job = STRATA__JOB_EVENT;
                return device_fn(0, rt);
        }
        STRATA_TRY(strata__multi_run(rt, STRATA__JOB_EVENT));
        if (split)
                rt->replicas_current = 1; /* the split step left the master's in every replica */
        return STRATA_OK;
}

int strata__multi_run(struct strata_runtime *rt, enum strata__job job)
{
        rt->job = job;
        return strata_workers_run(rt->workers, device_fn, rt);
}
