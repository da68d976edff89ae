/*
 * The CPU device driver: GEMM from OpenBLAS (serial build, so no BLAS thread pool runs beside
 * the pinned workers), the rest hand-written in loops the compiler vectorises.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "strata/device.h"
#include "strata/nn.h"
#include "kernel/philox.h"
#include "arch/simd.h"
#include "drivers/formulas.h"
#include "drivers/drivers.h"

static int cpu_probe(const char **why)
{
        if (why)
                *why = NULL;
        return 1;
}

static void cpu_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_fill_rows(float *y, const float *bias, int rows, int cols)
{
        for (int i = 0; i < rows; i++)
                memcpy(y + (size_t)i * cols, bias, (size_t)cols * sizeof(float));
}

STRATA_SIMD static void cpu_relu(const float *x, float *y, size_t n)
{
        for (size_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

STRATA_SIMD static void cpu_relu_backward(const float *y, const float *dy, float *dx, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
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

static void cpu_optim(const void *o, uint64_t t, float *p, float *g, float *state, size_t n)
{
        strata_optim_update(o, t, p, g, state, n);
}

static void cpu_optim_range(const void *o, uint64_t t, float *p, float *g, float *state,
                            size_t n, size_t lo, size_t hi)
{
        strata_optim_update_range(o, t, p, g, state, n, lo, hi);
}

static double cpu_sumsq(const float *x, size_t n)
{
        double ss = 0.0;

        for (size_t i = 0; i < n; i++)
                ss += (double)x[i] * x[i];
        return ss;
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

const struct strata_device_ops strata__cpu_driver = {
        .name = "cpu",
        .probe = cpu_probe,
        .gemm = cpu_gemm,
        .fill_rows = cpu_fill_rows,
        .relu = cpu_relu,
        .relu_backward = cpu_relu_backward,
        .col_sums = cpu_col_sums,
        .softmax_xent = cpu_softmax_xent,
        .dropout = cpu_dropout,
        .copy = cpu_copy,
        .fill = cpu_fill,
        .mul = cpu_mul,
        .col_stats = cpu_col_stats,
        .div = cpu_div,
        .bn_moments = cpu_bn_moments,
        .bn_normalize = cpu_bn_normalize,
        .bn_eval = cpu_bn_eval,
        .bn_grad_sums = cpu_bn_grad_sums,
        .bn_dx = cpu_bn_dx,
        .optim = cpu_optim,
        .optim_range = cpu_optim_range,
        .sumsq = cpu_sumsq,
        .scale = cpu_scale,
        .clamp = cpu_clamp,
        .host_visible = 1,
};
