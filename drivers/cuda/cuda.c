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
#include "drivers/cuda/gpu.h"
#include "drivers/cuda/kernels.h"

#define MAX_GPUS STRATA_MAX_DEVICES
#define SCRATCH_BYTES ((size_t)64 << 10)
#define OVERHEAD (STRATA__CUDA_WS_BYTES + SCRATCH_BYTES)
#define PIN_HEAD ((size_t)4096)

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

static void drop(struct strata__cuda_gpu *g)
{
        void *dev = g->base, *host = g->host_base;

        if (g->blas)
                cublasDestroy(g->blas);
        if (g->lt)
                cublasLtDestroy(g->lt);
        strata__cuda_blas_forget((int)(g - strata__cuda_gpu(0)));
        if (g->stream)
                cudaStreamDestroy(g->stream);
        if (dev)
                cudaFree(dev);
        if (host)
                cudaFreeHost(host);
        memset(g, 0, sizeof(*g));
}

/* The driver's head of the device block: workspace, then scratch. */
static int setup_blas(struct strata__cuda_gpu *g, unsigned char *ws, unsigned flags, int ordinal)
{
        cublasStatus_t s;

        if ((s = cublasCreate(&g->blas)) != CUBLAS_STATUS_SUCCESS)
                return strata__fail(STRATA_EDEVICE, "cuda device %d: cublasCreate failed (%d)",
                                    ordinal, (int)s);
        if ((s = cublasSetStream(g->blas, g->stream)) != CUBLAS_STATUS_SUCCESS ||
            (s = cublasSetWorkspace(g->blas, ws, STRATA__CUDA_WS_BYTES)) != CUBLAS_STATUS_SUCCESS ||
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
        struct strata__cuda_gpu *g;
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
        g = strata__cuda_gpu(dev_id);
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
        g->partial = (double *)(d + STRATA__CUDA_WS_BYTES);
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
        if (dev_id < 0 || dev_id >= MAX_GPUS || !strata__cuda_gpu(dev_id)->live)
                return;
        cudaSetDevice(strata__cuda_gpu(dev_id)->ordinal);
        cudaStreamSynchronize(strata__cuda_gpu(dev_id)->stream);
        drop(strata__cuda_gpu(dev_id));
}

static int cuda_bind(int dev_id)
{
        cudaError_t e;

        if (dev_id < 0 || dev_id >= MAX_GPUS || !strata__cuda_gpu(dev_id)->live)
                return strata__fail(STRATA_EINVAL, "cuda bind: device %d is not reserved",
                                    dev_id);
        if ((e = cudaSetDevice(strata__cuda_gpu(dev_id)->ordinal)) != cudaSuccess)
                return fail_cuda(e, strata__cuda_gpu(dev_id)->ordinal, "cudaSetDevice");
        strata__cuda_bind_thread(dev_id);
        return STRATA_OK;
}

static void cuda_to_device(void *dst, const void *src, size_t bytes)
{
        strata__cuda_note(
                cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, strata__cuda_me()->stream),
                "to_device");
}

static void cuda_to_host(void *dst, const void *src, size_t bytes)
{
        strata__cuda_note(
                cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, strata__cuda_me()->stream),
                "to_host");
        strata__cuda_note(cudaStreamSynchronize(strata__cuda_me()->stream), "to_host");
}

static int cuda_sync(void)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        strata__cuda_note(cudaStreamSynchronize(g->stream), "sync");
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
        if (dev_id < 0 || dev_id >= MAX_GPUS || !strata__cuda_gpu(dev_id)->live) {
                snprintf(buf, n, "cuda device %d: not reserved", dev_id);
                return;
        }
        ordinal = strata__cuda_gpu(dev_id)->ordinal;
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

        if (dev_id < 0 || dev_id >= MAX_GPUS || !strata__cuda_gpu(dev_id)->live || !pus || max <= 0)
                return 0;
        if ((set = gpu_cpuset(strata__cuda_gpu(dev_id)->ordinal)) == NULL)
                return 0;
        for (int i = hwloc_bitmap_first(set); i >= 0 && n < max; i = hwloc_bitmap_next(set, i))
                pus[n++] = i;
        hwloc_bitmap_free(set);
        return n;
}

/* ---- compute (the GEMMs: blas.c) ---- */

#define S (strata__cuda_me()->stream)

static void cuda_fill_rows(float *y, const float *bias, int rows, int cols)
{
        strata__k_fill_rows(S, y, bias, rows, cols);
        strata__cuda_launched("fill_rows");
}

static void cuda_relu(const float *x, float *y, size_t n)
{
        strata__k_relu(S, x, y, n);
        strata__cuda_launched("relu");
}

static void cuda_relu_backward(const float *y, const float *dy, float *dx, size_t n)
{
        strata__k_relu_backward(S, y, dy, dx, n);
        strata__cuda_launched("relu_backward");
}

static void cuda_act(enum strata_activation kind, float a, const float *x, float *y, size_t n)
{
        strata__k_act(S, kind, a, x, y, n);
        strata__cuda_launched("act");
}

static void cuda_act_backward(enum strata_activation kind, float a, const float *x,
                              const float *y, const float *dy, float *dx, size_t n)
{
        strata__k_act_backward(S, kind, a, x, y, dy, dx, n);
        strata__cuda_launched("act_backward");
}

static void cuda_col_sums(const float *x, int rows, int cols, float *s, int acc)
{
        strata__k_col_sums(S, x, rows, cols, s, acc);
        strata__cuda_launched("col_sums");
}

