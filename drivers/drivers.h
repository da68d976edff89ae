/* The device drivers compiled into this library (internal). */
#ifndef STRATA_DRIVERS_DRIVERS_H
#define STRATA_DRIVERS_DRIVERS_H

#include "strata/device.h"
#include "strata/tensor.h"

extern const struct strata_device_ops strata__cpu_driver;
/* In libstrata-cuda.so (drivers/cuda/), loaded by drivers/registry.c when asked for. */
extern const struct strata_device_ops strata__cuda_driver;

/**
 * Make OpenBLAS map @p n buffer slots now (one per device), so that concurrent GEMMs never map
 * during training. Returns 0, or -1 when OpenBLAS could not provide them.
 */
int strata__blas_reserve(int n);

/* drivers/cpu/lowp.c: the CPU driver's gemm_lp, gemm_lp_io, gemm_lp_bytes and prepare_lp. */
void strata__cpu_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc, void *scratch);
void strata__cpu_gemm_lp_io(const struct strata_gemm_io *g, void *scratch);
size_t strata__cpu_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim);
int strata__cpu_prepare_lp(enum strata_dtype dt);

#endif /* STRATA_DRIVERS_DRIVERS_H */
