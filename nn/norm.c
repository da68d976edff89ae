/*
 * The norms (PyTorch semantics): BatchNorm1d over a batch's rows, per feature, and LayerNorm
 * and RMSNorm over each sample, whatever its layout (nn/spatial.h checks it), or over its
 * last norm_dims dimensions (PyTorch's normalized_shape: each token of a sequence).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/chunks.h"
#include "nn/spatial.h"

/*
 * ---- BatchNorm1d: params gamma[F], beta[F]; state mean[F], var[F]; aux mean, invstd, xhat ----
 *
 * Statistics are accumulated in double. With c->sync the per-device sums are combined across
 * devices (in device order) before use: under dp through the context the copies share (set up
 * by the replication callback), otherwise through the strategy's all_sum. Both passes are
 * two-pass (mean first, then squared deviations), as on one device.
 */

static int bn_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        size_t f = (size_t)in;

        if (!(l->desc->eps >= 0.0f && isfinite(l->desc->eps)) ||
            !(l->desc->decay >= 0.0f && l->desc->decay <= 1.0f))
                return strata__fail(STRATA_EINVAL, "batchnorm (module %d): eps %g / momentum %g",
                                    l->index, l->desc->eps, l->desc->decay);
        *s = (struct strata_module_shape){
                .out = in, .params = 2 * f, .state = 2 * f, .aux_fixed = 4 * f,
                .aux_per_row = f, .ctx_per_copy = 2 * f * sizeof(float), .ngroups = 4,
                .batch_stats = 1,
                .groups = { { "weight", STRATA_F32, f, STRATA_ROLE_WEIGHT, 1, { f, 1 } },
                            { "bias", STRATA_F32, f, STRATA_ROLE_BIAS, 1, { f, 1 } },
                            { "running_mean", STRATA_F32, f, STRATA_ROLE_RUNNING, 1, { f, 1 } },
                            { "running_var", STRATA_F32, f, STRATA_ROLE_RUNNING, 1, { f, 1 } } } };
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

/* dp: the copies register in the shared context; copy 0 comes first and resets it. */
static int bn_replicate(struct strata_layer *copy, void *ctx, int copy_id, int copies)
{
        if (copy_id == 0)
                memset(ctx, 0, (size_t)copies * 2 * (size_t)copy->in * sizeof(float));
        copy->shared = ctx;
        copy->copy_id = copy_id;
        copy->copies = copies;
        return STRATA_OK;
}

/* Sum n floats across devices in device order; 0 when there is nothing to synchronise. */
static int bn_sum(struct strata_layer *l, const struct strata_step_ctx *c, float *buf, size_t n)
{
        if (!c->sync || c->world < 2)
                return STRATA_OK;
        if (l->shared && l->copies == c->world && c->barrier) {
                float *slots = l->shared;

                memcpy(slots + (size_t)l->copy_id * n, buf, n * sizeof(float));
                STRATA_TRY(c->barrier(c));
                for (size_t j = 0; j < n; j++) {
                        float acc = slots[j];

                        for (int k = 1; k < l->copies; k++)
                                acc += slots[(size_t)k * n + j];
                        buf[j] = acc;
                }
                return c->barrier(c); /* nobody reuses the slots before all have read them */
        }
        return c->all_sum ? c->all_sum(c, buf, n) : STRATA_OK;
}

/*
 * Invariant mode (c->chunks): every sum over rows is taken per chunk and combined by the
 * chunks' tree, completed across devices (all_sum); statistics and parameter gradients are
 * always the global batch's. Rows are normalised a chunk at a time, as other modules run.
 */
struct bn_chunk {
        struct strata_layer *l;
        const struct strata_kernel_ops *d;
        const float *x, *center, *dy, *xhat;
};

static void bn_stats_leaf(void *arg, int lo, int rows, float *out, int onto)
{
        const struct bn_chunk *b = arg;

        (void)onto; /* never asked: no pairs */
        b->d->col_stats(b->x + (size_t)lo * b->l->in, rows, b->l->in, b->center, out);
}

