/*
 * The CPU device driver: GEMM from libxsmm's kernels under Strata's blocking (gemm.c), one
 * table per kernel set; the rest hand-written in loops the compiler vectorises (STRATA_SIMD
 * clones, ISO C without contraction: the same bits on every clone).
 */
#include <math.h>
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "kernel/philox.h"
#include "arch/bits.h"
#include "arch/half.h"
#include "arch/reduce.h"
#include "arch/simd.h"
#include "base/base.h"
#include "drivers/formulas.h"
#include "drivers/drivers.h"
#include "drivers/cpu/erff.h"
#include "drivers/cpu/gemm.h"

static int cpu_probe(const char **why)
{
        if (why)
                *why = NULL;
        return 1;
}

/* One GEMM entry per kernel set (the kernel table's gemm has no context to carry it). */
#define CPU_GEMM(fn, set)                                                                          \
        static void fn(int ta, int tb, int m, int n, int k, float alpha, const float *a,           \
                       int lda, const float *b, int ldb, float beta, float *c, int ldc)            \
        {                                                                                          \
                strata__sgemm(set, &(struct strata__sgemm){ ta, tb, m, n, k, alpha, beta, a, lda,  \
                                                            b, ldb, c, ldc });                     \
        }                                                                                          \
        static void fn##_pb(int m, int n, int k, const float *a, int lda, const float *b,         \
                            int ldb, const float *pb, float beta, float *c, int ldc)               \
        {                                                                                          \
                strata__sgemm_pb(set, &(struct strata__sgemm){ 0, 1, m, n, k, 1.0f, beta, a, lda,  \
                                                               b, ldb, c, ldc }, pb);              \
        }                                                                                          \
        static int fn##_tree(const struct strata_gemm_tree *g)                                     \
        {                                                                                          \
                return strata__sgemm_tree(set, g);                                                 \
        }                                                                                          \
        static int fn##_ld(int ld)                                                                 \
        {                                                                                          \
                return strata__sgemm_direct_prepare(set, ld);                                      \
        }                                                                                          \
        static int fn##_prepare(int devices)                                                       \
        {                                                                                          \
                (void)devices;                                                                     \
                return strata__sgemm_prepare(set);                                                 \
        }
CPU_GEMM(gemm_native, STRATA_KERNELS_NATIVE)
CPU_GEMM(gemm_portable, STRATA_KERNELS_PORTABLE)
CPU_GEMM(gemm_avx512, STRATA_KERNELS_AVX512)
CPU_GEMM(gemm_scalar, STRATA_KERNELS_SCALAR)

/*
 * Every row of y (rows x cols, contiguous) = bias: the first row, then the rows filled so far
 * copied after themselves, doubling: log2(rows) copies, not one a row (a Linear's bias before
 * its GEMM; a row of 1 or 64 floats costs a memcpy's start more than its bytes).
 */
static void cpu_fill_rows(float *y, const float *bias, int rows, int cols)
{
        size_t row = (size_t)cols * sizeof(float);

        if (rows <= 0 || cols <= 0)
                return;
        memcpy(y, bias, row);
        for (size_t done = 1; done < (size_t)rows; done *= 2) {
                size_t n = (size_t)rows - done < done ? (size_t)rows - done : done;

                memcpy(y + done * (size_t)cols, y, n * row);
        }
}

