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

/* MULTISTEP: gamma in (0, 1], milestones strictly ascending from > 0 (the list may be empty). */
static int check_multistep(const struct strata_optim *o)
{
        if (o->schedule != STRATA_LR_MULTISTEP)
                return STRATA_OK;
        if (!(o->gamma > 0.0f && o->gamma <= 1.0f))
                return strata__fail(STRATA_EINVAL, "multistep schedule: gamma %g not in (0, 1]",
                                    o->gamma);
        for (int i = 1; i < STRATA_LR_MILESTONES && o->milestones[i]; i++)
                if (o->milestones[i] <= o->milestones[i - 1])
                        return strata__fail(STRATA_EINVAL, "multistep schedule: milestone %d "
                                            "(%llu) is not after milestone %d (%llu)", i,
                                            (unsigned long long)o->milestones[i], i - 1,
                                            (unsigned long long)o->milestones[i - 1]);
        return STRATA_OK;
}

/* ONECYCLE's three numbers with their defaults applied (PyTorch's 0.3, 25, 1e4). */
static void onecycle_params(const struct strata_optim *o, double *pct, double *div, double *fin)
{
        *pct = o->pct_start != 0.0f ? (double)o->pct_start : 0.3;
        *div = o->div_factor != 0.0f ? (double)o->div_factor : 25.0;
        *fin = o->final_div_factor != 0.0f ? (double)o->final_div_factor : 1e4;
}

/* ONECYCLE: t_max steps whose rising and falling phases each last more than one step. */
static int check_onecycle(const struct strata_optim *o)
{
        double pct, div, fin, rise;

        if (o->schedule != STRATA_LR_ONECYCLE)
                return STRATA_OK;
        onecycle_params(o, &pct, &div, &fin);
        if (!(pct > 0.0 && pct < 1.0))
                return strata__fail(STRATA_EINVAL, "onecycle schedule: pct_start %g not in "
                                    "(0, 1)", pct);
        if (!(div >= 1.0 && isfinite(div)) || !(fin >= 1.0 && isfinite(fin)))
                return strata__fail(STRATA_EINVAL, "onecycle schedule: div_factor %g and "
                                    "final_div_factor %g must be >= 1", div, fin);
        rise = pct * (double)o->t_max - 1.0; /* the step the peak is reached at */
        if (!(rise > 0.0 && rise < (double)o->t_max - 1.0))
                return strata__fail(STRATA_EINVAL, "onecycle schedule: t_max %llu steps with "
                                    "pct_start %g leave a phase without steps (use more steps)",
                                    (unsigned long long)o->t_max, pct);
        return STRATA_OK;
}

/* MultiStepLR's closed form: lr * gamma^(milestones <= k). */
static float multistep_lr(const struct strata_optim *o, uint64_t k)
{
        int n = 0;

        while (n < STRATA_LR_MILESTONES && o->milestones[n] && o->milestones[n] <= k)
                n++;
        return (float)((double)o->lr * pow((double)o->gamma, (double)n));
}

/*
 * OneCycleLR's cosine annealing, two phases: from lr / div to lr over the first pct * t_max
 * steps, then down to lr / div / final_div at step t_max - 1 (and after it).
 */
static float onecycle_lr(const struct strata_optim *o, uint64_t k)
{
        double pct, div, fin, peak = (double)o->lr, first, last, rise, end, x, a, b, p;

        onecycle_params(o, &pct, &div, &fin);
        first = peak / div;
        last = first / fin;
        rise = pct * (double)o->t_max - 1.0;
        end = (double)o->t_max - 1.0;
        x = (double)k < end ? (double)k : end;
        if (x <= rise) {
                p = x / rise;
                a = first;
                b = peak;
        } else {
                p = (x - rise) / (end - rise);
                a = peak;
                b = last;
        }
        return (float)(b + (a - b) / 2.0 * (cos(M_PI * p) + 1.0));
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
        STRATA_TRY(check_multistep(o));
        STRATA_TRY(check_onecycle(o));
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
        case STRATA_LR_MULTISTEP:
                return multistep_lr(o, k);
        case STRATA_LR_ONECYCLE:
                return onecycle_lr(o, k);
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
