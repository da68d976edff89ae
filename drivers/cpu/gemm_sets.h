/* The CPU driver's kernel sets (drivers/cpu/gemm_sets.c), as drivers/cpu/gemm.c uses them. */
#ifndef STRATA_DRIVERS_CPU_GEMM_SETS_H
#define STRATA_DRIVERS_CPU_GEMM_SETS_H

#include <libxsmm.h>

#include "strata/device.h"
#include "drivers/cpu/gemm.h"

#define STRATA__SGEMM_BM 64 /* columns of C per tile (libxsmm's m) */
#define STRATA__SGEMM_BN 32 /* rows of C per tile (libxsmm's n); tails of 16, 8, 4, 2, 1 */
#define STRATA__SGEMM_NROWS 6 /* kernels per set and panel width: BN, 16, 8, 4, 2, 1 rows */
#define STRATA__SGEMM_NWIDTH 4 /* panel widths: BM, then the narrower last panels 32, 16, 8 */
#define STRATA__SGEMM_NTAIL 8 /* a chunk's last k % KB products up to this many: a tail kernel */
#define STRATA__SGEMM_LDT_MAX (STRATA__SGEMM_BM + 16) /* the widest tile's leading dimension */

#define STRATA__SGEMM_DIRECT_MAX 32 /* leading dimensions with in-place kernels, per set */
#define STRATA__SGEMM_DIRECT_LD_MAX 2048 /* the widest rows read in place, in floats */

/** A kernel set's row counts by index: BN, then the tails of a block of rows 16, 8, 4, 2, 1. */
extern const int strata__sgemm_tile_rows[STRATA__SGEMM_NROWS];

/** libxsmm's strided batch-reduce kernel: C (+)= sum over the blocks of A B. */
typedef libxsmm_smmfunction_reducebatch_strd strata__sgemm_kernel;

/** One kernel set: libxsmm's kernels for each tile shape, or none (the scalar set). */
struct strata__sgemm_kset {
        const char *name; /**< "libxsmm:avx512", "libxsmm:avx2", "strata:scalar" */
        int ldt;          /**< the tile's leading dimension (kernels are cached by shape) */
        /** by panel width (BM, 32, 16, 8) and rows (BN .. 1): KB products a block, onto 0 */
        strata__sgemm_kernel k[STRATA__SGEMM_NWIDTH][STRATA__SGEMM_NROWS];
        /** the same shapes, t + 1 products onto the tile's chains; NULL: padded (0119) */
        strata__sgemm_kernel tail[STRATA__SGEMM_NWIDTH][STRATA__SGEMM_NROWS]
                                 [STRATA__SGEMM_NTAIL];
};

/**
 * The kernels of panel width BM that read op(A)' in place (decision 0122): A row-major, its
 * rows @p ld floats apart, instead of packed blocks of KB; by rows (BN .. 1). Registered by
 * strata__sgemm_direct_prepare(); a GEMM whose A has another leading dimension packs it.
 */
struct strata__sgemm_direct {
        int ld;
        strata__sgemm_kernel k[STRATA__SGEMM_NROWS];
};

/** @p s's in-place kernels for rows @p ld floats apart; NULL when none are registered. */
const strata__sgemm_kernel *strata__sgemm_direct(const struct strata__sgemm_kset *s, int ld);

/** What the packing may use of the CPU (set by strata__sgemm_compile()). */
struct strata__sgemm_cpu_features {
        int avx2; /**< AVX2 and FMA: the 8 x 8 transposes and copies, the avx2 set */
        int avx512; /**< the native set is libxsmm's AVX-512 */
        int t16;  /**< and the CPU has AVX-512F: the 16 x 16 transposes */
};

/** @brief Compile the kernel sets and read the CPU's features, once per process. */
void strata__sgemm_compile(void);

/** @brief Kernel set @p set (native, portable or AVX-512's: compiled; scalar: the native's). */
const struct strata__sgemm_kset *strata__sgemm_kset(enum strata_kernels set);

/** The CPU's features as strata__sgemm_compile() found them (zeros before: the plain copies). */
extern struct strata__sgemm_cpu_features strata__sgemm_cpu;

#endif /* STRATA_DRIVERS_CPU_GEMM_SETS_H */
