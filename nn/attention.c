/*
 * The attention family (PyTorch semantics): multi-head self-attention over a sequence, a
 * learned positional embedding, and tokens, which turns a (C, spatial...) sample into a
 * sequence (a patch embedding after a strided convolution).
 *
 * A sequence sample (L, E) is PyTorch's batch_first (N, L, E) row as it stands: a layout of L
 * channels over one extent E (struct strata_dims { L, 1, { E } }, input(L,E) in the model
 * line), so token t's E features are consecutive. Decision 0060.
 *
 * Multi-head self-attention, nn.MultiheadAttention(E, H, batch_first=True)(x, x, x) with
 * D = E / H, per sample:
 *   qkv = x in_proj_weight^T + in_proj_bias            [L, 3E]: Q | K | V
 *   P_h = softmax(Q_h K_h^T / sqrt(D)) per head h       [L, L], causal: keys after the query 0
 *   o[:, hD:(h+1)D] = P_h V_h                           [L, E]
 *   y = o out_proj.weight^T + out_proj.bias             [L, E]
 * Every product is a strata_gemm() (the device's kernels); a softmax row is reduced in index
 * order in double (its maximum, then its sum), so a row's bits depend on its values only.
 * Each sample keeps qkv, o and the H probability matrices for the backward, and a scratch of
 * L * L + L * D floats, all in its aux_per_row: nothing else is allocated, and a chunk of rows
 * (invariant mode) is a call like any other. The backward runs sample by sample in order and
 * writes the gradients over the values it has consumed (o becomes dO, P_h dS_h, qkv dqkv), so
 * it is called once per forward, as the runtime does.
 */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "arch/expd.h"
#include "arch/simd.h"
#include "base/base.h"
#include "nn/init.h"

/* A sequence module's geometry: L tokens of E features, H heads of D. */
struct seq {
        int l, e, h, d;
};

static void seq_of(const struct strata_layer *l, struct seq *q)
{
        q->l = l->in_dims.channels;
        q->e = l->in_dims.ndim == 1 ? l->in_dims.size[0] : 0;
        q->h = l->desc->heads > 0 ? l->desc->heads : 1;
        q->d = q->e / q->h;
}

/* The floats one sample keeps: qkv 3LE, o LE, P HLL, then the scratch dP LL and dQ LD. */
static size_t mha_per_row(const struct seq *q)
{
        size_t l = (size_t)q->l, e = (size_t)q->e;

        return 4 * l * e + (size_t)q->h * l * l + l * l + l * (size_t)q->d;
}

static int mha_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_dims *d = &l->in_dims;
        const struct strata_module *m = l->desc;
        struct seq q;
        size_t e, w;

        if (d->ndim != 1 || d->channels <= 0 || d->size[0] <= 0 ||
            (long long)d->channels * d->size[0] != in)
                return strata__fail(STRATA_EINVAL, "mha (module %d): input of %d features laid "
                                    "out as %d channels over %d dimensions; it reads a "
                                    "sequence (L, E): input(L,E), L channels over one extent",
                                    l->index, in, d->channels, d->ndim);
        if (m->heads <= 0 || d->size[0] % m->heads)
                return strata__fail(STRATA_EINVAL, "mha (module %d): heads %d does not divide "
                                    "the embedding %d", l->index, m->heads, d->size[0]);
        if (m->causal != 0 && m->causal != 1)
                return strata__fail(STRATA_EINVAL, "mha (module %d): causal %d (0 or 1)",
                                    l->index, m->causal);
        seq_of(l, &q);
        e = (size_t)q.e;
        if ((size_t)q.l * q.l > ((size_t)1 << 30) || mha_per_row(&q) > ((size_t)1 << 34))
                return strata__fail(STRATA_EOVERFLOW, "mha (module %d): %d tokens of %d "
                                    "features too large", l->index, q.l, q.e);
        w = 3 * e * e;
        *s = (struct strata_module_shape){
                .out = in, .params = w + 3 * e + e * e + e, .aux_per_row = mha_per_row(&q),
                .ngroups = 4, .host_loops = 1,
                .groups = { { "in_proj_weight", STRATA_F32, w, STRATA_ROLE_WEIGHT, 2,
                              { 3 * e, e } },
                            { "in_proj_bias", STRATA_F32, 3 * e, STRATA_ROLE_BIAS, 1,
                              { 3 * e, 1 } },
                            { "out_proj.weight", STRATA_F32, e * e, STRATA_ROLE_WEIGHT, 2,
                              { e, e } },
                            { "out_proj.bias", STRATA_F32, e, STRATA_ROLE_BIAS, 1, { e, 1 } } },
                /* the largest product's operands: the input projection's weight and a sample */
                .lp_fixed = w + 3 * e * (size_t)q.l + (size_t)q.l * q.l,
                .out_dims = *d };
        return STRATA_OK;
}