static double cuda_softmax_xent(const float *logits, const int32_t *labels, int rows, int cols,
                                float scale, float *dlogits, int *correct)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        strata__k_softmax_xent(S, logits, labels, rows, cols, scale, dlogits, g->partial,
                               g->partial_n, g->total, g->count);
        strata__cuda_launched("softmax_xent");
        strata__cuda_note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double) + sizeof(int),
                                          cudaMemcpyDeviceToHost, g->stream),
                          "softmax_xent readback");
        strata__cuda_note(cudaStreamSynchronize(g->stream), "softmax_xent");
        if (correct)
                *correct = *g->h_count;
        return *g->h_total;
}

static double cuda_pointwise_loss(enum strata_pointwise_loss kind, float beta, const float *out,
                                  const float *t, int rows, int cols, float scale, float *dout)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        strata__k_pointwise_loss(S, (int)kind, beta, out, t, rows, cols, scale, dout,
                                 g->partial, g->total);
        strata__cuda_launched("pointwise_loss");
        strata__cuda_note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double),
                                          cudaMemcpyDeviceToHost, g->stream),
                          "pointwise_loss readback");
        strata__cuda_note(cudaStreamSynchronize(g->stream), "pointwise_loss");
        return *g->h_total;
}

static void cuda_dropout(const float *x, float *y, float *mask, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t first)
{
        strata__k_dropout(S, x, y, mask, n, p, seed, stream, first);
        strata__cuda_launched("dropout");
}

static void cuda_copy(float *dst, const float *src, size_t n)
{
        strata__cuda_note(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, S),
                          "copy");
}

static void cuda_fill(float *dst, float value, size_t n)
{
        strata__k_fill(S, dst, value, n);
        strata__cuda_launched("fill");
}

static void cuda_mul(const float *a, const float *b, float *dst, size_t n)
{
        strata__k_mul(S, a, b, dst, n);
        strata__cuda_launched("mul");
}

static void cuda_col_stats(const float *x, int rows, int cols, const float *center, float *out)
{
        strata__k_col_stats(S, x, rows, cols, center, out);
        strata__cuda_launched("col_stats");
}

static void cuda_div(float *dst, const float *src, float d, size_t n)
{
        strata__k_div(S, dst, src, d, n);
        strata__cuda_launched("div");
}

static void cuda_bn_moments(const float *sq, const float *mean, float *running, float *invstd,
                            int f, int n, float mom, float eps)
{
        strata__k_bn_moments(S, sq, mean, running, invstd, f, n, mom, eps);
        strata__cuda_launched("bn_moments");
}

static void cuda_bn_normalize(const float *x, const float *mean, const float *invstd,
                              const float *g, const float *b, float *xhat, float *y, int rows,
                              int f)
{
        strata__k_bn_normalize(S, x, mean, invstd, g, b, xhat, y, rows, f);
        strata__cuda_launched("bn_normalize");
}

static void cuda_bn_eval(const float *x, const float *running, const float *g, const float *b,
                         float eps, float *y, int rows, int f)
{
        strata__k_bn_eval(S, x, running, g, b, eps, y, rows, f);
        strata__cuda_launched("bn_eval");
}

static void cuda_bn_grad_sums(const float *dy, const float *xhat, float *sums, float *dg,
                              float *db, int rows, int f, int fresh)
{
        strata__k_bn_grad_sums(S, dy, xhat, sums, dg, db, rows, f, fresh);
        strata__cuda_launched("bn_grad_sums");
}

static void cuda_bn_dx(const float *dy, const float *xhat, const float *sums, const float *g,
                       const float *invstd, float *dx, int rows, int f, int n)
{
        strata__k_bn_dx(S, dy, xhat, sums, g, invstd, dx, rows, f, n);
        strata__cuda_launched("bn_dx");
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
        strata__cuda_launched("optimizer");
}

static double cuda_sumsq(const float *x, size_t n)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        strata__k_sumsq(S, x, n, g->partial, g->total);
        strata__cuda_launched("sumsq");
        strata__cuda_note(cudaMemcpyAsync(g->h_total, g->total, sizeof(double),
                                          cudaMemcpyDeviceToHost, g->stream),
                          "sumsq readback");
        strata__cuda_note(cudaStreamSynchronize(g->stream), "sumsq");
        return *g->h_total;
}

static void cuda_scale(float *x, float s, size_t n)
{
        strata__k_scale(S, x, s, n);
        strata__cuda_launched("scale");
}

static void cuda_clamp(float *x, float v, size_t n)
{
        strata__k_clamp(S, x, v, n);
        strata__cuda_launched("clamp");
}

/* The communicator's data movement; the buffers may be other logical devices' (same GPU, or
 * another GPU through peer access enabled at reserve). */
static void cuda_reduce_many(float *const *dst, int nd, const float *const *src, int ns,
                             size_t lo, size_t hi, int mean)
{
        if (nd > STRATA__CUDA_MANY || ns > STRATA__CUDA_MANY || ns < 1) {
                strata__cuda_note(cudaErrorInvalidValue, "reduce_many: too many buffers");
                return;
        }
        strata__k_reduce_many(S, dst, nd, src, ns, lo, hi, mean);
        strata__cuda_launched("reduce_many");
}

static void cuda_copy_many(void *const *dst, int nd, const void *src, size_t lo, size_t hi)
{
        for (int d = 0; d < nd && hi > lo; d++)
                if ((char *)dst[d] != (const char *)src)
                        strata__cuda_note(cudaMemcpyAsync((char *)dst[d] + lo,
                                                          (const char *)src + lo, hi - lo,
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
        .gemm = strata__cuda_gemm,
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
        .gemm_lp = strata__cuda_gemm_lp,
        .gemm_lp_bytes = strata__cuda_gemm_lp_bytes,
        .prepare_lp = strata__cuda_prepare_lp,
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
