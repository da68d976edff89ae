/* SGD (momentum, dampening, Nesterov, L2 weight decay) and AdamW, with PyTorch's semantics. */
#include <math.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "kernel/internal.h"
#include "arch/simd.h"

int strata_optim_state_per_param(const struct strata_optim *o)
{
        if (!o)
                return 0;
        if (o->kind == STRATA_OPTIM_ADAMW)
                return 2;
        return o->momentum != 0.0f ? 1 : 0;
}

int strata_optim_check(const struct strata_optim *o)
{
        if (!o)
                return strata__fail(STRATA_EINVAL, "optimizer is NULL");
        if (o->kind != STRATA_OPTIM_SGD && o->kind != STRATA_OPTIM_ADAMW)
                return strata__fail(STRATA_EINVAL, "optimizer kind %d unknown", (int)o->kind);
        if (!(o->lr > 0.0f) || !isfinite(o->lr))
                return strata__fail(STRATA_EINVAL, "learning rate %g must be > 0", o->lr);
        if (!(o->weight_decay >= 0.0f) || !isfinite(o->weight_decay))
                return strata__fail(STRATA_EINVAL, "weight decay %g must be >= 0",
                                    o->weight_decay);
        if (o->kind == STRATA_OPTIM_SGD) {
                if (!(o->momentum >= 0.0f && o->momentum < 1.0f))
                        return strata__fail(STRATA_EINVAL, "momentum %g not in [0, 1)",
                                            o->momentum);
                if (o->nesterov && (o->momentum == 0.0f || o->dampening != 0.0f))
                        return strata__fail(STRATA_EINVAL,
                                            "nesterov needs momentum > 0 and dampening 0");
        } else {
                float b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;

                if (!(b1 >= 0.0f && b1 < 1.0f) || !(b2 >= 0.0f && b2 < 1.0f) || o->eps < 0.0f)
                        return strata__fail(STRATA_EINVAL, "adamw betas (%g, %g) / eps %g", b1,
                                            b2, o->eps);
        }
        return STRATA_OK;
}

/* One branch-free loop per case, so each vectorises. */
STRATA_SIMD static void sgd_plain(float *restrict p, const float *restrict g, float lr, float wd,
                                  size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] -= lr * (g[i] + wd * p[i]);
}

STRATA_SIMD static void sgd_momentum(float *restrict p, const float *restrict g,
                                     float *restrict buf, float lr, float wd, float mu, float damp,
                                     float first, float nesterov, size_t n)
{
        /* first = 1 on step 1 (buf := d, as PyTorch), else 0; nesterov is 0 or 1. */
        for (size_t i = 0; i < n; i++) {
                float d = g[i] + wd * p[i];
                float b = first * d + (1.0f - first) * (mu * buf[i] + damp * d);

                buf[i] = b;
                p[i] -= lr * (nesterov * (d + mu * b) + (1.0f - nesterov) * b);
        }
}

static void sgd(const struct strata_optim *o, uint64_t t, float *p, float *g, float *buf,
                size_t n)
{
        if (o->momentum == 0.0f)
                sgd_plain(p, g, o->lr, o->weight_decay, n);
        else
                sgd_momentum(p, g, buf, o->lr, o->weight_decay, o->momentum,
                             1.0f - o->dampening, t == 1 ? 1.0f : 0.0f, o->nesterov ? 1.0f : 0.0f,
                             n);
}

STRATA_SIMD static void adamw_loop(float *restrict p, const float *restrict g,
                                   float *restrict m, float *restrict v, float b1, float b2,
                                   float c2, float eps, float decay, float step, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                m[i] = b1 * m[i] + (1.0f - b1) * g[i];
                v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
                p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) / c2 + eps);
        }
}

static void adamw(const struct strata_optim *o, uint64_t t, float *p, const float *g, float *m,
                  float *v, size_t n)
{
        float b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;
        float eps = o->eps ? o->eps : 1e-8f, lr = o->lr;
        float c1 = 1.0f - powf(b1, (float)t), c2 = sqrtf(1.0f - powf(b2, (float)t));
        float decay = 1.0f - lr * o->weight_decay, step = lr / c1;

        adamw_loop(p, g, m, v, b1, b2, c2, eps, decay, step, n);
}

void strata_optim_update_range(const struct strata_optim *o, uint64_t t, float *p, float *g,
                               float *state, size_t n, size_t lo, size_t hi)
{
        /* Every update is elementwise: a range is bitwise the same as those elements of the
         * whole update, which is what lets dp split the master's step across devices. */
        if (hi > n)
                hi = n;
        if (lo >= hi)
                return;
        if (o->kind == STRATA_OPTIM_ADAMW)
                adamw(o, t, p + lo, g + lo, state + lo, state + n + lo, hi - lo);
        else
                sgd(o, t, p + lo, g + lo, state + lo, hi - lo);
}

void strata_optim_update(const struct strata_optim *o, uint64_t t, float *p, float *g,
                         float *state, size_t n)
{
        strata_optim_update_range(o, t, p, g, state, n, 0, n);
}
