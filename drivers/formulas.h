/*
 * Per-row, per-feature and per-element formulas shared by the CPU driver's loops and the CUDA
 * driver's kernels, so that both compute the same expressions (internal).
 */
#ifndef STRATA_DRIVERS_FORMULAS_H
#define STRATA_DRIVERS_FORMULAS_H

#include <stdint.h>

#include <math.h>
#include <stddef.h>

#include "strata/device.h"
#include "kernel/philox.h" /* STRATA__HD */

/** Feature j of @p f: running statistics [mean | var] and invstd from the summed squares. */
STRATA__HD static inline void strata__bn_moment(const float *sq, const float *mean,
                                                float *running, float *invstd, size_t j, int f,
                                                int n, float mom, float eps)
{
        float var = sq[j] / (float)n;

        running[j] = (1.0f - mom) * running[j] + mom * mean[j];
        running[f + j] = (1.0f - mom) * running[f + j] + mom * var * (float)n / (float)(n - 1);
        invstd[j] = 1.0f / sqrtf(var + eps);
}

/** Element k (feature j) of the input gradient, n rows in the batch. */
STRATA__HD static inline float strata__bn_dx(const float *dy, const float *xhat,
                                             const float *sums, const float *g,
                                             const float *invstd, size_t k, size_t j, int f,
                                             int n)
{
        float k0 = g[j] * invstd[j] / (float)n;

        return k0 * ((float)n * dy[k] - sums[j] - xhat[k] * sums[f + j]);
}

/**
 * Softmax cross-entropy of one row of logits @p z with label @p lab: returns the loss, adds 1
 * to *ok when the argmax is right, writes d = (softmax - onehot) * scale when d is not NULL
 * (d apart from z: it holds the exponentials between the two passes).
 */
STRATA__HD static inline double strata__softmax_row(const float *z, int32_t lab, int cols,
                                                    float scale, float *d, int *ok)
{
        float mx = z[0], sum = 0.0f;
        int arg = 0;

        for (int j = 1; j < cols; j++)
                if (z[j] > mx) {
                        mx = z[j];
                        arg = j;
                }
        for (int j = 0; j < cols; j++) { /* each exponential once, kept in d */
                float e = expf(z[j] - mx);

                sum += e;
                if (d)
                        d[j] = e;
        }
        *ok += arg == lab;
        if (d) {
                float inv = scale / sum;

                for (int j = 0; j < cols; j++)
                        d[j] *= inv;
                d[lab] -= scale;
        }
        return (double)(logf(sum) + mx - z[lab]);
}

/**
 * Elementwise loss @p kind (enum strata_pointwise_loss) of output @p o against target @p t:
 * returns the loss, writes its derivative in @p o to *g. Huber is SmoothL1 with @p beta > 0;
 * BCE with logits uses the stable max(o, 0) - o t + log1p(exp(-|o|)).
 */
STRATA__HD static inline float strata__ploss(int kind, float beta, float o, float t, float *g)
{
        float d = o - t, a = fabsf(d);

        switch (kind) {
        case 0: /* MSE */
                *g = 2.0f * d;
                return d * d;
        case 1: /* L1 */
                *g = (float)((d > 0.0f) - (d < 0.0f));
                return a;
        case 2: /* smooth L1 */
                *g = a < beta ? d / beta : (float)((d > 0.0f) - (d < 0.0f));
                return a < beta ? 0.5f * d * d / beta : a - 0.5f * beta;
        default: /* BCE with logits: d/do = sigmoid(o) - t */
                *g = 1.0f / (1.0f + expf(-o)) - t;
                return fmaxf(o, 0.0f) - o * t + log1pf(expf(-fabsf(o)));
        }
}

/* PyTorch's GELU constants: sqrt(2 / pi), the cubic term, 1 / sqrt(2), 1 / sqrt(2 pi). */
#define STRATA__GELU_BETA 0.7978845608028654f
#define STRATA__GELU_KAPPA 0.044715f
#define STRATA__SQRT1_2 0.7071067811865476f
#define STRATA__INV_SQRT_2PI 0.3989422804014327f

/*
 * The exact GELU in parts, so that the CPU driver's vector loops (drivers/cpu/erff.c) feed
 * their own erff and expf to the same expressions: e = erff(strata__gelu_erf_arg(x)) and
 * g = expf(strata__gelu_exp_arg(x)).
 */
STRATA__HD static inline float strata__gelu_erf_arg(float x)
{
        return x * STRATA__SQRT1_2;
}

STRATA__HD static inline float strata__gelu_exp_arg(float x)
{
        return -0.5f * x * x;
}

/** GELU's x Phi(x) from e = erf(x / sqrt 2). */
STRATA__HD static inline float strata__gelu_from(float x, float e)
{
        return 0.5f * x * (1.0f + e);
}

/** dy * GELU'(x) from e = erf(x / sqrt 2) and g = exp(-x^2 / 2), PyTorch's expression. */
STRATA__HD static inline float strata__gelu_grad_from(float x, float e, float g, float dy)
{
        return dy * (0.5f * (1.0f + e) + x * g * STRATA__INV_SQRT_2PI);
}

/** Activation @p k of @p x (enum strata_activation; @p a: LeakyReLU's negative slope). */
STRATA__HD static inline float strata__act(enum strata_activation k, float a, float x)
{
        switch (k) {
        case STRATA_ACT_TANH:
                return tanhf(x);
        case STRATA_ACT_SIGMOID:
                return 1.0f / (1.0f + expf(-x));
        case STRATA_ACT_GELU:
                return strata__gelu_from(x, erff(strata__gelu_erf_arg(x)));
        case STRATA_ACT_GELU_TANH:
                return 0.5f * x *
                       (1.0f + tanhf(STRATA__GELU_BETA * (x + STRATA__GELU_KAPPA * x * x * x)));
        case STRATA_ACT_SILU:
                return x / (1.0f + expf(-x));
        case STRATA_ACT_LEAKY_RELU:
        default:
                return x > 0.0f ? x : a * x;
        }
}

/** GELU's tanh form: d/dx, PyTorch's expression of it. */
STRATA__HD static inline float strata__gelu_tanh_grad(float x)
{
        float x2 = x * x;
        float t = tanhf(STRATA__GELU_BETA * (x + STRATA__GELU_KAPPA * x2 * x));
        float inner = STRATA__GELU_BETA * (1.0f + 3.0f * STRATA__GELU_KAPPA * x2);

        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner;
}

/**
 * dy * f'(x) for activation @p k, from its input @p x or its output @p y (Tanh and Sigmoid
 * read y, the others x), as PyTorch's backward formulas.
 */
STRATA__HD static inline float strata__act_grad(enum strata_activation k, float a, float x,
                                                float y, float dy)
{
        float s;

        switch (k) {
        case STRATA_ACT_TANH:
                return dy * (1.0f - y * y);
        case STRATA_ACT_SIGMOID:
                return dy * (1.0f - y) * y;
        case STRATA_ACT_GELU:
                return strata__gelu_grad_from(x, erff(strata__gelu_erf_arg(x)),
                                              expf(strata__gelu_exp_arg(x)), dy);
        case STRATA_ACT_GELU_TANH:
                return dy * strata__gelu_tanh_grad(x);
        case STRATA_ACT_SILU:
                s = 1.0f / (1.0f + expf(-x));
                return dy * s * (1.0f + x * (1.0f - s));
        case STRATA_ACT_LEAKY_RELU:
        default:
                return x > 0.0f ? dy : dy * a;
        }
}

#endif /* STRATA_DRIVERS_FORMULAS_H */