static void bn_sums_leaf(void *arg, int lo, int rows, float *out, int onto)
{
        const struct bn_chunk *b = arg;
        size_t at = (size_t)lo * b->l->in;

        (void)onto;
        /* the parameter gradients written here are replaced by the tree's sums */
        b->d->bn_grad_sums(b->dy + at, b->xhat + at, out, b->l->grad, b->l->grad + b->l->in,
                           rows, b->l->in, 1);
}

/* The tree's sum of @p leaf over the chunks, completed across devices, into @p dst. */
static int bn_tree(struct strata_layer *l, const struct strata_step_ctx *c,
                   strata__chunk_fn leaf, struct bn_chunk *b, float *dst, size_t n)
{
        float *s;

        strata__chunks_sum(c, n, leaf, b, 0, NULL, &s);
        STRATA_TRY(bn_sum(l, c, s, n)); /* the device's blocks in, the total out */
        c->k->copy(dst, s, n);
        return STRATA_OK;
}

static void bn_forward_chunks(struct strata_layer *l, const struct strata_step_ctx *c,
                              const float *x, float *y, int eval)
{
        const struct strata_chunks *ch = c->chunks;
        const struct strata_kernel_ops *d = c->k;
        struct bn_chunk b = { l, d, x, NULL, NULL, NULL };
        int f = l->in, n_all = c->rows_global;
        float eps = l->desc->eps > 0.0f ? l->desc->eps : 1e-5f;
        float mom = l->desc->decay > 0.0f ? l->desc->decay : 0.1f;
        float *mean = l->aux, *invstd = l->aux + f, *tmp = l->aux + 2 * (size_t)f;
        float *xhat = l->aux + 4 * (size_t)f;
        const float *g = l->param, *bias = l->param + f;

        if (!eval) {
                if ((l->failed = bn_tree(l, c, bn_stats_leaf, &b, tmp, (size_t)f)) != STRATA_OK)
                        return;
                d->div(mean, tmp, (float)n_all, (size_t)f);
                b.center = mean;
                if ((l->failed = bn_tree(l, c, bn_stats_leaf, &b, tmp, (size_t)f)) != STRATA_OK)
                        return;
                d->bn_moments(tmp, mean, l->state, invstd, f, n_all, mom, eps);
        }
        for (int j = 0; j < ch->n; j++) {
                size_t at = (size_t)ch->lo[j] * f;
                int rows = ch->lo[j + 1] - ch->lo[j];

                if (eval)
                        d->bn_eval(x + at, l->state, g, bias, eps, y + at, rows, f);
                else
                        d->bn_normalize(x + at, mean, invstd, g, bias, xhat + at, y + at, rows,
                                        f);
        }
}

static void bn_backward_chunks(struct strata_layer *l, const struct strata_step_ctx *c,
                               const float *dy, float *dx)
{
        const struct strata_chunks *ch = c->chunks;
        int f = l->in;
        const float *invstd = l->aux + f, *xhat = l->aux + 4 * (size_t)f;
        float *sums = l->aux + 2 * (size_t)f;
        struct bn_chunk b = { l, c->k, NULL, NULL, dy, xhat };

        /* [sum dy xhat | sum dy] over the global batch: the parameter gradients, whole */
        if ((l->failed = bn_tree(l, c, bn_sums_leaf, &b, sums, 2 * (size_t)f)) != STRATA_OK)
                return;
        c->k->copy(l->grad, sums + f, (size_t)f);
        c->k->copy(l->grad + f, sums, (size_t)f);
        if (!dx)
                return;
        for (int j = 0; j < ch->n; j++) {
                size_t at = (size_t)ch->lo[j] * f;

                c->k->bn_dx(dy + at, xhat + at, sums, l->param, invstd, dx + at,
                            ch->lo[j + 1] - ch->lo[j], f, c->rows_global);
        }
}

