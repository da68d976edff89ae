/*
 * Conv1d, Conv2d, Conv3d (PyTorch semantics): in channels from the input's layout, out
 * channels desc->out, kernel, stride, dilation, padding (per side, or 'same') read past the
 * edges as padding_mode says (zeros, circular, reflect, replicate), bias unless no_bias.
 *
 * Every geometry is run as 3-D: a 1-D or 2-D convolution is one whose outer dimensions have
 * extent 1, kernel 1, stride 1 and no padding, so one set of loops serves the three.
 *
 * Forward, per sample n (a row: C_in x D x H x W, the last fastest): the input is unfolded
 * (im2col / vol2col) into the sample's columns in the module's saved values, a [K x P] matrix,
 * K = C_in kD kH kW (rows in the weight's order), P the output positions; then
 * y_n [C_out x P] = W [C_out x K] cols_n, one strata_gemm() (so mixed precision applies), and
 * b added to the finished sums. Backward: dW (+)= dy_n cols_n^T sample after sample (beta 0
 * for the first of a fresh gradient), db (+)= the sums of dy over rows and positions (in
 * double, one rounding), and when dx is asked dcols = W^T dy_n into the sample's columns,
 * which it no longer needs, folded back (col2im) onto dx_n: a padded position adds onto the
 * source position its mode read it from (zeros: onto nothing). The forward product and dcols
 * run transposed where that fits the GEMM's tiles better, with the same bits. A kernel-1,
 * stride-1, unpadded convolution's columns are its input: it reads them there, and its column
 * gradient is written as dx (cols_are_input()). Every sum runs in one fixed order: bitwise
 * repeatable.
 *
 * The module declares row_loop: where the runtime runs the modules after it inside its loop
 * (c->fused, decision 0046), it calls their forward after each sample's output and takes
 * each sample's output gradient from their backward, summing the bias gradient row by row in
 * the same chains.
 *
 * The unfolding runs on the host: the module declares host_loops, so a driver whose devices
 * have memory of their own (CUDA) refuses it when the run is planned.
 *
 * This file holds the geometry, the shapes and the passes; the columns are nn/conv_cols.c's,
 * the small products nn/conv_small.c's (nn/conv_parts.h).
 */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "arch/simd.h"
#include "base/base.h"
#include "nn/conv_parts.h"
#include "nn/init.h"

/*
 * The most output channels whose bias gradient sums a loop over rows keeps on the stack (the
 * rows of a fused call, struct strata_row_hooks, arrive one at a time).
 */
#define BIAS_ROW_MAX 1024

/* An int-or-tuple argument's dimension @p i: an entry past the first that is 0 is the first. */
static int dim_arg(const int *a, int i)
{
        return i > 0 && a[i] == 0 ? a[0] : a[i];
}

/* Padding of dimension @p i: a count, or STRATA_PADDING_SAME. */
static int dim_pad(const int *a, int i)
{
        int p = dim_arg(a, i);

        return p == STRATA_PADDING_NONE ? 0 : p;
}

/* Kernel, stride and dilation of spatial dimension @p i into g's dimension @p j. */
static int read_window(const struct strata_layer *l, struct strata__conv_geom *g, int i, int j)
{
        const struct strata_module *m = l->desc;
        const char *name = m->ops->name;
        int k = dim_arg(m->kernel, i), s = dim_arg(m->stride, i), d = dim_arg(m->dilation, i);

        if (k <= 0 || s < 0 || d < 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): dimension %d has kernel %d, "
                                    "stride %d, dilation %d (kernel > 0, stride and dilation "
                                    ">= 0, 0 meaning 1)", name, l->index, i, k, s, d);
        g->k[j] = k;
        g->s[j] = s ? s : 1;
        g->d[j] = d ? d : 1;
        return STRATA_OK;
}

/*
 * Padding of spatial dimension @p i: PyTorch's 'same' (stride 1; the total d (k - 1) split
 * with the smaller half first), and the mode's limits: reflect pads less than the extent,
 * circular at most the extent.
 */
