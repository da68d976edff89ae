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
 * setup_environment); connect also assigns the shards by global rank; its variants (ddp's,
 * decision 0062) gather the parameters after the one device step updates the shard. zero2's
 * is zero1: its variants reduce each bucket or layer to its owners (and gather the shards for
 * clipping by norm, or chain the norm over them).
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

/* After the update: every shard's new parameters to every device (zero1, zero2). */
static int gather_params(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);

        return gather_shards(m, r, strata__replica_view(r)->params);
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
                            size_t lo, size_t hi, int in_place)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata__shard *sh = strata__replica_shard(r);
        size_t len = strata__shard_len(sh), own = strata__shard_lo(sh);
        size_t a = own > lo ? own : lo, b = own + len < hi ? own + len : hi;
        float *dst = a >= b ? NULL
                     : in_place ? src + (a - lo)
                     : strata__shard_grad_at(sh, v->grads, a);

        return strata__comm_reduce_scatter_blocks(comm, v->dev, src, dst, hi - lo, lo, len,
                                                  STRATA_F32, STRATA_OP_SUM);
}

static const struct strata__span span_bucket = { "gradient bucket", "comm", "bucket", 0 };
static const struct strata__span span_layer = { "reduce layer", "comm", "layer", 0 };

/* Layer @p layer's gradients to their owners: into the shard, or @p in_place (each). */
static int reduce_layer(void *h, struct strata__replica *r, int layer, int in_place)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        size_t lo = strata__replica_param_offset(r, layer), hi = lo + v->layers[layer].nparam;
        uint64_t t0;
        int rc;

        if (lo == hi)
                return STRATA_OK;
        t0 = strata__track_begin(v->track, &span_layer, NULL);
        rc = reduce_to_owners(strata__multi(h)->dcomm, r, v->layers[layer].grad, lo, hi,
                              in_place);
        strata__track_end(v->track, t0, layer);
        return rc;
}

int strata__zero_reduce_layer(void *h, struct strata__replica *r, int layer)
{
        return reduce_layer(h, r, layer, 0);
}

int strata__zero_reduce_layer_each(void *h, struct strata__replica *r, int layer)
{
        return reduce_layer(h, r, layer, 1);
}

/* zero2: reduce every bucket whose last layer's gradients just became ready to its owners. */
static int bucket_ready(void *h, struct strata__replica *r, int layer)
{
        const struct strata__replica_view *v = strata__replica_view(r);
        struct strata_runtime *rt = h;
        const struct strata__buckets *b = strata__ddp_buckets(rt);

        for (int k = 0; k < b->n; k++) {
                uint64_t t0;
                int rc;

                if (b->close[k] != layer)
                        continue;
                t0 = strata__track_begin(v->track, &span_bucket, NULL);
                rc = reduce_to_owners(strata__multi(rt)->dcomm, r, v->grads + b->lo[k],
                                      b->lo[k], b->hi[k], 0);
                strata__track_end(v->track, t0, k);
                STRATA_TRY(rc);
        }
        return STRATA_OK;
}

/*
 * Clipping by norm without own_grads (micro-batches accumulate in the whole vector, or the
 * kernels have no sumsq_from): every reduced shard on every device at the window's end, for
 * ddp's sum of squares of the whole vector.
 */
