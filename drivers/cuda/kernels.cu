/*
 * The CUDA driver's kernels: one launcher per device op (see kernels.h). Element-wise kernels
 * use grid-stride loops; column reductions give each column a fixed 8-way split over rows and
 * a fixed combine order; whole-vector reductions use a fixed grid of STRATA__CUDA_PARTIALS
 * blocks and a fixed tree. Nothing depends on timing, so every result is reproducible.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "drivers/cuda/kernels.h"
#include "drivers/formulas.h"
#include "kernel/philox.h"

#define THREADS 256
#define COL_W 32 /* columns per block of a column reduction */
#define COL_H 8  /* row lanes per column */

static unsigned grid_for(size_t n)
{
        size_t b = (n + THREADS - 1) / THREADS;

        return (unsigned)(b == 0 ? 1 : b > 65535 ? 65535 : b);
}

#define FOR_EACH(i, n)                                                                         \
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
             i += (size_t)blockDim.x * gridDim.x)

#define STREAM(s) ((cudaStream_t)(s))

/* ---- element-wise ---- */

__global__ void k_fill_rows(float *y, const float *bias, int rows, int cols)
{
        FOR_EACH(i, (size_t)rows * cols)
                y[i] = bias[i % (size_t)cols];
}

__global__ void k_relu(const float *x, float *y, size_t n)
{
        FOR_EACH(i, n)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void k_relu_backward(const float *y, const float *dy, float *dx, size_t n)
{
        FOR_EACH(i, n)
                dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void k_act(enum strata_activation kind, float a, const float *x, float *y, size_t n)
{
        FOR_EACH(i, n)
                y[i] = strata__act(kind, a, x[i]);
}

__global__ void k_act_backward(enum strata_activation kind, float a, const float *x,
                               const float *y, const float *dy, float *dx, size_t n)
{
        FOR_EACH(i, n)
                dx[i] = strata__act_grad(kind, a, x[i], y[i], dy[i]);
}

__global__ void k_dropout(const float *x, float *y, float *mask, size_t n, float p,
                          uint64_t seed, uint64_t stream, uint64_t first)
{
        float keep = 1.0f / (1.0f - p);

        FOR_EACH(i, n) {
                uint64_t k = first + i;
                struct strata__philox4 r = strata__philox(seed, stream, k >> 2);

                mask[i] = strata__u01(r.v[k & 3]) >= p ? keep : 0.0f;
                y[i] = x[i] * mask[i];
        }
}

__global__ void k_fill(float *dst, float v, size_t n)
{
        FOR_EACH(i, n)
                dst[i] = v;
}

__global__ void k_round_half(void *dst, const float *src, int rows, int cols, int ld, int bf16)
{
        FOR_EACH(i, (size_t)rows * cols) {
                float v = src[(i / cols) * (size_t)ld + i % cols];

                if (bf16)
                        ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(v);
                else
                        ((__half *)dst)[i] = __float2half_rn(v);
        }
}

__global__ void k_mul(const float *a, const float *b, float *dst, size_t n)
{
        FOR_EACH(i, n)
                dst[i] = a[i] * b[i];
}

__global__ void k_div(float *dst, const float *src, float d, size_t n)
{
        FOR_EACH(i, n)
                dst[i] = src[i] / d;
}

__global__ void k_scale(float *x, float a, size_t n)
{
        FOR_EACH(i, n)
                x[i] *= a;
}

__global__ void k_clamp(float *x, float v, size_t n)
{
        FOR_EACH(i, n)
                x[i] = x[i] > v ? v : x[i] < -v ? -v : x[i];
}

/* The collectives' reduction: every element summed over the sources in source order. */
struct many {
        float *dst[STRATA__CUDA_MANY];
        const float *src[STRATA__CUDA_MANY];
};
/* Passed by value: one launch takes every device's buffer while they fit a kernel's 4 KiB of
 * parameters, which bounds STRATA_MAX_DEVICES. */
static_assert(sizeof(struct many) + 64 <= 4096, "STRATA_MAX_DEVICES too large for reduce_many");

__global__ void k_reduce_many(struct many m, int nd, int ns, size_t lo, size_t hi, int mean)
{
        FOR_EACH(j, hi - lo) {
                size_t i = lo + j;
                float acc = m.src[0][i];

                for (int r = 1; r < ns; r++)
                        acc += m.src[r][i];
                if (mean)
                        acc = acc / (float)ns;
                for (int d = 0; d < nd; d++)
                        m.dst[d][i] = acc;
        }
}

/* ---- column reductions: block (COL_W, COL_H), column = blockIdx.x * COL_W + threadIdx.x ---- */

__global__ void k_col_sums(const float *x, int rows, int cols, float *out, int acc)
{
        __shared__ float sh[COL_H][COL_W + 1];
        int j = blockIdx.x * COL_W + threadIdx.x;
        float s = 0.0f;

        if (j < cols)
                for (int i = threadIdx.y; i < rows; i += COL_H)
                        s += x[(size_t)i * cols + j];
        sh[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && j < cols) {
                float t = 0.0f;

                for (int k = 0; k < COL_H; k++)
                        t += sh[k][threadIdx.x];
                out[j] = acc ? out[j] + t : t;
        }
}

__global__ void k_col_stats(const float *x, int rows, int cols, const float *center, float *out)
{
        __shared__ double sh[COL_H][COL_W + 1];
        int j = blockIdx.x * COL_W + threadIdx.x;
        double s = 0.0;

        if (j < cols)
                for (int i = threadIdx.y; i < rows; i += COL_H) {
                        double v = x[(size_t)i * cols + j];

                        if (center) {
                                v -= center[j];
                                v *= v;
                        }
                        s += v;
                }
        sh[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && j < cols) {
                double t = 0.0;

                for (int k = 0; k < COL_H; k++)
                        t += sh[k][threadIdx.x];
                out[j] = (float)t;
        }
}

__global__ void k_bn_grad_sums(const float *dy, const float *xhat, float *sums, float *dg,
                               float *db, int rows, int f, int fresh)
{
        __shared__ double a[COL_H][COL_W + 1], b[COL_H][COL_W + 1];
        int j = blockIdx.x * COL_W + threadIdx.x;
        double sdy = 0.0, sdyx = 0.0;

        if (j < f)
                for (int i = threadIdx.y; i < rows; i += COL_H) {
                        size_t k = (size_t)i * f + j;

                        sdy += dy[k];
                        sdyx += (double)dy[k] * xhat[k];
                }
        a[threadIdx.y][threadIdx.x] = sdy;
        b[threadIdx.y][threadIdx.x] = sdyx;
        __syncthreads();
        if (threadIdx.y == 0 && j < f) {
                double s0 = 0.0, s1 = 0.0;

                for (int k = 0; k < COL_H; k++) {
                        s0 += a[k][threadIdx.x];
                        s1 += b[k][threadIdx.x];
                }
                sums[j] = (float)s0;
                sums[f + j] = (float)s1;
                db[j] = (fresh ? 0.0f : db[j]) + sums[j];
                dg[j] = (fresh ? 0.0f : dg[j]) + sums[f + j];
        }
}

/* ---- BatchNorm, per feature or element-wise ---- */

__global__ void k_bn_moments(const float *sq, const float *mean, float *running, float *invstd,
                             int f, int n, float mom, float eps)
{
        FOR_EACH(j, (size_t)f)
                strata__bn_moment(sq, mean, running, invstd, j, f, n, mom, eps);
}

__global__ void k_bn_normalize(const float *x, const float *mean, const float *invstd,
                               const float *g, const float *b, float *xhat, float *y, int rows,
                               int f)
{
        FOR_EACH(k, (size_t)rows * f) {
                size_t j = k % (size_t)f;

                xhat[k] = (x[k] - mean[j]) * invstd[j];
                y[k] = xhat[k] * g[j] + b[j];
        }
}

__global__ void k_bn_eval(const float *x, const float *running, const float *g, const float *b,
                          float eps, float *y, int rows, int f)
{
        FOR_EACH(k, (size_t)rows * f) {
                size_t j = k % (size_t)f;
                float s = 1.0f / sqrtf(running[f + j] + eps);

                y[k] = (x[k] - running[j]) * s * g[j] + b[j];
        }
}

__global__ void k_bn_dx(const float *dy, const float *xhat, const float *sums, const float *g,
                        const float *invstd, float *dx, int rows, int f, int n)
{
        FOR_EACH(k, (size_t)rows * f)
                dx[k] = strata__bn_dx(dy, xhat, sums, g, invstd, k, k % (size_t)f, f, n);
}

/* ---- optimizers (PyTorch semantics, as nn/optim.c) ---- */

__global__ void k_sgd(float *p, const float *g, float *buf, float lr, float wd, float mu,
                      float damp, float first, float nesterov, int momentum, size_t n)
{
        FOR_EACH(i, n) {
                float d = g[i] + wd * p[i];

                if (!momentum) {
                        p[i] -= lr * d;
                } else {
                        float b = first * d + (1.0f - first) * (mu * buf[i] + damp * d);

                        buf[i] = b;
                        p[i] -= lr * (nesterov * (d + mu * b) + (1.0f - nesterov) * b);
                }
        }
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, float b1, float b2,
                        float c2, float eps, float decay, float step, size_t n)
{
        FOR_EACH(i, n) {
                m[i] = b1 * m[i] + (1.0f - b1) * g[i];
                v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
                p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) / c2 + eps);
        }
}