static int read_padding(const struct strata_layer *l, struct strata__conv_geom *g, int i, int j)
{
        const char *name = l->desc->ops->name;
        int p = dim_pad(l->desc->padding, i), n = g->in[j];
        long total;

        if (p == STRATA_PADDING_SAME) {
                if (g->s[j] != 1)
                        return strata__fail(STRATA_EINVAL, "%s (module %d): padding 'same' "
                                            "needs stride 1; dimension %d has stride %d", name,
                                            l->index, i, g->s[j]);
                total = (long)g->d[j] * (g->k[j] - 1);
                if (total > (1L << 30))
                        return strata__fail(STRATA_EOVERFLOW, "%s (module %d): dimension %d's "
                                            "'same' padding overflows", name, l->index, i);
                g->lo[j] = (int)(total / 2);
                g->hi[j] = (int)(total - total / 2);
        } else if (p < 0) {
                return strata__fail(STRATA_EINVAL, "%s (module %d): dimension %d has padding %d "
                                    "(>= 0, or STRATA_PADDING_SAME)", name, l->index, i, p);
        } else {
                g->lo[j] = g->hi[j] = p;
        }
        p = g->lo[j] > g->hi[j] ? g->lo[j] : g->hi[j];
        if (g->mode == STRATA_PAD_REFLECT && p >= n)
                return strata__fail(STRATA_EINVAL, "%s (module %d): reflect padding %d in "
                                    "dimension %d must be less than the input's extent %d",
                                    name, l->index, p, i, n);
        if (g->mode == STRATA_PAD_CIRCULAR && p > n)
                return strata__fail(STRATA_EINVAL, "%s (module %d): circular padding %d in "
                                    "dimension %d must be at most the input's extent %d", name,
                                    l->index, p, i, n);
        return STRATA_OK;
}

/* Output extent of dimension @p i (g's @p j), or a refusal when the kernel overhangs. */
static int read_extent(const struct strata_layer *l, struct strata__conv_geom *g, int i, int j)
{
        long padded = (long)g->in[j] + g->lo[j] + g->hi[j];
        long span = (long)g->d[j] * (g->k[j] - 1) + 1;

        if (span > padded)
                return strata__fail(STRATA_EINVAL, "%s (module %d): kernel %d (dilation %d) "
                                    "spans %ld positions in dimension %d, more than the padded "
                                    "input's %ld", l->desc->ops->name, l->index, g->k[j],
                                    g->d[j], span, i, padded);
        g->out[j] = (int)((padded - span) / g->s[j] + 1);
        return STRATA_OK;
}

/* The products of the geometry, refused past 2^40 elements as Linear's. */
static int read_sizes(const struct strata_layer *l, struct strata__conv_geom *g)
{
        size_t limit = (size_t)1 << 40;

        g->kvol = g->in_sp = g->out_sp = 1;
        for (int j = 0; j < 3; j++) {
                g->kvol *= (size_t)g->k[j];
                g->in_sp *= (size_t)g->in[j];
                g->out_sp *= (size_t)g->out[j];
                if (g->kvol > limit || g->out_sp > limit)
                        return strata__fail(STRATA_EOVERFLOW, "%s (module %d): kernel or output "
                                            "too large", l->desc->ops->name, l->index);
        }
        g->kk = (size_t)g->cin * g->kvol;
        if (g->kk > limit / g->out_sp || (size_t)g->cout > limit / g->kk ||
            (size_t)g->cout > limit / g->out_sp)
                return strata__fail(STRATA_EOVERFLOW, "%s (module %d): %d x %zu columns of %zu "
                                    "positions too large", l->desc->ops->name, l->index,
                                    g->cin, g->kvol, g->out_sp);
        return STRATA_OK;
}

