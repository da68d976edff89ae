/* The core's f32 FMA peak, measured: what the benchmarks report their GEMMs against. */
#ifndef STRATA_TOOLS_PEAK_H
#define STRATA_TOOLS_PEAK_H

/**
 * @brief One measurement of this core's AVX2 f32 FMA rate in GFLOP/s (12 independent
 *        8-wide FMA chains); 0 where the CPU is not x86-64. Callers take the best of several.
 *        Call only where the CPU has AVX2 and FMA.
 */
double strata_tool_peak_avx2(void);

/** @brief The same timed by @p clock (seconds), e.g. strata_tool_cpu_now. */
double strata_tool_peak_avx2_on(double (*clock)(void));

/**
 * @brief The same for AVX-512 (16 independent 16-wide FMA chains), timed by @p clock: the
 *        peak of a CPU whose native kernel set is AVX-512. Call only where the CPU has
 *        AVX-512F; 0 where the CPU is not x86-64.
 */
double strata_tool_peak_avx512_on(double (*clock)(void));

#endif
