/*
 * The `ddp` strategy: one worker per device, each with its own parameters and optimizer.
 * Parameters are broadcast from device 0 at connect; gradients are summed across devices in
 * buckets (reverse layer order, 25 MB cap) as soon as each bucket's gradients are complete
 * during backward, in bucket order; on accumulation micro-batches nothing is communicated
 * (no_sync), unless every micro-batch is reduced (accumulate_reduce each: layer by layer, the
 * reduced gradients added into the window's sum; decision 0047). Every device then takes the
 * same optimizer step on identical inputs. With cfg.strategy.grad_allreduce bf16 the buckets
 * travel as bf16 (rounded, summed in f32, rounded once).
 *
 * Parent: the multi-device parent (strategy/multi.c). ddp plans its buckets at setup, aligns
 * evaluations on rank 0's running statistics (align), and has two hooks: connect (broadcast
 * after init) and layer (the bucketed all-reduce). It writes no state of its own.
 */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "arch/reduce.h"
#include "drivers/comm_blocks.h"
#include "strategy/multi.h"

struct ddp {
        struct strata__multi m;    /* first: the parents' state */
        struct strata__buckets b;  /* gradient buckets, bucket 0 = last layers */
};

static struct ddp *ddp_of(const struct strata_runtime *rt)
{
        return rt->priv;
}

int strata__ddp_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                       struct strata_arena *a, void **priv)
{
        size_t layers = (size_t)strata__models_layers(c); /* every model's buckets fit */
        size_t models = (size_t)strata__models_count(c);  /* one set each (decision 0082) */
        struct ddp *d;
        void *p, *q;

        STRATA_TRY(strata_arena_alloc(a, sizeof(*d), 64, &p));
        d = p;
        if (d) {
                memset(d, 0, sizeof(*d));
                d->m.sum_stats = 1; /* SyncBatchNorm: statistics all-reduced across devices */
        }
        STRATA_TRY(strata__multi_layout(c, drv, a, d ? &d->m : NULL));
        STRATA_TRY(strata_arena_alloc(a, 2 * sizeof(size_t) * layers * models, 0, &p));
        STRATA_TRY(strata_arena_alloc(a, sizeof(int) * layers * models, 0, &q));
        if (d) {
                d->b.lo = p;
                d->b.hi = (size_t *)p + layers;
                d->b.close = q;
        }
        *priv = d;
        return STRATA_OK;
}

/* rank 0's parameters and running state become everyone's. */
static int init_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        strata__replica_init(r, rt->cfg.seed);
        STRATA_TRY(strata_comm_broadcast(m->dcomm, dev, v->params, v->nparam, STRATA_F32, 0));
        for (int i = 0; i < v->nlayers; i++)
                if (v->layers[i].nstate)
                        STRATA_TRY(strata_comm_broadcast(m->dcomm, dev, v->layers[i].state,
                                                         v->layers[i].nstate, STRATA_F32, 0));
        return STRATA_OK;
}

size_t strata__ddp_bucket_cap(const struct strata_config *c)
{
        return c->strategy.bucket_bytes ? c->strategy.bucket_bytes : (size_t)25 << 20;
}

void strata__ddp_bucket_walk(const struct strata__replica *r, size_t cap,
                             void (*fn)(void *arg, size_t lo, size_t hi, int close), void *arg)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        size_t hi = v->nparam, bytes = 0;

        for (int i = v->nlayers - 1; i >= 0; i--) {
                bytes += v->layers[i].nparam * sizeof(float);
                if (bytes >= cap || i == 0) {
                        size_t lo = strata__replica_param_offset(r, i);

                        if (hi > lo)
                                fn(arg, lo, hi, i);
                        hi = lo;
                        bytes = 0;
                }
        }
}

static void add_bucket(void *arg, size_t lo, size_t hi, int close)
{
        struct strata__buckets *b = arg;

        b->lo[b->n] = lo;
        b->hi[b->n] = hi;
        b->close[b->n] = close;
        b->n++;
}

/*
 * Invariant mode: where each device holds one block of the chunks' tree (a power of two of
 * devices), a window is one batch and no module (BatchNorm) completes its own gradients, the
 * buckets complete the tree with the pairwise tree over devices: the same bits in fewer
 * collectives than the replica's per layer (ddp's tree variant).
 */
