/*
 * The CPU driver's GEMM against a double-precision reference for every transpose pair,
 * including one-row products (batch-1 inference), which it runs as a GEMV, and alpha/beta.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "strata/device.h"
#include "strata/runtime.h"
#include "strata/status.h"

#define M_MAX 5
#define N 37
#define K 53

static float a[(M_MAX + 3) * (K + 3)], b[(K + 3) * (N + 3)], c[M_MAX * N];
static double ref[M_MAX * N];

static const struct strata_kernel_ops *cpu_kernels(void)
{
        const struct strata_device_ops *d;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &d), STRATA_OK);
        return d->kernels;
}

/*
 * op(A) is m x k, op(B) k x n, both stored with leading dimensions wider than their rows (the
 * strides a caller's sub-matrix has); element (i, j) of op(X) read through the transpose.
 */
static void check(int ta, int tb, int m, float alpha, float beta)
{
        int lda = ta ? m + 3 : K + 3, ldb = tb ? K + 3 : N + 3;

        for (int i = 0; i < (M_MAX + 3) * (K + 3); i++)
                a[i] = (float)sin(0.37 * i + 1.0);
        for (int i = 0; i < (K + 3) * (N + 3); i++)
                b[i] = (float)cos(0.11 * i - 2.0);
        for (int i = 0; i < m; i++)
                for (int j = 0; j < N; j++) {
                        double s = 0.0;

                        c[i * N + j] = (float)(0.5 + 0.01 * (i * N + j));
                        for (int p = 0; p < K; p++)
                                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                                     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
                        ref[i * N + j] = alpha * s + beta * (double)c[i * N + j];
                }
        cpu_kernels()->gemm(ta, tb, m, N, K, alpha, a, lda, b, ldb, beta, c, N);
        for (int i = 0; i < m * N; i++)
                cr_assert(fabs(c[i] - ref[i]) <= 1e-4 * (1.0 + fabs(ref[i])),
                          "ta %d tb %d m %d: element %d is %g, expected %g", ta, tb, m, i,
                          (double)c[i], ref[i]);
}

Test(cpu_gemm, one_row_and_several_rows_every_transpose)
{
        for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                        check(ta, tb, 1, 1.0f, 0.0f);
                        check(ta, tb, 1, 0.5f, 1.0f);
                        check(ta, tb, M_MAX, 1.0f, 0.0f);
                        check(ta, tb, M_MAX, -2.0f, 0.25f);
                }
}
