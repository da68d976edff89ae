/* CPU feature queries (CPUID through the compiler's builtins). */
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