static int tree_buckets(const struct strata_config *c, const struct strata_runtime *rt,
                        const struct strata__replica *r)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata_chunks *ch = strata__replica_chunkset(r);

        if (strata__chunks_gathered(ch) || rt->world < 2 || c->train.accumulate > 1)
                return 0;
        for (int i = 0; i < v->nlayers; i++)
                if (strata__chunks_batch_stats(ch, i))
                        return 0;
        return 1;
}

/* Buckets @p b of the model whose replicas are @p reps, and whether they complete its tree. */
static void plan_buckets(struct strata_runtime *rt, struct strata__replica *reps,
                         struct strata__buckets *b)
{
        struct ddp *d = ddp_of(rt);

        b->n = 0;
        strata__ddp_bucket_walk(strata__replica_at(reps, 0), strata__ddp_bucket_cap(&rt->cfg),
                                add_bucket, b);
        for (int dev = 0; dev < rt->nreplicas; dev++)
                strata__chunks_set_defer(strata__replica_chunkset(strata__replica_at(reps, dev)),
                                         d->m.sync->tree);
}

/*
 * setup (model 0 active): the gradient buckets from the layer sizes, and whether they
 * complete the chunks' tree (the variant's, picked at init); with several models every
 * model's, each in its own arrays (after model 0's), kept in the model's state copy that a
 * call on it swaps in (decision 0082).
 */
static int ddp_setup(struct strata_runtime *rt)
{
        struct ddp *d = ddp_of(rt);
        size_t layers = (size_t)strata__models_layers(&rt->cfg);

        plan_buckets(rt, rt->replicas, &d->b);
        for (int i = 1; i < strata__models_n(rt); i++) {
                struct strata__buckets *b = strata__models_state(rt, i);

                b->lo = d->b.lo + 2 * layers * (size_t)i;
                b->hi = b->lo + layers;
                b->close = d->b.close + layers * (size_t)i;
                plan_buckets(rt, strata__models_replicas(rt->models, i), b);
        }
        return STRATA_OK;
}

_Static_assert(sizeof(struct strata__buckets) <= STRATA__MODEL_STATE_BYTES,
               "ddp's buckets fit a model's state copy");

/* The active model's buckets, which a call on another model exchanges with its copy. */
static void *ddp_model_state(struct strata_runtime *rt, size_t *bytes)
{
        *bytes = sizeof(ddp_of(rt)->b);
        return &ddp_of(rt)->b;
}

/*
 * The split step's sum of a bucket (decision 0096): every device's elements [lo, lo + n) at
 * @p g summed with @p op as the all-reduce sums them (each element src[0] + src[1] + ... in
 * the world's order, or the pairwise tree: the same bits), each device's part of the split
 * (strata__dev_part()) into its own replica only, the one part of its gradient its update
 * reads. The sums are checked for NaN and infinities as they are stored (decision 0104), which
 * the split step takes for its part's check.
 */
static int reduce_parts(const struct strata_runtime *rt, struct strata__replica *r, float *g,
                        size_t lo, size_t n, enum strata_reduce_op op)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        size_t a, e, block, x;

        strata__dev_part(rt, v->nparam, v->dev, &a, &e, &block);
        x = (size_t)v->dev * block;
        x = x < lo ? lo : x > lo + n ? lo + n : x; /* the part's first element in the bucket */
        return strata__comm_reduce_scatter_checked(ddp_of(rt)->m.dcomm, v->dev, g, g + (x - lo),
                                                   n, lo, block, op);
}

/*
 * A bucket of at most this many floats is all-reduced under the split step too: the
 * all-reduce's eager path (the communicator's mailboxes) meets the devices once where the
 * reduce-scatter meets them twice, and each element is the same sum in the same order.
 */
#define SPLIT_MIN 64

/*
 * Sum elements [lo, lo + n) of every device's gradients, held at @p g (the replica's vector
 * at lo, or a layer's buffer): into every replica, or with @p part each device's part of the
 * split step into its own (a bucket of at most SPLIT_MIN floats: into every replica). With
 * @p alone (strata__dev_alone()) the sums are checked in their pass where the transport can,
 * the device's record of checks, which its step then takes for its check (decision 0110). In
 * bf16 (cfg.strategy.grad_allreduce) they are rounded into the replica's staging, all-reduced
 * there and widened back.
 */
