/*
 * The chunk tree in one GEMM (the kernel table's gemm_tree, decision 0095): on a C whose rows
 * and columns leave edge tiles in every set (901 x 53, leading dimensions past them; its rows
 * in two or more blocks, each packing its part of A, in every tree, decision 0118), trees of
 * 3, 4 and 8 chunks with and without chunks made onto their left sibling, a chunk of more
 * than one KC of rows and an empty one, every kernel set (and a thread with no packing
 * buffer) gives bitwise what the per-chunk gemm() calls and add() calls it stands for give;
 * bad trees and shapes are refused with a message and C untouched; rows past the buffer are
 * STRATA_ENOTSUP, C untouched.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "tests/support/cpusets.h"

#define M 901
#define N 53
#define LDA (M + 2)
#define LDB (N + 5)
#define LDC (N + 3)
#define K_MAX 700

/* One tree: its chunks' rows and its program. */
struct tree {
        const char *name;
        int leaves;
        int lo[9];
        unsigned char op[8];
};

#define ONTO STRATA_TREE_ONTO
static const struct tree trees[] = {
        /* ((c0 onto c1) + (c2 onto c3)): 2 devices' 4 chunks of 16 rows, pairs */
        { "4 paired", 4, { 0, 16, 32, 48, 64 }, { 0, ONTO, 0, ONTO | 1 << 1 } },
        /* ((c0 + c1) + (c2 + c3)), odd rows */
        { "4 apart", 4, { 0, 13, 25, 38, 50 }, { 0, 1 << 1, 0, 2 << 1 } },
        /* (c0 onto c1) + c2: three chunks */
        { "3 paired", 3, { 0, 12, 25, 37 }, { 0, ONTO, 1 << 1 } },
        /* ((c0 + c1) + c2), a chunk past one KC of rows (300) and an empty one */
        { "3 long", 3, { 5, 305, 305, 321 }, { 0, 1 << 1, 1 << 1 } },
        /* eight chunks of 1 device, pairs, one of them empty */
        { "8 paired", 8, { 0, 9, 18, 27, 27, 45, 54, 63, 72 },
          { 0, ONTO, 0, ONTO | 1 << 1, 0, ONTO, 0, ONTO | 2 << 1 } },
};

static float a[K_MAX * LDA], b[K_MAX * LDB], c[M * LDC], want[M * LDC];
static float slots[8][M * N];

/* The per-chunk GEMMs and the additions @p t stands for, with @p k, into want. */
static void reference(const struct strata_kernel_ops *k, const struct tree *t)
{
        int top = 0;

        for (int j = 0; j < t->leaves; j++) {
                int onto = t->op[j] & ONTO, lo = t->lo[j];
                float *s = slots[onto ? top - 1 : top];

                k->gemm(1, 0, M, N, t->lo[j + 1] - lo, 1.0f, a + (size_t)lo * LDA, LDA,
                        b + (size_t)lo * LDB, LDB, onto ? 1.0f : 0.0f, s, N);
                top += !onto;
                for (int q = t->op[j] >> 1; q > 0; q--, top--)
                        k->add(slots[top - 2], slots[top - 1], (size_t)M * N);
        }
        cr_assert_eq(top, 1);
        memset(want, 0x7f, sizeof(want));
        for (int i = 0; i < M; i++)
                memcpy(want + (size_t)i * LDC, slots[0] + (size_t)i * N, sizeof(float) * N);
}

static int run(const struct strata_kernel_ops *k, const struct tree *t)
{
        memset(c, 0x7f, sizeof(c)); /* the gaps past N must stay */
        return k->gemm_tree(&(struct strata_gemm_tree){ .m = M, .n = N, .a = a, .lda = LDA,
                                                        .b = b, .ldb = LDB, .c = c, .ldc = LDC,
                                                        .leaves = t->leaves, .lo = t->lo,
                                                        .op = t->op });
}

