/* The device drivers compiled into this library (internal). */
#ifndef STRATA_DRIVERS_DRIVERS_H
#define STRATA_DRIVERS_DRIVERS_H

#include "strata/device.h"
#include "strata/tensor.h"

extern const struct strata_device_ops strata__cpu_driver;
/* In libstrata-cuda.so (drivers/cuda/), loaded by drivers/registry.c when asked for. */
extern const struct strata_device_ops strata__cuda_driver;

/**
 * The CPU driver whose GEMMs run kernel set @p set; STRATA_ENOTSUP (with the reason) where
 * this CPU cannot run it, STRATA_EINVAL for a value that is no set.
 */
int strata__cpu_driver_for(enum strata_kernels set, const struct strata_device_ops **out);

/**
 * The accelerator's driver as strata_device_driver() gives it, without probing for a device:
 * for strata_plan(), whose sizes are the driver's own numbers, so a GPU job is planned on a
 * machine without the GPU (issue 58, item 10).
 */
int strata__device_driver_unprobed(enum strata_accelerator kind,
                                   const struct strata_device_ops **out);

/** 1 when @p dev is one of the CPU driver's tables (one per kernel set). */
int strata__cpu_is(const struct strata_device_ops *dev);

/* drivers/cpu/lowp.c: the CPU driver's gemm_lp, gemm_lp_io, gemm_lp_bytes and prepare_lp. */
void strata__cpu_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc, void *scratch);
void strata__cpu_gemm_lp_io(const struct strata_gemm_io *g, void *scratch);
size_t strata__cpu_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim);
int strata__cpu_prepare_lp(enum strata_dtype dt);
/*
 * The bf16 GEMMs' path: "bf16:amx" where the CPU has AMX-BF16, STRATA_AMX=1 opts in and the
 * kernel grants the tiles, else "bf16:avx512_bf16" where it has AVX512_BF16, else "bf16:fma".
 */
const char *strata__cpu_lp_name(void);
#ifdef STRATA_TESTING
/*
 * Tests only: @p on 1 makes bf16 GEMMs take bf16:fma even on an AVX512_BF16 CPU (0: the CPU
 * decides again). Call before a plan or prepare_lp(STRATA_BF16): the scratch size follows it.
 */
void strata__cpu_lp_force_fma(int on);
/* How strata__cpu_lp_force_amx() lets bf16 GEMMs use AMX. */
enum strata__lp_amx {
        STRATA__AMX_CPU,      /* the default: where the CPU has it and STRATA_AMX=1 */
        STRATA__AMX_OFF,      /* never: bf16:avx512_bf16 or bf16:fma as the CPU allows */
        STRATA__AMX_EMULATED, /* always, its tile instructions run by a scalar emulator */
        STRATA__AMX_ON,       /* where the CPU has it, opted in or not (the tiles asked for) */
};
/*
 * Tests only: bf16:amx on or off as @p how says (strata__cpu_lp_force_fma(1) still wins).
 * Call before a plan or prepare_lp(STRATA_BF16): the scratch size follows it.
 */
void strata__cpu_lp_force_amx(enum strata__lp_amx how);
#endif

#endif /* STRATA_DRIVERS_DRIVERS_H */
