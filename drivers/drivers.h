/* The device drivers compiled into this library (internal). */
#ifndef STRATA_DRIVERS_DRIVERS_H
#define STRATA_DRIVERS_DRIVERS_H

#include "strata/device.h"

extern const struct strata_device_ops strata__cpu_driver;
/* In libstrata-cuda.so (drivers/cuda/), loaded by drivers/registry.c when asked for. */
extern const struct strata_device_ops strata__cuda_driver;

/**
 * Make OpenBLAS map @p n buffer slots now (one per device), so that concurrent GEMMs never map
 * during training. Returns 0, or -1 when OpenBLAS could not provide them.
 */
int strata__blas_reserve(int n);

#endif /* STRATA_DRIVERS_DRIVERS_H */
