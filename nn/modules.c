/*
 * The built-in modules: Linear, ReLU and the other activations, BatchNorm1d, Dropout
 * (PyTorch semantics).
 */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/chunks.h"
#include "nn/init.h"

void strata_gemm(const struct strata_step_ctx *c, int ta, int tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *cm, int ldc)
{
        size_t mk = (size_t)m * (size_t)k, kn = (size_t)k * (size_t)n;
        size_t dim = (size_t)(m > n ? (m > k ? m : k) : (n > k ? n : k));

        if (c->compute == STRATA_F32 || !c->lp_scratch || !c->k->gemm_lp || m < 0 || n < 0 ||
            k < 0 || mk + kn > c->lp_elems || dim > c->lp_dim)
                c->k->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc);
        else
                c->k->gemm_lp(c->compute, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cm,
                                ldc, c->lp_scratch);
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
        *s = (struct strata_module_shape){
                .out = l->desc->out, .params = w + l->desc->out, .ngroups = 2,
                .groups = { { "weight", STRATA_F32, w, STRATA_ROLE_WEIGHT, 2,
                              { (size_t)l->desc->out, (size_t)in } },
                            { "bias", STRATA_F32, (size_t)l->desc->out, STRATA_ROLE_BIAS, 1,
                              { (size_t)l->desc->out, 1 } } },
                .lp_fixed = w, .lp_per_row = (size_t)in + (size_t)l->desc->out,
                .bf16_io = 1,
                /* flat, even when out == in: its output is not its input's layout */
                .out_dims = { .channels = l->desc->out } };
        return STRATA_OK;
}

static void linear_init(struct strata_layer *l, uint64_t seed)
{
        float bound = 1.0f / sqrtf((float)l->in); /* kaiming_uniform(a=sqrt(5)) and bias rule */

        strata__uniform_fill(l->param, (size_t)l->in * l->out, bound, seed,
                             STRATA__INIT_STREAM(l->index, 0));
        strata__uniform_fill(l->param + (size_t)l->in * l->out, (size_t)l->out, bound, seed,
                             STRATA__INIT_STREAM(l->index, 1));
}

/*
 * bf16-stored activations (the runtime chose them, so gemm_lp_io exists and the scratch fits
 * the module's declared GEMMs): an f32 y starts from the bias as in fp32; a bf16 y gets the
 * bias added to the f32 products before its one rounding, so it holds the fp32 path's values
 * rounded.
 */
static void linear_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                           const float *x, float *y, int rows)
{
        const float *w = l->param, *b = l->param + (size_t)l->in * l->out;
        int bf16_y = c->y_type == STRATA_BF16;

        if (!bf16_y)
                c->k->fill_rows(y, b, rows, l->out);
        if (c->x_type == STRATA_F32 && !bf16_y) {
                strata_gemm(c, 0, 1, rows, l->out, l->in, 1.0f, x, l->in, w, l->in, 1.0f, y,
                            l->out);
                return;
        }
        c->k->gemm_lp_io(&(struct strata_gemm_io){ .dt = c->compute, .tb = 1, .m = rows,
                                                     .n = l->out, .k = l->in, .alpha = 1.0f,
                                                     .beta = bf16_y ? 0.0f : 1.0f, .a = x,
                                                     .lda = l->in, .at = c->x_type, .b = w,
                                                     .ldb = l->in, .c = y, .ldc = l->out,
                                                     .ct = c->y_type,
                                                     .bias = bf16_y ? b : NULL },
                           c->lp_scratch);
}

static void linear_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, const float *y, const float *dy, float *dx, int rows)
{
        float *dw = l->grad, *db = l->grad + (size_t)l->in * l->out;

        (void)y;
        if (c->x_type == STRATA_F32)
                strata_gemm(c, 1, 0, l->out, l->in, rows, 1.0f, dy, l->out, x, l->in,
                            l->grad_fresh ? 0.0f : 1.0f, dw, l->in);
        else
                c->k->gemm_lp_io(&(struct strata_gemm_io){ .dt = c->compute, .ta = 1,
                                                             .m = l->out, .n = l->in, .k = rows,
                                                             .alpha = 1.0f,
                                                             .beta = l->grad_fresh ? 0.0f : 1.0f,
                                                             .a = dy, .lda = l->out, .b = x,
                                                             .ldb = l->in, .bt = c->x_type,
                                                             .c = dw, .ldc = l->in },
                                   c->lp_scratch);
        if (c->chunks && !l->grad_fresh) /* invariant mode: onto a sibling chunk's sum */
                strata__chunks_add_col_sums(c, dy, rows, l->out, db);
        else
                c->k->col_sums(dy, rows, l->out, db, !l->grad_fresh);
        if (dx)
                strata__linear_input_grad(l, c, dy, dx, rows);
}

void strata__linear_input_grad(const struct strata_layer *l, const struct strata_step_ctx *c,
                               const float *dy, float *dx, int rows)
{
        strata_gemm(c, 0, 0, rows, l->in, l->out, 1.0f, dy, l->out, l->param, l->in, 0.0f, dx,
                    l->in);
}

