/*
 * The multi-device parent, the root of every strategy: what a strategy does for each lifecycle
 * event. The coordinator (the caller's thread, which is also device 0) posts one job per event,
 * but one per training step where whole_step() allows (decision 0097); the executor runs each
 * device's share, on its pinned worker or inline on the caller's thread (single), with the
 * per-device work every strategy runs (strategy/step.c) and the strategy's hooks where they
 * differ (connect_dev, layer_hook, after_backward, step_dev). A child strategy overrides the
 * states whose coordination differs and hands the rest up (STRATA__SM_PARENT). The runtime's
 * job (strategy/job.h) is joined before the devices start, aborted on entering ERROR and left
 * after they stop; one of several processes adds its placement, communicators and metrics
 * through peers (strategy/process/job.c). Nothing here knows processes beyond the peers'
 * hooks (a step's flags handed to the link before its gradients cross, decision 0108).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "strategy/job.h"
#include "strategy/multi.h"

int strata__multi_validate(const struct strata__strategy *st, const struct strata_config *c,
                           const struct strata_device_ops *drv)
{
        const char *name = st->name;

        (void)c;
        if (strata__own_memory(drv) && (!drv->reduce_many || !drv->copy_many))
                return strata__fail(STRATA_ENOTSUP,
                                    "strategy %s on %s: the driver has no collectives over its "
                                    "memory (reduce_many, copy_many); use single",
                                    name, drv->name);
        return STRATA_OK;
}

int strata__multi_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, struct strata__multi *m)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_comm_config cc = STRATA_COMM_CONFIG_INIT;
        size_t pool, comm;
        void *p, *q, *dq = NULL;
        /* c->processes: resolved by the runtime's plan (strata__world) */
        int world = c->strategy.devices * (c->process.count > 0 ? c->process.count : 1);

        wc.devices = c->strategy.devices;
        cc.local_size = c->strategy.devices;
        cc.world_size = world;
        STRATA_TRY(strata__workers_plan(&wc, &pool));
        STRATA_TRY(strata_comm_plan_config(&cc, &comm));
        STRATA_TRY(strata_arena_alloc(a, pool, STRATA_ALIGN_PAGE, &p));
        STRATA_TRY(strata_arena_alloc(a, comm, 64, &q));
        if (strata__own_memory(drv))
                STRATA_TRY(strata_arena_alloc(a, comm, 64, &dq));
        if (m) {
                m->ex = &strata__pool_executor;
                m->pool_mem = p;
                m->pool_bytes = pool;
                m->comm_mem = q;
                m->dcomm_mem = dq;
                m->comm_bytes = comm;
        }
        return STRATA_OK;
}

/* setup_environment: start the pinned workers, bind device memory, open the communicators. */
static int pool_start(struct strata_runtime *rt, struct strata__multi *m)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata__placement near[STRATA_MAX_DEVICES];
        struct strata_arena pool, comm;

        wc.devices = rt->nreplicas;
        wc.timeout_s = rt->cfg.device.timeout_s;
        wc.tracks = strata__trace_tracks(rt->trace);
        wc.stall_s = strata__stall_s(&rt->cfg);
        wc.bind = rt->cfg.device.bind == STRATA_BIND_CORES;
        wc.peers = m->peers != NULL;
        /* A device with local cores (a GPU's PCIe root) gets a worker on one of them. */
        if (m->peers && m->peers->place(rt, near) == STRATA_OK) {
                wc.placement = near;
        } else if (rt->dev->local_pus) {
                STRATA_TRY(strata__topology_place_near(rt->nreplicas, rt->dev->local_pus, near));
                wc.placement = near;
        }
        STRATA_TRY(strata_arena_init(&pool, m->pool_mem, m->pool_bytes, NULL));
        STRATA_TRY(strata_arena_init(&comm, m->comm_mem, m->comm_bytes, NULL));
        STRATA_TRY(strata__workers_start(&m->workers, &pool, &wc));
        /* Each device's memory goes to the NUMA node of the core its worker is pinned to. */
        for (int d = 0; d < rt->nreplicas; d++) {
                const struct strata__placement *pl = strata__workers_placement(m->workers, d);
                const char *why = NULL;

                if (!wc.bind)
                        break; /* no placement asked for: memory stays where it is */
                STRATA_TRY(strata_arena_bind_numa(strata__replica_arena(strata__rep(rt, d)),
                                                  pl->numa_node, &why));
                if (rt->cfg.verbose && d == 0 && why)
                        strata__log(STRATA_LOG_INFO, "strata: device memory not bound: %s", why);
        }
        if (m->peers)
                return m->peers->open(rt, &comm);
        STRATA_TRY(strata__comm_init_workers(&m->comm, &comm, m->workers, NULL));
        m->dcomm = m->comm;
        if (!m->dcomm_mem)
                return STRATA_OK;
        STRATA_TRY(strata_arena_init(&comm, m->dcomm_mem, m->comm_bytes, NULL));
        return strata__comm_init_workers(&m->dcomm, &comm, m->workers, rt->dev);
}