static void bn_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                       float *y, int rows)
{
        const struct strata_kernel_ops *d = c->k;
        int f = l->in, n_all = c->sync ? c->rows_global : rows;
        float eps = l->desc->eps > 0.0f ? l->desc->eps : 1e-5f;
        float mom = l->desc->decay > 0.0f ? l->desc->decay : 0.1f;
        float *mean = l->aux, *invstd = l->aux + f, *tmp = l->aux + 2 * (size_t)f;
        float *xhat = l->aux + 4 * (size_t)f;
        const float *g = l->param, *b = l->param + f;
        int rc;

        if (c->chunks) {
                bn_forward_chunks(l, c, x, y, !c->train || c->rows_global < 2);
                return;
        }
        if (!c->train || n_all < 2) {
                d->bn_eval(x, l->state, g, b, eps, y, rows, f);
                return;
        }
        d->col_stats(x, rows, f, NULL, tmp);
        if ((rc = bn_sum(l, c, tmp, (size_t)f)) != STRATA_OK) {
                l->failed = rc;
                return;
        }
        d->div(mean, tmp, (float)n_all, (size_t)f);
        d->col_stats(x, rows, f, mean, tmp);
        if ((rc = bn_sum(l, c, tmp, (size_t)f)) != STRATA_OK) {
                l->failed = rc;
                return;
        }
        d->bn_moments(tmp, mean, l->state, invstd, f, n_all, mom, eps);
        d->bn_normalize(x, mean, invstd, g, b, xhat, y, rows, f);
}

static void bn_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        const float *y, const float *dy, float *dx, int rows)
{
        int f = l->in, n_all = c->sync ? c->rows_global : rows, rc;
        const float *invstd = l->aux + f, *xhat = l->aux + 4 * (size_t)f;
        float *sums = l->aux + 2 * (size_t)f; /* [sum dy | sum dy*xhat], 2F */

        (void)x;
        (void)y;
        if (c->chunks) {
                bn_backward_chunks(l, c, dy, dx);
                return;
        }
        /* Parameter gradients are this device's share: the strategy reduces them. */
        c->k->bn_grad_sums(dy, xhat, sums, l->grad, l->grad + f, rows, f, l->grad_fresh);
        if (!dx)
                return;
        if ((rc = bn_sum(l, c, sums, 2 * (size_t)f)) != STRATA_OK) {
                l->failed = rc;
                return;
        }
        c->k->bn_dx(dy, xhat, sums, l->param, invstd, dx, rows, f, n_all);
}

const struct strata_module_ops strata_batchnorm1d = {
        .name = "batchnorm1d",
        .shape = bn_shape,
        .init = bn_init,
        .forward = bn_forward,
        .backward = bn_backward,
        .replicate = bn_replicate,
};

/*
 * ---- LayerNorm over the sample's last dims dimensions (0: all): weight, bias of their shape
 *
 * The sample's shape (C, spatial...) splits into groups of its last norm_dims extents
 * (PyTorch's normalized_shape; 0 the whole sample, one group a row). Per group: mean and
 * biased variance in double (two passes, in order), 1/std = 1 / sqrt(var + eps),
 * y = (x - mean) / std * weight + bias rounded once. aux keeps each group's mean and 1/std as
 * two doubles (four floats) for the backward: dx = (g - mean(g) - xhat mean(g xhat)) / std
 * with g = dy * weight; the parameter gradients sum over rows and groups in order, in double,
 * per feature.
 */

#define LN_AUX 4 /* floats per group: mean and 1/std, doubles */

static double ln_eps(const struct strata_layer *l)
{
        return l->desc->eps > 0.0f ? (double)l->desc->eps : 1e-5;
}

/* Features of one group: the product of the sample's last norm_dims extents (all for 0). */
static int norm_group(const struct strata_layer *l)
{
        const struct strata_dims *d = &l->in_dims;
        int k = l->desc->norm_dims, g = 1;

        if (k <= 0 || d->ndim <= 0 || k > d->ndim)
                return l->in;
        for (int i = d->ndim - k; i < d->ndim; i++)
                g *= d->size[i];
        return g;
}

/*
 * A norm's weight, of normalized_shape: the sample's (C, spatial...) when it has a layout,
 * else (features); its last norm_dims extents when that is set (checked here).
 */
