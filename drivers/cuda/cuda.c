/*
 * The CUDA device driver: GEMM through cuBLAS (workspace from the reserved device memory, TF32
 * only when the configuration allows it), every other op a kernel from kernels.cu, all on one
 * compute stream per GPU.
 *
 * Memory: reserve() makes the only cudaMalloc and cudaHostAlloc of a run, at init. The runtime
 * carves parameters, gradients, activations and optimizer state from the device block; the
 * driver keeps its head (cuBLAS workspace, reduction scratch), so that what the runtime gets
 * starts 256-byte aligned. Nothing is allocated per step.
 *
 * Errors: ops return nothing, so the first CUDA error of a device is kept (sticky) and
 * returned by sync(), which the strategy calls at the end of every step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* one declaration in CUDA 13's header */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <hwloc.h>
#include <hwloc/cudart.h>
#include <stdio.h>

#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "drivers/cuda/kernels.h"

#define MAX_GPUS STRATA_MAX_DEVICES
#define LT_SHAPES 48 /* GEMM shapes a logical device remembers (cuBLASLt path) */
#define WS_BYTES ((size_t)32 << 20) /* cuBLAS workspace: NVIDIA's advice for Hopper */
#define SCRATCH_BYTES ((size_t)64 << 10)
#define OVERHEAD (WS_BYTES + SCRATCH_BYTES)
#define PIN_HEAD ((size_t)4096)

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

/* One logical device: its stream, cuBLAS handle and scratch. */
struct gpu {
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
        void *ws;                /* cuBLAS(Lt) workspace, WS_BYTES */
        int tf32;                /* TF32 allowed (STRATA_DEV_TF32) */
        cublasLtHandle_t lt;     /* NULL: GEMMs through cublasSgemm/cublasGemmEx */
};

static struct gpu gpus[MAX_GPUS];
static struct lt_shape lt_shapes[MAX_GPUS][LT_SHAPES];
static _Thread_local int cur; /* the calling thread's logical device (bind) */

static struct gpu *me(void)
{
        return &gpus[cur];
}

/* Keep the first error of the current device; later ones add nothing. */
static void note(cudaError_t e, const char *op)
{
        struct gpu *g = me();

        if (e != cudaSuccess && g->err == cudaSuccess) {
                g->err = e;
                g->err_op = op;
        }
}

static void launched(const char *op)
{
        note(cudaGetLastError(), op);
}

static void blas_note(cublasStatus_t s, const char *op)
{
        struct gpu *g = me();

        if (s != CUBLAS_STATUS_SUCCESS && !g->blas_err) {
                g->blas_err = (int)s;
                g->err_op = op;
        }
}

static int cuda_probe(const char **why)
{
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);

        if (e != cudaSuccess) {
                if (why)
                        *why = e == cudaErrorInsufficientDriver
                                       ? "no NVIDIA driver for this CUDA runtime is loaded (no "
                                         "GPU here, or its driver is older than the toolkit)"
                               : e == cudaErrorNoDevice ? "no CUDA-capable GPU is present"
                                                        : cudaGetErrorString(e);
                return 0;
        }
        if (n <= 0) {
                if (why)
                        *why = "no CUDA device is visible";
                return 0;
        }
        if (why)
                *why = NULL;
        return 1;
}

/* ---- memory ---- */

static int fail_cuda(cudaError_t e, int ordinal, const char *what)
{
        return strata__fail(e == cudaErrorMemoryAllocation ? STRATA_ENOMEM : STRATA_EDEVICE,
                            "cuda device %d: %s: %s", ordinal, what, cudaGetErrorString(e));
}

static void drop(struct gpu *g)
{
        void *dev = g->base, *host = g->host_base;

        if (g->blas)
                cublasDestroy(g->blas);
        if (g->lt)
                cublasLtDestroy(g->lt);
        memset(lt_shapes[g - gpus], 0, sizeof(lt_shapes[0]));
        if (g->stream)
                cudaStreamDestroy(g->stream);
        if (dev)
                cudaFree(dev);
        if (host)
                cudaFreeHost(host);
        memset(g, 0, sizeof(*g));
}