/* ---- whole-vector reductions: fixed grid, fixed tree ---- */

__device__ static void tree_sum(double *sh, int *shn)
{
        for (int o = blockDim.x / 2; o > 0; o >>= 1) {
                if ((int)threadIdx.x < o) {
                        sh[threadIdx.x] += sh[threadIdx.x + o];
                        if (shn)
                                shn[threadIdx.x] += shn[threadIdx.x + o];
                }
                __syncthreads();
        }
}

__global__ void k_softmax_rows(const float *logits, const int32_t *labels, int rows, int cols,
                               float scale, float *dlogits, double *partial, int *partial_n)
{
        __shared__ double sh[THREADS];
        __shared__ int shn[THREADS];
        double loss = 0.0;
        int ok = 0;

        FOR_EACH(r, (size_t)rows)
                loss += strata__softmax_row(logits + r * cols, labels[r], cols, scale,
                                            dlogits ? dlogits + r * cols : NULL, &ok);
        sh[threadIdx.x] = loss;
        shn[threadIdx.x] = ok;
        __syncthreads();
        tree_sum(sh, shn);
        if (threadIdx.x == 0) {
                partial[blockIdx.x] = sh[0];
                partial_n[blockIdx.x] = shn[0];
        }
}

/* Pointwise losses: one thread a row (the row's sum in order), rows folded by a fixed tree. */
__global__ void k_ploss_rows(int kind, float beta, const float *out, const float *t, int rows,
                             int cols, float scale, float *dout, double *partial)
{
        __shared__ double sh[THREADS];
        double loss = 0.0;

        FOR_EACH(r, (size_t)rows) {
                double row = 0.0;
                float g;

                for (int j = 0; j < cols; j++) {
                        size_t k = r * cols + j;

                        row += strata__ploss(kind, beta, out[k], t[k], &g);
                        if (dout)
                                dout[k] = g * scale;
                }
                loss += row;
        }
        sh[threadIdx.x] = loss;
        __syncthreads();
        tree_sum(sh, NULL);
        if (threadIdx.x == 0)
                partial[blockIdx.x] = sh[0];
}