static int all_sum(const struct strata_step_ctx *c, float *buf, size_t n)
{
        struct strata__multi *m = c->h;

        return strata_comm_all_reduce(m->dcomm, c->rank, buf, buf, n, STRATA_F32, STRATA_OP_SUM);
}

/*
 * Invariant mode: the top of the chunks' tree across devices. Over a power of two of devices
 * each holds one subtree and the pairwise tree over devices completes it; otherwise every
 * device's blocks are gathered and each device completes the tree from them.
 */
static int tree_sum(const struct strata_step_ctx *c, float *buf, size_t n)
{
        struct strata__multi *m = c->h;
        const struct strata_chunks *ch = c->chunks;

        if (!ch || !ch->gathered)
                return strata_comm_all_reduce(m->dcomm, c->rank, buf, buf, n, STRATA_F32,
                                              STRATA_OP_SUM_TREE);
        STRATA_TRY(strata_comm_all_gather(m->dcomm, c->rank, buf, ch->gathered,
                                          (size_t)ch->blocks * n, STRATA_F32));
        strata__chunks_combine(ch, n, buf);
        return STRATA_OK;
}

static int barrier(const struct strata_step_ctx *c)
{
        struct strata__multi *m = c->h;

        return strata__workers_barrier(m->workers, c->rank);
}

struct strata_step_ctx strata__multi_ctx(struct strata_runtime *rt, int dev, int train)
{
        struct strata__multi *m = strata__multi(rt);
        struct strata_step_ctx c = strata__ctx(rt, train, m->args->batch->rows);

        c.rank = dev;
        c.world = rt->world;
        c.row0 = strata__repv(rt, dev)->row0;
        c.sync = rt->cfg.strategy.sync_bn && train;
        c.all_sum = m->sum_stats ? all_sum : NULL;
        c.barrier = barrier;
        if (strata__own_memory(rt->dev)) {
                /* The dp copies' shared context is host memory: device statistics are summed
                 * with the device communicator instead, in the same device order. */
                c.all_sum = all_sum;
                c.barrier = NULL;
        }
        if (rt->cfg.strategy.invariant)
                c.all_sum = tree_sum;
        c.h = m;
        return c;
}

/* The events after which the caller reads what the devices computed: a step's end. */
static int ends_step(int event)
{
        return event == STRATA__EV_BATCH_END || event == STRATA__EV_VALIDATION_STEP ||
               event == STRATA__EV_TEST_STEP || event == STRATA__EV_PREDICT_STEP;
}

/*
 * One job on one device. A device that queues work runs on its own device (bind) and drains
 * its queue (sync) before reporting: under the pool after every phase, a training step's
 * phases in its one job included, since the next one may read what this one wrote on another
 * device's queue (dp's replicas read the master); inline (one device, bound at start) where a
 * step ends. Errors surface there.
 */
