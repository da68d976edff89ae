/*
 * ReduceLROnPlateau with PyTorch's semantics (threshold_mode "rel", eps 1e-8): a metric that
 * stops improving for more than `patience` evaluations multiplies the learning rate by
 * `factor`, never below `min_lr`; `cooldown` evaluations after a reduction count no plateau.
 * The rate is kept as the float the optimizer uses (PyTorch keeps a double: the two differ by
 * float's rounding), so a checkpoint holding that float continues it exactly. Pure arithmetic
 * on the caller's struct: the caller agrees on the metric across processes (every process
 * passing the same value decides the same) and applies the rate (strata_set_lr()).
 */
#include <math.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"

/* PyTorch's eps: a reduction smaller than this is not made. */
#define PLATEAU_EPS 1e-8

int strata_plateau_start(struct strata_plateau *p, float lr)
{
        if (!p)
                return strata__fail(STRATA_EINVAL, "plateau: NULL");
        if (!(lr > 0.0f) || !isfinite(lr))
                return strata__fail(STRATA_EINVAL, "plateau: learning rate %g must be > 0", lr);
        if (!(p->factor > 0.0f && p->factor < 1.0f))
                return strata__fail(STRATA_EINVAL, "plateau: factor %g not in (0, 1)",
                                    p->factor);
        if (p->patience < 0 || p->cooldown < 0)
                return strata__fail(STRATA_EINVAL, "plateau: patience %d and cooldown %d must "
                                    "be >= 0", p->patience, p->cooldown);
        if (!(p->threshold >= 0.0f) || !isfinite(p->threshold))
                return strata__fail(STRATA_EINVAL, "plateau: threshold %g must be >= 0",
                                    p->threshold);
        if (!(p->min_lr >= 0.0f && p->min_lr <= lr))
                return strata__fail(STRATA_EINVAL, "plateau: min_lr %g not in [0, lr %g]",
                                    p->min_lr, lr);
        if (p->mode_max != 0 && p->mode_max != 1)
                return strata__fail(STRATA_EINVAL, "plateau: mode_max %d is not 0 or 1",
                                    p->mode_max);
        p->lr = (double)lr;
        p->best = p->mode_max ? -INFINITY : INFINITY;
        p->bad = 0;
        p->cooldown_left = 0;
        p->reductions = 0;
        return STRATA_OK;
}

/* PyTorch's is_better, relative threshold: a NaN compares false, so never improves. */
static int improves(const struct strata_plateau *p, double m)
{
        if (p->mode_max)
                return m > p->best * (1.0 + (double)p->threshold);
        return m < p->best * (1.0 - (double)p->threshold);
}

int strata_plateau_step(struct strata_plateau *p, double metric, float *lr)
{
        double next;

        if (!p || !lr)
                return strata__fail(STRATA_EINVAL, "plateau: NULL");
        if (!(p->lr > 0.0))
                return strata__fail(STRATA_EINVAL, "plateau: not started "
                                    "(strata_plateau_start() first)");
        if (improves(p, metric)) {
                p->best = metric;
                p->bad = 0;
        } else {
                p->bad++;
        }
        if (p->cooldown_left > 0) {
                p->cooldown_left--;
                p->bad = 0;
        }
        if (p->bad > p->patience) {
                next = fmax(p->lr * (double)p->factor, (double)p->min_lr);
                if (p->lr - next > PLATEAU_EPS) {
                        p->lr = (double)(float)next; /* the rate the optimizer uses */
                        p->reductions++;
                }
                p->cooldown_left = p->cooldown;
                p->bad = 0;
        }
        *lr = (float)p->lr;
        return STRATA_OK;
}
