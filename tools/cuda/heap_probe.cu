/*
 * strata-cuda-heap-probe: the host heap calls each CUDA call that a training
 * step makes costs (cublasSgemm, cuBLASLt with descriptors in caller memory and
 * a fixed algorithm, its heuristic, copies, memsets, synchronisation, a kernel
 * launch), counted by tools/heapcount.c's interposer. Decision 0051: the first
 * GPU lent showed ~50 000 heap calls during CUDA steps, none from Strata; this
 * names the CUDA calls that make them, in one short run on a GPU.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
extern "C" {
#include "tools/heapcount.h"
}

__global__ void probe_add(float *x, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;

        if (i < n)
                x[i] += 1.0f;
}
#define N 200
int main()
{
        int m = 128, n = 256, k = 784;
        float one = 1, zero = 0;
        float *a, *b, *c, *h;
        void *ws;
        cudaStream_t s;
        cublasHandle_t hb;
        cublasLtHandle_t lt;
        long cnt;
        if (cudaMalloc((void **)&a, 4 << 22) != cudaSuccess) {
                printf("no GPU\n");
                return 1;
        }
        cudaMalloc((void **)&b, 4 << 22);
        cudaMalloc((void **)&c, 4 << 22);
        cudaMalloc(&ws, 32 << 20);
        cudaMallocHost((void **)&h, 4 << 20);
        cudaStreamCreate(&s);
        cublasCreate(&hb);
        cublasSetStream(hb, s);
        cublasSetWorkspace(hb, ws, 32 << 20);
        for (int w = 0; w < 3; w++)
                cublasSgemm(hb, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n);
        cudaStreamSynchronize(s);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                cublasSgemm(hb, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n);
        cnt = strata_heapcount_stop();
        printf("cublasSgemm: %.1f heap calls per call\n", (double)cnt / N);
        cublasSetMathMode(hb, CUBLAS_PEDANTIC_MATH);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                cublasSgemm(hb, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n);
        cnt = strata_heapcount_stop();
        printf("cublasSgemm pedantic: %.1f heap calls per call\n", (double)cnt / N);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                cudaMemcpyAsync(c, h, 4096, cudaMemcpyHostToDevice, s);
        cnt = strata_heapcount_stop();
        printf("cudaMemcpyAsync pinned: %.1f\n", (double)cnt / N);
        static float pg[1 << 16];
        strata_heapcount_start();
        for (int i = 0; i < N; i++) {
                cudaMemcpyAsync(c, pg, sizeof(pg), cudaMemcpyHostToDevice, s);
                cudaMemcpyAsync(pg, c, 4096, cudaMemcpyDeviceToHost, s);
                cudaStreamSynchronize(s);
        }
        cnt = strata_heapcount_stop();
        printf("cudaMemcpyAsync pageable H2D+D2H+sync: %.1f\n", (double)cnt / N);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                probe_add<<<16, 256, 0, s>>>(c, 4096);
        cnt = strata_heapcount_stop();
        printf("kernel launch: %.1f\n", (double)cnt / N);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                cudaMemsetAsync(c, 0, 4096, s);
        cnt = strata_heapcount_stop();
        printf("cudaMemsetAsync: %.1f\n", (double)cnt / N);
        strata_heapcount_start();
        for (int i = 0; i < N; i++) {
                cudaStreamSynchronize(s);
                cudaGetLastError();
        }
        cnt = strata_heapcount_stop();
        printf("cudaStreamSynchronize+GetLastError: %.1f\n", (double)cnt / N);
        /* cublasLt with descriptors and an algo chosen before the window */
        cublasLtCreate(&lt);
        cublasLtMatmulDesc_t d;
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatmulPreference_t p;
        cublasOperation_t tA = CUBLAS_OP_T;
        size_t wsz = 32 << 20;
        int got = 0;
        cublasLtMatmulHeuristicResult_t r;
        cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA));
        cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, n, k);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, m, k);
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n);
        cublasLtMatmulPreferenceCreate(&p);
        cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz,
                                             sizeof(wsz));
        cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, 1, &r, &got);
        printf("cublasLt heuristic: %d algos\n", got);
        if (got < 1)
                return 1;
        for (int w = 0; w < 3; w++)
                cublasLtMatmul(lt, d, &one, b, la, a, lb, &zero, c, lc, c, lc, &r.algo, ws, wsz, s);
        cudaStreamSynchronize(s);
        strata_heapcount_start();
        for (int i = 0; i < N; i++)
                cublasLtMatmul(lt, d, &one, b, la, a, lb, &zero, c, lc, c, lc, &r.algo, ws, wsz, s);
        cnt = strata_heapcount_stop();
        printf("cublasLtMatmul fixed algo: %.1f heap calls per call\n", (double)cnt / N);
        { /* a new shape described in caller memory (Init variants), heuristics asked
             once */
                cublasLtMatmulDescOpaque_t od;
                cublasLtMatrixLayoutOpaque_t oa, ob, oc;
                cublasLtMatmulPreferenceOpaque_t op;
                cublasLtMatmulHeuristicResult_t r2;
                int m2 = 100, n2 = 300, k2 = 200, g2 = 0;
                strata_heapcount_start();
                cublasLtMatmulDescInit((cublasLtMatmulDesc_t)&od, CUBLAS_COMPUTE_32F, CUDA_R_32F);
                cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&oa, CUDA_R_32F, n2, k2, n2);
                cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&ob, CUDA_R_32F, k2, m2, k2);
                cublasLtMatrixLayoutInit((cublasLtMatrixLayout_t)&oc, CUDA_R_32F, n2, m2, n2);
                cublasLtMatmulPreferenceInit((cublasLtMatmulPreference_t)&op);
                cublasLtMatmulPreferenceSetAttribute((cublasLtMatmulPreference_t)&op,
                                                     CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz,
                                                     sizeof(wsz));
                cnt = strata_heapcount_stop();
                printf("Lt Init x5: %ld heap calls\n", cnt);
                strata_heapcount_start();
                cublasLtMatmulAlgoGetHeuristic(
                    lt, (cublasLtMatmulDesc_t)&od, (cublasLtMatrixLayout_t)&oa,
                    (cublasLtMatrixLayout_t)&ob, (cublasLtMatrixLayout_t)&oc,
                    (cublasLtMatrixLayout_t)&oc, (cublasLtMatmulPreference_t)&op, 1, &r2, &g2);
                cnt = strata_heapcount_stop();
                printf("Lt heuristic (new shape): %ld heap calls, %d algos\n", cnt, g2);
                if (g2 < 1)
                        return 1;
                strata_heapcount_start();
                for (int i = 0; i < N; i++)
                        cublasLtMatmul(lt, (cublasLtMatmulDesc_t)&od, &one, b,
                                       (cublasLtMatrixLayout_t)&oa, a, (cublasLtMatrixLayout_t)&ob,
                                       &zero, c, (cublasLtMatrixLayout_t)&oc, c,
                                       (cublasLtMatrixLayout_t)&oc, &r2.algo, ws, wsz, s);
                cnt = strata_heapcount_stop();
                printf("cublasLtMatmul opaque descs: %.1f heap calls per call\n", (double)cnt / N);
                strata_heapcount_start();
                for (int i = 0; i < N; i++)
                        cublasLtMatmul(lt, (cublasLtMatmulDesc_t)&od, &one, b,
                                       (cublasLtMatrixLayout_t)&oa, a, (cublasLtMatrixLayout_t)&ob,
                                       &zero, c, (cublasLtMatrixLayout_t)&oc, c,
                                       (cublasLtMatrixLayout_t)&oc, NULL, ws, wsz, s);
                cnt = strata_heapcount_stop();
                printf("cublasLtMatmul algo NULL: %.1f heap calls per call\n", (double)cnt / N);
        }
        cudaStreamSynchronize(s);
        printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 0;
}
