/*
 * exp() over an array of doubles with libm's bits, in vectors where that can be promised
 * (arch/expd.c, decision 0089): glibc 2.36's exp replayed operation by operation.
 */
#ifndef STRATA_ARCH_EXPD_H
#define STRATA_ARCH_EXPD_H

#include <stddef.h>

/**
 * The path strata__expd() takes here: "replica" (glibc 2.36's exp replayed in vectors: the
 * CPU has FMA and AVX2 and the libm is glibc 2.36) or "libm" (one call per element).
 */
const char *strata__expd_path(void);

/** v[i] = exp(v[i]) with libm's bits, for i < @p n. */
void strata__expd(double *v, size_t n);

/**
 * The replica itself whatever the path (for the checks): v[i] = exp(v[i]) for every i < @p n,
 * replayed where the argument is on glibc's main path (2^-54 <= |x| < 512), libm's call for
 * the others.
 */
void strata__expd_replica(double *v, size_t n);

#endif /* STRATA_ARCH_EXPD_H */
