/*
 * The GEMM packing's transposes (arch/transpose.h) against their definition,
 * dst[j * ld + i] = src[i * ls + j], float for float: 16 x 16 blocks with AVX-512 (decision
 * 0107) and 8 x 8 ones with AVX2, on rows and columns that are not multiples of 8 or 16,
 * sources wider than the block (ls > cols), destinations of the packing's panel widths (64,
 * 32, 16, 8: pack_b()) and of its KB rows (pack_a()). Each destination has a guard of sentinels
 * around and between its rows, which must be left as they were: nothing past a row or a column
 * is written; each source ends against a page that cannot be read, so nothing past its last
 * row or column is read. The transposes run under both kernel sets' GEMMs; cpu_kernel_sets
 * compares the GEMMs' bits.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/transpose.h"

#if defined(__x86_64__)
#define GUARD 64
#define SENTINEL (-7777.0f)
#define MAXF (4 * GUARD + 300 * 300)

static _Alignas(64) float src[MAXF], dst[MAXF];

/* A source of @p rows rows @p ls apart whose every float says where it is. */
static void fill(int rows, size_t ls)
{
        for (size_t i = 0; i < (size_t)rows * ls; i++)
                src[i] = (float)i + 0.5f;
}

/* dst's rows j < cols hold src's column j in rows i < rows; every other float is a sentinel. */
static void check(int rows, int cols, size_t ls, size_t ld, const char *what)
{
        size_t end = GUARD + (size_t)cols * ld + GUARD;

        for (size_t o = 0; o < end; o++) {
                size_t p = o - GUARD, j = p / ld, i = p % ld;
                int inside = o >= GUARD && j < (size_t)cols && i < (size_t)rows;
                float want = inside ? src[i * ls + j] : SENTINEL;

                if (memcmp(&dst[o], &want, sizeof(float)))
                        cr_assert_fail("%s: rows %d cols %d ls %zu ld %zu: float %zu is %g, not %g",
                                       what, rows, cols, ls, ld, p, (double)dst[o], (double)want);
        }
}

static void reset(void)
{
        for (size_t o = 0; o < MAXF; o++)
                dst[o] = SENTINEL;
}

/* The AVX2 path gemm.c's transpose() takes without AVX-512: blocks, edges, scalar rows. */
static void by_8(const float *s, int rows, int cols, size_t ls, size_t ld)
{
        float *d = dst + GUARD;
        int i0 = strata__transpose8_all(s, ls, rows, cols, d, ld);

        cr_assert_eq(i0, rows & ~7);
        for (; i0 < rows; i0++)
                for (int j0 = 0; j0 < cols; j0++)
                        d[(size_t)j0 * ld + i0] = s[(size_t)i0 * ls + j0];
}

static int by_16(const float *s, int rows, int cols, size_t ls, size_t ld)
{
        return strata__transpose16_all(s, ls, rows, cols, dst + GUARD, ld);
}

/*
 * The source again with its last float against a page that cannot be read: a transpose that
 * reads past the last row's last column (an unmasked load on a narrow edge) faults.
 */
static const float *at_the_edge(int rows, size_t ls)
{
        static float *map;
        static size_t page, len;
        size_t bytes = (size_t)rows * ls * sizeof(float);
        float *s;

        if (!map) {
                page = (size_t)sysconf(_SC_PAGESIZE);
                len = (MAXF * sizeof(float) + page - 1) / page * page;
                map = mmap(NULL, len + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                cr_assert_neq(map, MAP_FAILED);
                cr_assert_eq(mprotect((char *)map + len, page, PROT_NONE), 0);
        }
        s = (float *)((char *)map + len - bytes);
        memcpy(s, src, bytes);
        return s;
}

/*
 * Every rows x cols up to the packing's (64 rows of a panel, a chunk's 256 columns; pack_a's
 * KB rows by a block's 32, 16, 8, 4, 2, 1 columns), into @p ld of each width it uses.
 */
static void every_shape(int avx512)
{
        static const int rows[] = { 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 40, 47,
                                    48, 49, 63, 64 };
        static const int cols[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 30, 32, 33, 64,
                                    100, 255, 256 };
        static const int lds[] = { 8, 16, 32, 64 };

        for (size_t a = 0; a < sizeof(rows) / sizeof(rows[0]); a++)
                for (size_t b = 0; b < sizeof(cols) / sizeof(cols[0]); b++)
                        for (size_t c = 0; c < sizeof(lds) / sizeof(lds[0]); c++)
                                for (size_t extra = 0; extra < 24; extra += 23) {
                                        size_t ls = (size_t)cols[b] + extra;
                                        size_t ld = (size_t)lds[c];

                                        if (ld < (size_t)rows[a])
                                                ld = (size_t)rows[a] + extra;
                                        const float *s;

                                        fill(rows[a], ls);
                                        s = at_the_edge(rows[a], ls);
                                        reset();
                                        if (!avx512) {
                                                by_8(s, rows[a], cols[b], ls, ld);
                                        } else {
                                                cr_assert_eq(by_16(s, rows[a], cols[b], ls, ld),
                                                             rows[a]);
                                        }
                                        check(rows[a], cols[b], ls, ld, avx512 ? "16" : "8");
                                }
}

Test(cpu_transpose, avx512_blocks_equal_the_definition)
{
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512f"))
                cr_skip_test("this CPU has no AVX-512F (the AVX2 transposes run instead)");
        every_shape(1);
}

Test(cpu_transpose, avx2_blocks_equal_the_definition)
{
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx2"))
                cr_skip_test("this CPU has no AVX2 (the scalar loop runs instead)");
        every_shape(0);
}

/* A destination whose rows are 64-byte lines (pack_b()'s panels): the same floats. */
Test(cpu_transpose, aligned_panel_rows)
{
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512f"))
                cr_skip_test("this CPU has no AVX-512F");
        cr_assert_eq((uintptr_t)(dst + GUARD) % 64, 0);
        fill(64, 784);
        reset();
        by_16(src, 64, 256, 784, 64);
        check(64, 256, 784, 64, "aligned");
}
#endif