/*
 * PyTorch's init: in_proj_weight xavier_uniform (bound sqrt(6 / (E + 3E))), out_proj.weight
 * Linear's kaiming bound 1 / sqrt(E), both biases 0.
 */
static void mha_init(struct strata_layer *l, uint64_t seed)
{
        size_t e = (size_t)l->in_dims.size[0];
        float *p = l->param;

        strata__uniform_fill(p, 3 * e * e, sqrtf(6.0f / (float)(4 * e)), seed,
                             STRATA__INIT_STREAM(l->index, 0));
        memset(p + 3 * e * e, 0, 3 * e * sizeof(float));
        strata__uniform_fill(p + 3 * e * e + 3 * e, e * e, 1.0f / sqrtf((float)e), seed,
                             STRATA__INIT_STREAM(l->index, 1));
        memset(p + 4 * e * e + 3 * e, 0, e * sizeof(float));
}

/* The parameters by name. */
struct mha_params {
        const float *w_in, *b_in, *w_out, *b_out;
};

static void params_of(const float *p, const struct seq *q, struct mha_params *m)
{
        size_t e = (size_t)q->e;

        m->w_in = p;
        m->b_in = p + 3 * e * e;
        m->w_out = m->b_in + 3 * e;
        m->b_out = m->w_out + e * e;
}

/* One sample's saved values and scratch in its aux. */
struct mha_row {
        float *qkv, *o, *p, *dp, *dq;
};

static void row_of(const struct strata_layer *l, const struct seq *q, int r, struct mha_row *a)
{
        size_t le = (size_t)q->l * q->e, ll = (size_t)q->l * q->l;

        a->qkv = l->aux + (size_t)r * mha_per_row(q);
        a->o = a->qkv + 3 * le;
        a->p = a->o + le;
        a->dp = a->p + (size_t)q->h * ll;
        a->dq = a->dp + ll;
}

/* y [n, cols] = bias in every row, then += x w^T: a Linear over n rows. */
static void project(const struct strata_step_ctx *c, const float *x, const float *w,
                    const float *b, int n, int cols, int k, float *y)
{
        for (int i = 0; i < n; i++)
                memcpy(y + (size_t)i * cols, b, (size_t)cols * sizeof(float));
        strata_gemm(c, 0, 1, n, cols, k, 1.0f, x, k, w, k, 1.0f, y, cols);
}

/* Exponentials of a softmax row kept on the stack, so that each is computed once. */
#define SOFTMAX_HELD 256
/* The running maxima a row's maximum is taken in (vectors), then combined. */
#define SOFTMAX_LANES 8

/*
 * Row i of scores @p s (n of them) into probabilities, the masked ones 0, in index order:
 * the maximum (of floats: the same value as in double; in SOFTMAX_LANES running maxima, a
 * NaN at 0 kept by each and any other skipped, as the one loop did, and which of +0 and -0
 * wins changes no exp(s - max)), the sum of exp(s - max) in double, then each
 * exp(s - max) / sum. The first SOFTMAX_HELD exponentials are computed together
 * (strata__expd(): libm's bits, in vectors where glibc 2.36's exp can be replayed) and kept
 * from the sum to the division (exp is a function of its argument: the same bits as
 * computing it twice); a longer row computes the rest with libm, twice.
 */
