/* The built-in modules: Linear, ReLU, BatchNorm1d, Dropout (PyTorch semantics). */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "kernel/internal.h"
#include "kernel/philox.h"

/* Stream ids for parameter initialisation, one per (layer, tensor). */
#define INIT_STREAM(layer, which) (((uint64_t)1 << 62) | ((uint64_t)(layer) << 8) | (which))

static void uniform_fill(float *p, size_t n, float bound, uint64_t seed, uint64_t stream)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (2.0f * strata__uniform_at(seed, stream, i) - 1.0f) * bound;
}

/* ---- Linear: weight [out, in] then bias [out] ---- */

static int linear_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        size_t w;

        if (l->desc->out <= 0)
                return strata__fail(STRATA_EINVAL, "linear (module %d): out features %d <= 0",
                                    l->index, l->desc->out);
        if (strata__mul_size((size_t)in, (size_t)l->desc->out, &w) || w > ((size_t)1 << 40))
                return strata__fail(STRATA_EOVERFLOW, "linear (module %d): %d x %d too large",
                                    l->index, in, l->desc->out);
        *s = (struct strata_module_shape){ .out = l->desc->out, .params = w + l->desc->out };
        return STRATA_OK;
}

static void linear_init(struct strata_layer *l, uint64_t seed)
{
        float bound = 1.0f / sqrtf((float)l->in); /* kaiming_uniform(a=sqrt(5)) and bias rule */

        uniform_fill(l->param, (size_t)l->in * l->out, bound, seed, INIT_STREAM(l->index, 0));
        uniform_fill(l->param + (size_t)l->in * l->out, (size_t)l->out, bound, seed,
                     INIT_STREAM(l->index, 1));
}

static void linear_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                           const float *x, float *y, int rows)
{
        const float *w = l->param, *b = l->param + (size_t)l->in * l->out;

        c->dev->fill_rows(y, b, rows, l->out);
        c->dev->gemm(0, 1, rows, l->out, l->in, 1.0f, x, l->in, w, l->in, 1.0f, y, l->out);
}

static void linear_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, const float *y, const float *dy, float *dx, int rows)
{
        float *dw = l->grad, *db = l->grad + (size_t)l->in * l->out;

        (void)y;
        c->dev->gemm(1, 0, l->out, l->in, rows, 1.0f, dy, l->out, x, l->in,
                     l->grad_fresh ? 0.0f : 1.0f, dw, l->in);
        c->dev->col_sums(dy, rows, l->out, db, !l->grad_fresh);
        if (dx)
                c->dev->gemm(0, 0, rows, l->in, l->out, 1.0f, dy, l->out, l->param, l->in, 0.0f,
                             dx, l->in);
}

const struct strata_module_ops strata_linear = {
        .name = "linear",
        .shape = linear_shape,
        .init = linear_init,
        .forward = linear_forward,
        .backward = linear_backward,
};

/* ---- ReLU ---- */

static int same_width(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in };
        return STRATA_OK;
}

static void relu_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         float *y, int rows)
{
        c->dev->relu(x, y, (size_t)rows * l->out);
}

static void relu_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                          const float *x, const float *y, const float *dy, float *dx, int rows)
{
        (void)x;
        if (dx)
                c->dev->relu_backward(y, dy, dx, (size_t)rows * l->out);
}

const struct strata_module_ops strata_relu = {
        .name = "relu",
        .shape = same_width,
        .forward = relu_forward,
        .backward = relu_backward,
};

/* ---- BatchNorm1d: params gamma[F], beta[F]; state mean[F], var[F]; aux mean, invstd, xhat ---- */

static int bn_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        if (l->desc->eps < 0.0f || l->desc->decay < 0.0f || l->desc->decay > 1.0f)
                return strata__fail(STRATA_EINVAL, "batchnorm (module %d): eps %g / momentum %g",
                                    l->index, l->desc->eps, l->desc->decay);
        *s = (struct strata_module_shape){ .out = in, .params = 2 * (size_t)in,
                                           .state = 2 * (size_t)in, .aux_fixed = 2 * (size_t)in,
                                           .aux_per_row = (size_t)in };
        return STRATA_OK;
}

static void bn_init(struct strata_layer *l, uint64_t seed)
{
        (void)seed;
        for (int j = 0; j < l->in; j++) {
                l->param[j] = 1.0f;
                l->param[l->in + j] = 0.0f;
                l->state[j] = 0.0f;
                l->state[l->in + j] = 1.0f;
        }
}