static int run_on(struct strata_runtime *rt, int dev, int event, strata__device_fn fn)
{
        struct strata__multi *m = strata__multi(rt);
        const struct strata_device_ops *d = rt->dev;
        int pool = m->workers != NULL, rc;

        if (d->bind && pool)
                STRATA_TRY(d->bind(dev));
        rc = fn(rt, m, dev);
        if (d->sync && (pool || ends_step(event))) {
                int s = d->sync();

                if (rc == STRATA_OK)
                        rc = s;
        }
        return rc;
}

static int device_fn(int dev, void *arg)
{
        struct strata_runtime *rt = arg;
        struct strata__multi *m = strata__multi(rt);

        return run_on(rt, dev, m->event, m->job);
}

/* Each device's share of a lifecycle event, as one span on its track. */
static const struct strata__span span_event[STRATA__EV_COUNT] = {
#define SPAN(e, name, span) [STRATA__EV_##e] = { span, "step", NULL, 0 },
        STRATA__EVENTS(SPAN)
#undef SPAN
};

static int phase_on(struct strata_runtime *rt, int dev, int event, strata__device_fn fn)
{
        struct strata__track *t = strata__repv(rt, dev)->track;
        uint64_t t0;
        int rc;

        STRATA_TRY(STRATA__INJECTED(rt, dev, event));
        t0 = strata__track_begin(t, &span_event[event], NULL);
        rc = run_on(rt, dev, event, fn);
        strata__track_end(t, t0, 0);
        return rc;
}

static int event_fn(int dev, void *arg)
{
        struct strata_runtime *rt = arg;
        struct strata__multi *m = strata__multi(rt);

        return phase_on(rt, dev, m->event, m->job);
}

int strata__multi_post(struct strata_runtime *rt, int event, const void *arg,
                       strata__device_fn fn, int idle)
{
        struct strata__multi *m = strata__multi(rt);

        m->event = event;
        m->args = arg;
        m->job = fn;
        if (!idle)
                return m->ex->each(m, event_fn, rt);
        /* An event without work on the other devices is not posted to them (one sync point
         * less per step): their injected failures, if a test build has any, are found here. */
        for (int d = 1; d < rt->nreplicas; d++)
                STRATA_TRY(STRATA__INJECTED(rt, d, event));
        return event_fn(0, rt);
}

/* ---- the executors ---- */

static int pool_run(struct strata__multi *m, int (*fn)(int dev, void *arg), void *arg)
{
        return strata__workers_run(m->workers, fn, arg);
}

static void pool_stop(struct strata_runtime *rt, struct strata__multi *m)
{
        if (m->workers && strata__workers_stop(m->workers) == STRATA_ETIMEDOUT) {
                rt->abandoned = 1; /* teardown keeps the region */
                snprintf(rt->abandoned_why, sizeof(rt->abandoned_why), "%s",
                         strata_last_error());
        }
        m->workers = NULL;
}

const struct strata__executor strata__pool_executor = {
        .begin = pool_start,
        .each = pool_run,
        .end = pool_stop,
};

/* One device on the caller's thread, which it binds to the device and does not pin. */
static int inline_start(struct strata_runtime *rt, struct strata__multi *m)
{
        (void)m;
        return rt->dev->bind ? rt->dev->bind(0) : STRATA_OK;
}

static int inline_run(struct strata__multi *m, int (*fn)(int dev, void *arg), void *arg)
{
        (void)m;
        return fn(0, arg);
}

static void inline_stop(struct strata_runtime *rt, struct strata__multi *m)
{
        (void)rt, (void)m;
}

const struct strata__executor strata__inline_executor = {
        .begin = inline_start,
        .each = inline_run,
        .end = inline_stop,
};

/* ---- the work of one device ---- */