/* The driver's head of the device block: workspace, then scratch. */
static int setup_blas(struct gpu *g, unsigned char *ws, unsigned flags, int ordinal)
{
        cublasStatus_t s;

        if ((s = cublasCreate(&g->blas)) != CUBLAS_STATUS_SUCCESS)
                return strata__fail(STRATA_EDEVICE, "cuda device %d: cublasCreate failed (%d)",
                                    ordinal, (int)s);
        if ((s = cublasSetStream(g->blas, g->stream)) != CUBLAS_STATUS_SUCCESS ||
            (s = cublasSetWorkspace(g->blas, ws, WS_BYTES)) != CUBLAS_STATUS_SUCCESS ||
            (s = cublasSetMathMode(g->blas, flags & STRATA_DEV_TF32
                                                    ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_DEFAULT_MATH)) !=
                    CUBLAS_STATUS_SUCCESS)
                return strata__fail(STRATA_EDEVICE, "cuda device %d: cuBLAS set-up failed (%d)",
                                    ordinal, (int)s);
        g->ws = ws;
        g->tf32 = !!(flags & STRATA_DEV_TF32);
        {
                /* Experiment (decision 0051): STRATA_CUDA_GEMM=lt runs GEMMs through cuBLASLt. */
                const char *v = getenv("STRATA_CUDA_GEMM");

                if (v && !strcmp(v, "lt") &&
                    (s = cublasLtCreate(&g->lt)) != CUBLAS_STATUS_SUCCESS)
                        return strata__fail(STRATA_EDEVICE,
                                            "cuda device %d: cublasLtCreate failed (%d)", ordinal,
                                            (int)s);
        }
        return STRATA_OK;
}

static int cuda_reserve(int dev_id, size_t dev_bytes, size_t host_bytes, unsigned flags,
                        void **dev, void **host)
{
        struct gpu *g;
        unsigned char *d = NULL, *h = NULL;
        cudaError_t e;
        int n = 0, ordinal, rc;

        if (dev_id < 0 || dev_id >= MAX_GPUS || !dev || !host)
                return strata__fail(STRATA_EINVAL, "cuda reserve: device %d or output invalid",
                                    dev_id);
        if (dev_bytes <= OVERHEAD)
                return strata__fail(STRATA_EINVAL, "cuda reserve: %zu bytes leave no room beside "
                                                   "the driver's %zu", dev_bytes, OVERHEAD);
        if ((e = cudaGetDeviceCount(&n)) != cudaSuccess || n <= 0)
                return strata__fail(STRATA_ENODEV, "cuda: %s",
                                    e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        g = &gpus[dev_id];
        if (g->live)
                return strata__fail(STRATA_EBADSTATE, "cuda device %d is already reserved",
                                    dev_id);
        ordinal = dev_id % n; /* several logical devices may share one GPU */
        if ((e = cudaSetDevice(ordinal)) != cudaSuccess)
                return fail_cuda(e, ordinal, "cudaSetDevice");
        /* Collectives read other GPUs' buffers directly: allow it where the hardware can. */
        for (int p = 0; p < n; p++) {
                int can = 0;

                if (p != ordinal && cudaDeviceCanAccessPeer(&can, ordinal, p) == cudaSuccess &&
                    can && cudaDeviceEnablePeerAccess(p, 0) != cudaSuccess)
                        (void)cudaGetLastError(); /* already enabled: not an error */
        }
        if ((e = cudaMalloc((void **)&d, dev_bytes)) != cudaSuccess)
                return fail_cuda(e, ordinal, "cudaMalloc of the device arena");
        if ((e = cudaHostAlloc((void **)&h, host_bytes + PIN_HEAD, cudaHostAllocDefault)) !=
            cudaSuccess) {
                cudaFree(d);
                return fail_cuda(e, ordinal, "cudaHostAlloc of the staging");
        }
        memset(g, 0, sizeof(*g));
        g->ordinal = ordinal;
        g->base = d;
        g->host_base = h;
        if ((e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess) {
                drop(g);
                return fail_cuda(e, ordinal, "cudaStreamCreate");
        }
        if ((rc = setup_blas(g, d, flags, ordinal)) != STRATA_OK) {
                drop(g);
                return rc;
        }
        g->partial = (double *)(d + WS_BYTES);
        g->partial_n = (int *)(g->partial + STRATA__CUDA_PARTIALS);
        g->total = (double *)(g->partial_n + STRATA__CUDA_PARTIALS);
        g->count = (int *)(g->total + 1);
        g->h_total = (double *)h;
        g->h_count = (int *)(g->h_total + 1);
        g->live = 1;
        *dev = d + OVERHEAD;
        *host = h + PIN_HEAD;
        return STRATA_OK;
}

static void cuda_unreserve(int dev_id, void *dev, void *host)
{
        (void)dev;
        (void)host;
        if (dev_id < 0 || dev_id >= MAX_GPUS || !gpus[dev_id].live)
                return;
        cudaSetDevice(gpus[dev_id].ordinal);
        cudaStreamSynchronize(gpus[dev_id].stream);
        drop(&gpus[dev_id]);
}

static int cuda_bind(int dev_id)
{
        cudaError_t e;

        if (dev_id < 0 || dev_id >= MAX_GPUS || !gpus[dev_id].live)
                return strata__fail(STRATA_EINVAL, "cuda bind: device %d is not reserved",
                                    dev_id);
        if ((e = cudaSetDevice(gpus[dev_id].ordinal)) != cudaSuccess)
                return fail_cuda(e, gpus[dev_id].ordinal, "cudaSetDevice");
        cur = dev_id;
        return STRATA_OK;
}

static void cuda_to_device(void *dst, const void *src, size_t bytes)
{
        note(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, me()->stream), "to_device");
}

static void cuda_to_host(void *dst, const void *src, size_t bytes)
{
        note(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, me()->stream), "to_host");
        note(cudaStreamSynchronize(me()->stream), "to_host");
}

