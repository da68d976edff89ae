/* The CPU driver's f32 GEMM and its kernel sets (drivers/cpu/gemm.c; internal). */
#ifndef STRATA_DRIVERS_CPU_GEMM_H
#define STRATA_DRIVERS_CPU_GEMM_H

#include <stddef.h>

#include "strata/device.h"

/** One GEMM: C = alpha op(A) op(B) + beta C, row-major, op = transpose when ta / tb. */
struct strata__sgemm {
        int ta, tb, m, n, k;
        float alpha, beta;
        const float *a;
        int lda;
        const float *b;
        int ldb;
        float *c;
        int ldc;
};

/**
 * @brief Compute @p g with kernel set @p set (ready: strata__sgemm_prepare()), the packing
 *        in the calling thread's buffer; a thread that has none gets the scalar set's path
 *        (the same bits).
 */
void strata__sgemm(enum strata_kernels set, const struct strata__sgemm *g);

/**
 * @brief Compile the kernel sets (once per process) and map packing buffers so that
 *        @p threads more threads find one each.
 * @retval STRATA_OK, STRATA_ENOTSUP (@p set cannot run on this CPU: the message says why),
 *         STRATA_ESYS (no buffer could be mapped).
 */
int strata__sgemm_prepare(enum strata_kernels set, int threads);

/** @brief Claim the calling thread's packing buffer (a device's thread, before it computes). */
void strata__sgemm_warm_up(void);

/** @brief "libxsmm:avx512", "libxsmm:avx2", "strata:scalar"; NULL: @p set cannot run here. */
const char *strata__sgemm_name(enum strata_kernels set);

/** @brief Bytes of one thread's packing buffer. */
size_t strata__sgemm_slot_bytes(void);

#endif /* STRATA_DRIVERS_CPU_GEMM_H */