STRATA_SIMD static void cpu_relu(const float *x, float *y, size_t n)
{
        for (size_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/*
 * @p d where @p keep, else +0, through a mask on the bits: the select `keep ? d : 0.0f` became a
 * masked load of d in GCC's AVX2 clones (vmaskmovps, many micro-ops on the first Zen generation:
 * 80% of the ReLU backward's samples). The same bits.
 */
static inline __attribute__((always_inline)) float kept(int keep, float d)
{
        return strata__from_bits_f(strata__bits_f(d) & -(uint32_t)keep);
}

STRATA_SIMD static void cpu_relu_backward(const float *y, const float *dy, float *dx, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = kept(y[i] > 0.0f, dy[i]);
}

/* bf16 activations: chunks widened or narrowed through a stack buffer around the f32 ReLU. */
#define RELU_CHUNK 512

static void cpu_relu_io(const void *x, enum strata_dtype xt, void *y, enum strata_dtype yt,
                        size_t n)
{
        float tmp[RELU_CHUNK];

        if (xt == STRATA_F32 && yt == STRATA_F32) {
                cpu_relu(x, y, n);
                return;
        }
        for (size_t i = 0; i < n; i += RELU_CHUNK) {
                size_t c = n - i < RELU_CHUNK ? n - i : RELU_CHUNK;
                float *f = yt == STRATA_F32 ? (float *)y + i : tmp;

                if (xt == STRATA_BF16)
                        strata__from_bf16(f, (const uint16_t *)x + i, c);
                cpu_relu(xt == STRATA_BF16 ? f : (const float *)x + i, f, c);
                if (yt == STRATA_BF16)
                        strata__to_bf16((uint16_t *)y + i, f, c);
        }
}

STRATA_SIMD static void cpu_relu_backward_bf16(const uint16_t *y, const float *dy, float *dx,
                                               size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = kept(strata__bf16_to_f32(y[i]) > 0.0f, dy[i]);
}

/*
 * Activations other than ReLU: one loop per kind with the kind a constant in it (act_n and
 * act_grad_n are inlined into each case), so every body is a straight formula. LeakyReLU's
 * loops and the Tanh and Sigmoid backward (from y) vectorise; the exact GELU runs erff.c's
 * vector replica of libm's erff and expf (libm's bits, decision 0088); the rest call libm's
 * tanhf or expf once per element, scalar, so an element's bits do not depend on its position
 * in the call (a device's slice of a batch computes the whole batch's values).
 */
static inline __attribute__((always_inline)) void act_n(enum strata_activation k, float a,
                                                        const float *x, float *y, size_t n)
{
        for (size_t i = 0; i < n; i++)
                y[i] = strata__act(k, a, x[i]);
}

static inline __attribute__((always_inline)) void act_grad_n(enum strata_activation k, float a,
                                                             const float *x, const float *y,
                                                             const float *dy, float *dx,
                                                             size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = strata__act_grad(k, a, x[i], y[i], dy[i]);
}

STRATA_SIMD static void cpu_act(enum strata_activation k, float a, const float *x, float *y,
                                size_t n)
{
        switch (k) {
        case STRATA_ACT_TANH: act_n(STRATA_ACT_TANH, a, x, y, n); break;
        case STRATA_ACT_SIGMOID: act_n(STRATA_ACT_SIGMOID, a, x, y, n); break;
        case STRATA_ACT_GELU: strata__cpu_gelu(x, y, n); break;
        case STRATA_ACT_GELU_TANH: act_n(STRATA_ACT_GELU_TANH, a, x, y, n); break;
        case STRATA_ACT_SILU: act_n(STRATA_ACT_SILU, a, x, y, n); break;
        default: act_n(STRATA_ACT_LEAKY_RELU, a, x, y, n); break;
        }
}

STRATA_SIMD static void cpu_act_backward(enum strata_activation k, float a, const float *x,
                                         const float *y, const float *dy, float *dx, size_t n)
{
        switch (k) {
        case STRATA_ACT_TANH: act_grad_n(STRATA_ACT_TANH, a, x, y, dy, dx, n); break;
        case STRATA_ACT_SIGMOID: act_grad_n(STRATA_ACT_SIGMOID, a, x, y, dy, dx, n); break;
        case STRATA_ACT_GELU: strata__cpu_gelu_backward(x, dy, dx, n); break;
        case STRATA_ACT_GELU_TANH: act_grad_n(STRATA_ACT_GELU_TANH, a, x, y, dy, dx, n); break;
        case STRATA_ACT_SILU: act_grad_n(STRATA_ACT_SILU, a, x, y, dy, dx, n); break;
        default: act_grad_n(STRATA_ACT_LEAKY_RELU, a, x, y, dy, dx, n); break;
        }
}

STRATA_SIMD static void cpu_col_sums(const float *x, int rows, int cols, float *s, int acc)
{
        if (!acc)
                memset(s, 0, (size_t)cols * sizeof(float));
        for (int i = 0; i < rows; i++) {
                const float *r = x + (size_t)i * cols;

                for (int j = 0; j < cols; j++)
                        s[j] += r[j];
        }
}

static double cpu_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
                               float scale, float *dlogits, int *correct)
{
        double loss = 0.0;
        int ok = 0;

        for (int i = 0; i < rows; i++)
                loss += strata__softmax_row(logits + (size_t)i * cols, labels[i], cols, scale,
                                            dlogits ? dlogits + (size_t)i * cols : NULL, &ok);
        if (correct)
                *correct = ok;
        return loss;
}

/* An element's term of lane_row()'s loss: MSE's d d, or L1's |d| (in double). */
static inline double lane_term(int l1, float e)
{
        return l1 ? (double)fabsf(e) : (double)(e * e);
}

/* Its gradient: MSE's 2 d scale, or L1's sign(d) scale (0 for a zero or a NaN d, as
 * strata__ploss). */
static inline float lane_grad(int l1, float e, float scale)
{
        return l1 ? (float)((e > 0.0f) - (e < 0.0f)) * scale : 2.0f * e * scale;
}

/*
 * One row of MSE (@p l1 0) or L1 (@p l1 1): cpu_pointwise_loss()'s arithmetic (d = o - t, the
 * loss term into lane j & 7 in double, the gradient), written eight elements at a time so
 * that the lanes vectorise: the generic loop's per-element switch and j & 7 indexing kept
 * them scalar. Inlined with a constant @p l1, each loss gets its own loops (the same machine
 * code as when each had its own function). The runtime takes every step's sum of absolute
 * errors through L1 (the MAE a regression step reports), gradient-free.
 */
static inline void lane_row(int l1, const float *o, const float *y, int cols, float scale,
                            float *d, double lane[8])
{
        double a[8];
        int j0 = 0;

        memcpy(a, lane, sizeof(a));
        for (; d && j0 + 8 <= cols; j0 += 8)
                for (int l = 0; l < 8; l++) {
                        float e = o[j0 + l] - y[j0 + l];

                        a[l] += lane_term(l1, e);
                        d[j0 + l] = lane_grad(l1, e, scale);
                }
        for (; !d && j0 + 8 <= cols; j0 += 8)
                for (int l = 0; l < 8; l++)
                        a[l] += lane_term(l1, o[j0 + l] - y[j0 + l]);
        for (int j = j0; j < cols; j++) {
                float e = o[j] - y[j];

                a[j & 7] += lane_term(l1, e);
                if (d)
                        d[j] = lane_grad(l1, e, scale);
        }
        memcpy(lane, a, sizeof(a));
}

/*
 * MSE or L1 over rows narrower than the eight lanes (a critic's or a regression's one output):
 * each lane holds at most one term, and the empty lanes add +0 to a row's sum that is never
 * -0 (its terms are squares or magnitudes), which changes no bit, a NaN's included; so the
 * row's sum is its terms added in order, as below, without the lanes' array (whose copies and
 * sums per row made this loss 3% of the cart-pole's TD3 time).
 */
static inline double narrow_rows(int l1, const float *out, const float *t, int rows, int cols,
                                 float scale, float *dout)
{
        double loss = 0.0;

        for (int i = 0; i < rows; i++) {
                const float *o = out + (size_t)i * cols, *y = t + (size_t)i * cols;
                double row = 0.0;

                for (int j = 0; j < cols; j++) {
                        float e = o[j] - y[j];

                        row += lane_term(l1, e);
                        if (dout)
                                dout[(size_t)i * cols + j] = lane_grad(l1, e, scale);
                }
                loss += row;
        }
        return loss;
}

/*
 * Pointwise losses: per row, the gradient elementwise and the loss summed in eight fixed
 * lanes (vectorisable, the same bits on every ISA), the lanes added in order; rows in order
 * (MSE and L1 over rows narrower than the lanes: narrow_rows(), the same bits).
 */
STRATA_SIMD static double cpu_pointwise_loss(enum strata_pointwise_loss kind, float beta,
                                             const float *out, const float *t, int rows,
                                             int cols, float scale, float *dout)
{
        double loss = 0.0;

        if (cols < 8 && (kind == STRATA_PLOSS_MSE || kind == STRATA_PLOSS_L1))
                return kind == STRATA_PLOSS_L1 ? narrow_rows(1, out, t, rows, cols, scale, dout)
                                               : narrow_rows(0, out, t, rows, cols, scale, dout);
        for (int i = 0; i < rows; i++) {
                const float *o = out + (size_t)i * cols, *y = t + (size_t)i * cols;
                float *d = dout ? dout + (size_t)i * cols : NULL;
                double lane[8] = { 0.0 }, row = 0.0;
                float g;

                if (kind == STRATA_PLOSS_MSE)
                        lane_row(0, o, y, cols, scale, d, lane);
                else if (kind == STRATA_PLOSS_L1)
                        lane_row(1, o, y, cols, scale, d, lane);
                for (int j = 0; j < cols && kind != STRATA_PLOSS_MSE && kind != STRATA_PLOSS_L1;
                     j++) {
                        lane[j & 7] += strata__ploss((int)kind, beta, o[j], y[j], &g);
                        if (d)
                                d[j] = g * scale;
                }
                for (int l = 0; l < 8; l++)
                        row += lane[l];
                loss += row;
        }
        return loss;
}

static void cpu_dropout(const float *x, float *y, float *mask, size_t n, float p, uint64_t seed,
                        uint64_t stream, uint64_t first)
{
        float keep = 1.0f / (1.0f - p);

        for (size_t i = 0; i < n; i++) {
                uint64_t k = first + i;
                struct strata__philox4 r = strata__philox(seed, stream, k >> 2);

                mask[i] = strata__u01(r.v[k & 3]) >= p ? keep : 0.0f;
                y[i] = x[i] * mask[i];
        }
}

static void cpu_copy(float *dst, const float *src, size_t n)
{
        memmove(dst, src, n * sizeof(float));
}

STRATA_SIMD static void cpu_fill(float *dst, float value, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dst[i] = value;
}

STRATA_SIMD static void cpu_mul(const float *a, const float *b, float *dst, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dst[i] = a[i] * b[i];
}

/* ---- BatchNorm: per-feature loops over rows, sums in double ---- */

static void cpu_col_stats(const float *x, int rows, int cols, const float *center, float *out)
{
        for (int j = 0; j < cols; j++) {
                double s = 0.0;

                if (center)
                        for (int i = 0; i < rows; i++) {
                                double d = (double)x[(size_t)i * cols + j] - center[j];

                                s += d * d;
                        }
                else
                        for (int i = 0; i < rows; i++)
                                s += x[(size_t)i * cols + j];
                out[j] = (float)s;
        }
}

static void cpu_div(float *dst, const float *src, float d, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dst[i] = src[i] / d;
}

static void cpu_bn_moments(const float *sq, const float *mean, float *running, float *invstd,
                           int f, int n, float mom, float eps)
{
        for (int j = 0; j < f; j++)
                strata__bn_moment(sq, mean, running, invstd, (size_t)j, f, n, mom, eps);
}

static void cpu_bn_normalize(const float *x, const float *mean, const float *invstd,
                             const float *g, const float *b, float *xhat, float *y, int rows,
                             int f)
{
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++) {
                        size_t k = (size_t)i * f + j;

                        xhat[k] = (x[k] - mean[j]) * invstd[j];
                        y[k] = xhat[k] * g[j] + b[j];
                }
}