static int cuda_sync(void)
{
        struct gpu *g = me();

        note(cudaStreamSynchronize(g->stream), "sync");
        if (g->err != cudaSuccess)
                return strata__fail(STRATA_EDEVICE, "cuda device %d: %s: %s", g->ordinal,
                                    g->err_op, cudaGetErrorString(g->err));
        if (g->blas_err)
                return strata__fail(STRATA_EDEVICE, "cuda device %d: %s: cuBLAS status %d",
                                    g->ordinal, g->err_op, g->blas_err);
        return STRATA_OK;
}

/*
 * The PUs hwloc reports as local to GPU @p ordinal's PCIe slot, or NULL when hwloc cannot tell.
 * The caller frees the bitmap (hwloc_bitmap_free). Setup and --verbose only.
 */
static hwloc_bitmap_t gpu_cpuset(int ordinal)
{
        hwloc_topology_t topo;
        hwloc_bitmap_t set = NULL;

        if (hwloc_topology_init(&topo) != 0)
                return NULL;
        if (hwloc_topology_load(topo) == 0 && (set = hwloc_bitmap_alloc()) != NULL &&
            hwloc_cudart_get_device_cpuset(topo, ordinal, set) != 0) {
                hwloc_bitmap_free(set);
                set = NULL;
        }
        hwloc_topology_destroy(topo);
        return set;
}

/* The GPU's name and the cores hwloc reports as local to its PCI slot. */
static void cuda_describe(int dev_id, char *buf, size_t n)
{
        struct cudaDeviceProp prop;
        hwloc_bitmap_t set;
        char cores[256] = "unknown";
        int ordinal;

        if (!buf || n == 0)
                return;
        if (dev_id < 0 || dev_id >= MAX_GPUS || !gpus[dev_id].live) {
                snprintf(buf, n, "cuda device %d: not reserved", dev_id);
                return;
        }
        ordinal = gpus[dev_id].ordinal;
        if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess)
                snprintf(prop.name, sizeof(prop.name), "?");
        if ((set = gpu_cpuset(ordinal)) != NULL) {
                hwloc_bitmap_list_snprintf(cores, sizeof(cores), set);
                hwloc_bitmap_free(set);
        }
        snprintf(buf, n, "cuda device %d = GPU %d (%s), host cores local to it: %s", dev_id,
                 ordinal, prop.name, cores);
}

/* The PUs hwloc reports as local to the GPU's PCIe slot: workers go there first. */
static int cuda_local_pus(int dev_id, int *pus, int max)
{
        hwloc_bitmap_t set;
        int n = 0;

        if (dev_id < 0 || dev_id >= MAX_GPUS || !gpus[dev_id].live || !pus || max <= 0)
                return 0;
        if ((set = gpu_cpuset(gpus[dev_id].ordinal)) == NULL)
                return 0;
        for (int i = hwloc_bitmap_first(set); i >= 0 && n < max; i = hwloc_bitmap_next(set, i))
                pus[n++] = i;
        hwloc_bitmap_free(set);
        return n;
}