static int gather_grads(struct strata_runtime *rt, struct strata__multi *m, int dev)
{
        struct strata__replica *r = strata__rep(rt, dev);

        return gather_shards(m, r, strata__replica_view(r)->grads);
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

/* The chain of strata__zero_sumsq() as a variant's sum of squares. */
static int chain_sumsq(struct strata_runtime *rt, struct strata__multi *m, int dev, double *ss)
{
        return strata__zero_sumsq(m, strata__rep(rt, dev), ss);
}

/*
 * zero1's variants: ddp's (its layer hooks, the same bits on every device), each followed by
 * the gather of every shard's parameters after the update. zero2's in invariant mode too: the
 * chunks' tree gives every device the whole reduced gradient.
 */
static const struct strata__sync zero1_buckets = {
        .name = "buckets",
        .hooks = { .ready = strata__ddp_bucket_ready },
        .gather = gather_params,
};
static const struct strata__sync zero1_each = {
        .name = "each",
        .hooks = { .ready = strata__ddp_layer_each, .micro = strata__ddp_layer_each },
        .gather = gather_params,
        .shard = STRATA__SHARD_EACH,
};
static const struct strata__sync zero1_tree = {
        .name = "tree",
        .hooks = { .ready = strata__ddp_tree_ready },
        .gather = gather_params,
        .tree = 1,
};
static const struct strata__sync zero1_invariant = {
        .name = "invariant",
        .gather = gather_params,
};

static const struct strata__sync *zero1_pick(const struct strata_config *c,
                                             const struct strata_device_ops *drv,
                                             const struct strata__shard_sizes *z,
                                             const struct strata_runtime *rt)
{
        static const struct strata__sync *const set[STRATA__DDP_SYNCS] = {
                &zero1_buckets, &zero1_each, &zero1_tree, &zero1_invariant
        };

        (void)drv, (void)z;
        return strata__ddp_pick_from(set, c, rt);
}

/*
 * zero2's variants (decisions 0036, 0045, 0047). own-grads: after each layer's backward its
 * gradients go to their owners' shard (the replica holds its shard alone), the norm chained
 * over the owners' shards. each: every micro-batch's layers to their owners, in place, the
 * owners adding their piece into their shard of the window's sum; the norm chained. Where the
 * replica keeps the whole vector (micro-batches accumulate there, the kernels have no
 * sumsq_from, or a shard is not smaller): buckets, each bucket to its owners at the window's
 * end, and each-whole; with clipping by norm (their -gather) every reduced shard is gathered
 * after backward for ddp's sum of squares of the whole vector.
 */
static const struct strata__sync zero2_own = {
        .name = "own-grads",
        .hooks = { .ready = strata__zero_reduce_layer },
        .sumsq = chain_sumsq,
        .gather = gather_params,
        .shard = STRATA__SHARD_GRADS,
};
static const struct strata__sync zero2_each = {
        .name = "each",
        .hooks = { .ready = strata__zero_reduce_layer_each, .micro = strata__zero_reduce_layer_each },
        .sumsq = chain_sumsq,
        .gather = gather_params,
        .shard = STRATA__SHARD_GRADS | STRATA__SHARD_EACH,
};
static const struct strata__sync zero2_buckets = {
        .name = "buckets",
        .hooks = { .ready = bucket_ready },
        .gather = gather_params,
};
static const struct strata__sync zero2_buckets_gather = {
        .name = "buckets-gather",
        .hooks = { .ready = bucket_ready },
        .after_backward = gather_grads,
        .gather = gather_params,
};
static const struct strata__sync zero2_each_whole = {
        .name = "each-whole",
        .hooks = { .ready = strata__zero_reduce_layer_each, .micro = strata__zero_reduce_layer_each },
        .gather = gather_params,
        .shard = STRATA__SHARD_EACH,
};
static const struct strata__sync zero2_each_gather = {
        .name = "each-gather",
        .hooks = { .ready = strata__zero_reduce_layer_each, .micro = strata__zero_reduce_layer_each },
        .after_backward = gather_grads,
        .gather = gather_params,
        .shard = STRATA__SHARD_EACH,
};

/*
 * The plan asks the shard for the reduced gradients alone where micro-batches do not
 * accumulate locally (each device's local sum of every element is ddp's operand: decision
 * 0036) and clipping by norm can chain the sum of squares (the kernels' sumsq_from); the
 * shard holds them alone (own_grads) where that is smaller, which its sizes @p z say.
 */
static const struct strata__sync *zero2_pick(const struct strata_config *c,
                                             const struct strata_device_ops *drv,
                                             const struct strata__shard_sizes *z,
                                             const struct strata_runtime *rt)
{
        int clip = c->train.clip_norm > 0.0f, each = strata__accumulate_each(c);
        int own = (c->train.accumulate <= 1 || each) && (!clip || drv->kernels->sumsq_from);

        if (c->strategy.invariant)
                return zero1_pick(c, drv, z, rt);
        /* several models (decision 0116): every replica is laid out with model 0's shard
         * choice, which another model's sizes may not share, so they keep whole gradients */
        if (strata__models_count(c) > 1)
                own = 0;
        if (own && z)
                own = z->own_grads;
        if (each)
                return own ? &zero2_each : clip ? &zero2_each_gather : &zero2_each_whole;
        return own ? &zero2_own : clip ? &zero2_buckets_gather : &zero2_buckets;
}

const struct strata__strategy strata__zero1 = {
        .name = "zero1",
        .parent = &strata__ddp,
        .caps = STRATA__CAP_SHARD_STATE,
        .ops = { .pick = zero1_pick },
        .hooks = { .connect = connect_dev },
};

/* Its buckets are reduced to their owners in f32: grad_allreduce bf16 does not apply. */
const struct strata__strategy strata__zero2 = {
        .name = "zero2",
        .parent = &strata__zero1,
        .caps = STRATA__CAP_SHARD_GRADS,
        .drops = STRATA__CAP_ALL_REDUCE,
        .ops = { .pick = zero2_pick },
};
