/*
 * The CUDA driver's logical devices (internal to drivers/cuda/). Bottom to top: gpu.c holds
 * them, which one the calling thread runs and each one's first error (sticky: the driver's
 * sync returns it); blas.c multiplies on them through cuBLAS and cuBLASLt; cuda.c reserves
 * and binds them, runs every other kernel on their streams and holds the driver's tables.
 */
#ifndef STRATA_DRIVERS_CUDA_GPU_H
#define STRATA_DRIVERS_CUDA_GPU_H

#include <stddef.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* one declaration in CUDA 13's header */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "strata/device.h"

/* cuBLAS workspace: NVIDIA's advice for Hopper; the head of each device block. */
#define STRATA__CUDA_WS_BYTES ((size_t)32 << 20)


/* One logical device: its stream, cuBLAS handle and scratch. */
struct strata__cuda_gpu {
        int live;
        int ordinal;             /* the CUDA device it runs on */
        void *base, *host_base;  /* the blocks reserve() took */
        cudaStream_t stream;
        cublasHandle_t blas;
        double *partial, *total; /* device scratch for whole-vector reductions */
        int *partial_n, *count;
        double *h_total;         /* pinned readback */
        int *h_count;
        cudaError_t err;         /* first CUDA error, cudaSuccess when none */
        int blas_err;            /* first cuBLAS error */
        const char *err_op;
        void *ws;                /* cuBLAS(Lt) workspace, STRATA__CUDA_WS_BYTES */
        int tf32;                /* TF32 allowed (STRATA_DEV_TF32) */
        cublasLtHandle_t lt;     /* NULL: GEMMs through cublasSgemm/cublasGemmEx */
};

/* Logical device @p dev_id (0 <= dev_id < STRATA_MAX_DEVICES; live once reserved). */
struct strata__cuda_gpu *strata__cuda_gpu(int dev_id);

/* The calling thread's logical device (the driver's bind), and its number. */
struct strata__cuda_gpu *strata__cuda_me(void);
int strata__cuda_cur(void);

/* The calling thread runs logical device @p dev_id from now on (the driver's bind). */
void strata__cuda_bind_thread(int dev_id);

/* Keep the first error of the current device; later ones add nothing. */
void strata__cuda_note(cudaError_t e, const char *op);

/* strata__cuda_note() of the last kernel launch's outcome. */
void strata__cuda_launched(const char *op);

/* blas.c: the kernel table's gemm, gemm_lp, gemm_lp_bytes and prepare_lp. */
void strata__cuda_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);
void strata__cuda_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc, void *scratch);
size_t strata__cuda_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim);
int strata__cuda_prepare_lp(enum strata_dtype dt);

/* Forget logical device @p dev_id's remembered GEMM shapes (its handles are going). */
void strata__cuda_blas_forget(int dev_id);

#endif /* STRATA_DRIVERS_CUDA_GPU_H */