/* ---- compute ---- */

/*
 * Describe slot @p x for these arguments and ask cuBLASLt's heuristic for its algorithm;
 * 0 when cuBLASLt has none (the slot then stays known as one cuBLAS serves).
 */
static int lt_describe(struct lt_shape *x, int dt, int ta, int tb, int m, int n, int k,
                       int lda, int ldb, int ldc)
{
        struct gpu *g = me();
        cudaDataType_t ty = dt ? (dt == STRATA_BF16 ? CUDA_R_16BF : CUDA_R_16F) : CUDA_R_32F;
        cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasLtMatmulPreferenceOpaque_t pref;
        cublasLtMatmulHeuristicResult_t r;
        size_t wsb = WS_BYTES;
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
        struct lt_shape *t = lt_shapes[cur];
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
        struct gpu *g = me();
        struct lt_shape *x;

        if (!g->lt || !(x = lt_find(dt, ta, tb, m, n, k, lda, ldb, ldc)))
                return 0;
        blas_note(cublasLtMatmul(g->lt, (cublasLtMatmulDesc_t)&x->desc, &alpha, b,
                                 (cublasLtMatrixLayout_t)&x->la, a, (cublasLtMatrixLayout_t)&x->lb,
                                 &beta, c, (cublasLtMatrixLayout_t)&x->lc, c,
                                 (cublasLtMatrixLayout_t)&x->lc, &x->algo, g->ws, WS_BYTES,
                                 g->stream),
                  "gemm (cuBLASLt)");
        return 1;
}

static void cuda_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
{
        if (lt_gemm(0, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
                return;
        /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
        blas_note(cublasSgemm(me()->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                              &beta, c, ldc),
                  "gemm");
}

#define S (me()->stream)

/*
 * Mixed precision: both operands, as stored, rounded into the scratch as bf16 or f16, then
 * cublasGemmEx with f32 output and f32 compute (TF32 never: the operands are already low
 * precision). Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, as in gemm.
 */
static void cuda_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc, void *scratch)
{
        int bf = dt == STRATA_BF16, ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k;
        int bc = tb ? k : n;
        cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
        char *a16 = scratch, *b16 = a16 + ((size_t)ar * ac * 2 + 255) / 256 * 256;

        if (m <= 0 || n <= 0)
                return;
        strata__k_round_half(S, a16, a, ar, ac, lda, bf);
        strata__k_round_half(S, b16, b, br, bc, ldb, bf);
        launched("round operands");
        if (lt_gemm(dt, ta, tb, m, n, k, alpha, a16, ac > 0 ? ac : 1, b16, bc > 0 ? bc : 1, beta,
                    c, ldc))
                return;
        blas_note(cublasGemmEx(me()->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b16, t,
                               bc > 0 ? bc : 1, a16, t, ac > 0 ? ac : 1, &beta, c, CUDA_R_32F,
                               ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "gemm_lp");
}

static size_t cuda_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim)
{
        (void)dt, (void)dim;
        return elems * 2 + 512; /* two 256-byte aligned halves */
}

static int cuda_prepare_lp(enum strata_dtype dt)
{
        if (dt != STRATA_BF16 && dt != STRATA_F16)
                return strata__fail(STRATA_EINVAL, "cuda: no mixed-precision GEMM for dtype %d",
                                    (int)dt);
        return STRATA_OK;
}

static void cuda_fill_rows(float *y, const float *bias, int rows, int cols)
{
        strata__k_fill_rows(S, y, bias, rows, cols);
        launched("fill_rows");
}

static void cuda_relu(const float *x, float *y, size_t n)
{
        strata__k_relu(S, x, y, n);
        launched("relu");
}

static void cuda_relu_backward(const float *y, const float *dy, float *dx, size_t n)
{
        strata__k_relu_backward(S, y, dy, dx, n);
        launched("relu_backward");
}

static void cuda_act(enum strata_activation kind, float a, const float *x, float *y, size_t n)
{
        strata__k_act(S, kind, a, x, y, n);
        launched("act");
}

static void cuda_act_backward(enum strata_activation kind, float a, const float *x,
                              const float *y, const float *dy, float *dx, size_t n)
{
        strata__k_act_backward(S, kind, a, x, y, dy, dx, n);
        launched("act_backward");
}

static void cuda_col_sums(const float *x, int rows, int cols, float *s, int acc)
{
        strata__k_col_sums(S, x, rows, cols, s, acc);
        launched("col_sums");
}

static double cuda_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
                                float scale, float *dlogits, int *correct)
{
        struct gpu *g = me();

        strata__k_softmax_xent(S, logits, labels, rows, cols, scale, dlogits, g->partial,
                               g->partial_n, g->total, g->count);
        launched("softmax_xent");
        note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double) + sizeof(int),
                             cudaMemcpyDeviceToHost, g->stream),
             "softmax_xent readback");
        note(cudaStreamSynchronize(g->stream), "softmax_xent");
        if (correct)
                *correct = *g->h_count;
        return *g->h_total;
}