/* The input's layout: exactly @p nd spatial dimensions. */
static int read_input(const struct strata_layer *l, struct strata__conv_geom *g)
{
        const struct strata_dims *in = &l->in_dims;
        const char *name = l->desc->ops->name;

        if (in->ndim == 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): needs an input of %d spatial "
                                    "dimensions, got %d flat features; set the model's in_dims",
                                    name, l->index, g->nd, l->in);
        if (in->ndim != g->nd)
                return strata__fail(STRATA_EINVAL, "%s (module %d): needs an input of %d spatial "
                                    "dimensions, got %d (%d channels of %d x %d x %d)", name,
                                    l->index, g->nd, in->ndim, in->channels, in->size[0],
                                    in->ndim > 1 ? in->size[1] : 1,
                                    in->ndim > 2 ? in->size[2] : 1);
        g->cin = in->channels;
        for (int j = 0; j < 3; j++)
                g->in[j] = 1;
        for (int i = 0; i < g->nd; i++)
                g->in[3 - g->nd + i] = in->size[i];
        return STRATA_OK;
}

/* Layer @p l's geometry for a convolution of @p nd spatial dimensions, checked. */
static int conv_geom(const struct strata_layer *l, int nd, struct strata__conv_geom *g)
{
        const struct strata_module *m = l->desc;

        memset(g, 0, sizeof(*g));
        g->nd = nd;
        g->cout = m->out;
        g->mode = m->padding_mode;
        g->bias = !m->no_bias;
        if ((unsigned)m->padding_mode >= STRATA_PAD_COUNT)
                return strata__fail(STRATA_EINVAL, "%s (module %d): padding_mode %d is not one "
                                    "of zeros (0), circular (1), reflect (2), replicate (3)",
                                    m->ops->name, l->index, m->padding_mode);
        if (m->out <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): out channels %d <= 0",
                                    m->ops->name, l->index, m->out);
        STRATA_TRY(read_input(l, g));
        for (int j = 0; j < 3 - nd; j++) /* outer dimensions of extent 1 */
                g->k[j] = g->s[j] = g->d[j] = g->out[j] = 1;
        for (int i = 0; i < nd; i++) {
                int j = 3 - nd + i;

                STRATA_TRY(read_window(l, g, i, j));
                STRATA_TRY(read_padding(l, g, i, j));
                STRATA_TRY(read_extent(l, g, i, j));
        }
        return read_sizes(l, g);
}

static int conv_shape(const struct strata_layer *l, int nd, struct strata_module_shape *s)
{
        struct strata__conv_geom g;
        size_t w, fwd, dw;

        STRATA_TRY(conv_geom(l, nd, &g));
        w = (size_t)g.cout * g.kk;
        /* the largest GEMM's operands: forward W, cols (dcols the same); dW dy, cols */
        fwd = w + g.kk * g.out_sp;
        dw = (size_t)g.cout * g.out_sp + g.kk * g.out_sp;
        *s = (struct strata_module_shape){
                .out = (int)((size_t)g.cout * g.out_sp),
                .params = w + (g.bias ? (size_t)g.cout : 0),
                .aux_per_row = g.kk * g.out_sp,
                .ngroups = g.bias ? 2 : 1,
                .groups = { { "weight", STRATA_F32, w, STRATA_ROLE_WEIGHT, 2 + nd,
                              { (size_t)g.cout, (size_t)g.cin } },
                            { "bias", STRATA_F32, (size_t)g.cout, STRATA_ROLE_BIAS, 1,
                              { (size_t)g.cout, 1 } } },
                .lp_fixed = fwd > dw ? fwd : dw,
                .out_dims = { .channels = g.cout, .ndim = nd },
                .host_loops = 1,
                /* fused, the bias gradient's sums are kept across rows on the stack */
                .row_loop = !g.bias || g.cout <= BIAS_ROW_MAX };
        if ((size_t)g.cout * g.out_sp > (size_t)1 << 30)
                return strata__fail(STRATA_EOVERFLOW, "%s (module %d): %d channels of %zu "
                                    "positions exceed a row's width", l->desc->ops->name,
                                    l->index, g.cout, g.out_sp);
        for (int i = 0; i < nd; i++) {
                s->groups[0].shape[2 + i] = (size_t)g.k[3 - nd + i];
                s->out_dims.size[i] = g.out[3 - nd + i];
        }
        return STRATA_OK;
}

