/*
 * Weights packed once (the kernel table's gemm_pack / gemm_pb, decision 0078): for the
 * default MLP's layers and shapes past a chunk of k and of n, batch 1 and batch 16 (where the
 * 10-wide layer runs as its transpose and packs nothing beforehand), beta 0 and 1, every
 * kernel set gives bitwise what its gemm() gives from the unpacked weights; the pack itself
 * writes exactly gemm_pack_floats() floats.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "tests/support/cpusets.h"

Test(cpu_gemm_pb, packed_weights_give_the_unpacked_bits, .timeout = 120)
{
        static const int shapes[][2] = { /* out (n), in (k) */
                { 256, 784 }, { 128, 256 }, { 10, 128 }, { 130, 300 }, { 65, 17 }, { 1, 5 },
        };
        static const int rows[] = { 1, 16, 3, 600 };
        static const enum strata_kernels sets[] = { STRATA_KERNELS_NATIVE,
                                                    STRATA_KERNELS_PORTABLE,
                                                    STRATA_KERNELS_SCALAR };

        for (size_t q = 0; q < sizeof(sets) / sizeof(sets[0]); q++) {
                const struct strata_kernel_ops *k = cpusets_kernels(sets[q], 1);

                if (!k) /* a set this CPU does not have */
                        continue;
                cr_assert(k->gemm_pack_floats && k->gemm_pack && k->gemm_pb);
                for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                        int n = shapes[s][0], kk = shapes[s][1], ldb = kk + 3;
                        size_t np = k->gemm_pack_floats(n, kk);
                        float *w = cpusets_filled((size_t)n * ldb, 7u * s + 1);
                        float *pb = malloc((np + 1) * sizeof(float));

                        cr_assert_not_null(pb);
                        cr_assert_geq(np, (size_t)n * kk);
                        pb[np] = 12345.0f; /* the pack stays within its size */
                        k->gemm_pack(w, ldb, n, kk, pb);
                        cr_assert_eq(pb[np], 12345.0f);
                        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
                                for (int be = 0; be < 2; be++) {
                                        int m = rows[r], lda = kk + 1, ldc = n + 2;
                                        float *x = cpusets_filled((size_t)m * lda, 3u * r + 2);
                                        float *c0 = cpusets_filled((size_t)m * ldc, 9u + r);
                                        float *c1 = malloc((size_t)m * ldc * sizeof(float));

                                        cr_assert_not_null(c1);
                                        memcpy(c1, c0, (size_t)m * ldc * sizeof(float));
                                        k->gemm(0, 1, m, n, kk, 1.0f, x, lda, w, ldb,
                                                (float)be, c0, ldc);
                                        k->gemm_pb(m, n, kk, x, lda, w, ldb, pb, (float)be,
                                                   c1, ldc);
                                        cr_assert_eq(memcmp(c0, c1, sizeof(float) * (size_t)m *
                                                            ldc), 0,
                                                     "set %zu, %d x %d, rows %d, beta %d", q,
                                                     n, kk, m, be);
                                        free(x);
                                        free(c0);
                                        free(c1);
                                }
                        free(w);
                        free(pb);
                }
        }
}

Test(cpu_gemm_pb, an_empty_weight_packs_nothing)
{
        const struct strata_kernel_ops *k = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);

        cr_assert_not_null(k);
        cr_assert_eq(k->gemm_pack_floats(0, 10), 0);
        cr_assert_eq(k->gemm_pack_floats(10, 0), 0);
        cr_assert_eq(k->gemm_pack_floats(-1, 10), 0);
}

/* The packed copy is what the call reads (not B): a zero copy gives a zero C at batch 1. */
Test(cpu_gemm_pb, the_call_reads_the_packed_copy)
{
        const struct strata_kernel_ops *k;
        float *w, *x, *c, *pb;

        if (!cpusets_kernels(STRATA_KERNELS_PORTABLE, 1)) /* no AVX2: the native set may pack nothing */
                cr_skip_test("no AVX2 kernel set here");
        k = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        cr_assert_not_null(k);
        w = cpusets_filled(256 * 784, 1);
        x = cpusets_filled(784, 2);
        c = cpusets_filled(256, 3);
        pb = calloc(k->gemm_pack_floats(256, 784), sizeof(float));
        cr_assert_not_null(pb);
        k->gemm_pb(1, 256, 784, x, 784, w, 784, pb, 0.0f, c, 256);
        for (int j = 0; j < 256; j++)
                cr_assert_eq(c[j], 0.0f, "column %d", j);
        free(w);
        free(x);
        free(c);
        free(pb);
}
