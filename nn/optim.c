/* SGD (momentum, dampening, Nesterov, L2 weight decay) and AdamW, with PyTorch's semantics. */
#include <math.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/optim.h"

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
        if ((unsigned)o->schedule >= STRATA_LR_SCHEDULE_COUNT)
                return strata__fail(STRATA_EINVAL, "learning-rate schedule %d unknown",
                                    (int)o->schedule);
        /* Each schedule's fields checked one by one: the message names the one that is bad. */
        if (o->schedule == STRATA_LR_STEP && o->step_size == 0)
                return strata__fail(STRATA_EINVAL, "step schedule: step_size must be > 0");
        if (o->schedule == STRATA_LR_STEP && !(o->gamma > 0.0f && o->gamma <= 1.0f))
                return strata__fail(STRATA_EINVAL, "step schedule: gamma %g not in (0, 1]",
                                    o->gamma);
        if (o->schedule == STRATA_LR_COSINE && o->t_max == 0)
                return strata__fail(STRATA_EINVAL, "cosine schedule: t_max must be > 0");
        if (o->schedule == STRATA_LR_COSINE && !(o->lr_min >= 0.0f && o->lr_min <= o->lr))
                return strata__fail(STRATA_EINVAL, "cosine schedule: lr_min %g not in [0, lr "
                                    "%g] (the floor the rate anneals to)", o->lr_min, o->lr);
        if (o->kind == STRATA_OPTIM_SGD) {
                if (!(o->momentum >= 0.0f && o->momentum < 1.0f))
                        return strata__fail(STRATA_EINVAL, "momentum %g not in [0, 1)",
                                            o->momentum);
                if (!(o->dampening >= 0.0f && o->dampening <= 1.0f))
                        return strata__fail(STRATA_EINVAL, "dampening %g not in [0, 1]",
                                            o->dampening);
                if (o->nesterov && (o->momentum == 0.0f || o->dampening != 0.0f))
                        return strata__fail(STRATA_EINVAL,
                                            "nesterov needs momentum > 0 and dampening 0");
        } else {
                float b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;

                if (!(b1 >= 0.0f && b1 < 1.0f) || !(b2 >= 0.0f && b2 < 1.0f) ||
                    !(o->eps >= 0.0f && isfinite(o->eps)))
                        return strata__fail(STRATA_EINVAL, "adamw betas (%g, %g) / eps %g", b1,
                                            b2, o->eps);
        }
        return STRATA_OK;
}

float strata_optim_lr(const struct strata_optim *o, uint64_t t)
{
        uint64_t k;

        if (!o)
                return 0.0f;
        if (t <= o->warmup)
                return (float)((double)o->lr * (double)t / (double)o->warmup);
        k = t - o->warmup - 1; /* schedule steps taken before this one */
        switch (o->schedule) {
        case STRATA_LR_STEP:
                return (float)((double)o->lr * pow((double)o->gamma, (double)(k / o->step_size)));
        case STRATA_LR_COSINE:
                if (k >= o->t_max)
                        return o->lr_min;
                return (float)((double)o->lr_min + ((double)o->lr - (double)o->lr_min) *
                                                           (1.0 + cos(M_PI * (double)k /
                                                                      (double)o->t_max)) / 2.0);
        default:
                return o->lr;
        }
}

/* The rule and scalars of step @p t: what every driver's update kernel evaluates. */
void strata__optim_scalars(const struct strata_optim *o, uint64_t t, struct strata_update *u)
{
        float lr = strata_optim_lr(o, t);

        if (o->kind == STRATA_OPTIM_ADAMW) {
                float b1 = o->beta1 ? o->beta1 : 0.9f, b2 = o->beta2 ? o->beta2 : 0.999f;
                float c1 = 1.0f - powf(b1, (float)t);

                *u = (struct strata_update){ .rule = STRATA_UPDATE_ADAMW, .beta1 = b1, .beta2 = b2,
                                             .c2 = sqrtf(1.0f - powf(b2, (float)t)),
                                             .eps = o->eps ? o->eps : 1e-8f,
                                             .decay = 1.0f - lr * o->weight_decay,
                                             .step = lr / c1 };
                return;
        }
        *u = (struct strata_update){
                .rule = o->momentum == 0.0f ? STRATA_UPDATE_SGD : STRATA_UPDATE_SGD_MOMENTUM,
                .lr = lr, .weight_decay = o->weight_decay, .momentum = o->momentum,
                .damp = 1.0f - o->dampening, .first = t == 1 ? 1.0f : 0.0f,
                .nesterov = o->nesterov ? 1.0f : 0.0f };
}

void strata_optim_update_range(const struct strata_optim *o, uint64_t t, float *p, float *g,
                               float *state, size_t n, size_t lo, size_t hi)
{
        const struct strata_device_ops *cpu = NULL;
        struct strata_update u;

        /* The host's reference: the CPU driver's kernels with the scalars every driver gets. */
        if (!o || strata_device_driver(STRATA_ACCEL_CPU, &cpu) != STRATA_OK)
                return;
        strata__optim_scalars(o, t, &u);
        cpu->kernels->update_range(&u, p, g, state, n, lo, hi);
}

void strata_optim_update(const struct strata_optim *o, uint64_t t, float *p, float *g,
                         float *state, size_t n)
{
        strata_optim_update_range(o, t, p, g, state, n, 0, n);
}
