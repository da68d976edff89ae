/*
 * The sharded strategies `zero1` and `zero2` (ZeRO stages 1 and 2): ddp whose optimizer state is
 * sharded, over the devices of this process or of every process of its job (strata_spawn()'s, or an
 * MPI launcher's: the job auto; decision 0027). Device g (its global rank) owns shard g of
 * the flat parameter vector, elements [g * L, (g + 1) * L) with L = strata__shard_len_for() (at
 * least 1/N of the parameters, a 64-byte multiple; the vectors are padded with zeros to N * L), and
 * holds the optimizer state of that shard only (the plan lays out one shard per device).
 *
 * zero1: gradients are all-reduced as ddp does (ddp's buckets and backward, ddp's bits on
 * every device), each device unscales and clips the whole gradient as ddp (the same sum of
 * squares), updates its shard, and an all-gather copies every shard's new bits to every
 * device. zero2: each bucket is reduced during backward only to the owners of its parts (one
 * reduce-scatter along the shard boundaries, each element summed in the world's order as ddp's
 * all-reduce sums it; decision 0045), so a device holds ddp's reduced gradient for its shard
 * only; the rest of its gradient vector keeps its local sums (backward's output and the
 * accumulation buffer). Clipping by norm needs ddp's sum of squares of the whole reduced
 * gradient: with own_grads the owners continue one running sum shard after shard (the
 * kernels' sumsq_from); with the whole vector (micro-batches accumulating there) zero2
 * all-gathers the reduced shards after backward. Where every micro-batch is reduced
 * (accumulate_reduce each), each layer goes to its owners every micro-batch and the owners add
 * it into their shard of the window's sum, so zero2 keeps that shard alone with accumulation
 * too. Decisions 0026, 0036, 0047. In invariant mode (decision 0030) both stages take ddp's
 * invariant backward (the chunks' tree gives every device the whole reduced gradient) and
 * differ from it only in the sharded optimizer state: zero2 then keeps whole gradients.
 *
 * Parents: zero1's is ddp (the job's processes, if any, are joined by the runtime's job at
 * setup_environment); connect also assigns the shards by global rank; its step hook updates
 * the shard and gathers the parameters. zero2's is zero1: its backward hooks reduce each
 * bucket to its owners (and gather the shards for clipping by norm).
 */
#include "strata/status.h"
#include "drivers/comm_blocks.h"
#include "strategy/multi.h"

/* Every device's copy of @p v (its whole shards) from the shards' owners. */
static int gather_shards(struct strata__multi *m, const struct strata__replica *r, float *v)
{
        struct strata__shard *sh = strata__replica_shard(r);

        if (strata__shard_count(sh) == 1)
                return STRATA_OK;
        return strata_comm_all_gather(m->dcomm, strata__replica_view(r)->dev,
                                      v + strata__shard_lo(sh), v,
                                      strata__shard_len(sh), STRATA_F32);
}

/* connect: each device owns the shard of its global rank; then ddp's initial values. */
static int connect_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        strata__shard_set(strata__rep_shard(rt, dev), rt->rank0 + dev);
        return STRATA__INHERITED(&strata__ddp, hooks.connect)(rt, m, dev);
}

/*
 * optimizer_step: unscale and clip as ddp (the skip agreed by every device), update this
 * device's shard, then every shard's parameters to every device.
 */
static int step_dev(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        STRATA_TRY(strata__dev_step(rt, dev, m->comm, m->args));
        return gather_shards(m, r, v->params);
}

/*
 * Elements [lo, hi) of every device's gradients (@p src holds element lo) summed into the
 * owners' alone: one reduce-scatter over the shards (each owner's piece of the range, in place
 * in the whole vector, or into the owner's shard of reduced gradients where the replica holds
 * only that: own_grads, own_params; in place in @p src where every micro-batch is reduced,
 * for the replica to add into the window's sum), every element summed in the world's order as
 * one reduce per shard summed it (decision 0045).
 */