static void cpu_bn_eval(const float *x, const float *running, const float *g, const float *b,
                        float eps, float *y, int rows, int f)
{
        for (int i = 0; i < rows; i++)
                for (int j = 0; j < f; j++) {
                        float s = 1.0f / sqrtf(running[f + j] + eps);
                        size_t k = (size_t)i * f + j;

                        y[k] = (x[k] - running[j]) * s * g[j] + b[j];
                }
}

static void cpu_bn_grad_sums(const float *dy, const float *xhat, float *sums, float *dg,
                             float *db, int rows, int f, int fresh)
{
        for (int j = 0; j < f; j++) {
                double sdy = 0.0, sdyx = 0.0;

                for (int i = 0; i < rows; i++) {
                        sdy += dy[(size_t)i * f + j];
                        sdyx += (double)dy[(size_t)i * f + j] * xhat[(size_t)i * f + j];
                }
                sums[j] = (float)sdy;
                sums[f + j] = (float)sdyx;
                db[j] = (fresh ? 0.0f : db[j]) + sums[j];
                dg[j] = (fresh ? 0.0f : dg[j]) + sums[f + j];
        }
}

static void cpu_bn_dx(const float *dy, const float *xhat, const float *sums, const float *g,
                      const float *invstd, float *dx, int rows, int f, int n)
{
        for (int j = 0; j < f; j++)
                for (int i = 0; i < rows; i++) {
                        size_t k = (size_t)i * f + j;

                        dx[k] = strata__bn_dx(dy, xhat, sums, g, invstd, k, (size_t)j, f, n);
                }
}