const struct strata_module_ops strata_linear = {
        .name = "linear",
        .shape = linear_shape,
        .init = linear_init,
        .forward = linear_forward,
        .backward = linear_backward,
};

/* ---- ReLU ---- */

static int relu_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .bf16_io = 1, .row_wise = 1,
                                           .in_place = 1 };
        return STRATA_OK;
}

static void relu_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         float *y, int rows)
{
        size_t n = (size_t)rows * l->out;

        if (c->x_type == STRATA_F32 && c->y_type == STRATA_F32)
                c->k->relu(x, y, n);
        else
                c->k->relu_io(x, c->x_type, y, c->y_type, n);
}

static void relu_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                          const float *x, const float *y, const float *dy, float *dx, int rows)
{
        size_t n = (size_t)rows * l->out;

        (void)x;
        if (!dx)
                return;
        if (c->y_type == STRATA_BF16)
                c->k->relu_backward_bf16((const uint16_t *)(const void *)y, dy, dx, n);
        else
                c->k->relu_backward(y, dy, dx, n);
}

const struct strata_module_ops strata_relu = {
        .name = "relu",
        .shape = relu_shape,
        .forward = relu_forward,
        .backward = relu_backward,
};

/*
 * ---- Tanh, Sigmoid, GELU (erf and tanh forms), SiLU, LeakyReLU: the driver's act kernels ----
 *
 * No aux: the replica keeps every module's input and output until backward, and each kind's
 * gradient reads one of them (Tanh and Sigmoid the output, the others the input). Storage
 * stays f32 (no bf16_io): under bf16-mixed the boundaries on both sides of them are f32.
 */

static int act_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .row_wise = 1 };
        return STRATA_OK;
}

static int leaky_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        if (!isfinite(l->desc->slope))
                return strata__fail(STRATA_EINVAL, "leaky-relu (module %d): negative slope %g "
                                    "is not finite", l->index, l->desc->slope);
        return act_shape(l, in, s);
}

/* LeakyReLU's negative slope (PyTorch's default 0.01 for 0); the other kinds ignore it. */
static float act_param(const struct strata_layer *l)
{
        return l->desc->slope != 0.0f ? l->desc->slope : 0.01f;
}

static void act_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                        enum strata_activation kind, const float *x, float *y, int rows)
{
        c->k->act(kind, act_param(l), x, y, (size_t)rows * l->out);
}

static void act_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                         enum strata_activation kind, const float *x, const float *y,
                         const float *dy, float *dx, int rows)
{
        if (dx)
                c->k->act_backward(kind, act_param(l), x, y, dy, dx, (size_t)rows * l->out);
}

/* One module kind per activation: its forward and backward name the kind for the kernels. */
#define ACTIVATION(sym, label, kind, shape_fn)                                                 \
        static void sym##_forward(struct strata_layer *l, const struct strata_step_ctx *c,    \
                                  const float *x, float *y, int rows)                          \
        {                                                                                      \
                act_forward(l, c, kind, x, y, rows);                                           \
        }                                                                                      \
        static void sym##_backward(struct strata_layer *l, const struct strata_step_ctx *c,   \
                                   const float *x, const float *y, const float *dy, float *dx, \
                                   int rows)                                                   \
        {                                                                                      \
                act_backward(l, c, kind, x, y, dy, dx, rows);                                  \
        }                                                                                      \
        const struct strata_module_ops strata_##sym = {                                        \
                .name = label,                                                                 \
                .shape = shape_fn,                                                             \
                .forward = sym##_forward,                                                      \
                .backward = sym##_backward,                                                    \
        };

ACTIVATION(tanh, "tanh", STRATA_ACT_TANH, act_shape)
ACTIVATION(sigmoid, "sigmoid", STRATA_ACT_SIGMOID, act_shape)
ACTIVATION(gelu, "gelu", STRATA_ACT_GELU, act_shape)
ACTIVATION(gelu_tanh, "gelu-tanh", STRATA_ACT_GELU_TANH, act_shape)
ACTIVATION(silu, "silu", STRATA_ACT_SILU, act_shape)
ACTIVATION(leaky_relu, "leaky-relu", STRATA_ACT_LEAKY_RELU, leaky_shape)

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

        strata__chunks_sum(c, n, leaf, b, 0, &s);
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
                c->k->copy(y, x, n);
                c->k->fill(l->aux, 1.0f, n);
                return;
        }
        c->k->dropout(x, y, l->aux, n, l->desc->p, c->seed,
                        (c->step << 8) | (uint64_t)l->index, (uint64_t)c->row0 * l->out);
}

static void dropout_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                             const float *x, const float *y, const float *dy, float *dx, int rows)
{
        (void)x;
        (void)y;
        if (dx)
                c->k->mul(dy, l->aux, dx, (size_t)rows * l->out);
}

const struct strata_module_ops strata_dropout = {
        .name = "dropout",
        .shape = dropout_shape,
        .forward = dropout_forward,
        .backward = dropout_backward,
};
