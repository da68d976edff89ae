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
 * run transposed where that fits the GEMM's tiles better, with the same bits. Every sum runs
 * in one fixed order: bitwise repeatable.
 *
 * The module declares row_loop: where the runtime runs the modules after it inside its loop
 * (c->fused, decision 0046), it calls their forward after each sample's output and takes
 * each sample's output gradient from their backward, summing the bias gradient row by row in
 * the same chains.
 *
 * The unfolding runs on the host: the module declares host_loops, so a driver whose devices
 * have memory of their own (CUDA) refuses it when the run is planned.
 */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "arch/simd.h"
#include "base/base.h"
#include "nn/conv.h"
#include "nn/init.h"

/*
 * The most output channels whose bias gradient sums a loop over rows keeps on the stack (the
 * rows of a fused call, struct strata_row_hooks, arrive one at a time).
 */
#define BIAS_ROW_MAX 1024

/* One convolution's geometry, as 3-D: dimension 3 - nd + i is spatial dimension i. */
struct geom {
        int nd;                     /* spatial dimensions of the module: 1, 2, 3 */
        int cin, cout;
        int in[3], out[3];          /* extents */
        int k[3], s[3], d[3];       /* kernel, stride, dilation */
        int lo[3], hi[3];           /* padding before and after */
        int mode;                   /* enum strata_padding_mode */
        int bias;                   /* a bias group follows the weight */
        size_t kvol, in_sp, out_sp; /* kernel volume, input and output positions */
        size_t kk;                  /* K = cin * kvol: rows of a sample's columns */
};

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
static int read_window(const struct strata_layer *l, struct geom *g, int i, int j)
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
static int read_padding(const struct strata_layer *l, struct geom *g, int i, int j)
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
static int read_extent(const struct strata_layer *l, struct geom *g, int i, int j)
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
static int read_sizes(const struct strata_layer *l, struct geom *g)
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
static int read_input(const struct strata_layer *l, struct geom *g)
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
static int conv_geom(const struct strata_layer *l, int nd, struct geom *g)
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
        struct geom g;
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
 * Where padded index @p i (from -lo) of an extent @p n reads: the source index, or -1 for a
 * zero. The shape's checks keep circular within one period and reflect within one bounce.
 */
static int source(int i, int n, int mode)
{
        if (i >= 0 && i < n)
                return i;
        switch (mode) {
        case STRATA_PAD_CIRCULAR:
                return i < 0 ? i + n : i - n;
        case STRATA_PAD_REFLECT:
                return i < 0 ? -i : 2 * (n - 1) - i;
        case STRATA_PAD_REPLICATE:
                return i < 0 ? 0 : n - 1;
        default:
                return -1;
        }
}

/* Outputs [p0, p1) of a line read inside the input: p sw + w0 in [0, nw). */
static void inside(int nw, int sw, int w0, int ow, int *p0, int *p1)
{
        int a, b;

        if (sw == 1) { /* no division: the common case, once per line */
                a = w0 >= 0 ? 0 : -w0;
                b = nw - w0 < 0 ? 0 : nw - w0;
        } else {
                a = w0 >= 0 ? 0 : (-w0 + sw - 1) / sw;
                b = nw - 1 - w0 < 0 ? 0 : (nw - 1 - w0) / sw + 1;
        }
        *p0 = a < ow ? a : ow;
        *p1 = b < *p0 ? *p0 : b > ow ? ow : b;
}

/*
 * A row of the columns as the walk sees it: its first position and the stride between its
 * positions (1 in the columns' own [K x P] layout; K in a transposed [P x K] gradient).
 */
struct row {
        float *at;
        int ps;
};

/* Output @p p of a line read past its edge: through source(). */
static void edge(float *xp, struct row r, int p, int nw, int sw, int w0, int mode, int back)
{
        int iw = source(p * sw + w0, nw, mode);
        float *v = r.at + (size_t)p * r.ps;

        if (back) {
                if (iw >= 0)
                        xp[iw] += *v;
        } else {
                *v = iw >= 0 ? xp[iw] : 0.0f;
        }
}

/*
 * One line of a row against input line @p xp (@p nw wide): output p reads index p sw + w0.
 * The positions read inside the line run as a plain strided loop, the edges through source().
 * Gather (@p back 0) or scatter-add (1), in position order.
 */