Test(cpu_gemm_tree, every_set_gives_the_per_chunk_gemms_bits, .timeout = 120)
{
        static const enum strata_kernels sets[] = { STRATA_KERNELS_NATIVE,
                                                    STRATA_KERNELS_PORTABLE,
                                                    STRATA_KERNELS_AVX512,
                                                    STRATA_KERNELS_SCALAR };
        static float first[sizeof(trees) / sizeof(trees[0])][M * LDC];
        int ran = 0;

        cpusets_fill(a, sizeof(a) / sizeof(a[0]), 1);
        cpusets_fill(b, sizeof(b) / sizeof(b[0]), 2);
        for (size_t q = 0; q < 2 * sizeof(sets) / sizeof(sets[0]); q++) {
                int with_buffer = q % 2 == 0;
                const struct strata_kernel_ops *k = cpusets_kernels(sets[q / 2], with_buffer);

                if (!k) /* a set this CPU does not have */
                        continue;
                cr_assert_not_null(k->gemm_tree);
                for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
                        reference(k, &trees[i]);
                        cr_assert_eq(run(k, &trees[i]), STRATA_OK, "%s", strata_last_error());
                        cr_assert_eq(memcmp(c, want, sizeof(c)), 0,
                                     "set %d (buffer %d), tree %s: not the per-chunk bits",
                                     (int)sets[q / 2], with_buffer, trees[i].name);
                        if (!ran) /* every set: the first set's bits */
                                memcpy(first[i], c, sizeof(c));
                        cr_assert_eq(memcmp(c, first[i], sizeof(c)), 0, "set %d, tree %s",
                                     (int)sets[q / 2], trees[i].name);
                }
                ran++;
        }
        cr_assert_geq(ran, 4, "%d sets ran", ran);
}

Test(cpu_gemm_tree, bad_trees_and_shapes_are_refused_c_untouched)
{
        static const struct {
                const char *what;
                int m, lda, leaves, lo[4];
                unsigned char op[3];
        } bad[] = {
                { "chunk 0 onto no sum", M, LDA, 2, { 0, 4, 8 }, { ONTO, 1 << 1 } },
                { "chunk 1: 2 additions over 2 sums", M, LDA, 2, { 0, 4, 8 }, { 0, 2 << 1 } },
                { "the tree leaves 2 sums, not one", M, LDA, 2, { 0, 4, 8 }, { 0, 0 } },
                { "chunk 1's rows [8, 4)", M, LDA, 3, { 0, 8, 4, 9 }, { 0, 1 << 1, 0 } },
                { "0 chunks", M, LDA, 0, { 0 }, { 0 } },
                { "C -1 x 53", -1, LDA, 1, { 0, 4 }, { 0 } },
                { "leading dimensions 5", M, 5, 1, { 0, 4 }, { 0 } },
        };
        const struct strata_kernel_ops *k = cpusets_kernels(STRATA_KERNELS_NATIVE, 1);

        cr_assert_not_null(k);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(c, 0x7f, sizeof(c));
                memcpy(want, c, sizeof(c));
                cr_assert_eq(k->gemm_tree(&(struct strata_gemm_tree){
                                     .m = bad[i].m, .n = N, .a = a, .lda = bad[i].lda, .b = b,
                                     .ldb = LDB, .c = c, .ldc = LDC, .leaves = bad[i].leaves,
                                     .lo = bad[i].lo, .op = bad[i].op }),
                             STRATA_EINVAL, "%s", bad[i].what);
                cr_assert(strstr(strata_last_error(), bad[i].what), "%s: \"%s\"", bad[i].what,
                          strata_last_error());
                cr_assert_eq(memcmp(c, want, sizeof(c)), 0, "%s: C written", bad[i].what);
        }
        cr_assert_eq(k->gemm_tree(&(struct strata_gemm_tree){ .m = M, .n = N, .a = a, .lda = LDA,
                                                              .b = NULL, .ldb = LDB, .c = c,
                                                              .ldc = LDC, .leaves = 1,
                                                              .lo = bad[5].lo,
                                                              .op = bad[5].op }),
                     STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "a NULL matrix"), "\"%s\"", strata_last_error());
        cr_assert_eq(memcmp(c, want, sizeof(c)), 0, "NULL B: C written");
}