static int reduce_to_owners(struct strata_comm *comm, struct strata__replica *r, float *src,
                            size_t lo, size_t hi)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        size_t len = strata__shard_len(sh), own = strata__shard_lo(sh);
        size_t a = own > lo ? own : lo, b = own + len < hi ? own + len : hi;
        float *dst = a >= b ? NULL
                     : strata__shard_each(sh) ? src + (a - lo)
                     : strata__shard_grad_at(sh, v->grads, a);

        return strata__comm_reduce_scatter_blocks(comm, v->dev, src, dst, hi - lo, lo, len,
                                                  STRATA_F32, STRATA_OP_SUM);
}

static const struct strata__span span_bucket = { "gradient bucket", "comm", "bucket", 0 };
static const struct strata__span span_layer = { "reduce layer", "comm", "layer", 0 };

int strata__zero_reduce_layer(void *h, struct strata__replica *r, int layer)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        size_t lo = strata__replica_param_offset(r, layer), hi = lo + v->layers[layer].nparam;
        uint64_t t0;
        int rc;

        if (lo == hi)
                return STRATA_OK;
        t0 = strata__track_begin(v->track, &span_layer, NULL);
        rc = reduce_to_owners(strata__multi(h)->dcomm, r, v->layers[layer].grad, lo, hi);
        strata__track_end(v->track, t0, layer);
        return rc;
}

/*
 * zero2: reduce every bucket whose last layer's gradients just became ready; with own_grads
 * the layer's own gradients, before the next layer's backward writes the same buffer.
 */
static int bucket_ready(void *h, struct strata__replica *r, int layer)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata_runtime *rt = h;
        const struct strata__buckets *b = strata__ddp_buckets(rt);

        if (strata__shard_own_grads(strata__replica_shard(r)))
                return strata__zero_reduce_layer(h, r, layer);
        for (int k = 0; k < b->n; k++) {
                uint64_t t0;
                int rc;

                if (b->close[k] != layer)
                        continue;
                t0 = strata__track_begin(v->track, &span_bucket, NULL);
                rc = reduce_to_owners(strata__multi(rt)->dcomm, r, v->grads + b->lo[k],
                                      b->lo[k], b->hi[k]);
                strata__track_end(v->track, t0, k);
                STRATA_TRY(rc);
        }
        return STRATA_OK;
}

/*
 * zero2's backward: nothing communicated on accumulation micro-batches (no_sync); at the
 * window's end each bucket (or, with own_grads, each layer) goes to its owners. Where every
 * micro-batch is reduced (accumulate_reduce each), each layer goes to its owners every
 * micro-batch, and each owner adds its piece into its shard of the window's sum (decision
 * 0047). In invariant mode every device gets the chunks' tree's whole gradient: zero1's
 * (ddp's) hook.
 */
static strata__grad_ready_fn zero2_layer_hook(const struct strata_runtime *rt,
                                              const struct strata__replica *r, int sync)
{
        if (strata__shard_each(strata__replica_shard(r)))
                return strata__zero_reduce_layer;
        if (rt->cfg.strategy.invariant)
                return STRATA__INHERITED(&strata__zero1, hooks.layer)(rt, r, sync);
        return sync ? bucket_ready : NULL;
}

/*
 * Clipping by norm without own_grads (micro-batches accumulate in the whole vector, or the
 * kernels have no sumsq_from): every reduced shard on every device, for ddp's sum of squares
 * of the whole vector.
 */
static int zero2_after_backward(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        if (rt->cfg.strategy.invariant || !m->args->sync || !(rt->cfg.train.clip_norm > 0.0f) ||
            strata__shard_own_grads(strata__replica_shard(r)))
                return STRATA_OK;
        return gather_shards(m, r, v->grads);
}

/*
 * Shards from which a job of several processes gathers the sum of squares layer by layer
 * instead of chaining it shard by shard (decision 0047): the chain is one broadcast per shard
 * in sequence (a binomial tree each, about 2 log2(P) latencies), the gather one all-gather per
 * layer (Bruck's, as many steps) and the gradients' bytes once. On decision 0037's TCP link
 * (23.6 us, 1.31 ns/B) they cross near 64 shards for models of about a million parameters
 * (chain 18 ms, gather 8 ms for 784-512x4-10 at 64); in one process a broadcast costs well
 * under a microsecond and the chain stays. The choice reads the world and the processes
 * alone, which every process shares; both give the same bits.
 */
