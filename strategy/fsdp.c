/*
 * The `fsdp` strategy (ZeRO stage 3, the seed's model_sharded_context): zero2 whose parameters
 * are sharded too, over the devices of this process or of every process of its job
 * (the runtime's job, `auto`, as zero1's and zero2's; decision 0027). Device g (its global rank)
 * owns elements [g * L, (g + 1) * L)
 * of the flat parameter vector, L = strata__shard_len_for() as under zero1 and zero2, and
 * holds that shard alone of the parameters, of the reduced gradients and of the optimizer
 * state (the replica's own_params layout).
 *
 * Every layer computes from one planned layer buffer. Before its forward, and again before its
 * backward, its parameters are gathered there from their owners: one all-gather over the
 * shards the layer meets, each owner sending its piece (the forward's last layer is still
 * there for the backward). After its backward its gradients are reduced to the owners of its
 * parts, one reduce-scatter over the shards: each element summed in the world's order as ddp's
 * all-reduce sums it, so the owner holds ddp's bits (decision 0045: one collective per layer,
 * where there was one per shard piece). Gradients are written to a layer-sized
 * buffer, or to a whole local vector where accumulation micro-batches sum there (no_sync) or
 * clipping by norm gathers every reduced shard to take ddp's sum of squares. The update is
 * elementwise on the shard. Every device issues the same collectives in the same order.
 * Decision 0028. In invariant mode (decision 0030) the chunks' tree gives every device each
 * layer's whole reduced gradient, every micro-batch, and the device keeps its shard's part.
 *
 * Parent: zero1 (the job's processes joined at setup_environment, the shards assigned by
 * global rank); fsdp's connect initialises each layer into the layer buffer, global device
 * 0's broadcast as ddp does, and keeps the shard's part; its variants (decision 0062) fetch
 * each layer and reduce it to its owners, and sum the squares for the one device step, which
 * unscales, clips and updates the shard.
 */
#include "strata/status.h"
#include "drivers/comm_blocks.h"
#include "strategy/multi.h"

static int fsdp_validate(const struct strata__strategy *st, const struct strata_config *c,
                         const struct strata_device_ops *drv)
{
        STRATA_TRY(strata__multi_validate(st, c, drv));
        if (strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy fsdp on %s: layers are gathered "
                                    "in host memory in this version; use zero2 or ddp",
                                    drv->name);
        return STRATA_OK;
}

static const struct strata__span span_gather = { "gather layer", "comm", "layer", 0 };

/*
 * The replica's fetch: layer @p i's parameters into the layer buffer before it computes, one
 * all-gather over the shards the layer meets (each owner's piece from its shard; decision
 * 0045).
 */
static int gather_layer(void *h, struct strata__replica *r, int i)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        struct strata_comm *comm = strata__multi(h)->dcomm;
        size_t lo = v->poff[i], hi = lo + v->layers[i].nparam, len = strata__shard_len(sh);
        size_t own = strata__shard_lo(sh), a = own > lo ? own : lo;
        const float *mine = a < hi && a < own + len ? v->params + (a - own) : NULL;
        uint64_t t0 = strata__track_begin(v->track, &span_gather, NULL);
        int rc = STRATA_OK;

        if (lo < hi)
                rc = strata__comm_all_gather_blocks(comm, v->dev, mine,
                                                    strata__shard_layer_buffer(sh), hi - lo,
                                                    lo, len, STRATA_F32);
        strata__track_end(v->track, t0, i);
        return rc;
}

/*
 * connect: zeros, then layer by layer the initial values into the layer buffer, device 0's
 * broadcast (as ddp broadcasts its replica) and the shard's part kept; running state as ddp.
 */
static int init_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);

        strata__shard_set(sh, rt->rank0 + dev);
        strata__replica_init(r, rt->cfg.seed);
        for (int i = 0; i < v->nlayers; i++) {
                struct strata_layer *l = &v->layers[i];

                if (l->desc->ops->init)
                        l->desc->ops->init(l, rt->cfg.seed);
                if (l->nparam) {
                        STRATA_TRY(strata_comm_broadcast(m->dcomm, dev,
                                                         strata__shard_layer_buffer(sh),
                                                         l->nparam, STRATA_F32, 0));
                        strata__replica_keep(r, i);
                }
                if (l->nstate)
                        STRATA_TRY(strata_comm_broadcast(m->dcomm, dev, l->state, l->nstate,
                                                         STRATA_F32, 0));
        }
        return STRATA_OK;
}

/*
 * Invariant mode: the chunks' tree has left layer @p layer's whole reduced gradient on every
 * device (decision 0030); the device keeps its shard's part.
 */