/* PyTorch's default: kaiming_uniform(a = sqrt 5) and the bias rule, both 1 / sqrt(fan_in). */
static void conv_init(struct strata_layer *l, uint64_t seed)
{
        size_t fan_in = l->nparam, w;
        int cout = l->desc->out;

        if (!l->desc->no_bias)
                fan_in -= (size_t)cout;
        w = fan_in;
        fan_in /= (size_t)cout;
        strata__uniform_fill(l->param, w, 1.0f / sqrtf((float)fan_in), seed,
                             STRATA__INIT_STREAM(l->index, 0));
        if (!l->desc->no_bias)
                strata__uniform_fill(l->param + w, (size_t)cout, 1.0f / sqrtf((float)fan_in),
                                     seed, STRATA__INIT_STREAM(l->index, 1));
}

/*
 * Which way round a GEMM whose result is an [m x n] matrix or its transpose runs faster: the
 * CPU GEMM tiles the result's columns by 64, its last panel by 32, 16 or 8 where fewer are
 * left (drivers/cpu/gemm.c), so the orientation whose columns leave less of their last tile
 * empty; with @p plain, the transposed one only where it saves more than an eighth of the
 * tiles' area (the forward's transposed product transposes both operands in its packing and
 * its result into y, which cost more than a few empty columns: decision 0052). Either way
 * each element is the same chain of products in k order (the GEMM's contract): the same bits.
 */
#define GEMM_COLUMNS 64

/* @p n columns as the GEMM's panels hold them. */
static size_t gemm_columns(size_t n)
{
        size_t whole = n / GEMM_COLUMNS * GEMM_COLUMNS, w = GEMM_COLUMNS;

        while (n > whole && w > 8 && n - whole <= w / 2)
                w /= 2;
        return whole + (n > whole ? w : 0);
}

int strata__conv_transposed(size_t m, size_t n, int plain)
{
        size_t t = gemm_columns(m) * n, u = gemm_columns(n) * m;

        return plain ? t * 8 < u * 7 : t < u;
}

/*
 * Small products (K <= STRATA__CONV_SMALL_K) run in nn/conv_small.c's own chains, not through
 * strata_gemm(); only in fp32 (mixed precision rounds the operands first: strata_gemm() keeps
 * those).
 */
#define SMALL_DW 64 /* weight gradients of up to this many elements run directly */

static int small_path(const struct strata_step_ctx *c)
{
        return c->compute == STRATA_F32;
}

/* The direct path (nn/conv_parts.h): the sample's padded copy and its shifted views, no columns. */
static int direct_path(const struct strata_step_ctx *c, const struct strata__conv_geom *g,
                       struct strata__conv_pad *pd)
{
        if (!small_path(c) || g->kk > STRATA__CONV_SMALL_K || (size_t)g->cout * g->kk > SMALL_DW)
                return 0;
        return strata__conv_pad_of(g, pd) && pd->plane * (size_t)g->cin <= g->kk * g->out_sp;
}

/*
 * Kernel 1 everywhere, stride 1, no padding: a sample's columns are the sample itself ([C_in x
 * P], P the input's positions), as is its padded copy. The passes then read the input where it
 * is instead of copying it into the saved values (the input stays until the backward), and the
 * column gradient, in the [K x P] layout, is the input gradient: col2im would add each value
 * once onto 0, which changes only a -0 (to +0), so the product writes dx and a pass adds 0.
 */
static int cols_are_input(const struct strata__conv_geom *g)
{
        for (int j = 0; j < 3; j++)
                if (g->k[j] != 1 || g->s[j] != 1 || g->lo[j] || g->hi[j])
                        return 0;
        return 1;
}

/* What col2im onto 0 does to a value added once: -0 becomes +0, every other value stays. */
STRATA_SIMD static void onto_zero(float *dx, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = 0.0f + dx[i];
}

/* The geometry the shape accepted (forward and backward never see a refused one). */
static void geom_of(const struct strata_layer *l, struct strata__conv_geom *g)
{
        int rc = conv_geom(l, l->in_dims.ndim, g);

        (void)rc;
}