static void walk_line(float *xp, struct row r, int nw, int sw, int w0, int ow, int mode,
                      int back)
{
        float *in = xp + w0;
        int p0, p1;

        inside(nw, sw, w0, ow, &p0, &p1);
        for (int p = 0; p < p0; p++)
                edge(xp, r, p, nw, sw, w0, mode, back);
        if (back)
                for (int p = p0; p < p1; p++)
                        in[p * sw] += r.at[(size_t)p * r.ps];
        else if (r.ps == 1 && sw == 1)
                memcpy(r.at + p0, in + p0, (size_t)(p1 - p0) * sizeof(float));
        else
                for (int p = p0; p < p1; p++)
                        r.at[(size_t)p * r.ps] = in[p * sw];
        for (int p = p1; p < ow; p++)
                edge(xp, r, p, nw, sw, w0, mode, back);
}

/*
 * One row of the columns (channel c, kernel offset (a, b, e)) against one sample, along W:
 * gather (@p back 0: row[p] = x[src]) or scatter-add (1: x[src] += row[p]) for every output
 * position, in position order. @p xr is the sample's channel plane.
 */
static void walk_row(const struct geom *g, float *xr, struct row r, int a, int b, int e,
                     int back)
{
        int nw = g->in[2], sw = g->s[2], ow = g->out[2];

        for (int od = 0; od < g->out[0]; od++) {
                int id = source(od * g->s[0] - g->lo[0] + a * g->d[0], g->in[0], g->mode);

                for (int oh = 0; oh < g->out[1]; oh++, r.at += (size_t)ow * r.ps) {
                        int ih = source(oh * g->s[1] - g->lo[1] + b * g->d[1], g->in[1], g->mode);
                        int w0 = e * g->d[2] - g->lo[2];
                        float *xp;

                        if (id < 0 || ih < 0) { /* a zero-padded plane or line */
                                for (int p = 0; p < ow && !back; p++)
                                        r.at[(size_t)p * r.ps] = 0.0f;
                                continue;
                        }
                        xp = xr + ((size_t)id * g->in[1] + (size_t)ih) * (size_t)nw;
                        walk_line(xp, r, nw, sw, w0, ow, g->mode, back);
                }
        }
}

/*
 * im2col (@p back 0) or its adjoint col2im (1) of one sample @p x against its columns, in
 * their [K x P] layout, or (@p trans, col2im only) a [P x K] one.
 */
