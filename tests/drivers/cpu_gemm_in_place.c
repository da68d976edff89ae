/*
 * A row-major A read in place (decision 0122): once a leading dimension is declared
 * (gemm_ld), the native set's GEMMs whose A has it read A's rows where they lie, and a
 * Linear's forward with few rows against a wide layer runs as its transpose into the packing
 * buffer; both give the scalar set's bits, leave C's columns past n alone, and anything not
 * declared (or not supported) is packed as before. Bad leading dimensions are refused.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "tests/support/cpusets.h"
#include "drivers/cpu/gemm_sets.h"
#include "tests/support/rig.h"

/* Whether the native set reads rows @p ld floats apart in place. */
static int in_place(int ld)
{
        return strata__sgemm_direct(strata__sgemm_kset(STRATA_KERNELS_NATIVE), ld) != NULL;
}

/*
 * C = alpha op(A) op(B) + beta C, A m x k row-major (lda = @p lda), op(B) B' (tb) or B, C
 * with ldc = n + 5, by the native and the scalar set: the same bytes, the columns past n as
 * they were.
 */
static void same_bits(int tb, int m, int n, int k, int lda, int ldb, float alpha, float beta)
{
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        const struct strata_kernel_ops *sca = cpusets_kernels(STRATA_KERNELS_SCALAR, 1);
        int ldc = n + 5;
        float *a = cpusets_filled((size_t)m * lda, 7u + (unsigned)k);
        float *b = cpusets_filled((size_t)(tb ? n : k) * ldb, 9u + (unsigned)n);
        float *c0 = cpusets_filled((size_t)m * ldc, 3u + (unsigned)m);
        float *cn = malloc(sizeof(float) * (size_t)m * ldc);
        float *cs = malloc(sizeof(float) * (size_t)m * ldc);

        cr_assert(nat && sca && cn && cs);
        cr_assert(lda >= k && ldb >= (tb ? k : n), "the test's own shapes: lda %d, ldb %d", lda,
                  ldb);
        memcpy(cn, c0, sizeof(float) * (size_t)m * ldc);
        memcpy(cs, c0, sizeof(float) * (size_t)m * ldc);
        nat->gemm(0, tb, m, n, k, alpha, a, lda, b, ldb, beta, cn, ldc);
        sca->gemm(0, tb, m, n, k, alpha, a, lda, b, ldb, beta, cs, ldc);
        cr_assert_eq(memcmp(cn, cs, sizeof(float) * (size_t)m * ldc), 0,
                     "%d x %d x %d, tb %d, lda %d ldb %d, alpha %g beta %g: native and scalar "
                     "differ", m, n, k, tb, lda, ldb, (double)alpha, (double)beta);
        for (int i = 0; i < m; i++)
                for (int j = n; j < ldc; j++)
                        cr_assert_eq(cn[(size_t)i * ldc + j], c0[(size_t)i * ldc + j],
                                     "(%d, %d) past C's columns was written", i, j);
        free(a), free(b), free(c0), free(cn), free(cs);
}

static const float ab[][2] = { { 1.0f, 0.0f }, { 1.0f, 1.0f }, { -0.5f, 0.25f } };

Test(cpu_gemm_in_place, declared_rows_read_in_place_give_the_scalar_sets_bits, .timeout = 120)
{
        static const int shapes[][5] = { /* tb, m, n, k, lda (ldb: k + 2 or n + 2) */
                { 1, 128, 256, 784, 784 }, /* a Linear's forward, rows read in place */
                { 1, 64, 256, 784, 784 },  /* a ddp device's forward: C' into the buffer */
                { 1, 64, 512, 800, 816 },  /* the same, k past three chunks */
                { 1, 100, 128, 256, 256 }, /* rows in blocks of 32, then 4 */
                { 1, 128, 10, 128, 128 },  /* narrow: B (the weight) read in place */
                { 0, 128, 256, 128, 128 }, /* an input gradient: dY read in place */
                { 0, 37, 192, 48, 64 },    /* 37 rows: blocks of 32, 4 and 1 */
        };
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);

        cr_assert_not_null(nat);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                const int *x = shapes[s];
                int ldb = x[0] ? x[3] + 2 : x[2] + 2;

                cr_assert_eq(nat->gemm_ld(x[4]), STRATA_OK);
                cr_assert_eq(nat->gemm_ld(ldb), STRATA_OK);
                cr_assert_eq(nat->gemm_ld(x[4]), STRATA_OK, "declared twice: a no-op");
                if (strcmp(strata__sgemm_name(STRATA_KERNELS_NATIVE), "strata:scalar"))
                        cr_assert(in_place(x[4]) && in_place(ldb), "lda %d, ldb %d", x[4],
                                  ldb);
                for (size_t v = 0; v < sizeof(ab) / sizeof(ab[0]); v++)
                        same_bits(x[0], x[1], x[2], x[3], x[4], ldb, ab[v][0], ab[v][1]);
        }
}