/*
 * y_n [cout x P] = W cols_n + b. With @p t (P x cout floats of scratch) as t = cols_n^T W^T,
 * then transposed into y_n, when that orientation fits the GEMM better; the bias is added to
 * the finished sums either way.
 */
static void forward_sample(const struct strata_layer *l, const struct strata_step_ctx *c,
                           const struct strata__conv_geom *g, const float *cols, float *yn,
                           float *t)
{
        const float *bias = l->param + (size_t)g->cout * g->kk;
        int p = (int)g->out_sp, kk = (int)g->kk, co = g->cout;

        if (small_path(c) && kk <= STRATA__CONV_SMALL_K) {
                strata__conv_small_product(l->param, (size_t)kk, 1, co, kk, cols, p,
                                           g->bias ? bias : NULL, yn);
                return;
        }
        if (t) {
                strata_gemm(c, 1, 1, p, co, kk, 1.0f, cols, p, l->param, kk, 0.0f, t, co);
                for (int o = 0; o < co; o++)
                        for (int q = 0; q < p; q++)
                                yn[(size_t)o * p + q] = g->bias ? t[(size_t)q * co + o] + bias[o]
                                                                : t[(size_t)q * co + o];
                return;
        }
        strata_gemm(c, 0, 0, co, p, kk, 1.0f, l->param, kk, cols, p, 0.0f, yn, p);
        for (int o = 0; o < co && g->bias; o++)
                for (int q = 0; q < p; q++)
                        yn[(size_t)o * p + q] += bias[o];
}

/*
 * Sample @p xn's columns into @p cols: im2col, through a padded plane on the stack where the
 * stride is 1 and a channel's plane fits. The columns are not kept for the backward, which
 * unfolds each sample again (decisions 0046, 0052, 0093): every sample of a call unfolds into
 * the first row's place in the saved values (one sample's columns, 226 KiB for the CNN's
 * second layer, hot in L2), where a batch of them (29 MB at 128 samples) was written out in
 * forward and read back in backward. The same function on the same input: the same columns,
 * the same bits; the plan is unchanged.
 */
static void unfold(const struct strata__conv_geom *g, const float *xn, float *cols)
{
        struct strata__conv_pad pd;

        if (strata__conv_pad_of(g, &pd) && pd.plane <= STRATA__CONV_PAD_STACK)
                strata__conv_im2col_padded(g, &pd, xn, cols);
        else
                strata__conv_im2col(g, xn, cols);
}

/*
 * Sample after sample: unfold, then multiply. The transposed product's scratch is the next
 * sample's output, not yet written; the last sample multiplies the other way round.
 */
static void conv_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                         const float *x, float *y, int rows)
{
        struct strata__conv_geom g;
        struct strata__conv_pad pd;
        size_t cols_n;
        int trans, same;

        geom_of(l, &g);
        cols_n = g.kk * g.out_sp;
        same = cols_are_input(&g);
        if (direct_path(c, &g, &pd)) {
                for (int n = 0; n < rows; n++) {
                        float *xp = same ? (float *)x + (size_t)n * l->in
                                         : l->aux + (size_t)n * cols_n;

                        if (!same)
                                strata__conv_pad_sample(&g, &pd, x + (size_t)n * l->in, xp);
                        strata__conv_direct_forward(&g, &pd, l->param,
                                                    g.bias ? l->param + (size_t)g.cout * g.kk
                                                           : NULL,
                                                    xp, y + (size_t)n * l->out);
                        if (c->fused) /* the modules after it, while the row is in cache */
                                c->fused->forward(c->fused, n);
                }
                return;
        }
        trans = strata__conv_transposed((size_t)g.cout, g.out_sp, 1);
        for (int n = 0; n < rows; n++) {
                float *cols = l->aux, *yn = y + (size_t)n * l->out; /* unfolded again later */

                if (same)
                        cols = (float *)x + (size_t)n * l->in;
                else
                        unfold(&g, x + (size_t)n * l->in, cols);
                forward_sample(l, c, &g, cols, yn, trans && n + 1 < rows ? yn + l->out : NULL);
                if (c->fused)
                        c->fused->forward(c->fused, n);
        }
}