static void walk(const struct geom *g, float *x, float *cols, int back, int trans)
{
        size_t rs = trans ? 1 : g->out_sp, k = 0;

        for (int c = 0; c < g->cin; c++) {
                float *xr = x + (size_t)c * g->in_sp;

                for (int a = 0; a < g->k[0]; a++)
                        for (int b = 0; b < g->k[1]; b++)
                                for (int e = 0; e < g->k[2]; e++, k++)
                                        walk_row(g, xr, (struct row){ cols + k * rs,
                                                                      trans ? (int)g->kk : 1 },
                                                 a, b, e, back);
        }
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
 * Small products run here, not through strata_gemm(): a reduction of a few terms (K = 9 for a
 * one-channel 3 x 3 kernel) pads to the GEMM's blocks of 16 and pays its packing for nothing.
 * Each element is the chain the GEMM's contract computes (drivers/cpu/gemm.c, its scalar set):
 * t = 0, t = fmaf(a, b, t) in reduction order, in chunks of KC terms, the first chunk's t
 * stored (beta 0) or added (beta 1), the next ones added. ISO C with explicit fmaf: every
 * clone and every kernel set gives the same bits as the GEMM. fp32 only (mixed precision
 * rounds the operands first: strata_gemm() keeps those).
 */
#define GEMM_KC 256   /* the GEMM's chunk along k (drivers/cpu/gemm.c KC) */
#define SMALL_K 16    /* reductions up to this run directly (one KB block of the GEMM) */
#define SMALL_DW 64   /* weight gradients of up to this many elements run directly */
#define LANES 32      /* output positions a direct product keeps in flight */

static int small_path(const struct strata_step_ctx *c)
{
        return c->compute == STRATA_F32;
}

/*
 * out[i][q] = sum_r a[i ai + r ar] b[r][q] (+ bias[i]), i < @p ni, q < @p p, r < @p nr
 * (<= SMALL_K, one chunk): the forward product (a = W) and the column gradient (a = W^T).
 */
STRATA_SIMD static void small_product(const float *a, size_t ai, size_t ar, int ni, int nr,
                                      const float *b, int p, const float *bias, float *out)
{
        for (int i = 0; i < ni; i++) {
                const float *ra = a + (size_t)i * ai;
                float *o = out + (size_t)i * p, bi = bias ? bias[i] : 0.0f;
                int q0 = 0;

                for (; q0 + LANES <= p; q0 += LANES) {
                        float t[LANES] = { 0.0f };

                        for (int r = 0; r < nr; r++) {
                                const float *br = b + (size_t)r * p + q0;
                                float w = ra[(size_t)r * ar];

                                for (int j = 0; j < LANES; j++)
                                        t[j] = fmaf(w, br[j], t[j]);
                        }
                        for (int j = 0; j < LANES; j++)
                                o[q0 + j] = bias ? t[j] + bi : t[j];
                }
                for (int q = q0; q < p; q++) {
                        float t = 0.0f;

                        for (int r = 0; r < nr; r++)
                                t = fmaf(ra[(size_t)r * ar], b[(size_t)r * p + q], t);
                        o[q] = bias ? t + bi : t;
                }
        }
}

/*
 * One chunk [q0, q1) of @p G weight-gradient chains side by side: t[j] = sum_q d[q] c_j[q],
 * c_j = cols row k0 + j, in q order, each its own chain (no lanes cross: the same bits on every
 * clone). @p G is a constant per instance, so the chains stay in registers; rows past @p n
 * re-read row k0 and are dropped (a group is padded rather than split into a serial tail).
 */
#define WGRAD_GROUP(G)                                                                           \
        STRATA_SIMD static void wgrad_chunk_##G(const float *d, const float *cols, size_t p,   \
                                               int k0, int n, int q0, int q1, float *t)       \
        {                                                                                      \
                const float *c[G];                                                             \
                float s[G] = { 0.0f };                                                         \
                                                                                               \
                for (int j = 0; j < G; j++)                                                    \
                        c[j] = cols + (size_t)(j < n ? k0 + j : k0) * p;                       \
                for (int q = q0; q < q1; q++)                                                  \
                        for (int j = 0; j < G; j++)                                            \
                                s[j] = fmaf(d[q], c[j][q], s[j]);                              \
                for (int j = 0; j < n; j++)                                                    \
                        t[j] = s[j];                                                           \
        }
WGRAD_GROUP(4)
WGRAD_GROUP(8)
WGRAD_GROUP(12)
WGRAD_GROUP(16)

/*
 * dW[o][k] = (@p fresh ? 0 : dW[o][k]) + sum_q dy[o][q] cols[k][q], the GEMM's chains over q
 * in chunks of GEMM_KC, each chunk's sum added in chunk order; up to 16 rows of K at a time.
 */