Test(cpu_gemm_in_place, a_packed_weight_with_its_input_in_place_gives_the_same_bits)
{
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        const struct strata_kernel_ops *sca = cpusets_kernels(STRATA_KERNELS_SCALAR, 1);
        int m = 96, n = 256, k = 784, ldc = n + 5;
        float *x = cpusets_filled((size_t)m * k, 21u), *w = cpusets_filled((size_t)n * k, 22u);
        float *pw = malloc(sizeof(float) * nat->gemm_pack_floats(n, k));
        float *cn = cpusets_filled((size_t)m * ldc, 23u), *cs = malloc(sizeof(float) * m * ldc);

        cr_assert(pw && cs);
        memcpy(cs, cn, sizeof(float) * (size_t)m * ldc);
        cr_assert_eq(nat->gemm_ld(k), STRATA_OK);
        nat->gemm_pack(w, k, n, k, pw);
        nat->gemm_pb(m, n, k, x, k, w, k, pw, 1.0f, cn, ldc); /* inference: W packed once */
        sca->gemm(0, 1, m, n, k, 1.0f, x, k, w, k, 1.0f, cs, ldc);
        cr_assert_eq(memcmp(cn, cs, sizeof(float) * (size_t)m * ldc), 0, "gemm_pb differs");
        free(x), free(w), free(pw), free(cn), free(cs);
}

Test(cpu_gemm_in_place, bad_leading_dimensions_are_refused_others_pack)
{
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        const struct strata_kernel_ops *sca = cpusets_kernels(STRATA_KERNELS_SCALAR, 1);

        cr_assert(nat && sca);
        cr_assert_eq(nat->gemm_ld(0), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "leading dimension of 0"),
                         "message: %s", strata_last_error());
        cr_assert_eq(nat->gemm_ld(-3), STRATA_EINVAL);
        cr_assert_eq(sca->gemm_ld(-3), STRATA_EINVAL);
        cr_assert_eq(sca->gemm_ld(784), STRATA_OK, "the scalar set: nothing to compile");
        /* under a block of KB, over the widest: accepted, nothing compiled, packed */
        cr_assert_eq(nat->gemm_ld(STRATA__SGEMM_KB - 1), STRATA_OK);
        cr_assert_eq(nat->gemm_ld(STRATA__SGEMM_DIRECT_LD_MAX + 16), STRATA_OK);
        cr_assert(!in_place(STRATA__SGEMM_KB - 1) && !in_place(STRATA__SGEMM_DIRECT_LD_MAX + 16));
        cr_assert(!in_place(0) && !in_place(-3));
        same_bits(1, 64, 256, STRATA__SGEMM_DIRECT_LD_MAX + 16, STRATA__SGEMM_DIRECT_LD_MAX + 16,
                  STRATA__SGEMM_DIRECT_LD_MAX + 18, 1.0f, 1.0f);
        same_bits(0, 33, 128, 64, 64, 130, 1.0f, 0.0f); /* 64 never declared: packed */
}

Test(cpu_gemm_in_place, past_the_registrys_size_the_rest_are_packed, .timeout = 60)
{
        const struct strata_kernel_ops *nat = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);
        int first = 200, n = STRATA__SGEMM_DIRECT_MAX + 8, kept = 0;

        cr_assert_not_null(nat);
        if (!strcmp(strata__sgemm_name(STRATA_KERNELS_NATIVE), "strata:scalar"))
                cr_skip_test("no libxsmm kernels here");
        for (int i = 0; i < n; i++)
                cr_assert_eq(nat->gemm_ld(first + 16 * i), STRATA_OK);
        for (int i = 0; i < n; i++)
                kept += in_place(first + 16 * i);
        cr_assert_eq(kept, STRATA__SGEMM_DIRECT_MAX);
        cr_assert(in_place(first) && !in_place(first + 16 * (n - 1)));
        same_bits(1, 64, 512, 128, first + 16 * (n - 1), 130, 1.0f, 1.0f); /* not kept */
        same_bits(1, 64, 512, 128, first, 130, 1.0f, 1.0f);                /* kept */
}

Test(cpu_gemm_in_place, a_runtime_declares_its_linears_widths)
{
        struct rig r;
        struct strata_runtime *rt;

        if (!strcmp(strata__sgemm_name(STRATA_KERNELS_NATIVE), "strata:scalar"))
                cr_skip_test("no libxsmm kernels here");
        rig_init(&r, 0); /* 20-16-relu-4 */
        cr_assert(!in_place(RIG_IN) && !in_place(16));
        rt = rig_open(&r.cfg);
        cr_assert(in_place(RIG_IN) && in_place(16), "the Linears' in and out");
        cr_assert(!in_place(RIG_CLASSES), "under a block of 16: packed");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