/* ---- optimizer and clipping ---- */

/* One branch-free loop per rule, so each vectorises. */
STRATA_SIMD static void sgd_plain(float *restrict p, const float *restrict g, float lr, float wd,
                                  size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] -= lr * (g[i] + wd * p[i]);
}

/*
 * first = 1 on step 1 (buf := d, as PyTorch), else 0; nesterov is 0 or 1. Inlined with both
 * constant (every step after the first without Nesterov), the compiler folds only what is
 * exact (1 - 0 is 1, x * 1 is x; x * 0 stays, for a NaN or a signed zero): the same bits.
 */
__attribute__((always_inline)) static inline void
sgd_momentum_n(float *restrict p, const float *restrict g, float *restrict buf, float lr,
               float wd, float mu, float damp, float first, float nesterov, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                float d = g[i] + wd * p[i];
                float b = first * d + (1.0f - first) * (mu * buf[i] + damp * d);

                buf[i] = b;
                p[i] -= lr * (nesterov * (d + mu * b) + (1.0f - nesterov) * b);
        }
}

STRATA_SIMD static void sgd_momentum(float *restrict p, const float *restrict g,
                                     float *restrict buf, float lr, float wd, float mu, float damp,
                                     float first, float nesterov, size_t n)
{
        if (first == 0.0f && nesterov == 0.0f)
                sgd_momentum_n(p, g, buf, lr, wd, mu, damp, 0.0f, 0.0f, n);
        else
                sgd_momentum_n(p, g, buf, lr, wd, mu, damp, first, nesterov, n);
}

