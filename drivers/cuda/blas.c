/*
 * The CUDA driver's GEMMs (the kernel table's gemm and gemm_lp): cuBLAS on the device's stream
 * with its workspace, or, when STRATA_CUDA_GEMM=lt (decision 0051), cuBLASLt with each shape's
 * descriptors and algorithm remembered per logical device, in the driver's own memory, the
 * first time the shape is seen. Mixed precision rounds the operands into the scratch first.
 */
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* one declaration in CUDA 13's header */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/cuda/gpu.h"
#include "drivers/cuda/kernels.h"

#define LT_SHAPES 48 /* GEMM shapes a logical device remembers (cuBLASLt path) */

/*
 * One GEMM shape on the cuBLASLt path: its descriptors in the driver's own memory (the Init
 * variants allocate nothing) and the algorithm cuBLASLt's heuristic chose the first time.
 */
struct lt_shape {
        int used, ok;
        int dt, ta, tb, m, n, k, lda, ldb, ldc;
        cublasLtMatmulDescOpaque_t desc;
        cublasLtMatrixLayoutOpaque_t la, lb, lc;
        cublasLtMatmulAlgo_t algo;
};

static struct lt_shape lt_shapes[STRATA_MAX_DEVICES][LT_SHAPES];

/* Keep the first cuBLAS error of the current device (as strata__cuda_note() keeps CUDA's). */
static void blas_note(cublasStatus_t s, const char *op)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        if (s != CUBLAS_STATUS_SUCCESS && !g->blas_err) {
                g->blas_err = (int)s;
                g->err_op = op;
        }
}

/*
 * Describe slot @p x for these arguments and ask cuBLASLt's heuristic for its algorithm;
 * 0 when cuBLASLt has none (the slot then stays known as one cuBLAS serves).
 */
static int lt_describe(struct lt_shape *x, int dt, int ta, int tb, int m, int n, int k,
                       int lda, int ldb, int ldc)
{
        struct strata__cuda_gpu *g = strata__cuda_me();
        cudaDataType_t ty = dt ? (dt == STRATA_BF16 ? CUDA_R_16BF : CUDA_R_16F) : CUDA_R_32F;
        cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasLtMatmulPreferenceOpaque_t pref;
        cublasLtMatmulHeuristicResult_t r;
        size_t wsb = STRATA__CUDA_WS_BYTES;
        int got = 0;

        memset(x, 0, sizeof(*x));
        x->used = 1;
        x->dt = dt, x->ta = ta, x->tb = tb, x->m = m, x->n = n, x->k = k;
        x->lda = lda, x->ldb = ldb, x->ldc = ldc;
        /* Row-major C = op(A) op(B) as column-major C' = op(B)' op(A)'. */
        if (cublasLtMatmulDescInit((cublasLtMatmulDesc_t)&x->desc,
                                   dt || !g->tf32 ? CUBLAS_COMPUTE_32F
                                                  : CUBLAS_COMPUTE_32F_FAST_TF32,
                                   CUDA_R_32F) ||
            cublasLtMatmulDescSetAttribute((cublasLtMatmulDesc_t)&x->desc,
                                           CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)) ||
            cublasLtMatmulDescSetAttribute((cublasLtMatmulDesc_t)&x->desc,
                                           CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)) ||
            cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&x->la, ty,
                                     tb ? (uint64_t)k : (uint64_t)n,
                                     tb ? (uint64_t)n : (uint64_t)k, ldb) ||
            cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&x->lb, ty,
                                     ta ? (uint64_t)m : (uint64_t)k,
                                     ta ? (uint64_t)k : (uint64_t)m, lda) ||
            cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&x->lc, CUDA_R_32F, (uint64_t)n,
                                     (uint64_t)m, ldc) ||
            cublasLtMatmulPreferenceInit((cublasLtMatmulPreference_t)&pref) ||
            cublasLtMatmulPreferenceSetAttribute((cublasLtMatmulPreference_t)&pref,
                                                 CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                 sizeof(wsb)) ||
            cublasLtMatmulAlgoGetHeuristic(
                    g->lt, (cublasLtMatmulDesc_t)&x->desc, (cublasLtMatrixLayout_t)&x->la,
                    (cublasLtMatrixLayout_t)&x->lb, (cublasLtMatrixLayout_t)&x->lc,
                    (cublasLtMatrixLayout_t)&x->lc, (cublasLtMatmulPreference_t)&pref, 1, &r,
                    &got) ||
            got < 1)
                return 0;
        x->algo = r.algo;
        x->ok = 1;
        return 1;
}

