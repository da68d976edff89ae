/*
 * The CPU driver's bf16 panels (internal to drivers/cpu/): the block geometry that lowp.c packs
 * the operands in and lowp_amx.c's tiles read, and the AMX tile code lowp.c calls.
 */
#ifndef STRATA_DRIVERS_CPU_LOWP_H
#define STRATA_DRIVERS_CPU_LOWP_H

#include <stddef.h>
#include <stdint.h>

#define STRATA__LP_BM 32 /* rows of C' per tile (libxsmm m): columns of C */
#define STRATA__LP_BN 64 /* columns of C' per tile (libxsmm n): rows of C */
#define STRATA__LP_KB 64 /* k per batch-reduce block (even: VNNI pairs) */

#if defined(__x86_64__)
/*
 * bf16:amx: one 64 x 32 block of C into @p tile (STRATA__LP_BN x STRATA__LP_BM f32) from
 * op(A)'s panel @p pa and op(B)'s VNNI panel @p pb, over @p kp (a multiple of STRATA__LP_KB);
 * between strata__cpu_amx_begin() and strata__cpu_amx_end() on the calling thread.
 */
void strata__cpu_amx_block(const uint16_t *pa, const uint16_t *pb, float *tile, size_t kp);
/* The calling thread's tile configuration, loaded per GEMM call and released after it. */
void strata__cpu_amx_begin(void);
void strata__cpu_amx_end(void);
#endif

#ifdef STRATA_TESTING
/* Tests only: strata__cpu_amx_block() with each tile instruction emulated in C. */
void strata__cpu_amx_block_emulated(const uint16_t *pa, const uint16_t *pb, float *tile,
                                    size_t kp);
#endif

#endif /* STRATA_DRIVERS_CPU_LOWP_H */