__global__ void k_sumsq_part(const float *x, size_t n, double *partial)
{
        __shared__ double sh[THREADS];
        double s = 0.0;

        FOR_EACH(i, n)
                s += (double)x[i] * x[i];
        sh[threadIdx.x] = s;
        __syncthreads();
        tree_sum(sh, NULL);
        if (threadIdx.x == 0)
                partial[blockIdx.x] = sh[0];
}

/* One block of STRATA__CUDA_PARTIALS threads folds the partials. */
__global__ void k_fold(const double *partial, const int *partial_n, double *total, int *count)
{
        __shared__ double sh[STRATA__CUDA_PARTIALS];
        __shared__ int shn[STRATA__CUDA_PARTIALS];

        sh[threadIdx.x] = partial[threadIdx.x];
        shn[threadIdx.x] = partial_n ? partial_n[threadIdx.x] : 0;
        __syncthreads();
        tree_sum(sh, shn);
        if (threadIdx.x == 0) {
                total[0] = sh[0];
                if (count)
                        count[0] = shn[0];
        }
}

/* ---- launchers ---- */

extern "C" {

void strata__k_fill_rows(void *s, float *y, const float *bias, int rows, int cols)
{
        k_fill_rows<<<grid_for((size_t)rows * cols), THREADS, 0, STREAM(s)>>>(y, bias, rows, cols);
}

void strata__k_relu(void *s, const float *x, float *y, size_t n)
{
        k_relu<<<grid_for(n), THREADS, 0, STREAM(s)>>>(x, y, n);
}

void strata__k_relu_backward(void *s, const float *y, const float *dy, float *dx, size_t n)
{
        k_relu_backward<<<grid_for(n), THREADS, 0, STREAM(s)>>>(y, dy, dx, n);
}

void strata__k_act(void *s, enum strata_activation kind, float a, const float *x, float *y,
                   size_t n)
{
        k_act<<<grid_for(n), THREADS, 0, STREAM(s)>>>(kind, a, x, y, n);
}

void strata__k_act_backward(void *s, enum strata_activation kind, float a, const float *x,
                            const float *y, const float *dy, float *dx, size_t n)
{
        k_act_backward<<<grid_for(n), THREADS, 0, STREAM(s)>>>(kind, a, x, y, dy, dx, n);
}

void strata__k_col_sums(void *s, const float *x, int rows, int cols, float *out, int acc)
{
        dim3 b(COL_W, COL_H);

        k_col_sums<<<(cols + COL_W - 1) / COL_W, b, 0, STREAM(s)>>>(x, rows, cols, out, acc);
}

void strata__k_softmax_xent(void *s, const float *logits, const int32_t *labels, int rows,
                            int cols, float scale, float *dlogits, double *partial,
                            int *partial_n, double *total, int *count)
{
        k_softmax_rows<<<STRATA__CUDA_PARTIALS, THREADS, 0, STREAM(s)>>>(
                logits, labels, rows, cols, scale, dlogits, partial, partial_n);
        k_fold<<<1, STRATA__CUDA_PARTIALS, 0, STREAM(s)>>>(partial, partial_n, total, count);
}

void strata__k_pointwise_loss(void *s, int kind, float beta, const float *out, const float *t,
                              int rows, int cols, float scale, float *dout, double *partial,
                              double *total)
{
        k_ploss_rows<<<STRATA__CUDA_PARTIALS, THREADS, 0, STREAM(s)>>>(
                kind, beta, out, t, rows, cols, scale, dout, partial);
        k_fold<<<1, STRATA__CUDA_PARTIALS, 0, STREAM(s)>>>(partial, NULL, total, NULL);
}

void strata__k_dropout(void *s, const float *x, float *y, float *mask, size_t n, float p,
                       uint64_t seed, uint64_t stream, uint64_t first)
{
        k_dropout<<<grid_for(n), THREADS, 0, STREAM(s)>>>(x, y, mask, n, p, seed, stream, first);
}

void strata__k_fill(void *s, float *dst, float v, size_t n)
{
        k_fill<<<grid_for(n), THREADS, 0, STREAM(s)>>>(dst, v, n);
}

void strata__k_round_half(void *s, void *dst, const float *src, int rows, int cols, int ld,
                          int bf16)
{
        k_round_half<<<grid_for((size_t)rows * cols), THREADS, 0, STREAM(s)>>>(dst, src, rows,
                                                                             cols, ld, bf16);
}

void strata__k_mul(void *s, const float *a, const float *b, float *dst, size_t n)
{
        k_mul<<<grid_for(n), THREADS, 0, STREAM(s)>>>(a, b, dst, n);
}

void strata__k_col_stats(void *s, const float *x, int rows, int cols, const float *center,
                         float *out)
{
        dim3 b(COL_W, COL_H);

        k_col_stats<<<(cols + COL_W - 1) / COL_W, b, 0, STREAM(s)>>>(x, rows, cols, center, out);
}

void strata__k_div(void *s, float *dst, const float *src, float d, size_t n)
{
        k_div<<<grid_for(n), THREADS, 0, STREAM(s)>>>(dst, src, d, n);
}

void strata__k_bn_moments(void *s, const float *sq, const float *mean, float *running,
                          float *invstd, int f, int n, float mom, float eps)
{
        k_bn_moments<<<grid_for((size_t)f), THREADS, 0, STREAM(s)>>>(sq, mean, running, invstd,
                                                                       f, n, mom, eps);
}

void strata__k_bn_normalize(void *s, const float *x, const float *mean, const float *invstd,
                            const float *g, const float *b, float *xhat, float *y, int rows,
                            int f)
{
        k_bn_normalize<<<grid_for((size_t)rows * f), THREADS, 0, STREAM(s)>>>(
                x, mean, invstd, g, b, xhat, y, rows, f);
}

void strata__k_bn_eval(void *s, const float *x, const float *running, const float *g,
                       const float *b, float eps, float *y, int rows, int f)
{
        k_bn_eval<<<grid_for((size_t)rows * f), THREADS, 0, STREAM(s)>>>(x, running, g, b, eps,
                                                                          y, rows, f);
}

void strata__k_bn_grad_sums(void *s, const float *dy, const float *xhat, float *sums, float *dg,
                            float *db, int rows, int f, int fresh)
{
        dim3 b(COL_W, COL_H);

        k_bn_grad_sums<<<(f + COL_W - 1) / COL_W, b, 0, STREAM(s)>>>(dy, xhat, sums, dg, db, rows,
                                                                      f, fresh);
}

void strata__k_bn_dx(void *s, const float *dy, const float *xhat, const float *sums,
                     const float *g, const float *invstd, float *dx, int rows, int f, int n)
{
        k_bn_dx<<<grid_for((size_t)rows * f), THREADS, 0, STREAM(s)>>>(dy, xhat, sums, g, invstd,
                                                                        dx, rows, f, n);
}

void strata__k_sgd(void *s, float *p, const float *g, float *buf, float lr, float wd, float mu,
                   float damp, float first, float nesterov, int momentum, size_t n)
{
        k_sgd<<<grid_for(n), THREADS, 0, STREAM(s)>>>(p, g, buf, lr, wd, mu, damp, first,
                                                       nesterov, momentum, n);
}

void strata__k_adamw(void *s, float *p, const float *g, float *m, float *v, float b1, float b2,
                     float c2, float eps, float decay, float step, size_t n)
{
        k_adamw<<<grid_for(n), THREADS, 0, STREAM(s)>>>(p, g, m, v, b1, b2, c2, eps, decay, step,
                                                         n);
}

void strata__k_sumsq(void *s, const float *x, size_t n, double *partial, double *total)
{
        k_sumsq_part<<<STRATA__CUDA_PARTIALS, THREADS, 0, STREAM(s)>>>(x, n, partial);
        k_fold<<<1, STRATA__CUDA_PARTIALS, 0, STREAM(s)>>>(partial, NULL, total, NULL);
}

void strata__k_scale(void *s, float *x, float a, size_t n)
{
        k_scale<<<grid_for(n), THREADS, 0, STREAM(s)>>>(x, a, n);
}

void strata__k_clamp(void *s, float *x, float v, size_t n)
{
        k_clamp<<<grid_for(n), THREADS, 0, STREAM(s)>>>(x, v, n);
}

void strata__k_reduce_many(void *s, float *const *dst, int nd, const float *const *src, int ns,
                           size_t lo, size_t hi, int mean)
{
        struct many m;

        for (int d = 0; d < nd; d++)
                m.dst[d] = dst[d];
        for (int r = 0; r < ns; r++)
                m.src[r] = src[r];
        if (hi > lo)
                k_reduce_many<<<grid_for(hi - lo), THREADS, 0, STREAM(s)>>>(m, nd, ns, lo, hi,
                                                                          mean);
}

} /* extern "C" */