STRATA_SIMD static void adamw(float *restrict p, const float *restrict g, float *restrict m,
                              float *restrict v, float b1, float b2, float c2, float eps,
                              float decay, float step, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                m[i] = b1 * m[i] + (1.0f - b1) * g[i];
                v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
                p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) / c2 + eps);
        }
}

/* Every rule is elementwise: a range is bitwise those elements of the whole update. */
static void cpu_update_range(const struct strata_update *u, float *p, float *g, float *state,
                             size_t n, size_t lo, size_t hi)
{
        if (hi > n)
                hi = n;
        if (lo >= hi)
                return;
        switch (u->rule) {
        case STRATA_UPDATE_ADAMW:
                adamw(p + lo, g + lo, state + lo, state + n + lo, u->beta1, u->beta2, u->c2,
                      u->eps, u->decay, u->step, hi - lo);
                break;
        case STRATA_UPDATE_SGD_MOMENTUM:
                sgd_momentum(p + lo, g + lo, state + lo, u->lr, u->weight_decay, u->momentum,
                             u->damp, u->first, u->nesterov, hi - lo);
                break;
        default:
                sgd_plain(p + lo, g + lo, u->lr, u->weight_decay, hi - lo);
        }
}

static void cpu_update(const struct strata_update *u, float *p, float *g, float *state, size_t n)
{
        cpu_update_range(u, p, g, state, n, 0, n);
}

/* One running sum in element order: a sum continued from s has the whole vector's bits. */
static double cpu_sumsq_from(double s, const float *x, size_t n)
{
        for (size_t i = 0; i < n; i++)
                s += (double)x[i] * x[i];
        return s;
}

