/*
 * A replica's shard (nn/shard.h): the ZeRO geometry of the flat vector, what the replica holds
 * of it under zero2 and fsdp, and fsdp's layer buffer with its fetch. Decisions 0026, 0028.
 */
#include "strata/status.h"
#include "alloc/floats.h"
#include "base/base.h"
#include "nn/shard.h"

size_t strata__shard_len_for(size_t nparam, int shards)
{
        size_t line = 64 / sizeof(float);

        if (shards <= 1)
                return nparam;
        return ((nparam + (size_t)shards - 1) / (size_t)shards + line - 1) / line * line;
}

int strata__shard_plan(size_t nparam, size_t lmax, int shards, unsigned how,
                       struct strata__shard_sizes *z)
{
        *z = (struct strata__shard_sizes){ .nparam = nparam, .n = shards > 1 ? shards : 1 };
        z->len = strata__shard_len_for(nparam, z->n);
        if (strata__mul_size(z->len, (size_t)z->n, &z->npad))
                return strata__fail(STRATA_EOVERFLOW, "model: %d shards of %zu parameters "
                                    "overflow a size", z->n, z->len);
        /* fsdp: one shard of the parameters and reduced gradients, the layer buffer, and one
         * layer's gradients (or a whole local vector); zero2 where it is smaller: the whole
         * parameters, one shard of the reduced gradients, and one layer's gradients */
        /* each: the alternative to zero2's shard is the whole vector and the layer buffer */
        z->each = (how & STRATA__SHARD_EACH) != 0;
        z->own_params = (how & STRATA__SHARD_PARAMS) != 0;
        z->own_grads = !z->own_params && (how & STRATA__SHARD_GRADS) && z->n > 1 &&
                       (z->each || z->len + lmax < z->npad);
        z->params = z->own_params ? z->len : z->npad;
        z->grads = z->own_params || z->own_grads ? z->len : z->npad;
        z->lbuf = z->own_params ? lmax : 0;
        z->whole_grads = z->own_params && (how & STRATA__SHARD_WHOLE_GRADS);
        if (z->own_params)
                z->lgrad = z->whole_grads ? z->npad : lmax;
        else
                z->lgrad = z->own_grads || z->each ? lmax : 0;
        return STRATA_OK;
}

int strata__shard_layout(struct strata__shard *s, struct strata_arena *d,
                         const struct strata__shard_sizes *z, enum strata_dtype grad_comm,
                         const struct strata_kernel_ops *k)
{
        void *p;

        *s = (struct strata__shard){ .size = *z, .held = -1, .k = k };
        if (z->lbuf)
                STRATA_TRY(strata__arena_floats(d, z->lbuf, &s->lbuf));
        if (z->lgrad)
                STRATA_TRY(strata__arena_floats(d, z->lgrad, &s->lgrad));
        if (grad_comm == STRATA_F32)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(d, z->npad * strata_dtype_size(grad_comm), 64, &p));
        s->grad_stage = p;
        return STRATA_OK;
}

void strata__shard_set(struct strata__shard *s, int rank)
{
        if (s->size.n > 1)
                s->lo = (size_t)rank * s->size.len;
}

size_t strata__shard_len(const struct strata__shard *s)
{
        return s->size.len;
}

size_t strata__shard_lo(const struct strata__shard *s)
{
        return s->lo;
}

int strata__shard_count(const struct strata__shard *s)
{
        return s->size.n;
}

int strata__shard_each(const struct strata__shard *s)
{
        return s->size.each;
}

int strata__shard_whole_grads(const struct strata__shard *s)
{
        return s->size.whole_grads; /* not lgrad > lbuf: npad may equal lmax */
}

/* Elements [*a, *b) of [off, off + n) that lie in the device's shard; whether there are any. */
static int mine(const struct strata__shard *s, size_t off, size_t n, size_t *a, size_t *b)
{
        size_t hi = off + n, end = s->lo + s->size.len;

        *a = off > s->lo ? off : s->lo;
        *b = hi < end ? hi : end;
        return *b > *a;
}

