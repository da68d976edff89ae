/*
 * The built-in modules: Linear, ReLU and the other activations, Dropout (PyTorch semantics).
 * The norms are in nn/norm.c, the spatial modules in nn/pool.c and nn/upsample.c, the
 * convolutions in nn/conv.c, the merge modules in nn/merge.c.
 */
#include <math.h>

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
        if (c->x_type == STRATA_F32 && !bf16_y && c->compute == STRATA_F32 && l->naux_fixed &&
            c->k->gemm_pb) { /* an inference replica's weight packed once (nn/packed.c) */
                c->k->gemm_pb(rows, l->out, l->in, x, l->in, w, l->in, l->aux, 1.0f, y, l->out);
                return;
        }
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