static double cpu_sumsq(const float *x, size_t n)
{
        return cpu_sumsq_from(0.0, x, n);
}

STRATA_SIMD static void cpu_scale(float *x, float s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x[i] *= s;
}

STRATA_SIMD static void cpu_clamp(float *x, float v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x[i] = x[i] > v ? v : x[i] < -v ? -v : x[i];
}

/* The host's memory is the device's: copies are memory copies, views are the memory itself. */
static void cpu_memcpy(void *dst, const void *src, size_t bytes)
{
        memcpy(dst, src, bytes);
}

static const void *cpu_view(void *stage, const void *src, size_t bytes)
{
        (void)stage, (void)bytes;
        return src;
}

/* A device's thread takes its GEMM packing buffer (the plan's) before the arenas seal. */
static void cpu_warm_up(void *scratch)
{
        strata__sgemm_use(scratch);
}

static size_t cpu_scratch_bytes(void)
{
        return strata__sgemm_scratch_bytes();
}

/* dst += src with the communicator's reduction of two buffers (arch/reduce.c), its bits. */
static void cpu_add(float *dst, const float *src, size_t n)
{
        void *d[1] = { dst };
        const void *s[2] = { dst, src };

        strata__reduce_many(STRATA_F32, STRATA__SUM, d, 1, s, 2, 0, n, 0);
}

/* The kernels, the same but for the GEMMs' set. */
#define CPU_KERNELS(var, gemm_fn)                                                                  \
        static const struct strata_kernel_ops var = {                                              \
                .gemm = gemm_fn,                                                                   \
                .fill_rows = cpu_fill_rows,                                                        \
                .relu = cpu_relu,                                                                  \
                .relu_backward = cpu_relu_backward,                                                \
                .act = cpu_act,                                                                    \
                .act_backward = cpu_act_backward,                                                  \
                .col_sums = cpu_col_sums,                                                          \
                .softmax_xent = cpu_softmax_xent,                                                  \
                .dropout = cpu_dropout,                                                            \
                .copy = cpu_copy,                                                                  \
                .fill = cpu_fill,                                                                  \
                .mul = cpu_mul,                                                                    \
                .col_stats = cpu_col_stats,                                                        \
                .div = cpu_div,                                                                    \
                .bn_moments = cpu_bn_moments,                                                      \
                .bn_normalize = cpu_bn_normalize,                                                  \
                .bn_eval = cpu_bn_eval,                                                            \
                .bn_grad_sums = cpu_bn_grad_sums,                                                  \
                .bn_dx = cpu_bn_dx,                                                                \
                .update = cpu_update,                                                              \
                .update_range = cpu_update_range,                                                  \
                .sumsq = cpu_sumsq,                                                                \
                .sumsq_from = cpu_sumsq_from,                                                      \
                .scale = cpu_scale,                                                                \
                .clamp = cpu_clamp,                                                                \
                .nonfinite = strata__nonfinite,                                                    \
                .add = cpu_add,                                                                    \
                .gemm_lp = strata__cpu_gemm_lp,                                                    \
                .gemm_lp_bytes = strata__cpu_gemm_lp_bytes,                                        \
                .prepare_lp = strata__cpu_prepare_lp,                                              \
                .gemm_lp_io = strata__cpu_gemm_lp_io,                                              \
                .relu_io = cpu_relu_io,                                                            \
                .relu_backward_bf16 = cpu_relu_backward_bf16,                                      \
                .pointwise_loss = cpu_pointwise_loss,                                              \
                .gemm_pack_floats = strata__sgemm_pack_b_floats,                                   \
                .gemm_pack = strata__sgemm_pack_b,                                                 \
                .gemm_pb = gemm_fn##_pb,                                                           \
                .gemm_ld = gemm_fn##_ld,                                                           \
                .gemm_tree = gemm_fn##_tree,                                                       \
        }
CPU_KERNELS(kernels_native, gemm_native);
CPU_KERNELS(kernels_portable, gemm_portable);
CPU_KERNELS(kernels_avx512, gemm_avx512);
CPU_KERNELS(kernels_scalar, gemm_scalar);