/* connect: the strategy's hook, or the replica's own initial values. */
static int connect_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        strata__device_fn hook = STRATA__INHERITED(rt->strategy, hooks.connect);

        /* the variant's upcalls, once: the replica calls them with the runtime */
        strata__replica_set_hooks(strata__rep(rt, dev), &m->sync->hooks, rt);
        if (hook)
                return hook(rt, m, dev);
        strata__replica_init(strata__rep(rt, dev), rt->cfg.seed);
        return STRATA_OK;
}

static int warm_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        (void)m;
        strata__replica_warm_up(strata__rep(rt, dev));
        return STRATA_OK;
}

static int idle_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        (void)rt, (void)m, (void)dev;
        return STRATA_OK; /* batch_start, batch_end: the coordinator does the work */
}

/* training_step: each device loads its own rows when it starts computing on them. */
static int forward_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata_step_ctx c = strata__multi_ctx(rt, dev, 1);

        strata__dev_load(rt, dev, m->args, 1);
        return strata__dev_forward(rt, dev, &c);
}

/*
 * backward: the replica's pass, calling the variant's hook (given at connect) as each layer's
 * gradients complete (how they are summed across devices; another on an accumulation
 * micro-batch), then what the variant does after the pass at the window's end. Across
 * processes, at a window's end, first whether this device's loss is finite joins the flags
 * that the step's exchanges carry to the other processes (decision 0108).
 */
static int backward_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata_step_ctx c = strata__multi_ctx(rt, dev, 1);
        int sync = m->args->sync;

        if (m->peers && sync) { /* the loss's verdict rides on the gradients' exchanges */
                struct strata__replica_metrics rm;

                strata__replica_metrics(strata__rep(rt, dev), &rm);
                strata__net_carry(m->dcomm, isfinite(rm.loss_sum) ? 0u : STRATA__CARRY_LOSS);
        }
        STRATA_TRY(strata__replica_backward(strata__rep(rt, dev), &c, sync));
        return sync && m->sync->after_backward ? m->sync->after_backward(rt, m, dev) : STRATA_OK;
}

/*
 * optimizer_step: the strategy's hook (dp's master), or the one device step with the variant's
 * sum of squares and gather: every device of every process, holding the reduced gradients,
 * agrees whether to skip over the host communicator (the flag is host memory, also for a
 * driver with memory of its own; inline, none: the one device decides).
 */
static int step_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        strata__device_fn hook = STRATA__INHERITED(rt->strategy, hooks.step);

        if (hook)
                return hook(rt, m, dev);
        return strata__dev_step(rt, m, dev, m->comm, m->args, m->sync);
}

/*
 * The root's variants (single's): nothing crosses devices. Where every micro-batch is reduced
 * (accumulate_reduce each) the layers still write to the layer buffer the replica adds into
 * the window's sum.
 */
static const struct strata__sync sync_local = { .name = "local" };
static const struct strata__sync sync_local_each = {
        .name = "each",
        .shard = STRATA__SHARD_EACH,
};

static const struct strata__sync *local_pick(const struct strata_config *c,
                                             const struct strata_device_ops *drv,
                                             const struct strata__shard_sizes *z,
                                             const struct strata_runtime *rt)
{
        (void)drv, (void)z, (void)rt;
        return strata__accumulate_each(c) ? &sync_local_each : &sync_local;
}

static int eval_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata_step_ctx c = strata__multi_ctx(rt, dev, 0);

        return strata__dev_eval(rt, dev, m->args, &c, m->event == STRATA__EV_PREDICT_STEP);
}

static int coll_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata_coll op = m->coll;

        (void)rt;
        op.recv = m->coll_bufs ? m->coll_bufs[dev] : NULL;
        op.send = m->coll_send ? m->coll_send[dev] : op.recv;
        return strata_comm_run(m->comm, dev, &op);
}

/* The step's metrics: this process's devices, or the job's (its peers). */
static int metrics(struct strata_runtime *rt)
{
        struct strata__multi *m = strata__multi(rt);

        if (m->peers)
                return m->peers->metrics(rt, m->args);
        strata__metrics(rt, m->args->metrics);
        return STRATA_OK;
}

