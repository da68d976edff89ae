/*
 * Launchers of the CUDA driver's kernels (internal). Each enqueues on stream @p s and returns
 * nothing: launch errors are picked up by the driver's sticky error check. Reductions are
 * written so that the order of every sum is fixed by the shapes alone (fixed grid, fixed tree),
 * never by scheduling: results are bitwise reproducible run to run on one GPU.
 */
#ifndef STRATA_DRIVERS_CUDA_KERNELS_H
#define STRATA_DRIVERS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/device.h"
#include "strata/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Blocks of the grid-stride reductions: partial sums need this many doubles of scratch. */
#define STRATA__CUDA_PARTIALS 256

void strata__k_fill_rows(void *s, float *y, const float *bias, int rows, int cols);
void strata__k_relu(void *s, const float *x, float *y, size_t n);
void strata__k_relu_backward(void *s, const float *y, const float *dy, float *dx, size_t n);
/* An activation other than ReLU and its backward (enum strata_activation, drivers/formulas.h). */
void strata__k_act(void *s, enum strata_activation kind, float a, const float *x, float *y,
                   size_t n);
void strata__k_act_backward(void *s, enum strata_activation kind, float a, const float *x,
                            const float *y, const float *dy, float *dx, size_t n);
void strata__k_col_sums(void *s, const float *x, int rows, int cols, float *out, int acc);
/* Loss and correct count: partial[0..P) doubles, partial_n[0..P) ints, then total[0], count[0]. */
void strata__k_softmax_xent(void *s, const float *logits, const int32_t *labels, int rows,
                            int cols, float scale, float *dlogits, double *partial,
                            int *partial_n, double *total, int *count);
void strata__k_pointwise_loss(void *s, int kind, float beta, const float *out, const float *t,
                              int rows, int cols, float scale, float *dout, double *partial,
                              double *total);
void strata__k_dropout(void *s, const float *x, float *y, float *mask, size_t n, float p,
                       uint64_t seed, uint64_t stream, uint64_t first);
void strata__k_fill(void *s, float *dst, float v, size_t n);
/* dst (rows x cols, contiguous) = src (rows x cols, leading dimension ld) rounded to bf16
 * (@p bf16) or f16, nearest even: a mixed-precision GEMM's operand. */
void strata__k_round_half(void *s, void *dst, const float *src, int rows, int cols, int ld,
                          int bf16);
void strata__k_mul(void *s, const float *a, const float *b, float *dst, size_t n);
void strata__k_col_stats(void *s, const float *x, int rows, int cols, const float *center,
                         float *out);
void strata__k_div(void *s, float *dst, const float *src, float d, size_t n);
void strata__k_bn_moments(void *s, const float *sq, const float *mean, float *running,
                          float *invstd, int f, int n, float mom, float eps);
void strata__k_bn_normalize(void *s, const float *x, const float *mean, const float *invstd,
                            const float *g, const float *b, float *xhat, float *y, int rows,
                            int f);
void strata__k_bn_eval(void *s, const float *x, const float *running, const float *g,
                       const float *b, float eps, float *y, int rows, int f);
void strata__k_bn_grad_sums(void *s, const float *dy, const float *xhat, float *sums, float *dg,
                            float *db, int rows, int f, int fresh);
void strata__k_bn_dx(void *s, const float *dy, const float *xhat, const float *sums,
                     const float *g, const float *invstd, float *dx, int rows, int f, int n);
void strata__k_sgd(void *s, float *p, const float *g, float *buf, float lr, float wd, float mu,
                   float damp, float first, float nesterov, int momentum, size_t n);
void strata__k_adamw(void *s, float *p, const float *g, float *m, float *v, float b1, float b2,
                     float c2, float eps, float decay, float step, size_t n);
/* Sum of squares into total[0] through partial[0..P). */
void strata__k_sumsq(void *s, const float *x, size_t n, double *partial, double *total);
void strata__k_scale(void *s, float *x, float a, size_t n);
void strata__k_clamp(void *s, float *x, float v, size_t n);
/* Most buffers one reduce_many launch takes on each side (the communicator's rank limit). */
#define STRATA__CUDA_MANY STRATA_MAX_DEVICES
/* dst[d][i] = sum of src[r][i] in source order (/ ns when mean), i in [lo, hi). */
void strata__k_reduce_many(void *s, float *const *dst, int nd, const float *const *src, int ns,
                           size_t lo, size_t hi, int mean);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DRIVERS_CUDA_KERNELS_H */