static void bn_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                       float *y, int rows)
{
        int f = l->in;
        float eps = l->desc->eps > 0.0f ? l->desc->eps : 1e-5f;
        float mom = l->desc->decay > 0.0f ? l->desc->decay : 0.1f;
        float *mean = l->aux, *invstd = l->aux + f, *xhat = l->aux + 2 * (size_t)f;
        const float *g = l->param, *b = l->param + f;

        if (!c->train || rows < 2) {
                for (int i = 0; i < rows; i++)
                        for (int j = 0; j < f; j++) {
                                float s = 1.0f / sqrtf(l->state[f + j] + eps);
                                size_t k = (size_t)i * f + j;

                                y[k] = (x[k] - l->state[j]) * s * g[j] + b[j];
                        }
                return;
        }
        for (int j = 0; j < f; j++)
                mean[j] = invstd[j] = 0.0f;
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++)
                        mean[j] += x[(size_t)i * f + j];
        for (int j = 0; j < f; j++)
                mean[j] /= (float)rows;
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++) {
                        float d = x[(size_t)i * f + j] - mean[j];

                        invstd[j] += d * d;
                }
        for (int j = 0; j < f; j++) {
                float var = invstd[j] / (float)rows;

                l->state[j] = (1.0f - mom) * l->state[j] + mom * mean[j];
                l->state[f + j] = (1.0f - mom) * l->state[f + j] +
                                  mom * var * (float)rows / (float)(rows - 1);
                invstd[j] = 1.0f / sqrtf(var + eps);
        }
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++) {
                        size_t k = (size_t)i * f + j;

                        xhat[k] = (x[k] - mean[j]) * invstd[j];
                        y[k] = xhat[k] * g[j] + b[j];
                }
}

static void bn_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        const float *y, const float *dy, float *dx, int rows)
{
        int f = l->in;
        const float *invstd = l->aux + f, *xhat = l->aux + 2 * (size_t)f;
        float *dg = l->grad, *db = l->grad + f;

        (void)c;
        (void)x;
        (void)y;
        if (l->grad_fresh)
                memset(l->grad, 0, 2 * (size_t)f * sizeof(float));
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++) {
                        size_t k = (size_t)i * f + j;

                        dg[j] += dy[k] * xhat[k];
                        db[j] += dy[k];
                }
        if (!dx)
                return;
        /* dg and db may hold earlier micro-batches: recompute this batch's sums. */
        for (int j = 0; j < f; j++) {
                float sdy = 0.0f, sdyx = 0.0f, k0;

                for (int i = 0; i < rows; i++) {
                        sdy += dy[(size_t)i * f + j];
                        sdyx += dy[(size_t)i * f + j] * xhat[(size_t)i * f + j];
                }
                k0 = l->param[j] * invstd[j] / (float)rows;
                for (int i = 0; i < rows; i++) {
                        size_t k = (size_t)i * f + j;

                        dx[k] = k0 * ((float)rows * dy[k] - sdy - xhat[k] * sdyx);
                }
        }
}

const struct strata_module_ops strata_batchnorm1d = {
        .name = "batchnorm1d",
        .shape = bn_shape,
        .init = bn_init,
        .forward = bn_forward,
        .backward = bn_backward,
};

/* ---- Dropout: aux holds the mask (0 or 1/(1-p)) ---- */

static int dropout_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        if (!(l->desc->p >= 0.0f && l->desc->p < 1.0f))
                return strata__fail(STRATA_EINVAL, "dropout (module %d): p %g not in [0, 1)",
                                    l->index, l->desc->p);
        *s = (struct strata_module_shape){ .out = in, .aux_per_row = (size_t)in };
        return STRATA_OK;
}

static void dropout_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, float *y, int rows)
{
        size_t n = (size_t)rows * l->out;

        if (!c->train || l->desc->p == 0.0f) {
                c->dev->copy(y, x, n);
                c->dev->fill(l->aux, 1.0f, n);
                return;
        }
        c->dev->dropout(x, y, l->aux, n, l->desc->p, c->seed,
                        (c->step << 8) | (uint64_t)l->index);
}

static void dropout_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                             const float *x, const float *y, const float *dy, float *dx, int rows)
{
        (void)x;
        (void)y;
        if (dx)
                c->dev->mul(dy, l->aux, dx, (size_t)rows * l->out);
}

const struct strata_module_ops strata_dropout = {
        .name = "dropout",
        .shape = dropout_shape,
        .forward = dropout_forward,
        .backward = dropout_backward,
};