static int norm_weight(const struct strata_layer *l, int in, struct strata_param_group *w)
{
        const struct strata_dims *d = &l->in_dims;
        int k = l->desc->norm_dims;

        if (k < 0 || (k > 0 && k > d->ndim))
                return strata__fail(STRATA_EINVAL, "%s (module %d): dims %d over a sample of "
                                    "%d spatial dimensions (0 for all, up to %d)",
                                    l->desc->ops->name, l->index, k, d->ndim, d->ndim);
        *w = (struct strata_param_group){ "weight", STRATA_F32, (size_t)in, STRATA_ROLE_WEIGHT,
                                          1, { (size_t)in, 1 } };
        if (d->ndim > 0) { /* normalized_shape (C, spatial...) when the sample has a layout */
                STRATA_TRY(strata__spatial_check(l, in, 0, "a layout that holds its width"));
                w->ndim = 1 + d->ndim;
                w->shape[0] = (size_t)d->channels;
                for (int i = 0; i < d->ndim; i++)
                        w->shape[1 + i] = (size_t)d->size[i];
        }
        if (k > 0) { /* the last k extents of (C, spatial...) */
                w->count = (size_t)norm_group(l);
                w->ndim = k;
                for (int i = 0; i < STRATA_MAX_PARAM_DIMS; i++)
                        w->shape[i] = i < k ? (size_t)d->size[d->ndim - k + i] : 0;
                if (k == 1)
                        w->shape[1] = 1;
        }
        return STRATA_OK;
}

static int ln_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        struct strata_param_group w;
        int g;

        if (!(l->desc->eps >= 0.0f && isfinite(l->desc->eps)))
                return strata__fail(STRATA_EINVAL, "layernorm (module %d): eps %g (>= 0, 0 "
                                    "for 1e-5)", l->index, l->desc->eps);
        STRATA_TRY(norm_weight(l, in, &w));
        g = norm_group(l);
        *s = (struct strata_module_shape){ .out = in, .params = 2 * (size_t)g,
                                           .aux_per_row = LN_AUX * (size_t)(in / g),
                                           .ngroups = 2, .groups = { w, w }, .host_loops = 1 };
        s->groups[1].name = "bias";
        s->groups[1].role = STRATA_ROLE_BIAS;
        return STRATA_OK;
}

static void ln_init(struct strata_layer *l, uint64_t seed)
{
        int g = norm_group(l);

        (void)seed;
        for (int j = 0; j < g; j++) {
                l->param[j] = 1.0f;
                l->param[g + j] = 0.0f;
        }
}

/* Group @p i's mean and 1/std (row r's group k is r * groups + k), as the forward saved them. */
static void ln_stats(const struct strata_layer *l, size_t i, double *mean, double *rstd)
{
        double m[2];

        memcpy(m, l->aux + i * LN_AUX, sizeof(m));
        *mean = m[0];
        *rstd = m[1];
}

static void ln_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                       float *y, int rows)
{
        int f = norm_group(l), n = l->in / f;
        const float *w = l->param, *b = l->param + f;

        (void)c;
        for (size_t i = 0; i < (size_t)rows * n; i++) { /* row r's group k: r * n + k */
                const float *xr = x + i * f;
                float *yr = y + i * f;
                double sum = 0.0, sq = 0.0, m[2];

                for (int j = 0; j < f; j++)
                        sum += xr[j];
                m[0] = sum / f;
                for (int j = 0; j < f; j++)
                        sq += (xr[j] - m[0]) * (xr[j] - m[0]);
                m[1] = 1.0 / sqrt(sq / f + ln_eps(l));
                memcpy(l->aux + i * LN_AUX, m, sizeof(m));
                for (int j = 0; j < f; j++)
                        yr[j] = (float)((xr[j] - m[0]) * m[1] * w[j] + b[j]);
        }
}

