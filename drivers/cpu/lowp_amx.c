/*
 * The CPU driver's AMX tiles (bf16:amx, drivers/cpu/lowp.c; decision 0049): one 64 x 32 block
 * of C from the packed bf16 panels by TDPBF16PS, the thread's tile configuration loaded around
 * a GEMM call, and under STRATA_TESTING the same block with each tile instruction emulated in
 * C, so that any CPU tests the addresses and loops the tiles use.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "arch/amx.h"
#include "arch/half.h"
#include "drivers/cpu/lowp.h"

/* The panels' blocks (drivers/cpu/lowp.h). */
#define BM STRATA__LP_BM
#define BN STRATA__LP_BN
#define KB STRATA__LP_KB

/*
 * bf16:amx. One 64 x 32 block of C (BN rows from j0, BM columns from i0) into tile[BN][BM]:
 * pa = op(A)'s panel at row j0 (pack_plain: element (j, kk) at (kk / KB) * KB * BN + j * KB +
 * kk % KB), pb = op(B)'s VNNI panel at column i0 (pack_vnni: element (kk, i) at
 * ((kk / 2) * BM + i) * 2 + (kk & 1)), kp a multiple of KB. Tiles 4, 5: 16 rows of op(A) by
 * 32 k (row stride KB bf16); tiles 6, 7: 16 pairs of k by 16 columns (row stride BM pairs);
 * tiles 0-3: the 2 x 2 C tiles of a half (32 rows). LOAD, DP, ZERO and STORE are the tile
 * operations, taking literal tile numbers (the instructions encode them): the instructions,
 * or under STRATA_TESTING a scalar emulation of them.
 */
#define AMX_BLOCK(LOAD, DP, ZERO, STORE)                                                     \
        for (size_t h = 0; h < BN; h += 32) {                                                 \
                ZERO(0);                                                                      \
                ZERO(1);                                                                      \
                ZERO(2);                                                                      \
                ZERO(3);                                                                      \
                for (size_t kk = 0; kk < kp; kk += 32) {                                      \
                        const uint16_t *ta = pa + (kk / KB) * KB * BN + kk % KB + h * KB;     \
                        const uint16_t *tb = pb + kk * BM;                                    \
                                                                                              \
                        LOAD(4, ta, KB * 2);                                                  \
                        LOAD(6, tb, BM * 4);                                                  \
                        LOAD(7, tb + 32, BM * 4);                                             \
                        LOAD(5, ta + 16 * KB, KB * 2);                                        \
                        DP(0, 4, 6);                                                          \
                        DP(1, 4, 7);                                                          \
                        DP(2, 5, 6);                                                          \
                        DP(3, 5, 7);                                                          \
                }                                                                             \
                STORE(0, tile + h * BM, BM * 4);                                              \
                STORE(1, tile + h * BM + 16, BM * 4);                                         \
                STORE(2, tile + (h + 16) * BM, BM * 4);                                       \
                STORE(3, tile + (h + 16) * BM + 16, BM * 4);                                  \
        }

#if defined(__x86_64__)
__attribute__((target("amx-tile,amx-bf16"))) void
strata__cpu_amx_block(const uint16_t *pa, const uint16_t *pb, float *tile, size_t kp)
{
        __asm__ volatile("" ::: "memory"); /* tileloadd's asm names no memory operand */
        AMX_BLOCK(_tile_loadd, _tile_dpbf16ps, _tile_zero, _tile_stored)
}

/* The calling thread's tile configuration, loaded per GEMM call and released after it. */
__attribute__((target("amx-tile"))) void strata__cpu_amx_begin(void)
{
        _tile_loadconfig(&strata__amx_16x64);
}

__attribute__((target("amx-tile"))) void strata__cpu_amx_end(void)
{
        _tile_release();
}
#endif

#ifdef STRATA_TESTING
/*
 * Tests only: TILELOADD, TDPBF16PS, TILESTORED and TILEZERO on 8 emulated tiles of 16 rows of
 * 64 bytes, as the SDM describes them: per row of C, the even and the odd products of each
 * VNNI pair summed apart over the pairs, then added to C (bf16 inputs' subnormals read as
 * zero, subnormal results flushed to zero).
 */
static _Thread_local unsigned char emu[8][16][64];

static void emu_load(int t, const void *p, size_t stride)
{
        for (int r = 0; r < 16; r++)
                memcpy(emu[t][r], (const char *)p + r * stride, 64);
}

static void emu_store(int t, void *p, size_t stride)
{
        for (int r = 0; r < 16; r++)
                memcpy((char *)p + r * stride, emu[t][r], 64);
}

static void emu_zero(int t)
{
        memset(emu[t], 0, sizeof(emu[t]));
}

static float emu_ftz(float x)
{
        uint32_t u;

        memcpy(&u, &x, 4);
        if (!(u & 0x7f800000u))
                u &= 0x80000000u;
        memcpy(&x, &u, 4);
        return x;
}

/* Element @p e of row @p r of tile @p t as bf16, widened, a subnormal read as zero. */
static float emu_bf16(int t, int r, int e)
{
        uint16_t h;

        memcpy(&h, &emu[t][r][2 * e], 2);
        return strata__bf16_to_f32((h & 0x7f80u) ? h : (uint16_t)(h & 0x8000u));
}

static void emu_dp(int c, int a, int b)
{
        for (int m = 0; m < 16; m++) {
                float t[32] = { 0 }, *cr = (float *)(void *)emu[c][m];

                for (int p = 0; p < 16; p++)
                        for (int n = 0; n < 32; n++)
                                t[n] = emu_ftz(t[n] + emu_bf16(a, m, 2 * p + (n & 1)) *
                                                              emu_bf16(b, p, n));
                for (int n = 0; n < 16; n++)
                        cr[n] = emu_ftz(emu_ftz(cr[n] + t[2 * n]) + t[2 * n + 1]);
        }
}

void strata__cpu_amx_block_emulated(const uint16_t *pa, const uint16_t *pb, float *tile,
                                    size_t kp)
{
        AMX_BLOCK(emu_load, emu_dp, emu_zero, emu_store)
}
#endif /* STRATA_TESTING */