static double cuda_pointwise_loss(enum strata_pointwise_loss kind, float beta, const float *out,
                                  const float *t, int rows, int cols, float scale, float *dout)
{
        struct gpu *g = me();

        strata__k_pointwise_loss(S, (int)kind, beta, out, t, rows, cols, scale, dout,
                                 g->partial, g->total);
        launched("pointwise_loss");
        note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double), cudaMemcpyDeviceToHost,
                             g->stream),
             "pointwise_loss readback");
        note(cudaStreamSynchronize(g->stream), "pointwise_loss");
        return *g->h_total;
}

static void cuda_dropout(const float *x, float *y, float *mask, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t first)
{
        strata__k_dropout(S, x, y, mask, n, p, seed, stream, first);
        launched("dropout");
}

static void cuda_copy(float *dst, const float *src, size_t n)
{
        note(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, S), "copy");
}

static void cuda_fill(float *dst, float value, size_t n)
{
        strata__k_fill(S, dst, value, n);
        launched("fill");
}

static void cuda_mul(const float *a, const float *b, float *dst, size_t n)
{
        strata__k_mul(S, a, b, dst, n);
        launched("mul");
}

static void cuda_col_stats(const float *x, int rows, int cols, const float *center, float *out)
{
        strata__k_col_stats(S, x, rows, cols, center, out);
        launched("col_stats");
}

static void cuda_div(float *dst, const float *src, float d, size_t n)
{
        strata__k_div(S, dst, src, d, n);
        launched("div");
}

static void cuda_bn_moments(const float *sq, const float *mean, float *running, float *invstd,
                            int f, int n, float mom, float eps)
{
        strata__k_bn_moments(S, sq, mean, running, invstd, f, n, mom, eps);
        launched("bn_moments");
}

static void cuda_bn_normalize(const float *x, const float *mean, const float *invstd,
                              const float *g, const float *b, float *xhat, float *y, int rows,
                              int f)
{
        strata__k_bn_normalize(S, x, mean, invstd, g, b, xhat, y, rows, f);
        launched("bn_normalize");
}

static void cuda_bn_eval(const float *x, const float *running, const float *g, const float *b,
                         float eps, float *y, int rows, int f)
{
        strata__k_bn_eval(S, x, running, g, b, eps, y, rows, f);
        launched("bn_eval");
}

static void cuda_bn_grad_sums(const float *dy, const float *xhat, float *sums, float *dg,
                              float *db, int rows, int f, int fresh)
{
        strata__k_bn_grad_sums(S, dy, xhat, sums, dg, db, rows, f, fresh);
        launched("bn_grad_sums");
}

static void cuda_bn_dx(const float *dy, const float *xhat, const float *sums, const float *g,
                       const float *invstd, float *dx, int rows, int f, int n)
{
        strata__k_bn_dx(S, dy, xhat, sums, g, invstd, dx, rows, f, n);
        launched("bn_dx");
}