Test(cpu_gemm_tree, rows_past_the_buffer_are_not_supported_c_untouched)
{
        static float big_a[20000 * 4], big_b[20000 * 4], small[4 * 4];
        static const int lo[3] = { 0, 10000, 20000 };
        static const unsigned char op[2] = { 0, 1 << 1 };
        const struct strata_kernel_ops *k = cpusets_kernels(STRATA_KERNELS_PORTABLE, 1);

        if (!k) /* no AVX2: the scalar walk takes any rows */
                return;
        memset(small, 0x7f, sizeof(small));
        cr_assert_eq(k->gemm_tree(&(struct strata_gemm_tree){ .m = 4, .n = 4, .a = big_a,
                                                              .lda = 4, .b = big_b, .ldb = 4,
                                                              .c = small, .ldc = 4,
                                                              .leaves = 2, .lo = lo,
                                                              .op = op }),
                     STRATA_ENOTSUP);
        for (int i = 0; i < 16; i++)
                cr_assert_eq(memcmp(&small[i], &(unsigned){ 0x7f7f7f7fu }, 4), 0);
}

/*
 * Chains whose sum is -0 (every product a negative underflow: fma(-2^-100, 2^-100, t) is -0
 * from +0 or -0). The per-chunk GEMM pads each piece of k up to a multiple of 16 with
 * fma(0, 0, t), which makes -0 into +0; every set's tree gives those bits: +0 where a
 * chunk's last piece is not a multiple of 16 rows, -0 where every piece is.
 */
Test(cpu_gemm_tree, negative_zero_chains_get_the_per_chunk_gemms_padding, .timeout = 60)
{
        static const enum strata_kernels sets[] = { STRATA_KERNELS_NATIVE,
                                                    STRATA_KERNELS_PORTABLE,
                                                    STRATA_KERNELS_AVX512,
                                                    STRATA_KERNELS_SCALAR };
        static const struct {
                struct tree t;
                unsigned bits; /* every element's */
        } cases[] = {
                { { "chunks of 3", 4, { 0, 3, 6, 9, 12 }, { 0, ONTO, 0, ONTO | 1 << 1 } },
                  0x00000000u },
                { { "chunks of 3, apart", 2, { 0, 3, 6 }, { 0, 1 << 1 } }, 0x00000000u },
                { { "chunks of 16", 4, { 0, 16, 32, 48, 64 }, { 0, ONTO, 0, ONTO | 1 << 1 } },
                  0x80000000u },
                { { "chunks of 16, apart", 2, { 0, 16, 32 }, { 0, 1 << 1 } }, 0x80000000u },
                /* pieces of 256 + 3 rows (+0), 16 and 3 */
                { { "259, 16, 3", 3, { 0, 259, 275, 278 }, { 0, 1 << 1, 1 << 1 } },
                  0x00000000u },
                /* pieces of 256 + 16 rows, onto 16 rows: -0 throughout */
                { { "16, 272", 2, { 0, 16, 288 }, { 0, ONTO } }, 0x80000000u },
        };
        int ran = 0;

        for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
                a[i] = -0x1p-100f;
        for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
                b[i] = 0x1p-100f;
        for (size_t q = 0; q < 2 * sizeof(sets) / sizeof(sets[0]); q++) {
                int with_buffer = q % 2 == 0;
                const struct strata_kernel_ops *k = cpusets_kernels(sets[q / 2], with_buffer);

                if (!k)
                        continue;
                for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                        const struct tree *t = &cases[i].t;

                        reference(k, t);
                        cr_assert_eq(run(k, t), STRATA_OK, "%s", strata_last_error());
                        cr_assert_eq(memcmp(c, want, sizeof(c)), 0,
                                     "set %d (buffer %d), %s: not the per-chunk bits",
                                     (int)sets[q / 2], with_buffer, t->name);
                        for (int r = 0; r < M; r++)
                                for (int l = 0; l < N; l++) {
                                        unsigned u;

                                        memcpy(&u, &c[(size_t)r * LDC + l], sizeof(u));
                                        cr_assert_eq(u, cases[i].bits, "set %d (buffer %d), "
                                                     "%s: C[%d][%d] = 0x%08x, not 0x%08x",
                                                     (int)sets[q / 2], with_buffer, t->name,
                                                     r, l, u, cases[i].bits);
                                }
                }
                ran++;
        }
        cr_assert_geq(ran, 4, "%d sets ran", ran);
}
