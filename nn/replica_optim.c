/*
 * A replica's optimizer side: clipping, loss-scale unscaling and the non-finite check of the
 * gradients the replica holds (its shard's where the strategy shards them, nn/shard.c), the
 * optimizer update with the scalars nn/optim.c computes, and what own_params keeps of a layer.
 */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "arch/simd.h"
#include "kernel/trace.h"
#include "nn/optim.h"
#include "nn/replica_private.h"

/* What the optimizer side shows on the device's trace track. */
static const struct strata__span span_clip = { "clip gradients", "compute", NULL, 0 };
static const struct strata__span span_step = { "optimizer step", "compute", "step", 0 };

/* The reduced gradients the replica holds (its shard's under zero2 and fsdp). */
static size_t grads_held(const struct strata__replica *r)
{
        return strata__shard_grads_held(r->v.shard);
}

void strata__replica_clip_sumsq(struct strata__replica *r, float max_norm, float max_value,
                                double ss)
{
        uint64_t t0;

        if (!(max_norm > 0.0f) && !(max_value > 0.0f))
                return;
        t0 = strata__track_begin(r->v.track, &span_clip, NULL);
        if (max_norm > 0.0f) {
                /* PyTorch clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above. */
                float scale = (float)(max_norm / (sqrt(ss) + 1e-6));

                if (scale < 1.0f)
                        r->v.k->scale(r->v.grads, scale, grads_held(r));
        }
        if (max_value > 0.0f)
                r->v.k->clamp(r->v.grads, max_value, grads_held(r));
        strata__track_end(r->v.track, t0, 0);
}

void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value)
{
        double ss = 0.0;

        if (max_norm > 0.0f) {
                const float *g = strata__shard_own_params(r->v.shard)
                                         ? strata__shard_layer_grads(r->v.shard) : r->v.grads;

                ss = r->v.k->sumsq(g, r->v.nparam);
        }
        strata__replica_clip_sumsq(r, max_norm, max_value, ss);
}

int strata__replica_unscale(struct strata__replica *r, float scale)
{
        /* f32 squares cannot overflow a double: a non-finite sum is a non-finite gradient. */
        if (!isfinite(r->v.k->sumsq(r->v.grads, grads_held(r))))
                return 1;
        r->v.k->scale(r->v.grads, 1.0f / scale, grads_held(r)); /* a power of two: exact */
        return 0;
}

int strata__replica_nonfinite(const struct strata__replica *r)
{
        if (r->v.k->nonfinite)
                return r->v.k->nonfinite(r->v.grads, grads_held(r));
        return !isfinite(r->v.k->sumsq(r->v.grads, grads_held(r)));
}

void strata__replica_skip(struct strata__replica *r)
{
        for (int i = 0; i < r->v.nlayers; i++)
                r->v.layers[i].grad_fresh = 1;
}

void strata__replica_step_range(const struct strata__replica *r, const struct strata_optim *o,
                                float *p, size_t lo, size_t hi)
{
        struct strata_update u;

        strata__optim_scalars(o, r->opt_t, &u);
        r->v.k->update_range(&u, p, r->v.grads, r->v.opt_state, r->v.nparam, lo, hi);
}

int strata__replica_nonfinite_range(const struct strata__replica *r, size_t lo, size_t hi)
{
        if (hi <= lo)
                return 0;
        if (r->v.k->nonfinite)
                return r->v.k->nonfinite(r->v.grads + lo, hi - lo);
        return !isfinite(r->v.k->sumsq(r->v.grads + lo, hi - lo));
}

void strata__replica_state_part(struct strata__replica *dst, const struct strata__replica *src,
                                size_t lo, size_t hi)
{
        size_t n = src->v.nparam, slots = n ? src->v.nopt / n : 0;

        for (size_t s = 0; s < slots && hi > lo; s++)
                memcpy(dst->v.opt_state + s * n + lo, src->v.opt_state + s * n + lo,
                       (hi - lo) * sizeof(float));
}