/* The input gradient of group @p i of @p f features. */
static void ln_dx(const struct strata_layer *l, size_t i, int f, const float *xr,
                  const float *dyr, float *dxr)
{
        const float *w = l->param;
        double mean, rstd, sg = 0.0, sgx = 0.0;

        ln_stats(l, i, &mean, &rstd);
        for (int j = 0; j < f; j++) {
                double g = (double)dyr[j] * w[j];

                sg += g;
                sgx += g * (xr[j] - mean) * rstd;
        }
        for (int j = 0; j < f; j++)
                dxr[j] = (float)(rstd * ((double)dyr[j] * w[j] - sg / f -
                                         (xr[j] - mean) * rstd * sgx / f));
}

/* Features whose parameter gradients are summed at once, in double on the stack. */
#define LN_BLOCK 64

/* Features [j0, j0 + nj)'s gradient sums @p gw, @p gb, rounded once: written or added on. */
static void ln_store(const struct strata_layer *l, const double *gw, const double *gb, int j0,
                     int nj)
{
        int f = norm_group(l);
        float *dw = l->grad, *db = l->grad + f;

        for (int j = 0; j < nj; j++) {
                dw[j0 + j] = (float)(l->grad_fresh ? gw[j] : dw[j0 + j] + gw[j]);
                db[j0 + j] = (float)(l->grad_fresh ? gb[j] : db[j0 + j] + gb[j]);
        }
}

static void ln_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        const float *y, const float *dy, float *dx, int rows)
{
        int f = norm_group(l);
        size_t groups = (size_t)rows * (size_t)(l->in / f);

        (void)c;
        (void)y;
        if (dx && f <= LN_BLOCK) { /* one block: each group's dx while its values are hot */
                double gw[LN_BLOCK] = { 0 }, gb[LN_BLOCK] = { 0 }, mean, rstd;

                for (size_t i = 0; i < groups; i++) {
                        const float *xr = x + i * f, *dr = dy + i * f;

                        ln_stats(l, i, &mean, &rstd);
                        for (int j = 0; j < f; j++) {
                                gw[j] += dr[j] * ((xr[j] - mean) * rstd);
                                gb[j] += dr[j];
                        }
                        ln_dx(l, i, f, xr, dr, dx + i * f);
                }
                ln_store(l, gw, gb, 0, f);
                return;
        }
        for (int j0 = 0; j0 < f; j0 += LN_BLOCK) { /* each feature's groups in order */
                int nj = f - j0 < LN_BLOCK ? f - j0 : LN_BLOCK;
                double gw[LN_BLOCK] = { 0 }, gb[LN_BLOCK] = { 0 }, mean, rstd;

                for (size_t i = 0; i < groups; i++) {
                        const float *xr = x + i * f + j0, *dr = dy + i * f + j0;

                        ln_stats(l, i, &mean, &rstd);
                        for (int j = 0; j < nj; j++) {
                                gw[j] += dr[j] * ((xr[j] - mean) * rstd);
                                gb[j] += dr[j];
                        }
                }
                ln_store(l, gw, gb, j0, nj);
        }
        if (!dx)
                return;
        for (size_t i = 0; i < groups; i++)
                ln_dx(l, i, f, x + i * f, dy + i * f, dx + i * f);
}

const struct strata_module_ops strata_layernorm = {
        .name = "layernorm",
        .shape = ln_shape,
        .init = ln_init,
        .forward = ln_forward,
        .backward = ln_backward,
};

/*
 * ---- RMSNorm over the sample's last dims dimensions (0: all): weight of their shape ----
 *
 * The sample's shape (C, spatial...) splits into groups of its last dims extents
 * (PyTorch's normalized_shape): a sequence (L, E) with dims 1 is RMSNorm(E) on each token.
 * Per group: the mean square in double (in order), 1/rms = 1 / sqrt(ms + eps),
 * y = x / rms * weight rounded once. aux keeps each group's 1/rms as a double (two floats)
 * for the backward: dx = (g - xhat mean(g xhat)) / rms with g = dy * weight, xhat = x / rms;
 * the weight's gradient sums dy xhat over rows and groups in order, in double, per feature.
 */

static double rms_eps(const struct strata_layer *l)
{
        return l->desc->eps > 0.0f ? (double)l->desc->eps : (double)FLT_EPSILON;
}