STRATA_SIMD static void softmax_row(float *s, int n, int valid)
{
        double e[SOFTMAX_HELD], mx, sum = 0.0;
        int held = valid < SOFTMAX_HELD ? valid : SOFTMAX_HELD, at = 1;
        float lane[SOFTMAX_LANES], m;

        for (int k = 0; k < SOFTMAX_LANES; k++)
                lane[k] = s[0];
        for (; at + SOFTMAX_LANES <= valid; at += SOFTMAX_LANES)
                for (int k = 0; k < SOFTMAX_LANES; k++)
                        lane[k] = s[at + k] > lane[k] ? s[at + k] : lane[k];
        m = lane[0];
        for (int k = 1; k < SOFTMAX_LANES; k++)
                m = lane[k] > m ? lane[k] : m;
        for (; at < valid; at++)
                m = s[at] > m ? s[at] : m;
        mx = m;
        for (int j = 0; j < held; j++)
                e[j] = (double)s[j] - mx;
        strata__expd(e, (size_t)held);
        for (int j = 0; j < held; j++)
                sum += e[j];
        for (int j = held; j < valid; j++)
                sum += exp((double)s[j] - mx);
        for (int j = 0; j < held; j++)
                s[j] = (float)(e[j] / sum);
        for (int j = held; j < valid; j++)
                s[j] = (float)(exp((double)s[j] - mx) / sum);
        for (int j = valid; j < n; j++)
                s[j] = 0.0f;
}

static void mha_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        struct seq q;
        struct mha_params w;
        struct mha_row a;
        int e3;
        float scale;

        seq_of(l, &q);
        params_of(l->param, &q, &w);
        e3 = 3 * q.e;
        scale = (float)(1.0 / sqrt((double)q.d));
        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * l->in;

                row_of(l, &q, r, &a);
                project(c, xr, w.w_in, w.b_in, q.l, e3, q.e, a.qkv);
                for (int h = 0; h < q.h; h++) {
                        const float *qh = a.qkv + (size_t)h * q.d;
                        float *ph = a.p + (size_t)h * q.l * q.l;

                        strata_gemm(c, 0, 1, q.l, q.l, q.d, scale, qh, e3, qh + q.e, e3, 0.0f,
                                    ph, q.l);
                        for (int i = 0; i < q.l; i++)
                                softmax_row(ph + (size_t)i * q.l, q.l,
                                            l->desc->causal ? i + 1 : q.l);
                        strata_gemm(c, 0, 0, q.l, q.d, q.l, 1.0f, ph, q.l, qh + 2 * q.e, e3,
                                    0.0f, a.o + (size_t)h * q.d, q.e);
                }
                project(c, a.o, w.w_out, w.b_out, q.l, q.e, q.e, y + (size_t)r * l->out);
        }
}

/*
 * dS = P * (dP - rowsum(P * dP)) * scale over one head's L x L, into P: each row's sum in
 * index order, in double, its products (exact in double) first computed in vectors, up to
 * SOFTMAX_HELD of them; the products after the sum are each their own, in vectors.
 */
STRATA_SIMD static void softmax_grad(float *p, const float *dp, int n, float scale)
{
        double pd[SOFTMAX_HELD];
        int held = n < SOFTMAX_HELD ? n : SOFTMAX_HELD;

        for (int i = 0; i < n; i++) {
                float *pr = p + (size_t)i * n;
                const float *dr = dp + (size_t)i * n;
                double dot = 0.0;

                for (int j = 0; j < held; j++)
                        pd[j] = (double)pr[j] * dr[j];
                for (int j = 0; j < held; j++)
                        dot += pd[j];
                for (int j = held; j < n; j++)
                        dot += (double)pr[j] * dr[j];
                for (int j = 0; j < n; j++)
                        pr[j] = (float)(pr[j] * ((double)dr[j] - dot) * scale);
        }
}

/* One head's backward: its dQ, dK, dV over its Q, K, V columns of qkv (dO in a.o). */
static void head_backward(const struct strata_step_ctx *c, const struct seq *q,
                          const struct mha_row *a, int h, float scale)
{
        int e3 = 3 * q->e;
        float *qh = a->qkv + (size_t)h * q->d, *kh = qh + q->e, *vh = qh + 2 * q->e;
        float *ph = a->p + (size_t)h * q->l * q->l;
        const float *doh = a->o + (size_t)h * q->d;

        strata_gemm(c, 0, 1, q->l, q->l, q->d, 1.0f, doh, q->e, vh, e3, 0.0f, a->dp, q->l);
        strata_gemm(c, 1, 0, q->l, q->d, q->l, 1.0f, ph, q->l, doh, q->e, 0.0f, vh, e3);
        softmax_grad(ph, a->dp, q->l, scale);
        strata_gemm(c, 0, 0, q->l, q->d, q->l, 1.0f, ph, q->l, kh, e3, 0.0f, a->dq, q->d);
        strata_gemm(c, 1, 0, q->l, q->d, q->l, 1.0f, ph, q->l, qh, e3, 0.0f, kh, e3);
        for (int i = 0; i < q->l; i++)
                memcpy(qh + (size_t)i * e3, a->dq + (size_t)i * q->d,
                       (size_t)q->d * sizeof(float));
}