static int keep_layer(void *h, struct strata__replica *r, int layer)
{
        (void)h;
        strata__replica_keep_grads(r, layer);
        return STRATA_OK;
}

/*
 * Clipping by norm where layers' gradients go to a whole local vector: every unscaled shard
 * gathered into it, and ddp's sum of squares of the whole vector.
 */
static int whole_sumsq(struct strata_runtime *rt, struct strata__multi *m, int dev, double *ss)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        float *whole = strata__shard_layer_grads(sh);

        STRATA_TRY(strata_comm_all_gather(m->dcomm, dev, v->grads, whole, strata__shard_len(sh),
                                          STRATA_F32));
        *ss = v->k->sumsq(whole, v->nparam);
        return STRATA_OK;
}

/* The chain of strata__zero_sumsq() over the owners' shards. */
static int chain_sumsq(struct strata_runtime *rt, struct strata__multi *m, int dev, double *ss)
{
        return strata__zero_sumsq(m, strata__rep(rt, dev), ss);
}

/*
 * fsdp's variants (decisions 0028, 0030, 0047); the update is the shard's, nothing gathered
 * after it (the layers are, before they compute). layer: an accumulation micro-batch sums
 * locally (no_sync), the window's end reduces each layer to its owners, layers' gradients in
 * a layer-sized buffer. whole: the same into a whole local vector (micro-batches accumulate
 * there, or clipping by norm gathers every unscaled shard into it for ddp's sum of squares).
 * each: every micro-batch's layers reduced, the owners adding their pieces into their shard
 * of the window's sum, the norm chained over the owners' shards (each-whole: gathered, where
 * the kernels have no sumsq_from). invariant: the chunks' tree has left every layer's whole
 * reduced gradient on every device, every micro-batch; the device keeps its shard's part.
 */
#define FSDP_SYNC(nm, lay, mic, ss, how)                                                       \
        { .name = nm, .hooks = { .ready = lay, .micro = mic, .fetch = gather_layer },       \
          .sumsq = ss, .shard = STRATA__SHARD_PARAMS | (how) }
static const struct strata__sync fsdp_layer =
        FSDP_SYNC("layer", strata__zero_reduce_layer, NULL, NULL, 0);
static const struct strata__sync fsdp_whole =
        FSDP_SYNC("whole", strata__zero_reduce_layer, NULL, whole_sumsq, STRATA__SHARD_WHOLE_GRADS);
static const struct strata__sync fsdp_each =
        FSDP_SYNC("each", strata__zero_reduce_layer_each, strata__zero_reduce_layer_each, chain_sumsq,
                  STRATA__SHARD_EACH);
static const struct strata__sync fsdp_each_whole =
        FSDP_SYNC("each-whole", strata__zero_reduce_layer_each, strata__zero_reduce_layer_each,
                  whole_sumsq, STRATA__SHARD_EACH | STRATA__SHARD_WHOLE_GRADS);
static const struct strata__sync fsdp_invariant =
        FSDP_SYNC("invariant", keep_layer, NULL, NULL, 0);
static const struct strata__sync fsdp_invariant_whole =
        FSDP_SYNC("invariant-whole", keep_layer, NULL, whole_sumsq, STRATA__SHARD_WHOLE_GRADS);

/*
 * Layers' gradients go to a whole local vector where micro-batches accumulate there or
 * clipping by norm needs every reduced element gathered: each micro-batch's reduced layers
 * chain the norm over the shards instead, unless the kernels have no sumsq_from.
 */
static const struct strata__sync *fsdp_pick(const struct strata_config *c,
                                            const struct strata_device_ops *drv,
                                            const struct strata__shard_sizes *z,
                                            const struct strata_runtime *rt)
{
        int clip = c->train.clip_norm > 0.0f;

        (void)z, (void)rt;
        if (strata__accumulate_each(c))
                return clip && !drv->kernels->sumsq_from ? &fsdp_each_whole : &fsdp_each;
        if (c->strategy.invariant)
                return c->train.accumulate > 1 || clip ? &fsdp_invariant_whole : &fsdp_invariant;
        return c->train.accumulate > 1 || clip ? &fsdp_whole : &fsdp_layer;
}

/* Its gradients are reduced to their owners in f32: grad_allreduce bf16 does not apply. */
const struct strata__strategy strata__fsdp = {
        .name = "fsdp",
        .parent = &strata__zero1,
        .caps = STRATA__CAP_SHARD_PARAMS,
        /* not several models: each model's parameter shards and gathers (decision 0116) */
        .drops = STRATA__CAP_ALL_REDUCE | STRATA__CAP_MODELS,
        .ops = { .validate = fsdp_validate, .pick = fsdp_pick },
        .hooks = { .connect = init_dev },
};