static int all_reduce_grads(const struct strata_runtime *rt, struct strata__replica *r, float *g,
                            size_t lo, size_t n, enum strata_reduce_op op, int part, int alone)
{
        struct ddp *d = ddp_of(rt);
        const struct strata__replica_view *v = strata__replica_view(r);
        uint16_t *s = strata__shard_grad_stage(strata__replica_shard(r));

        if (!s && part && n > SPLIT_MIN)
                return reduce_parts(rt, r, g, lo, n, op);
        if (!s && alone)
                return strata__comm_all_reduce_checked(d->m.dcomm, v->dev, g, n, op);
        if (!s) /* f32 (tree: the devices' blocks, the top of invariant mode's tree) */
                return strata_comm_all_reduce(d->m.dcomm, v->dev, g, g, n, STRATA_F32, op);
        s += lo;
        strata__to_bf16(s, g, n);
        STRATA_TRY(strata_comm_all_reduce(d->m.dcomm, v->dev, s, s, n, STRATA_BF16,
                                          STRATA_OP_SUM));
        strata__from_bf16(g, s, n);
        return STRATA_OK;
}

static const struct strata__span span_bucket = { "gradient bucket", "comm", "bucket", 0 };

/*
 * A test's overflow on device @p dev alone (strata__inject_nonfinite_grad()), where each
 * device decides alone: it enters the device's bucket at @p g before the sum, which carries
 * it to every device (decision 0091). Elsewhere the step's agreement finds it (step.c).
 */
static void inject_nonfinite(struct strata_runtime *rt, int dev, float *g)
{
#ifdef STRATA_TESTING
        if (strata__dev_alone(rt, strata__multi(rt)) && STRATA__FAULT_NONFINITE(rt->faults, dev))
                g[0] = NAN;
#else
        (void)rt, (void)dev, (void)g;
#endif
}

/* All-reduce every bucket whose last layer's gradients just became ready, with @p op. */
static int buckets_ready(void *h, struct strata__replica *r, int layer, enum strata_reduce_op op)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct ddp *d = ddp_of(h);
        int part = strata__dev_split(h, &d->m), alone = !part && strata__dev_alone(h, &d->m);

        for (int k = 0; k < d->b.n; k++) {
                uint64_t t0;
                int rc;

                if (d->b.close[k] != layer)
                        continue;
                if ((part || alone) && k == 0) { /* the step's first bucket: a fresh record */
                        size_t span;

                        (void)strata__comm_checked(d->m.dcomm, v->dev, &span);
                }
                inject_nonfinite(h, v->dev, v->grads + d->b.lo[k]);
                t0 = strata__track_begin(v->track, &span_bucket, NULL);
                rc = all_reduce_grads(h, r, v->grads + d->b.lo[k], d->b.lo[k],
                                      d->b.hi[k] - d->b.lo[k], op, part, alone);
                strata__track_end(v->track, t0, k);
                STRATA_TRY(rc);
        }
        return STRATA_OK;
}

int strata__ddp_bucket_ready(void *h, struct strata__replica *r, int layer)
{
        return buckets_ready(h, r, layer, STRATA_OP_SUM);
}

int strata__ddp_tree_ready(void *h, struct strata__replica *r, int layer)
{
        return buckets_ready(h, r, layer, STRATA_OP_SUM_TREE);
}

static const struct strata__span span_layer = { "reduce layer", "comm", "layer", 0 };

/*
 * accumulate_reduce each: layer @p layer's gradients of this micro-batch, in the layer buffer,
 * summed across devices as a bucket is (every element in the same order); the replica then
 * adds them into the window's sum (decision 0047).
 */
int strata__ddp_layer_each(void *h, struct strata__replica *r, int layer)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        const struct strata_layer *l = &v->layers[layer];
        uint64_t t0;
        int rc;

        if (!l->nparam)
                return STRATA_OK;
        t0 = strata__track_begin(v->track, &span_layer, NULL);
        rc = all_reduce_grads(h, r, l->grad, v->poff[layer], l->nparam, STRATA_OP_SUM,
                             0, 0);
        strata__track_end(v->track, t0, layer);
        return rc;
}