/* Columns of a bias's gradient summed at once, in double on the stack. */
#define BIAS_BLOCK 64

/*
 * A bias's gradient: the sum over rows and tokens of @p cols columns, in double, each
 * column's in row then token order; the columns BIAS_BLOCK at a time, each token's values
 * added across them (the same order per column as one column at a time, in vectors).
 */
STRATA_SIMD static void bias_grad(const struct strata_layer *l, const struct seq *q,
                                  const float *dy, int qkv, int rows, float *db)
{
        int cols = qkv ? 3 * q->e : q->e;

        for (int j0 = 0; j0 < cols; j0 += BIAS_BLOCK) {
                int nj = cols - j0 < BIAS_BLOCK ? cols - j0 : BIAS_BLOCK;
                double s[BIAS_BLOCK] = { 0 };

                for (int r = 0; r < rows; r++) {
                        struct mha_row a;
                        const float *g;

                        row_of(l, q, r, &a);
                        g = (qkv ? a.qkv : dy + (size_t)r * l->in) + j0;
                        for (int t = 0; t < q->l; t++)
                                for (int j = 0; j < nj; j++)
                                        s[j] += g[(size_t)t * cols + j];
                }
                for (int j = 0; j < nj; j++)
                        db[j0 + j] = (float)(l->grad_fresh ? s[j] : db[j0 + j] + s[j]);
        }
}

static void mha_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                         const float *x, const float *y, const float *dy, float *dx, int rows)
{
        struct seq q;
        struct mha_params w;
        struct mha_row a;
        float *g_in, *g_bin, *g_out, *g_bout, scale;
        int e3;

        (void)y;
        seq_of(l, &q);
        params_of(l->param, &q, &w);
        e3 = 3 * q.e;
        scale = (float)(1.0 / sqrt((double)q.d));
        g_in = l->grad;
        g_bin = g_in + (size_t)e3 * q.e;
        g_out = g_bin + e3;
        g_bout = g_out + (size_t)q.e * q.e;
        bias_grad(l, &q, dy, 0, rows, g_bout);
        for (int r = 0; r < rows; r++) {
                const float *dyr = dy + (size_t)r * l->in, *xr = x + (size_t)r * l->in;
                float beta = r == 0 && l->grad_fresh ? 0.0f : 1.0f;

                row_of(l, &q, r, &a);
                strata_gemm(c, 1, 0, q.e, q.e, q.l, 1.0f, dyr, q.e, a.o, q.e, beta, g_out, q.e);
                strata_gemm(c, 0, 0, q.l, q.e, q.e, 1.0f, dyr, q.e, w.w_out, q.e, 0.0f, a.o,
                            q.e);
                for (int h = 0; h < q.h; h++)
                        head_backward(c, &q, &a, h, scale);
                strata_gemm(c, 1, 0, e3, q.e, q.l, 1.0f, a.qkv, e3, xr, q.e, beta, g_in, q.e);
                if (dx)
                        strata_gemm(c, 0, 0, q.l, q.e, e3, 1.0f, a.qkv, e3, w.w_in, q.e, 0.0f,
                                    dx + (size_t)r * l->in, q.e);
        }
        bias_grad(l, &q, dy, 1, rows, g_bin);
}

const struct strata_module_ops strata_mha = {
        .name = "mha",
        .shape = mha_shape,
        .init = mha_init,
        .forward = mha_forward,
        .backward = mha_backward,
};

/* ---- Positional embedding: y = x + weight, weight shaped as the sample ---- */

static int pos_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_dims *d = &l->in_dims;
        struct strata_param_group w = { "weight", STRATA_F32, (size_t)in, STRATA_ROLE_WEIGHT, 1,
                                        { (size_t)in, 1 } };

        if (d->ndim > 0) { /* (L, E) for a sequence, (C, spatial...) for any other layout */
                w.ndim = 1 + d->ndim;
                w.shape[0] = (size_t)d->channels;
                for (int i = 0; i < d->ndim; i++)
                        w.shape[1 + i] = (size_t)d->size[i];
        }
        *s = (struct strata_module_shape){ .out = in, .params = (size_t)in, .ngroups = 1,
                                           .groups = { w }, .host_loops = 1 };
        return STRATA_OK;
}