/* Elements updated, then copied while they are still in the first-level cache. */
#define PART_BLOCK ((size_t)2048)

void strata__replica_step_part(struct strata__replica *r, const struct strata_optim *o,
                               size_t lo, size_t hi, struct strata__replica *const *to, int nto)
{
        struct strata_update u;
        uint64_t t0 = strata__track_begin(r->v.track, &span_step, NULL);

        r->opt_t++;
        strata__optim_scalars(o, r->opt_t, &u);
        for (size_t b = lo; b < hi; b += PART_BLOCK) {
                size_t e = hi - b > PART_BLOCK ? b + PART_BLOCK : hi;

                r->v.k->update_range(&u, r->v.params, r->v.grads, r->v.opt_state, r->v.nparam,
                                     b, e);
                for (int k = 0; k < nto; k++)
                        memcpy(to[k]->v.params + b, r->v.params + b, (e - b) * sizeof(float));
        }
        strata__track_end(r->v.track, t0, (int64_t)r->opt_t);
        strata__replica_skip(r);
}

size_t strata__replica_param_offset(const struct strata__replica *r, int i)
{
        return r->v.poff[i];
}

void strata__replica_set_hooks(struct strata__replica *r,
                               const struct strata__replica_hooks *hooks, void *h)
{
        strata__shard_set_hooks(r->v.shard, hooks, h);
}

void strata__replica_keep(struct strata__replica *r, int i)
{
        strata__shard_keep(r->v.shard, r->v.params, strata__shard_layer_buffer(r->v.shard),
                           r->v.poff[i], r->v.layers[i].nparam);
}

void strata__replica_keep_grads(struct strata__replica *r, int i)
{
        strata__shard_keep(r->v.shard, r->v.grads, r->v.layers[i].grad, r->v.poff[i],
                           r->v.layers[i].nparam);
}

void strata__replica_step(struct strata__replica *r, const struct strata_optim *o)
{
        struct strata_update u;
        uint64_t t0 = strata__track_begin(r->v.track, &span_step, NULL);
        size_t at = strata__shard_at(r->v.shard, 0), gat = strata__shard_at(r->v.shard, 1);

        r->opt_t++;
        strata__optim_scalars(o, r->opt_t, &u);
        /* unsharded: shard_lo 0, shard_len nparam; sharded: padding updates zeros to zeros;
         * own_params: the vectors are the shard; own_grads: the gradients are */
        r->v.k->update(&u, r->v.params + at, r->v.grads + gat, r->v.opt_state,
                     strata__shard_len(r->v.shard));
        strata__track_end(r->v.track, t0, (int64_t)r->opt_t);
        for (int i = 0; i < r->v.nlayers; i++)
                r->v.layers[i].grad_fresh = 1;
}

uint64_t strata__replica_steps(const struct strata__replica *r)
{
        return r->opt_t;
}

void strata__replica_set_steps(struct strata__replica *r, uint64_t t)
{
        r->opt_t = t;
}

/*
 * p = keep p + tau q, each element rounded as the scalar loop rounds it (two products and a
 * sum, ISO C: no contraction into a fused multiply-add), in the widest vectors the CPU has
 * (decision 0110: a process repeats it whole, whatever its share of the rows).
 */
STRATA_SIMD static void polyak(float *restrict p, const float *restrict q, float keep, float tau,
                               size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] = keep * p[i] + tau * q[i];
}

/*
 * A target copy's parameters follow its source's (decision 0069): p' = (1 - tau) p' + tau p,
 * element by element in f32 (the same bits on every machine); tau 1 copies. Host memory: the
 * runtime refuses several models on a driver with memory of its own.
 */
void strata__replica_polyak(struct strata__replica *t, const struct strata__replica *s,
                            float tau)
{
        float keep = 1.0f - tau, *p = t->v.params;
        const float *q = s->v.params;

        if (tau == 1.0f) {
                memcpy(p, q, t->v.nparam * sizeof(float));
                return;
        }
        polyak(p, q, keep, tau, t->v.nparam);
}