/*
 * db (+)= the sums of dy over rows and positions, per channel in double: one rounding. Each
 * channel's sum is one chain in row and position order; BIAS_CHAINS channels run side by
 * side so that the chains' additions overlap (one channel alone waits on each addition).
 */
#define BIAS_CHAINS 8

/* Channels [o0, o0 + m)'s sums @p s into db: rounded once, written or added on. */
static void bias_store(const struct strata_layer *l, const double *s, int o0, int m, float *db)
{
        for (int j = 0; j < m; j++)
                db[o0 + j] = l->grad_fresh ? (float)s[j] : db[o0 + j] + (float)s[j];
}

static void bias_grad(const struct strata_layer *l, const struct strata__conv_geom *g,
                      const float *dy, int rows, float *db)
{
        for (int o0 = 0; o0 < g->cout; o0 += BIAS_CHAINS) {
                int m = g->cout - o0 < BIAS_CHAINS ? g->cout - o0 : BIAS_CHAINS;
                double s[BIAS_CHAINS] = { 0.0 };

                for (int n = 0; n < rows; n++) {
                        const float *d = dy + (size_t)n * l->out + (size_t)o0 * g->out_sp;

                        if (m < BIAS_CHAINS) {
                                for (int j = 0; j < m; j++)
                                        for (size_t q = 0; q < g->out_sp; q++)
                                                s[j] += d[(size_t)j * g->out_sp + q];
                                continue;
                        }
                        for (size_t q = 0; q < g->out_sp; q++)
                                for (int j = 0; j < BIAS_CHAINS; j++)
                                        s[j] += d[(size_t)j * g->out_sp + q];
                }
                bias_store(l, s, o0, m, db);
        }
}

/*
 * bias_grad() a row at a time (a fused call's rows arrive one by one): row @p d's values
 * added onto the sums @p s of every channel, each channel's chain in the same order.
 */
STRATA_SIMD static void bias_row(const struct strata__conv_geom *g, const float *d, double *s)
{
        for (int o0 = 0; o0 < g->cout; o0 += BIAS_CHAINS) {
                int m = g->cout - o0 < BIAS_CHAINS ? g->cout - o0 : BIAS_CHAINS;
                const float *dd = d + (size_t)o0 * g->out_sp;
                double t[BIAS_CHAINS];

                memcpy(t, s + o0, (size_t)m * sizeof(double));
                if (m < BIAS_CHAINS) {
                        for (int j = 0; j < m; j++)
                                for (size_t q = 0; q < g->out_sp; q++)
                                        t[j] += dd[(size_t)j * g->out_sp + q];
                } else {
                        for (size_t q = 0; q < g->out_sp; q++)
                                for (int j = 0; j < BIAS_CHAINS; j++)
                                        t[j] += dd[(size_t)j * g->out_sp + q];
                }
                memcpy(s + o0, t, (size_t)m * sizeof(double));
        }
}

