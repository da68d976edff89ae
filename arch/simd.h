/*
 * Per-ISA code selection: a hot loop marked STRATA_SIMD is compiled for AVX-512, AVX2 and
 * baseline x86-64, and the loader picks one clone once, by CPUID, when the library is loaded
 * (GCC/clang function multi-versioning through an ifunc). Loops stay plain C that the
 * compiler vectorises for each target.
 */
#ifndef STRATA_ARCH_SIMD_H
#define STRATA_ARCH_SIMD_H

#if defined(__x86_64__) && !defined(STRATA_NO_CLONES) && !defined(__SANITIZE_THREAD__) &&   \
        !defined(STRATA_SANITIZED)
#define STRATA_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STRATA_SIMD
#endif

/**
 * The instruction set the STRATA_SIMD clones run with here ("avx512", "avx2" or "sse2").
 * (strata-train --verbose prints it.)
 */
const char *strata__simd_isa(void);

/**
 * Whether the vector replicas of libm's functions (exp: arch/expd.c; erff, expf:
 * drivers/cpu/erff.c) give libm's bits here: glibc runs its FMA builds (AVX2 and FMA) and is
 * version 2.36, the one they were checked against. Otherwise they call libm.
 */
int strata__simd_libm_replica(void);

#endif /* STRATA_ARCH_SIMD_H */