/*
 * The remembered shape for these arguments, described on first sight; NULL when the table is
 * full or cuBLASLt has no algorithm for it (the caller then uses cuBLAS).
 */
static struct lt_shape *lt_find(int dt, int ta, int tb, int m, int n, int k, int lda, int ldb,
                                int ldc)
{
        struct lt_shape *t = lt_shapes[strata__cuda_cur()];
        int i = 0;

        for (; i < LT_SHAPES && t[i].used; i++)
                if (t[i].dt == dt && t[i].ta == ta && t[i].tb == tb && t[i].m == m &&
                    t[i].n == n && t[i].k == k && t[i].lda == lda && t[i].ldb == ldb &&
                    t[i].ldc == ldc)
                        return t[i].ok ? &t[i] : NULL;
        if (i == LT_SHAPES ||
            !lt_describe(&t[i], dt, ta, tb, m, n, k, lda, ldb, ldc))
                return NULL;
        return &t[i];
}

/* C = alpha op(A) op(B) + beta C through cuBLASLt when on and the shape is known; else 0. */
static int lt_gemm(int dt, int ta, int tb, int m, int n, int k, float alpha, const void *a,
                   int lda, const void *b, int ldb, float beta, float *c, int ldc)
{
        struct strata__cuda_gpu *g = strata__cuda_me();
        struct lt_shape *x;

        if (!g->lt || !(x = lt_find(dt, ta, tb, m, n, k, lda, ldb, ldc)))
                return 0;
        blas_note(cublasLtMatmul(g->lt, (cublasLtMatmulDesc_t)&x->desc, &alpha, b,
                                 (cublasLtMatrixLayout_t)&x->la, a, (cublasLtMatrixLayout_t)&x->lb,
                                 &beta, c, (cublasLtMatrixLayout_t)&x->lc, c,
                                 (cublasLtMatrixLayout_t)&x->lc, &x->algo, g->ws,
                                 STRATA__CUDA_WS_BYTES, g->stream),
                  "gemm (cuBLASLt)");
        return 1;
}

void strata__cuda_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc)
{
        if (lt_gemm(0, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
                return;
        /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
        blas_note(cublasSgemm(strata__cuda_me()->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                              &beta, c, ldc),
                  "gemm");
}

/*
 * Mixed precision: both operands, as stored, rounded into the scratch as bf16 or f16, then
 * cublasGemmEx with f32 output and f32 compute (TF32 never: the operands are already low
 * precision). Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, as in gemm.
 */
void strata__cuda_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc, void *scratch)
{
        int bf = dt == STRATA_BF16, ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k;
        int bc = tb ? k : n;
        cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
        char *a16 = scratch, *b16 = a16 + ((size_t)ar * ac * 2 + 255) / 256 * 256;

        if (m <= 0 || n <= 0)
                return;
        strata__k_round_half(strata__cuda_me()->stream, a16, a, ar, ac, lda, bf);
        strata__k_round_half(strata__cuda_me()->stream, b16, b, br, bc, ldb, bf);
        strata__cuda_launched("round operands");
        if (lt_gemm(dt, ta, tb, m, n, k, alpha, a16, ac > 0 ? ac : 1, b16, bc > 0 ? bc : 1, beta,
                    c, ldc))
                return;
        blas_note(cublasGemmEx(strata__cuda_me()->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b16, t,
                               bc > 0 ? bc : 1, a16, t, ac > 0 ? ac : 1, &beta, c, CUDA_R_32F, ldc,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "gemm_lp");
}

size_t strata__cuda_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim)
{
        (void)dt, (void)dim;
        return elems * 2 + 512; /* two 256-byte aligned halves */
}

int strata__cuda_prepare_lp(enum strata_dtype dt)
{
        if (dt != STRATA_BF16 && dt != STRATA_F16)
                return strata__fail(STRATA_EINVAL, "cuda: no mixed-precision GEMM for dtype %d",
                                    (int)dt);
        return STRATA_OK;
}

void strata__cuda_blas_forget(int dev_id)
{
        memset(lt_shapes[dev_id], 0, sizeof(lt_shapes[0]));
}