static void conv_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                          const float *x, const float *y, const float *dy, float *dx, int rows)
{
        struct strata__conv_geom g;
        struct strata__conv_pad pd;
        int p, kk, trans, small_dx, direct, fold, same;
        size_t cols_n;
        double bsum[BIAS_ROW_MAX]; /* fused: the bias gradient's sums (shape: cout fits) */

        (void)y;
        geom_of(l, &g);
        same = cols_are_input(&g);
        direct = direct_path(c, &g, &pd); /* the samples' padded copies, not columns */
        p = (int)g.out_sp;
        kk = (int)g.kk;
        cols_n = g.kk * g.out_sp;
        small_dx = small_path(c) && g.cout <= STRATA__CONV_SMALL_K;
        /* the column gradient [K x P], or [P x K] where that fits the GEMM better */
        trans = !small_dx && strata__conv_transposed(g.kk, g.out_sp, 0);
        /* col2im onto a padded plane: stride 1, zero padding (direct set pd already) */
        fold = g.mode == STRATA_PAD_ZEROS && (direct || strata__conv_pad_of(&g, &pd)) &&
               pd.plane <= STRATA__CONV_PAD_STACK;
        if (c->fused && g.bias)
                memset(bsum, 0, (size_t)g.cout * sizeof(double));
        for (int n = 0; n < rows; n++) {
                /* the direct path's padded copy is the sample's own; columns are unfolded */
                float *cols = same     ? (float *)x + (size_t)n * l->in
                              : direct ? l->aux + (size_t)n * cols_n
                                       : l->aux;
                /* fused: the row's gradient through the modules after it, while hot */
                const float *dyn = c->fused ? c->fused->backward(c->fused, n)
                                            : dy + (size_t)n * l->out;

                if (c->fused && g.bias)
                        bias_row(&g, dyn, bsum);

                if (!same && !direct)
                        unfold(&g, x + (size_t)n * l->in, cols);
                if (direct)
                        strata__conv_direct_wgrad(&g, &pd, dyn, cols, n == 0 && l->grad_fresh,
                                                  l->grad);
                else if (small_path(c) && (size_t)g.cout * g.kk <= SMALL_DW)
                        strata__conv_small_wgrad(dyn, cols, g.cout, kk, p,
                                                 n == 0 && l->grad_fresh, l->grad);
                else
                        strata_gemm(c, 0, 1, g.cout, kk, p, 1.0f, dyn, p, cols, p,
                                    n == 0 && l->grad_fresh ? 0.0f : 1.0f, l->grad, kk);
                if (!dx)
                        continue;
                /* the sample's columns are spent: its column gradient takes their place */
                if (same && !trans) /* or that of its input, which it is (cols_are_input()) */
                        cols = dx + (size_t)n * l->in;
                else if (same)
                        cols = l->aux + (size_t)n * cols_n;
                if (small_dx)
                        strata__conv_small_product(l->param, 1, (size_t)kk, kk, g.cout, dyn, p,
                                                   NULL, cols);
                else if (trans)
                        strata_gemm(c, 1, 0, p, kk, g.cout, 1.0f, dyn, p, l->param, kk, 0.0f,
                                    cols, kk);
                else
                        strata_gemm(c, 1, 0, kk, p, g.cout, 1.0f, l->param, kk, dyn, p, 0.0f,
                                    cols, p);
                if (same && !trans) {
                        onto_zero(cols, (size_t)l->in);
                        continue;
                }
                if (fold) {
                        strata__conv_col2im_padded(&g, &pd, cols, trans,
                                                   dx + (size_t)n * l->in);
                        continue;
                }
                memset(dx + (size_t)n * l->in, 0, (size_t)l->in * sizeof(float));
                strata__conv_col2im(&g, dx + (size_t)n * l->in, cols, trans);
        }
        if (rows == 0 && l->grad_fresh)
                memset(l->grad, 0, (size_t)g.cout * g.kk * sizeof(float));
        if (g.bias && c->fused)
                bias_store(l, bsum, 0, g.cout, l->grad + (size_t)g.cout * g.kk);
        else if (g.bias)
                bias_grad(l, &g, dy, rows, l->grad + (size_t)g.cout * g.kk);
}

static int conv1d_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)in;
        return conv_shape(l, 1, s);
}

static int conv2d_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)in;
        return conv_shape(l, 2, s);
}

static int conv3d_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)in;
        return conv_shape(l, 3, s);
}

const struct strata_module_ops strata_conv1d = {
        .name = "conv1d",
        .shape = conv1d_shape,
        .init = conv_init,
        .forward = conv_forward,
        .backward = conv_backward,
};

const struct strata_module_ops strata_conv2d = {
        .name = "conv2d",
        .shape = conv2d_shape,
        .init = conv_init,
        .forward = conv_forward,
        .backward = conv_backward,
};

const struct strata_module_ops strata_conv3d = {
        .name = "conv3d",
        .shape = conv3d_shape,
        .init = conv_init,
        .forward = conv_forward,
        .backward = conv_backward,
};