/* ---- the parent states' actions ---- */

/* setup_environment: join the runtime's job (nothing alone), then start the executor. */
static int on_setup_environment(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__multi *m = strata__multi(rt);

        (void)state, (void)event, (void)arg;
        STRATA_TRY(rt->job->join(rt));
        return m->ex->begin(rt, m);
}

static int on_connect(void *obj, int state, int event, void *arg)
{
        (void)state;
        return strata__multi_post(obj, event, arg, connect_dev, 0);
}

static int on_setup(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        int (*setup)(struct strata_runtime *) = STRATA__INHERITED(rt->strategy, ops.setup);

        (void)state;
        if (setup)
                STRATA_TRY(setup(rt));
        STRATA_TRY(strata__prepare(obj));
        return strata__multi_post(obj, event, arg, warm_dev, 0);
}

/* batch_start (nothing on the devices yet) or an evaluation step, with its metrics. */
static int on_ready(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__multi *m = strata__multi(rt);

        int (*align)(struct strata_runtime *, int) = STRATA__INHERITED(rt->strategy, ops.align);

        (void)state;
        if (align)
                STRATA_TRY(align(rt, event));
        strata__split(rt, ((const struct strata__step_args *)arg)->batch);
        if (event == STRATA__EV_BATCH_START && m->peers && m->peers->begin)
                m->peers->begin(rt, arg);
        if (event == STRATA__EV_BATCH_START)
                return strata__multi_post(rt, event, arg, idle_dev, 1);
        STRATA_TRY(strata__multi_post(rt, event, arg, eval_dev, 0));
        return event != STRATA__EV_PREDICT_STEP ? metrics(rt) : STRATA_OK;
}

/*
 * Whether a training step's device work may run as one job: the devices meet the coordinator
 * once a step instead of after each of training_step, backward and optimizer_step (each join
 * waits for the last device, each post wakes them all). It may where several devices run on
 * the pool and no strategy of the chain coordinates those states itself (dp's master steps on
 * the coordinator): between them the coordinator does nothing, and what one device reads of
 * another's it reads after a collective.
 */
static int whole_step(const struct strata_runtime *rt)
{
        static const int states[] = { STRATA_STATE_IN_BATCH, STRATA_STATE_FORWARD_DONE,
                                      STRATA_STATE_BACKWARD_DONE };

        if (!strata__multi(rt)->workers || rt->nreplicas < 2)
                return 0;
        for (const struct strata__strategy *st = rt->strategy; st; st = st->parent)
                for (size_t i = 0; st->states && i < sizeof(states) / sizeof(states[0]); i++)
                        if (st != &strata__multi_parent && st->states[states[i]].run)
                                return 0;
        return 1;
}

/*
 * The step's job on one device: its phases in the lifecycle's order, each as its own event's
 * job would run it (a test's injected failure, its span, the driver's bind and sync); a
 * failure ends this device's job, and the others are released from their collectives by it.
 */
static int whole_step_fn(int dev, void *arg)
{
        struct strata_runtime *rt = arg;
        const struct strata__step_args *a = strata__multi(rt)->args;

        STRATA_TRY(phase_on(rt, dev, STRATA__EV_TRAINING_STEP, forward_dev));
        STRATA_TRY(phase_on(rt, dev, STRATA__EV_BACKWARD, backward_dev));
        return a->sync ? phase_on(rt, dev, STRATA__EV_OPTIMIZER_STEP, step_dev) : STRATA_OK;
}

/*
 * training_step; where whole_step() allows, its backward and step too (strata__api_train()
 * dispatches the step's events in a row, nothing read between them: the only dispatcher).
 */
static int on_training_step(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__multi *m = strata__multi(rt);
        struct strata__step_args *a = arg;

        (void)state;
        if (!whole_step(rt))
                return strata__multi_post(rt, event, arg, forward_dev, 0);
        a->ran = 1;
        m->event = event;
        m->args = a;
        m->job = NULL;
        return m->ex->each(m, whole_step_fn, rt);
}

