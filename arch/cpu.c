/* CPU feature queries (CPUID through the compiler's builtins). */
#include <stdatomic.h>
#include <string.h>
#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

#include "arch/simd.h"

const char *strata__simd_isa(void)
{
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
                return "avx512";
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                return "avx2";
        return "sse2";
}

/*
 * Where glibc runs its FMA builds of exp, expf and erff (its own test: the CPU has FMA and
 * AVX2) and the libm is glibc 2.36, the one the replicas were checked against (2.41 replaced
 * erff; elsewhere the library keeps libm's calls, so that no machine's bits change). Decided
 * once; a relaxed atomic, as threads may race to the first call.
 */
int strata__simd_libm_replica(void)
{
        static atomic_int runs = -1;
        int r = atomic_load_explicit(&runs, memory_order_relaxed);

        if (r < 0) {
                __builtin_cpu_init();
                r = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#if defined(__GLIBC__)
                r = r && !strcmp(gnu_get_libc_version(), "2.36");
#else
                r = 0;
#endif
                atomic_store_explicit(&runs, r, memory_order_relaxed);
        }
        return r;
}
