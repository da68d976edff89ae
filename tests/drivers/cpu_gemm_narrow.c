/*
 * A narrow C (fewer columns than the GEMM's panel of 64, more rows: a classifier's 10
 * outputs, a 3 x 3 conv's 9-term weight gradient) runs as its transpose in drivers/cpu/gemm.c
 * (decision 0043): for every transpose pair, alpha/beta, k past one chunk and C's rows wider
 * than its columns, the native set gives the scalar set's bits (which keep the one chain per
 * element in k order) and is exact against a double reference; a neighbour just wide enough
 * for the usual form is checked alike.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "tests/support/cpusets.h"

/* C (m x n, ldc = n + 5) from @p k, the elements past n untouched. */
static float *run(const struct strata_kernel_ops *k, int ta, int tb, int m, int n, int kk,
                  float alpha, float beta, const float *a, const float *b, unsigned seed)
{
        int lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 2, ldc = n + 5;
        float *c = cpusets_filled((size_t)m * ldc, seed);

        k->gemm(ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
        return c;
}

Test(cpu_gemm_narrow, a_narrow_c_gives_the_scalar_sets_bits, .timeout = 60)
{
        static const int shapes[][3] = { /* m, n, k */
                { 300, 10, 784 }, { 32, 9, 784 }, { 130, 33, 40 }, { 1000, 1, 600 },
                { 70, 63, 257 },  { 65, 64, 100 }, /* 64 columns: the usual form */
        };
        static const float ab[][2] = { { 1.0f, 0.0f }, { 1.0f, 1.0f }, { -0.5f, 0.25f } };
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        const struct strata_kernel_ops *sca = cpusets_kernels(STRATA_KERNELS_SCALAR, 1);

        cr_assert_not_null(nat);
        cr_assert_not_null(sca);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
                for (int t = 0; t < 4; t++)
                        for (size_t v = 0; v < sizeof(ab) / sizeof(ab[0]); v++) {
                                int m = shapes[s][0], n = shapes[s][1], kk = shapes[s][2];
                                int ta = t & 1, tb = t >> 1, ldc = n + 5;
                                int lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 2;
                                float *a = cpusets_filled((size_t)(ta ? kk : m) * lda, 11u * s + 1);
                                float *b = cpusets_filled((size_t)(tb ? n : kk) * ldb, 13u * s + 2);
                                float *c0 = cpusets_filled((size_t)m * ldc, 5u + (unsigned)v);
                                float al = ab[v][0], be = ab[v][1];
                                float *cn = run(nat, ta, tb, m, n, kk, al, be, a, b, 5u + v);
                                float *cs = run(sca, ta, tb, m, n, kk, al, be, a, b, 5u + v);

                                cr_assert_eq(memcmp(cn, cs, sizeof(float) * (size_t)m * ldc),
                                             0, "%d x %d x %d, ta %d tb %d, alpha %g beta %g: "
                                             "native and scalar differ", m, n, kk, ta, tb,
                                             (double)al, (double)be);
                                for (int i = 0; i < m; i++)
                                        for (int j = 0; j < ldc; j++) {
                                                double r = 0.0, x = cn[(size_t)i * ldc + j];

                                                if (j >= n) { /* past C's columns: untouched */
                                                        cr_assert_eq(x, c0[(size_t)i * ldc + j]);
                                                        continue;
                                                }
                                                for (int p = 0; p < kk; p++)
                                                        r += (double)(ta ? a[(size_t)p * lda + i]
                                                                         : a[(size_t)i * lda + p]) *
                                                             (double)(tb ? b[(size_t)j * ldb + p]
                                                                         : b[(size_t)p * ldb + j]);
                                                r = al * r + be * (double)c0[(size_t)i * ldc + j];
                                                cr_assert(fabs(x - r) <= 1e-4 * (1.0 + fabs(r)),
                                                          "%d x %d x %d, ta %d tb %d: (%d, %d) "
                                                          "is %g, expected %g", m, n, kk, ta,
                                                          tb, i, j, x, r);
                                        }
                                free(a), free(b), free(c0), free(cn), free(cs);
                        }
}
