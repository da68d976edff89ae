/* The device drivers compiled into this library (internal). */
#ifndef STRATA_DRIVERS_DRIVERS_H
#define STRATA_DRIVERS_DRIVERS_H

#include "strata/device.h"

extern const struct strata_device_ops strata__cpu_driver;
#ifdef STRATA_HAVE_CUDA
extern const struct strata_device_ops strata__cuda_driver;
#define STRATA__CUDA_DRIVER (&strata__cuda_driver)
#else
#define STRATA__CUDA_DRIVER NULL /* built without nvcc */
#endif

/**
 * Make OpenBLAS map @p n buffer slots now (one per device), so that concurrent GEMMs never map
 * during training. Returns 0, or -1 when OpenBLAS could not provide them.
 */
int strata__blas_reserve(int n);

/*
 * Rank @p rank's slice [lo, hi) of @p count elements of @p es bytes among @p n ranks, starting
 * on 64-byte boundaries: the part of a reduction that rank computes in the shm driver.
 */
void strata__comm_slice(size_t count, size_t es, int n, int rank, size_t *lo, size_t *hi);

#endif /* STRATA_DRIVERS_DRIVERS_H */