static int on_backward(void *obj, int state, int event, void *arg)
{
        (void)state;
        if (((const struct strata__step_args *)arg)->ran)
                return STRATA_OK;
        return strata__multi_post(obj, event, arg, backward_dev, 0);
}

/* batch_end: the step's metrics, summed over devices in device order. */
static int on_batch_end(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state;
        STRATA_TRY(strata__multi_post(rt, event, arg, idle_dev, 1));
        return metrics(rt);
}

/* optimizer_step (every device steps its own replica) or batch_end of a micro-batch. */
static int on_backward_done(void *obj, int state, int event, void *arg)
{
        if (event == STRATA__EV_OPTIMIZER_STEP && ((const struct strata__step_args *)arg)->ran)
                return STRATA_OK;
        if (event == STRATA__EV_OPTIMIZER_STEP)
                return strata__multi_post(obj, event, arg, step_dev, 0);
        return on_batch_end(obj, state, event, arg);
}

/* A failure ends the job: the other processes would wait for this one. */
static int on_error(void *obj, int state)
{
        struct strata_runtime *rt = obj;

        (void)state;
        rt->job->abort(rt);
        return STRATA_OK;
}

/* Entering TORNDOWN: the executor stops, then the job is left. */
static int on_torndown(void *obj, int state)
{
        struct strata_runtime *rt = obj;
        struct strata__multi *m = strata__multi(rt);

        (void)state;
        m->ex->end(rt, m);
        rt->job->close(rt);
        return STRATA_OK;
}

static const struct strata__sm_state multi_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = { .run = on_setup_environment },
        [STRATA_STATE_ENV_READY] = { .run = on_connect },
        [STRATA_STATE_CONNECTED] = { .run = on_setup },
        [STRATA_STATE_READY] = { .run = on_ready },
        [STRATA_STATE_IN_BATCH] = { .run = on_training_step },
        [STRATA_STATE_FORWARD_DONE] = { .run = on_backward },
        [STRATA_STATE_BACKWARD_DONE] = { .run = on_backward_done },
        [STRATA_STATE_STEPPED] = { .run = on_batch_end },
        [STRATA_STATE_TORNDOWN] = { .entry = on_torndown },
        [STRATA_STATE_ERROR] = { .entry = on_error },
};

/* The Strategy API's collectives on every device's thread (inline on one device). */
static int multi_collective(struct strata_runtime *rt, const struct strata_coll *op,
                            void *const *bufs, const void *const *send)
{
        struct strata__multi *m = strata__multi(rt);

        if (rt->world == 1 || !m->workers)
                return strata__local_collective(rt, op, bufs, send);
        m->coll = *op;
        m->coll_bufs = bufs;
        m->coll_send = send;
        return strata__multi_run(rt, coll_dev);
}

int strata__multi_run(struct strata_runtime *rt, strata__device_fn fn)
{
        struct strata__multi *m = strata__multi(rt);

        m->job = fn;
        return m->ex->each(m, device_fn, rt);
}

static int input_grad_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata_step_ctx c = strata__multi_ctx(rt, dev, 1);
        struct strata__replica *r = strata__rep(rt, dev);

        strata__dev_load(rt, dev, m->args, 0);
        STRATA_TRY(strata__replica_forward(r, &c));
        return strata__replica_input_grad(r, &c, m->args->dout, m->args->dx);
}

int strata__multi_input_grad(struct strata_runtime *rt, const struct strata__step_args *a)
{
        strata__split(rt, a->batch);
        strata__multi(rt)->args = a;
        return strata__multi_run(rt, input_grad_dev);
}

int strata__multi_connect(struct strata_runtime *rt)
{
        return strata__multi_run(rt, connect_dev);
}

const struct strata__strategy strata__multi_parent = {
        .ops = { .collective = multi_collective, .pick = local_pick },
        .states = multi_states,
};
