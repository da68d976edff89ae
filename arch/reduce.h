/*
 * Reduction and copy kernels for the collectives (internal). Values are combined in the order
 * of the source list, for every element alike, so results do not depend on timing.
 */
#ifndef STRATA_ARCH_REDUCE_H
#define STRATA_ARCH_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/tensor.h"

/** Reduction operators (the public enum strata_reduce_op has the same values). */
enum { STRATA__SUM = 0, STRATA__MEAN, STRATA__MAX, STRATA__MIN, STRATA__SUM_TREE,
       /* internal: the sum (mean) of recursive halving, docs/decisions/0035 */
       STRATA__SUM_HALVING, STRATA__MEAN_HALVING };

/**
 * dst[d][i] = op(src[0][i], …, src[nsrc-1][i]) for every d < ndst and i in [lo, hi).
 * A destination may be one of the sources (same index): every source element is read before
 * it is written. bf16/f16 are accumulated in f32. Non-temporal stores when @p nt.
 * STRATA__SUM_TREE (f32, f64; integers as STRATA__SUM, which is exact) adds the sources
 * pairwise over their indices: ((s0 + s1) + (s2 + s3)) for four, and for a count not a power
 * of two the tree of the largest power of two first plus the tree of the rest.
 * STRATA__SUM_HALVING and STRATA__MEAN_HALVING (f32, f64; otherwise as STRATA__SUM and
 * STRATA__MEAN) add in the order of recursive halving over nsrc = 2^k + r sources: the first r
 * pairs (s0 + s1), ..., (s[2r-2] + s[2r-1]) and the other sources are 2^k leaves, added as the
 * balanced pairwise tree; the mean then divides by nsrc.
 */
void strata__reduce_many(enum strata_dtype dt, int op, void *const *dst, int ndst,
                         const void *const *src, int nsrc, size_t lo, size_t hi, int nt);

/**
 * strata__reduce_many() into the one destination @p dst, for f32 only, also telling whether a
 * value it stored is NaN or infinite (strata__nonfinite()): in the same pass for two sources'
 * sum, else read back after the reduction (decision 0104).
 * @retval 1 a value in [lo, hi) of @p dst is not finite; 0 none is; -1 @p dt is not
 * STRATA_F32 (nothing is reduced).
 */
int strata__reduce_many_check(enum strata_dtype dt, int op, void *dst, const void *const *src,
                              int nsrc, size_t lo, size_t hi, int nt);

/** Copy bytes [lo, hi) of src to every dst, non-temporal when @p nt. */
void strata__copy_many(void *const *dst, int ndst, const void *src, size_t lo, size_t hi, int nt);

/**
 * dst[i] = bf16(src[i]) for i < n: round to nearest even, NaN kept quiet, overflow to
 * infinity (strata__f32_to_bf16, vectorised). The mixed-precision GEMMs' operand packing and
 * ddp's bf16 gradient all-reduce share it.
 */
void strata__to_bf16(uint16_t *restrict dst, const float *restrict src, size_t n);

/** dst[i] = src[i] widened exactly from bf16 to f32, for i < n (vectorised). */
void strata__from_bf16(float *restrict dst, const uint16_t *restrict src, size_t n);

/** Non-zero when any of the n floats at @p x is NaN or infinite (one vectorised pass). */
int strata__nonfinite(const float *restrict x, size_t n);

/** Make non-temporal stores visible before a barrier. */
void strata__store_fence(void);

/** Pick the kernels once for this CPU; returns the ISA name. */
const char *strata__reduce_isa(void);

#endif /* STRATA_ARCH_REDUCE_H */