#ifdef STRATA_TESTING
int strata__sumsq_gather_from = 64;
#define GATHER_FROM strata__sumsq_gather_from
#else
#define GATHER_FROM 64
#endif

/*
 * The running sum over every layer on every device: each layer's reduced gradients gathered
 * from their owners into the layer buffer (one all-gather over the shards it meets, decision
 * 0045), the sum continued over them in element order.
 */
static int gathered_sumsq(struct strata__multi *m, struct strata__replica *r, double *ss)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        size_t len = strata__shard_len(sh), own = strata__shard_lo(sh);
        float *buf = strata__shard_layer_grads(sh);

        *ss = 0.0;
        for (int i = 0; i < v->nlayers; i++) {
                size_t lo = v->poff[i], n = v->layers[i].nparam;
                size_t a = own > lo ? own : lo, b = own + len < lo + n ? own + len : lo + n;

                if (!n)
                        continue;
                STRATA_TRY(strata__comm_all_gather_blocks(m->dcomm, v->dev,
                                                          a < b ? v->grads + (a - own) : NULL,
                                                          buf, n, lo, len, STRATA_F32));
                *ss = v->k->sumsq_from(*ss, buf, n);
        }
        return STRATA_OK;
}

/*
 * ddp's sum of squares of the whole reduced gradient (one running double, element order) from
 * the shards alone (own_grads, own_params): the owner of shard 0 sums its elements, each next
 * owner continues the sum over its own (sumsq_from) and broadcasts it, so the last broadcast
 * carries the bits of ddp's sumsq() over the whole vector to every device. Shards past the
 * parameters add nothing. The sum is a host double: it travels over the host communicator (a
 * driver with memory of its own reduces only f32 in it). From GATHER_FROM shards over
 * processes every device sums the gathered layers itself instead: sumsq_from continued over
 * any cut of the vector in order gives the same double.
 */
int strata__zero_sumsq(struct strata__multi *m, struct strata__replica *r, double *ss)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        size_t len = strata__shard_len(sh), lo = strata__shard_lo(sh);

        if (m->peers && strata__shard_count(sh) >= GATHER_FROM)
                return gathered_sumsq(m, r, ss);
        *ss = 0.0;
        for (int g = 0; g < strata__shard_count(sh) && (size_t)g * len < v->nparam; g++) {
                size_t a = (size_t)g * len, n = v->nparam - a < len ? v->nparam - a : len;

                if (a == lo)
                        *ss = v->k->sumsq_from(*ss, v->grads, n);
                STRATA_TRY(strata_comm_broadcast(m->comm, v->dev, ss, 1, STRATA_F64, g));
        }
        return STRATA_OK;
}

/*
 * zero2's optimizer_step with own_grads and clipping by norm: zero1's, the norm summed over
 * the owners' shards (strata__zero_sumsq) instead of a whole gathered vector.
 */
static int zero2_step(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);
        double ss;
        int skip;

        if (!strata__shard_own_grads(strata__replica_shard(r)) ||
            !(rt->cfg.train.clip_norm > 0.0f))
                return step_dev(rt, m, dev);
        STRATA_TRY(strata__unscale_step(rt, dev, m->comm, m->args, &skip));
        if (skip)
                return STRATA_OK;
        STRATA_TRY(strata__zero_sumsq(m, r, &ss));
        strata__replica_clip_sumsq(r, rt->cfg.train.clip_norm, rt->cfg.train.clip_value, ss);
        strata__replica_step(r, &rt->cfg.optim);
        return gather_shards(m, r, v->params);
}

const struct strata__strategy strata__zero1 = {
        .name = "zero1",
        .parent = &strata__ddp,
        .caps = STRATA__CAP_SHARD_STATE,
        .hooks = { .connect = connect_dev, .step = step_dev },
};

/* Its buckets are reduced to their owners in f32: grad_allreduce bf16 does not apply. */
const struct strata__strategy strata__zero2 = {
        .name = "zero2",
        .parent = &strata__zero1,
        .caps = STRATA__CAP_SHARD_GRADS,
        .drops = STRATA__CAP_ALL_REDUCE,
        .hooks = { .layer = zero2_layer_hook, .after_backward = zero2_after_backward,
                   .step = zero2_step },
};