/* scratch: the packing buffer's size per device (the scalar set packs nothing: NULL). */
#define CPU_DRIVER(var, kern, prep, scratch)                                                       \
        const struct strata_device_ops var = {                                                     \
                .name = "cpu",                                                                     \
                .probe = cpu_probe,                                                                \
                .kernels = &kern,                                                                  \
                .prepare = prep,                                                                   \
                .scratch_bytes = scratch,                                                          \
                .warm_up = cpu_warm_up,                                                            \
                .forget = strata__sgemm_forget,                                                    \
                .to_device = cpu_memcpy,                                                           \
                .to_host = cpu_memcpy,                                                             \
                .device_view = cpu_view,                                                           \
                .host_view = cpu_view,                                                             \
        }
CPU_DRIVER(strata__cpu_driver, kernels_native, gemm_native_prepare, cpu_scratch_bytes);
static CPU_DRIVER(cpu_portable, kernels_portable, gemm_portable_prepare, cpu_scratch_bytes);
static CPU_DRIVER(cpu_avx512, kernels_avx512, gemm_avx512_prepare, cpu_scratch_bytes);
static CPU_DRIVER(cpu_scalar, kernels_scalar, gemm_scalar_prepare, NULL);

int strata__cpu_driver_for(enum strata_kernels set, const struct strata_device_ops **out)
{
        static const struct strata_device_ops *const by_set[STRATA_KERNELS_COUNT] = {
                [STRATA_KERNELS_NATIVE] = &strata__cpu_driver,
                [STRATA_KERNELS_PORTABLE] = &cpu_portable,
                [STRATA_KERNELS_AVX512] = &cpu_avx512,
                [STRATA_KERNELS_SCALAR] = &cpu_scalar,
        };

        if ((unsigned)set >= STRATA_KERNELS_COUNT)
                return strata__fail(STRATA_EINVAL, "device.kernels %d is not a kernel set "
                                    "(0 native, 1 portable, 2 avx512, 3 scalar)", (int)set);
        if (!strata__sgemm_name(set))
                return strata__sgemm_prepare(set);
        *out = by_set[set];
        return STRATA_OK;
}

/*
 * The f32 set's name, with the bf16 GEMMs' path appended for bf16 compute: bf16:avx512_bf16
 * (vdpbf16ps) or bf16:fma (bf16 operands in f32, the f32 GEMM's fused multiply-add chains).
 */
const char *strata_kernel_set(enum strata_kernels kernels, enum strata_dtype compute)
{
        static const char *const paths[] = { "bf16:amx", "bf16:avx512_bf16", "bf16:fma" };
        static const char *const with_bf16[][4] = { /* f32 set, then with each of paths[] */
                { "libxsmm:avx512", "libxsmm:avx512 bf16:amx", "libxsmm:avx512 bf16:avx512_bf16",
                  "libxsmm:avx512 bf16:fma" },
                { "libxsmm:avx2", "libxsmm:avx2 bf16:amx", "libxsmm:avx2 bf16:avx512_bf16",
                  "libxsmm:avx2 bf16:fma" },
                { "strata:scalar", "strata:scalar bf16:amx", "strata:scalar bf16:avx512_bf16",
                  "strata:scalar bf16:fma" },
        };
        const char *f32 = (unsigned)kernels < STRATA_KERNELS_COUNT ? strata__sgemm_name(kernels)
                                                                   : NULL;
        size_t p = 0;

        if (!f32 || compute != STRATA_BF16)
                return f32;
        while (p + 1 < sizeof(paths) / sizeof(paths[0]) && strcmp(strata__cpu_lp_name(), paths[p]))
                p++;
        for (size_t i = 0; i < sizeof(with_bf16) / sizeof(with_bf16[0]); i++)
                if (!strcmp(with_bf16[i][0], f32))
                        return with_bf16[i][1 + p];
        return NULL;
}

int strata__cpu_is(const struct strata_device_ops *dev)
{
        return dev && dev->warm_up == cpu_warm_up;
}
