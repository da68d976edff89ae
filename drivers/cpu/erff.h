/*
 * The exact GELU's libm functions as loops the compiler vectorises (drivers/cpu/erff.c,
 * decision 0088): glibc 2.36's erff and expf replayed operation by operation, so that every
 * element has libm's bits (internal).
 */
#ifndef STRATA_DRIVERS_CPU_ERFF_H
#define STRATA_DRIVERS_CPU_ERFF_H

#include <stddef.h>

/**
 * The path the loops below take here: "replica" (glibc 2.36's erff and expf replayed in
 * vector code: the CPU has AVX2 and FMA, where glibc runs its FMA build of expf, and the libm
 * is glibc 2.36) or "libm" (the libm's own erff and expf, one call per element).
 */
const char *strata__cpu_erff_path(void);

/** y[i] = erff(x[i]) with libm's bits, for i < @p n. */
void strata__cpu_erff(const float *x, float *y, size_t n);

/** y[i] = expf(x[i]) with libm's bits, for i < @p n. */
void strata__cpu_expf(const float *x, float *y, size_t n);

/**
 * erff's replica whatever the path (for the checks: it needs AVX2 and FMA to be fast, and it
 * has glibc 2.36's bits, checked against the libm that runs).
 */
void strata__cpu_erff_replica(const float *x, float *y, size_t n);
/** expf's replica (as strata__cpu_erff_replica()). */
void strata__cpu_expf_replica(const float *x, float *y, size_t n);

/** The exact GELU of x[i] into y[i] (strata__act()'s expression and bits). */
void strata__cpu_gelu(const float *x, float *y, size_t n);

/** dx[i] = dy[i] * GELU'(x[i]) (strata__act_grad()'s expression and bits). */
void strata__cpu_gelu_backward(const float *x, const float *dy, float *dx, size_t n);

#endif /* STRATA_DRIVERS_CPU_ERFF_H */
