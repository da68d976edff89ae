/*
 * A replica's optimizer side: clipping, loss-scale unscaling and the non-finite check of the
 * gradients the replica holds (its shard's where the strategy shards them, nn/shard.c), the
 * optimizer update with the scalars nn/optim.c computes, and what own_params keeps of a layer.
 */
#include <math.h>

#include "strata/status.h"
#include "kernel/trace.h"
#include "nn/optim.h"
#include "nn/replica.h"

/* What the optimizer side shows on the device's trace track. */
static const struct strata__span span_clip = { "clip gradients", "compute", NULL, 0 };
static const struct strata__span span_step = { "optimizer step", "compute", "step", 0 };

/* The reduced gradients the replica holds (its shard's under zero2 and fsdp). */
static size_t grads_held(const struct strata__replica *r)
{
        return strata__shard_grads_held(r->shard);
}

void strata__replica_clip_sumsq(struct strata__replica *r, float max_norm, float max_value,
                                double ss)
{
        uint64_t t0;

        if (!(max_norm > 0.0f) && !(max_value > 0.0f))
                return;
        t0 = strata__track_begin(r->track, &span_clip, NULL);
        if (max_norm > 0.0f) {
                /* PyTorch clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above. */
                float scale = (float)(max_norm / (sqrt(ss) + 1e-6));

                if (scale < 1.0f)
                        r->k->scale(r->grads, scale, grads_held(r));
        }
        if (max_value > 0.0f)
                r->k->clamp(r->grads, max_value, grads_held(r));
        strata__track_end(r->track, t0, 0);
}

void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value)
{
        double ss = 0.0;

        if (max_norm > 0.0f) {
                const float *g = strata__shard_own_params(r->shard)
                                         ? strata__shard_layer_grads(r->shard) : r->grads;

                ss = r->k->sumsq(g, r->nparam);
        }
        strata__replica_clip_sumsq(r, max_norm, max_value, ss);
}

int strata__replica_unscale(struct strata__replica *r, float scale)
{
        /* f32 squares cannot overflow a double: a non-finite sum is a non-finite gradient. */
        if (!isfinite(r->k->sumsq(r->grads, grads_held(r))))
                return 1;
        r->k->scale(r->grads, 1.0f / scale, grads_held(r)); /* a power of two: exact */
        return 0;
}

int strata__replica_nonfinite(const struct strata__replica *r)
{
        if (r->k->nonfinite)
                return r->k->nonfinite(r->grads, grads_held(r));
        return !isfinite(r->k->sumsq(r->grads, grads_held(r)));
}

void strata__replica_skip(struct strata__replica *r)
{
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
}

void strata__replica_step_range(const struct strata__replica *r, const struct strata_optim *o,
                                float *p, size_t lo, size_t hi)
{
        struct strata_update u;

        strata__optim_scalars(o, r->opt_t, &u);
        r->k->update_range(&u, p, r->grads, r->opt_state, r->nparam, lo, hi);
}

size_t strata__replica_param_offset(const struct strata__replica *r, int i)
{
        return r->poff[i];
}

void strata__replica_keep(struct strata__replica *r, int i)
{
        strata__shard_keep(r->shard, r->params, strata__shard_layer_buffer(r->shard), r->poff[i],
                           r->layers[i].nparam);
}

void strata__replica_keep_grads(struct strata__replica *r, int i)
{
        strata__shard_keep(r->shard, r->grads, r->layers[i].grad, r->poff[i],
                           r->layers[i].nparam);
}

void strata__replica_step(struct strata__replica *r, const struct strata_optim *o)
{
        struct strata_update u;
        uint64_t t0 = strata__track_begin(r->track, &span_step, NULL);
        size_t at = strata__shard_at(r->shard, 0), gat = strata__shard_at(r->shard, 1);

        r->opt_t++;
        strata__optim_scalars(o, r->opt_t, &u);
        /* unsharded: shard_lo 0, shard_len nparam; sharded: padding updates zeros to zeros;
         * own_params: the vectors are the shard; own_grads: the gradients are */
        r->k->update(&u, r->params + at, r->grads + gat, r->opt_state,
                     strata__shard_len(r->shard));
        strata__track_end(r->track, t0, (int64_t)r->opt_t);
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
}