/* The scalars come from nn/ (struct strata_update), the same the CPU kernels get. */
static void cuda_update(const struct strata_update *u, float *p, float *g, float *state, size_t n)
{
        if (u->rule == STRATA_UPDATE_ADAMW)
                strata__k_adamw(S, p, g, state, state + n, u->beta1, u->beta2, u->c2, u->eps,
                                u->decay, u->step, n);
        else
                strata__k_sgd(S, p, g, state, u->lr, u->weight_decay, u->momentum, u->damp,
                              u->first, u->nesterov, u->rule == STRATA_UPDATE_SGD_MOMENTUM, n);
        launched("optimizer");
}

static double cuda_sumsq(const float *x, size_t n)
{
        struct gpu *g = me();

        strata__k_sumsq(S, x, n, g->partial, g->total);
        launched("sumsq");
        note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double), cudaMemcpyDeviceToHost,
                             g->stream),
             "sumsq readback");
        note(cudaStreamSynchronize(g->stream), "sumsq");
        return *g->h_total;
}

static void cuda_scale(float *x, float s, size_t n)
{
        strata__k_scale(S, x, s, n);
        launched("scale");
}

static void cuda_clamp(float *x, float v, size_t n)
{
        strata__k_clamp(S, x, v, n);
        launched("clamp");
}

/* The communicator's data movement; the buffers may be other logical devices' (same GPU, or
 * another GPU through peer access enabled at reserve). */
static void cuda_reduce_many(float *const *dst, int nd, const float *const *src, int ns,
                             size_t lo, size_t hi, int mean)
{
        if (nd > STRATA__CUDA_MANY || ns > STRATA__CUDA_MANY || ns < 1) {
                note(cudaErrorInvalidValue, "reduce_many: too many buffers");
                return;
        }
        strata__k_reduce_many(S, dst, nd, src, ns, lo, hi, mean);
        launched("reduce_many");
}

static void cuda_copy_many(void *const *dst, int nd, const void *src, size_t lo, size_t hi)
{
        for (int d = 0; d < nd && hi > lo; d++)
                if ((char *)dst[d] != (const char *)src)
                        note(cudaMemcpyAsync((char *)dst[d] + lo, (const char *)src + lo, hi - lo,
                                             cudaMemcpyDefault, S),
                             "copy_many");
}

/* Host data the device reads, and device data the host reads: always through a copy. */
static const void *cuda_device_view(void *stage, const void *src, size_t bytes)
{
        cuda_to_device(stage, src, bytes);
        return stage;
}

static const void *cuda_host_view(void *host, const void *src, size_t bytes)
{
        cuda_to_host(host, src, bytes);
        return host;
}

static const struct strata_kernel_ops cuda_kernels = {
        .gemm = cuda_gemm,
        .fill_rows = cuda_fill_rows,
        .relu = cuda_relu,
        .relu_backward = cuda_relu_backward,
        .act = cuda_act,
        .act_backward = cuda_act_backward,
        .col_sums = cuda_col_sums,
        .softmax_xent = cuda_softmax_xent,
        .dropout = cuda_dropout,
        .copy = cuda_copy,
        .fill = cuda_fill,
        .mul = cuda_mul,
        .col_stats = cuda_col_stats,
        .div = cuda_div,
        .bn_moments = cuda_bn_moments,
        .bn_normalize = cuda_bn_normalize,
        .bn_eval = cuda_bn_eval,
        .bn_grad_sums = cuda_bn_grad_sums,
        .bn_dx = cuda_bn_dx,
        .update = cuda_update,
        .sumsq = cuda_sumsq,
        .scale = cuda_scale,
        .clamp = cuda_clamp,
        .gemm_lp = cuda_gemm_lp,
        .gemm_lp_bytes = cuda_gemm_lp_bytes,
        .prepare_lp = cuda_prepare_lp,
        .pointwise_loss = cuda_pointwise_loss,
};

const struct strata_device_ops strata__cuda_driver = {
        .name = "cuda",
        .probe = cuda_probe,
        .kernels = &cuda_kernels,
        .device_overhead = OVERHEAD,
        .reserve = cuda_reserve,
        .unreserve = cuda_unreserve,
        .bind = cuda_bind,
        .to_device = cuda_to_device,
        .to_host = cuda_to_host,
        .device_view = cuda_device_view,
        .host_view = cuda_host_view,
        .sync = cuda_sync,
        .describe = cuda_describe,
        .local_pus = cuda_local_pus,
        .reduce_many = cuda_reduce_many,
        .copy_many = cuda_copy_many,
};