void strata__shard_accumulate(const struct strata__shard *s, float *grads, const float *layer,
                              size_t off, size_t n, int first)
{
        size_t a = off, b = off + n;
        float *dst = grads + off;

        if (!s->size.each || !n)
                return;
        if (s->size.own_params || s->size.own_grads) { /* the shard's part, in the shard */
                if (!mine(s, off, n, &a, &b))
                        return;
                dst = grads + (a - s->lo);
        }
        if (first)
                s->k->copy(dst, layer + (a - off), b - a);
        else
                s->k->add(dst, layer + (a - off), b - a);
}

int strata__shard_own_params(const struct strata__shard *s)
{
        return s->size.own_params;
}

int strata__shard_own_grads(const struct strata__shard *s)
{
        return s->size.own_grads;
}

size_t strata__shard_owned(const struct strata__shard *s)
{
        size_t n = s->size.nparam;

        if (!s->size.own_params)
                return n;
        if (s->lo >= n)
                return 0;
        return n - s->lo < s->size.len ? n - s->lo : s->size.len;
}

size_t strata__shard_grads_held(const struct strata__shard *s)
{
        return s->size.own_params || s->size.own_grads ? s->size.len : s->size.nparam;
}

size_t strata__shard_at(const struct strata__shard *s, int grads)
{
        if (s->size.own_params || (grads && s->size.own_grads))
                return 0;
        return s->lo;
}

float *strata__shard_grad_at(const struct strata__shard *s, float *grads, size_t a)
{
        if (!s->size.own_params && !s->size.own_grads)
                return grads + a;
        return a >= s->lo && a - s->lo < s->size.len ? grads + (a - s->lo) : NULL;
}

float *strata__shard_layer_buffer(const struct strata__shard *s)
{
        return s->lbuf;
}

float *strata__shard_layer_grads(const struct strata__shard *s)
{
        return s->lgrad;
}

void *strata__shard_grad_stage(const struct strata__shard *s)
{
        return s->grad_stage;
}

void strata__shard_layer_vectors(const struct strata__shard *s, float *params, float *grads,
                                 size_t off, float **param, float **grad)
{
        if (s->size.own_grads || (s->size.each && !s->size.own_params)) {
                *param = params + off;
                *grad = s->lgrad;
                return;
        }
        if (!s->size.own_params) {
                *param = params ? params + off : NULL;
                *grad = grads ? grads + off : NULL;
                return;
        }
        *param = s->lbuf;
        *grad = s->size.whole_grads ? s->lgrad + off : s->lgrad;
}

void strata__shard_keep(const struct strata__shard *s, float *shard, const float *layer,
                        size_t off, size_t n)
{
        size_t a, b;

        if (mine(s, off, n, &a, &b))
                s->k->copy(shard + (a - s->lo), layer + (a - off), b - a);
}

size_t strata__shard_part(const struct strata__shard *s, size_t poff, size_t count, size_t *lo,
                          size_t *hi)
{
        size_t s0 = s->lo, s1 = s->lo + s->size.len;

        *lo = s0 > poff ? s0 - poff : 0;
        *hi = s1 > poff ? s1 - poff : 0;
        *lo = *lo < count ? *lo : count;
        *hi = *hi < count ? *hi : count;
        *hi = *hi > *lo ? *hi : *lo;
        return poff + *lo - s0;
}

void strata__shard_set_hooks(struct strata__shard *s, const struct strata__replica_hooks *hooks,
                             void *h)
{
        s->hooks = hooks;
        s->hooks_h = h;
}

strata__grad_ready_fn strata__shard_ready(const struct strata__shard *s, int sync, void **h)
{
        *h = s->hooks_h;
        if (!s->hooks)
                return NULL;
        return sync ? s->hooks->ready : s->hooks->micro;
}

void strata__shard_release(struct strata__shard *s)
{
        s->held = -1;
}

int strata__shard_fetch(struct strata__shard *s, struct strata__replica *r, int i,
                        size_t nparam)
{
        if (!s->hooks || !s->hooks->fetch || !nparam || s->held == i)
                return STRATA_OK;
        s->held = -1;
        STRATA_TRY(s->hooks->fetch(s->hooks_h, r, i));
        s->held = i;
        return STRATA_OK;
}