static int rms_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        struct strata_param_group w;
        int g;

        if (!(l->desc->eps >= 0.0f && isfinite(l->desc->eps)))
                return strata__fail(STRATA_EINVAL, "rmsnorm (module %d): eps %g (>= 0, 0 "
                                    "for FLT_EPSILON)", l->index, l->desc->eps);
        STRATA_TRY(norm_weight(l, in, &w));
        g = norm_group(l);
        *s = (struct strata_module_shape){ .out = in, .params = (size_t)g,
                                           .aux_per_row = 2 * (size_t)(in / g), .ngroups = 1,
                                           .groups = { w }, .host_loops = 1 };
        return STRATA_OK;
}

static void rms_init(struct strata_layer *l, uint64_t seed)
{
        (void)seed;
        for (size_t j = 0; j < l->nparam; j++)
                l->param[j] = 1.0f;
}

/* 1/rms of group @p k of row @p r, as the forward saved it. */
static double rms_rstd(const struct strata_layer *l, int r, int k)
{
        double v;

        memcpy(&v, l->aux + (size_t)r * l->naux_per_row + 2 * (size_t)k, sizeof(v));
        return v;
}

static void rms_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        const float *w = l->param;
        int g = norm_group(l), n = l->in / g;

        (void)c;
        for (int r = 0; r < rows; r++)
                for (int k = 0; k < n; k++) {
                        const float *xr = x + (size_t)r * l->in + (size_t)k * g;
                        float *yr = y + (size_t)r * l->in + (size_t)k * g;
                        double sq = 0.0, rstd;

                        for (int j = 0; j < g; j++)
                                sq += (double)xr[j] * xr[j];
                        rstd = 1.0 / sqrt(sq / g + rms_eps(l));
                        memcpy(l->aux + (size_t)r * l->naux_per_row + 2 * (size_t)k, &rstd,
                               sizeof(rstd));
                        for (int j = 0; j < g; j++)
                                yr[j] = (float)(xr[j] * rstd * w[j]);
                }
}

/* The input gradient of group @p k of row @p r. */
static void rms_dx(const struct strata_layer *l, int r, int k, int g, const float *xr,
                   const float *dr, float *dxr)
{
        const float *w = l->param;
        double rstd = rms_rstd(l, r, k), sgx = 0.0;

        for (int j = 0; j < g; j++)
                sgx += (double)dr[j] * w[j] * xr[j] * rstd;
        for (int j = 0; j < g; j++)
                dxr[j] = (float)(rstd * ((double)dr[j] * w[j] - xr[j] * rstd * sgx / g));
}

static void rms_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         const float *y, const float *dy, float *dx, int rows)
{
        float *dw = l->grad;
        int g = norm_group(l), n = l->in / g;

        (void)c;
        (void)y;
        for (int j0 = 0; j0 < g; j0 += LN_BLOCK) { /* each feature's rows in row order */
                int nj = g - j0 < LN_BLOCK ? g - j0 : LN_BLOCK;
                double gw[LN_BLOCK] = { 0 };

                for (int r = 0; r < rows; r++)
                        for (int k = 0; k < n; k++) {
                                size_t at = (size_t)r * l->in + (size_t)k * g + j0;
                                double rstd = rms_rstd(l, r, k);

                                for (int j = 0; j < nj; j++)
                                        gw[j] += dy[at + j] * (x[at + j] * rstd);
                        }
                for (int j = 0; j < nj; j++)
                        dw[j0 + j] = (float)(l->grad_fresh ? gw[j] : dw[j0 + j] + gw[j]);
        }
        for (int r = 0; dx && r < rows; r++)
                for (int k = 0; k < n; k++) {
                        size_t at = (size_t)r * l->in + (size_t)k * g;

                        rms_dx(l, r, k, g, x + at, dy + at, dx + at);
                }
}

const struct strata_module_ops strata_rmsnorm = {
        .name = "rmsnorm",
        .shape = rms_shape,
        .init = rms_init,
        .forward = rms_forward,
        .backward = rms_backward,
};