/*
 * ddp's variants. buckets: an accumulation micro-batch communicates nothing (no_sync), the
 * window's end all-reduces each bucket as its last layer completes. each (accumulate_reduce
 * each): every micro-batch's layers, in the layer buffer. invariant: the replica sums every
 * layer across devices itself, every micro-batch (nn/chunks.c); tree: the buckets complete
 * the chunks' tree instead (chunks.defer, tree_buckets()).
 */
static const struct strata__sync sync_buckets = {
        .name = "buckets",
        .hooks = { .ready = strata__ddp_bucket_ready },
        .split = 1,
        .alone = 1,
};
static const struct strata__sync sync_each = {
        .name = "each",
        .hooks = { .ready = strata__ddp_layer_each, .micro = strata__ddp_layer_each },
        .shard = STRATA__SHARD_EACH,
};
static const struct strata__sync sync_tree = {
        .name = "tree",
        .hooks = { .ready = strata__ddp_tree_ready },
        .tree = 1,
        .split = 1,
};
static const struct strata__sync sync_invariant = { .name = "invariant", .split = 1 };

const struct strata__sync *strata__ddp_pick_from(const struct strata__sync *const *set,
                                                 const struct strata_config *c,
                                                 const struct strata_runtime *rt)
{
        if (strata__accumulate_each(c))
                return set[STRATA__DDP_EACH];
        if (!c->strategy.invariant)
                return set[STRATA__DDP_BUCKETS];
        return set[rt && tree_buckets(c, rt, strata__rep(rt, 0)) ? STRATA__DDP_TREE
                                                              : STRATA__DDP_INVARIANT];
}

static const struct strata__sync *ddp_pick(const struct strata_config *c,
                                           const struct strata_device_ops *drv,
                                           const struct strata__shard_sizes *z,
                                           const struct strata_runtime *rt)
{
        static const struct strata__sync *const set[STRATA__DDP_SYNCS] = {
                &sync_buckets, &sync_each, &sync_tree, &sync_invariant
        };

        (void)drv, (void)z;
        return strata__ddp_pick_from(set, c, rt);
}

const struct strata__buckets *strata__ddp_buckets(const struct strata_runtime *rt)
{
        return &ddp_of(rt)->b;
}

/* Rank 0's running statistics (BatchNorm's) become everyone's. */
static int share_running_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        for (int i = 0; i < v->nlayers; i++)
                if (v->layers[i].nstate)
                        STRATA_TRY(strata_comm_broadcast(m->dcomm, dev, v->layers[i].state,
                                                         v->layers[i].nstate, STRATA_F32, 0));
        return STRATA_OK;
}

static int has_running(const struct strata__replica *r)
{
        const struct strata__replica_view *v = strata__replica_view(r);

        for (int i = 0; i < v->nlayers; i++)
                if (v->layers[i].nstate)
                        return 1;
        return 0;
}

/*
 * An evaluation or prediction runs rank 0's running statistics on every device, as PyTorch's
 * DDP (broadcast_buffers) does: without SyncBatchNorm each device's own would make a row's
 * output depend on the device that computes it, and the exported model (device 0's) would not
 * be the one evaluated. With SyncBatchNorm every device's are the same already (decision
 * 0033). Training reads batch statistics only, so no training step changes.
 */
static int ddp_align(struct strata_runtime *rt, int event)
{
        if ((event == STRATA__EV_VALIDATION_STEP || event == STRATA__EV_PREDICT_STEP) &&
            rt->world > 1 && !rt->cfg.strategy.sync_bn && has_running(strata__rep(rt, 0)))
                return strata__multi_run(rt, share_running_dev);
        return STRATA_OK;
}

const struct strata__strategy strata__ddp = {
        .name = "ddp",
        .parent = &strata__multi_parent,
        .caps = STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE | STRATA__CAP_MODELS,
        .ops = { .validate = strata__multi_validate, .layout = strata__ddp_layout,
                 .setup = ddp_setup, .align = ddp_align, .pick = ddp_pick,
                 .model_state = ddp_model_state },
        .hooks = { .connect = init_dev },
};