static void pos_init(struct strata_layer *l, uint64_t seed)
{
        (void)seed;
        memset(l->param, 0, (size_t)l->in * sizeof(float));
}

static void pos_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        (void)c;
        for (int r = 0; r < rows; r++)
                for (int j = 0; j < l->in; j++)
                        y[(size_t)r * l->in + j] = x[(size_t)r * l->in + j] + l->param[j];
}

/*
 * dweight sums dy over rows in row order, in double, BIAS_BLOCK features at a time (each
 * row's added across them: each feature's order as one at a time); dx = dy.
 */
STRATA_SIMD static void pos_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                                     const float *x, const float *y, const float *dy, float *dx,
                                     int rows)
{
        (void)c;
        (void)x;
        (void)y;
        for (int j0 = 0; j0 < l->in; j0 += BIAS_BLOCK) {
                int nj = l->in - j0 < BIAS_BLOCK ? l->in - j0 : BIAS_BLOCK;
                double s[BIAS_BLOCK] = { 0 };

                for (int r = 0; r < rows; r++)
                        for (int j = 0; j < nj; j++)
                                s[j] += dy[(size_t)r * l->in + j0 + j];
                for (int j = 0; j < nj; j++)
                        l->grad[j0 + j] = (float)(l->grad_fresh ? s[j] : l->grad[j0 + j] + s[j]);
        }
        if (dx)
                memcpy(dx, dy, (size_t)rows * l->in * sizeof(float));
}

const struct strata_module_ops strata_posembed = {
        .name = "posembed",
        .shape = pos_shape,
        .init = pos_init,
        .forward = pos_forward,
        .backward = pos_backward,
};

/*
 * ---- Tokens: a (C, spatial...) sample as a sequence (L, E) = (the spatial extents' product, C)
 *
 * PyTorch's x.flatten(2).transpose(1, 2): the step of a ViT's patch embedding after its
 * strided convolution, so conv2d(E,P,stride=P) tokens is PatchEmbed. On a sequence (L, E) it
 * gives (E, L), so a second tokens undoes the first (a kernel-1 conv1d between them is a
 * Linear applied to each token).
 */

static int tok_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_dims *d = &l->in_dims;
        int sp = d->channels > 0 ? in / d->channels : 0;

        if (d->ndim < 1 || d->channels <= 0 || (long long)sp * d->channels != in)
                return strata__fail(STRATA_EINVAL, "tokens (module %d): input of %d features "
                                    "laid out as %d channels over %d dimensions; it reads "
                                    "(C, spatial...)", l->index, in, d->channels, d->ndim);
        *s = (struct strata_module_shape){ .out = in, .host_loops = 1,
                                           .out_dims = { sp, 1, { d->channels } } };
        return STRATA_OK;
}

/*
 * @p rows samples [a, b] into [b, a], in tiles of TOK_TILE x TOK_TILE values: a tile's lines
 * are read and written whole while they are in cache (a copy: any order gives the same bits).
 */
#define TOK_TILE 16

static void transpose_rows(const float *x, float *y, int rows, int a, int b)
{
        size_t n = (size_t)a * b;

        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * n;
                float *yr = y + (size_t)r * n;

                for (int i0 = 0; i0 < a; i0 += TOK_TILE)
                        for (int j0 = 0; j0 < b; j0 += TOK_TILE) {
                                int i1 = a - i0 < TOK_TILE ? a : i0 + TOK_TILE;
                                int j1 = b - j0 < TOK_TILE ? b : j0 + TOK_TILE;

                                for (int j = j0; j < j1; j++)
                                        for (int i = i0; i < i1; i++)
                                                yr[(size_t)j * a + i] = xr[(size_t)i * b + j];
                        }
        }
}

static void tok_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        (void)c;
        transpose_rows(x, y, rows, l->in_dims.channels, l->in / l->in_dims.channels);
}

static void tok_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         const float *y, const float *dy, float *dx, int rows)
{
        (void)c;
        (void)x;
        (void)y;
        if (dx)
                transpose_rows(dy, dx, rows, l->in / l->in_dims.channels, l->in_dims.channels);
}

const struct strata_module_ops strata_tokens = {
        .name = "tokens",
        .shape = tok_shape,
        .forward = tok_forward,
        .backward = tok_backward,
};