static void small_wgrad(const float *dy, const float *cols, int co, int kk, int p, int fresh,
                        float *dw)
{
        float t[16];

        for (int o = 0; o < co; o++) {
                const float *d = dy + (size_t)o * p;
                float *g = dw + (size_t)o * kk;

                for (int q0 = 0; q0 < p; q0 += GEMM_KC) {
                        int q1 = p - q0 < GEMM_KC ? p : q0 + GEMM_KC;

                        for (int k0 = 0; k0 < kk; k0 += 16) {
                                int n = kk - k0 < 16 ? kk - k0 : 16;

                                if (n <= 4)
                                        wgrad_chunk_4(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else if (n <= 8)
                                        wgrad_chunk_8(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else if (n <= 12)
                                        wgrad_chunk_12(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else
                                        wgrad_chunk_16(d, cols, (size_t)p, k0, n, q0, q1, t);
                                for (int j = 0; j < n; j++)
                                        g[k0 + j] = q0 == 0 && fresh ? t[j] : g[k0 + j] + t[j];
                        }
                }
        }
}

/*
 * ---- The direct path: a small product with stride 1 reads a padded copy of the input ----
 *
 * With stride 1, output position (od, oh, ow) and kernel offset (a, b, e) read the padded
 * input at (od + a d, oh + b d, ow + e d): a shifted view. So instead of unfolding K columns
 * of P positions, the forward writes each sample's input once more with its padding (through
 * source(), so every mode) into the sample's saved values, and the forward product and the
 * weight gradient read the K shifted views of it: what the columns held, element for element,
 * in the same order of every chain (the small products' and the GEMM's), so the same bits.
 * It runs where the products run directly (fp32, K <= SMALL_K, a weight gradient of at most
 * SMALL_DW elements) and the padded copy fits the columns' place; the column gradient (a
 * layer that is not the first) overwrites a sample's copy once its weight gradient is done.
 */
/*
 * GCC's unroll-and-jam (-O3) fuses pairs of the forward's r loop into one loop over q that it
 * then leaves scalar: off for that function (the chains are the same either way).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define NO_JAM
#endif

struct pad {
        int e[3];     /* padded extents */
        size_t plane; /* values of one padded channel */
};

/* A stride of 1 everywhere: the padded extents. */
static int pad_of(const struct geom *g, struct pad *pd)
{
        pd->plane = 1;
        for (int j = 0; j < 3; j++) {
                if (g->s[j] != 1)
                        return 0;
                pd->e[j] = g->out[j] + g->d[j] * (g->k[j] - 1);
                pd->plane *= (size_t)pd->e[j];
        }
        return 1;
}

static int direct_path(const struct strata_step_ctx *c, const struct geom *g, struct pad *pd)
{
        if (!small_path(c) || g->kk > SMALL_K || (size_t)g->cout * g->kk > SMALL_DW)
                return 0;
        return pad_of(g, pd) && pd->plane * (size_t)g->cin <= g->kk * g->out_sp;
}

/* Sample @p x with its padding into @p xp (cin padded planes), through source(). */
static void pad_sample(const struct geom *g, const struct pad *pd, const float *x, float *xp)
{
        int nw = g->in[2], lo = g->lo[2], e2 = pd->e[2];
        int w0 = lo < e2 ? lo : e2, w1 = lo + nw < e2 ? lo + nw : e2;

        for (int c = 0; c < g->cin; c++)
                for (int a = 0; a < pd->e[0]; a++) {
                        int id = source(a - g->lo[0], g->in[0], g->mode);

                        for (int b = 0; b < pd->e[1]; b++, xp += e2) {
                                int ih = source(b - g->lo[1], g->in[1], g->mode);
                                const float *xr;

                                if (id < 0 || ih < 0) {
                                        memset(xp, 0, (size_t)e2 * sizeof(float));
                                        continue;
                                }
                                xr = x + (((size_t)c * g->in[0] + id) * g->in[1] + ih) * nw;
                                for (int w = 0; w < w0; w++) {
                                        int iw = source(w - lo, nw, g->mode);

                                        xp[w] = iw >= 0 ? xr[iw] : 0.0f;
                                }
                                memcpy(xp + w0, xr + (w0 - lo), (size_t)(w1 - w0) * sizeof(float));
                                for (int w = w1; w < e2; w++) {
                                        int iw = source(w - lo, nw, g->mode);

                                        xp[w] = iw >= 0 ? xr[iw] : 0.0f;
                                }
                        }
                }
}

/* Offset in the padded copy of row r = (c, a, b, e) of the columns (the weight's order). */
static size_t tap_offset(const struct geom *g, const struct pad *pd, size_t r)
{
        size_t e = r % (size_t)g->k[2], b = r / g->k[2] % (size_t)g->k[1];
        size_t a = r / ((size_t)g->k[2] * g->k[1]) % (size_t)g->k[0], c = r / g->kvol;

        return c * pd->plane + ((a * g->d[0] * pd->e[1]) + b * g->d[1]) * pd->e[2] +
               e * g->d[2];
}

/* Offset in the padded copy of the first position of output line (od, oh). */
static size_t line_offset(const struct pad *pd, int od, int oh)
{
        return ((size_t)od * pd->e[1] + (size_t)oh) * pd->e[2];
}

/*
 * The columns of a stride-1 convolution from a padded copy of one channel at a time on the
 * stack (at most PAD_STACK values): each column row's line is a plain copy of a padded line,
 * instead of walk()'s per-line edge handling and copy calls. The same values (source()).
 */
#define PAD_STACK 4096

#define LINE_BLOCK 8 /* floats a line copy moves at once */

/*
 * A line of @p n values in blocks of LINE_BLOCK: up to LINE_BLOCK - 1 values past the line are
 * read from @p src and written past @p dst, where the next line's copy writes them again
 * (a call per short line, 14 values in the CNN, cost more than the copy).
 */
static inline void copy_line_over(float *restrict dst, const float *restrict src, int n)
{
        for (int q = 0; q < n; q += LINE_BLOCK)
                memcpy(dst + q, src + q, LINE_BLOCK * sizeof(float));
}

STRATA_SIMD static void im2col_padded(const struct geom *g, const struct pad *pd, const float *x,
                                      float *cols)
{
        float buf[PAD_STACK + LINE_BLOCK]; /* a line's copy reads past the plane's end */
        struct geom one = *g;
        int ow = g->out[2];
        float *end = cols + g->kk * g->out_sp; /* the last line is copied exactly */

        one.cin = 1;
        memset(buf + pd->plane, 0, LINE_BLOCK * sizeof(float)); /* read, never kept */
        for (int c = 0; c < g->cin; c++) {
                pad_sample(&one, pd, x + (size_t)c * g->in_sp, buf);
                for (size_t r = 0; r < g->kvol; r++) {
                        const float *tap = buf + tap_offset(g, pd, r);
                        float *dst = cols + ((size_t)c * g->kvol + r) * g->out_sp;

                        for (int od = 0; od < g->out[0]; od++)
                                for (int oh = 0; oh < g->out[1]; oh++, dst += ow) {
                                        const float *src = tap + line_offset(pd, od, oh);

                                        if (dst + ow + LINE_BLOCK <= end)
                                                copy_line_over(dst, src, ow);
                                        else
                                                memcpy(dst, src, (size_t)ow * sizeof(float));
                                }
                }
        }
}

/*
 * col2im of a stride-1 convolution with zero padding (the CNN's) onto a padded copy of one
 * channel at a time on the stack: each row of the columns ([K x P], or [P x K] with @p trans)
 * is added line by line onto the plane's shifted lines, with no edge to handle (what lands in
 * the padding is dropped, as zero padding drops it), then the plane's inside is the channel's
 * gradient. Each input position takes its terms in walk()'s order, onto 0 (the rows in order,
 * a position at most once a row): the same bits.
 */
STRATA_SIMD static void col2im_padded(const struct geom *g, const struct pad *pd,
                                      const float *cols, int trans, float *dx)
{
        float buf[PAD_STACK];
        size_t rs = trans ? 1 : g->out_sp, ps = trans ? g->kk : 1;
        int ow = g->out[2], nw = g->in[2];

        for (int c = 0; c < g->cin; c++) {
                memset(buf, 0, pd->plane * sizeof(float));
                for (size_t r = 0; r < g->kvol; r++) {
                        float *tap = buf + tap_offset(g, pd, r);
                        const float *src = cols + ((size_t)c * g->kvol + r) * rs;

                        for (int od = 0; od < g->out[0]; od++)
                                for (int oh = 0; oh < g->out[1]; oh++, src += (size_t)ow * ps) {
                                        float *dst = tap + line_offset(pd, od, oh);

                                        for (int q = 0; q < ow; q++)
                                                dst[q] += src[(size_t)q * ps];
                                }
                }
                for (int id = 0; id < g->in[0]; id++)
                        for (int ih = 0; ih < g->in[1]; ih++, dx += nw)
                                memcpy(dx, buf + line_offset(pd, id + g->lo[0], ih + g->lo[1]) +
                                                   g->lo[2],
                                       (size_t)nw * sizeof(float));
        }
}

/*
 * small_product()'s forward on the views: y[o][q] = sum_r W[o][r] xp[tap_r + q's] (+ b), each
 * output's chain t = 0, t = fmaf(W[o][r], x, t) in r order kept in y itself, a line at a time.
 */
NO_JAM STRATA_SIMD static void direct_forward(const struct geom *g, const struct pad *pd,
                                       const float *restrict w, const float *restrict bias,
                                       const float *restrict xp, float *restrict y)
{
        size_t off[SMALL_K];
        int kk = (int)g->kk, ow = g->out[2];

        for (int r = 0; r < kk; r++)
                off[r] = tap_offset(g, pd, (size_t)r);
        for (int o = 0; o < g->cout; o++) {
                const float *ra = w + (size_t)o * kk;

                for (int od = 0; od < g->out[0]; od++)
                        for (int oh = 0; oh < g->out[1]; oh++, y += ow) {
                                const float *xl = xp + line_offset(pd, od, oh);

                                for (int q = 0; q < ow; q++)
                                        y[q] = 0.0f;
                                for (int r = 0; r < kk; r++) {
                                        const float *br = xl + off[r];
                                        float wr = ra[r];

                                        for (int q = 0; q < ow; q++)
                                                y[q] = fmaf(wr, br[q], y[q]);
                                }
                                for (int q = 0; q < ow && bias; q++)
                                        y[q] = y[q] + bias[o];
                        }
        }
}

/*
 * wgrad_chunk_G's chains on the views: positions [q0, q1) a line at a time, each chain
 * t[j] = sum_q d[q] xp[off[j] + q's] in q order; chains past @p n re-read the first.
 */
#define DIRECT_WGRAD(G)                                                                          \
        STRATA_SIMD static void direct_wgrad_##G(const struct geom *g, const struct pad *pd,   \
                                                const float *d, const float *xp,               \
                                                const size_t *off, int n, int q0, int q1,      \
                                                float *t)                                      \
        {                                                                                      \
                const float *c[G];                                                             \
                float s[G] = { 0.0f };                                                         \
                int ow = g->out[2], q = q0;                                                    \
                                                                                               \
                while (q < q1) {                                                               \
                        int line = q / ow, w = q % ow, m = ow - w < q1 - q ? ow - w : q1 - q;  \
                        const float *xl = xp + line_offset(pd, line / g->out[1],               \
                                                           line % g->out[1]) + w;              \
                        const float *dq = d + q;                                               \
                                                                                               \
                        for (int j = 0; j < G; j++)                                            \
                                c[j] = xl + off[j < n ? j : 0];                                \
                        for (int i = 0; i < m; i++)                                            \
                                for (int j = 0; j < G; j++)                                    \
                                        s[j] = fmaf(dq[i], c[j][i], s[j]);                     \
                        q += m;                                                                \
                }                                                                              \
                for (int j = 0; j < n; j++)                                                    \
                        t[j] = s[j];                                                           \
        }
DIRECT_WGRAD(4)
DIRECT_WGRAD(8)
DIRECT_WGRAD(9)
DIRECT_WGRAD(12)
DIRECT_WGRAD(16)

/* small_wgrad() on the views of sample copy @p xp: the same chains, chunks and order. */
static void direct_wgrad(const struct geom *g, const struct pad *pd, const float *dy,
                         const float *xp, int fresh, float *dw)
{
        int p = (int)g->out_sp, kk = (int)g->kk;
        size_t off[SMALL_K];
        float t[16];

        for (int r = 0; r < kk; r++)
                off[r] = tap_offset(g, pd, (size_t)r);
        for (int o = 0; o < g->cout; o++) {
                const float *d = dy + (size_t)o * p;
                float *gw = dw + (size_t)o * kk;

                for (int q0 = 0; q0 < p; q0 += GEMM_KC) {
                        int q1 = p - q0 < GEMM_KC ? p : q0 + GEMM_KC;

                        for (int k0 = 0; k0 < kk; k0 += 16) {
                                int n = kk - k0 < 16 ? kk - k0 : 16;
                                const size_t *ok = off + k0;

                                if (n <= 4)
                                        direct_wgrad_4(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 8)
                                        direct_wgrad_8(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 9)
                                        direct_wgrad_9(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 12)
                                        direct_wgrad_12(g, pd, d, xp, ok, n, q0, q1, t);
                                else
                                        direct_wgrad_16(g, pd, d, xp, ok, n, q0, q1, t);
                                for (int j = 0; j < n; j++)
                                        gw[k0 + j] = q0 == 0 && fresh ? t[j] : gw[k0 + j] + t[j];
                        }
                }
        }
}

/* The geometry the shape accepted (forward and backward never see a refused one). */
static void geom_of(const struct strata_layer *l, struct geom *g)
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
                           const struct geom *g, const float *cols, float *yn, float *t)
{
        const float *bias = l->param + (size_t)g->cout * g->kk;
        int p = (int)g->out_sp, kk = (int)g->kk, co = g->cout;

        if (small_path(c) && kk <= SMALL_K) {
                small_product(l->param, (size_t)kk, 1, co, kk, cols, p, g->bias ? bias : NULL,
                              yn);
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
 * Sample after sample: unfold, then multiply. The transposed product's scratch is the next
 * sample's output, not yet written; the last sample multiplies the other way round.
 */
static void conv_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                         const float *x, float *y, int rows)
{
        struct geom g;
        struct pad pd;
        size_t cols_n;
        int trans, padded;

        geom_of(l, &g);
        cols_n = g.kk * g.out_sp;
        if (direct_path(c, &g, &pd)) {
                for (int n = 0; n < rows; n++) {
                        float *xp = l->aux + (size_t)n * cols_n;

                        pad_sample(&g, &pd, x + (size_t)n * l->in, xp);
                        direct_forward(&g, &pd, l->param,
                                       g.bias ? l->param + (size_t)g.cout * g.kk : NULL, xp,
                                       y + (size_t)n * l->out);
                        if (c->fused) /* the modules after it, while the row is in cache */
                                c->fused->forward(c->fused, n);
                }
                return;
        }
        trans = strata__conv_transposed((size_t)g.cout, g.out_sp, 1);
        padded = pad_of(&g, &pd) && pd.plane <= PAD_STACK;
        for (int n = 0; n < rows; n++) {
                float *cols = l->aux + (size_t)n * cols_n, *yn = y + (size_t)n * l->out;

                if (padded)
                        im2col_padded(&g, &pd, x + (size_t)n * l->in, cols);
                else
                        walk(&g, (float *)(x + (size_t)n * l->in), cols, 0, 0);
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

static void bias_grad(const struct strata_layer *l, const struct geom *g, const float *dy,
                      int rows, float *db)
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
STRATA_SIMD static void bias_row(const struct geom *g, const float *d, double *s)
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
        struct geom g;
        struct pad pd;
        int p, kk, trans, small_dx, direct, fold;
        size_t cols_n;
        double bsum[BIAS_ROW_MAX]; /* fused: the bias gradient's sums (shape: cout fits) */

        (void)x;
        (void)y;
        geom_of(l, &g);
        direct = direct_path(c, &g, &pd); /* the samples' padded copies, not columns */
        p = (int)g.out_sp;
        kk = (int)g.kk;
        cols_n = g.kk * g.out_sp;
        small_dx = small_path(c) && g.cout <= SMALL_K;
        /* the column gradient [K x P], or [P x K] where that fits the GEMM better */
        trans = !small_dx && strata__conv_transposed(g.kk, g.out_sp, 0);
        /* col2im onto a padded plane: stride 1, zero padding (direct set pd already) */
        fold = g.mode == STRATA_PAD_ZEROS && (direct || pad_of(&g, &pd)) && pd.plane <= PAD_STACK;
        if (c->fused && g.bias)
                memset(bsum, 0, (size_t)g.cout * sizeof(double));
        for (int n = 0; n < rows; n++) {
                float *cols = l->aux + (size_t)n * cols_n;
                /* fused: the row's gradient through the modules after it, while hot */
                const float *dyn = c->fused ? c->fused->backward(c->fused, n)
                                            : dy + (size_t)n * l->out;

                if (c->fused && g.bias)
                        bias_row(&g, dyn, bsum);

                if (direct)
                        direct_wgrad(&g, &pd, dyn, cols, n == 0 && l->grad_fresh, l->grad);
                else if (small_path(c) && (size_t)g.cout * g.kk <= SMALL_DW)
                        small_wgrad(dyn, cols, g.cout, kk, p, n == 0 && l->grad_fresh,
                                    l->grad);
                else
                        strata_gemm(c, 0, 1, g.cout, kk, p, 1.0f, dyn, p, cols, p,
                                    n == 0 && l->grad_fresh ? 0.0f : 1.0f, l->grad, kk);
                if (!dx)
                        continue;
                /* the sample's columns are spent: its column gradient takes their place */
                if (small_dx)
                        small_product(l->param, 1, (size_t)kk, kk, g.cout, dyn, p, NULL, cols);
                else if (trans)
                        strata_gemm(c, 1, 0, p, kk, g.cout, 1.0f, dyn, p, l->param, kk, 0.0f,
                                    cols, kk);
                else
                        strata_gemm(c, 1, 0, kk, p, g.cout, 1.0f, l->param, kk, dyn, p, 0.0f,
                                    cols, p);
                if (fold) {
                        col2im_padded(&g, &pd, cols, trans, dx + (size_t)n * l->in);
                        continue;
                }
                memset(dx + (size_t)n * l->in, 0, (size_t)l->in * sizeof(float));
                walk(&g, dx + (size_t)n * l->in, cols, 1, trans);
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
