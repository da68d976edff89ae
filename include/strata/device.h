/*
 * Device drivers: per kind of device, two `static const` tables: the device (probe, memory,
 * copies, binding, synchronisation) and its kernels (GEMM, elementwise, module, loss and
 * optimizer math).
 *
 * Every operation works on memory of the driver's own device. Float math is f32. Operations a
 * driver lacks are NULL, and callers get STRATA_ENOTSUP; the mandatory ones are checked when a
 * runtime picks the driver (strata_device_driver()).
 */
#ifndef STRATA_DEVICE_H
#define STRATA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Accelerator kinds. */
enum strata_accelerator {
        STRATA_ACCEL_CPU = 0,
        STRATA_ACCEL_CUDA = 1,
        STRATA_ACCEL_COUNT
};

/**
 * The CPU's kernel sets (cfg.device.kernels, strata-train --kernels / --portable). Every set
 * computes a GEMM element as the same chain of fused multiply-adds (decision 0034), so all of
 * them give the same bits; they differ in speed and in where they run.
 */
enum strata_kernels {
        STRATA_KERNELS_NATIVE = 0, /**< the CPU's own ISA, chosen by its features (default) */
        STRATA_KERNELS_PORTABLE,   /**< AVX2+FMA: one fixed set on every x86-64 with AVX2 */
        STRATA_KERNELS_AVX512,     /**< AVX-512, refused at init where the CPU has none */
        STRATA_KERNELS_SCALAR,     /**< C with fmaf, any CPU (slow: a reference for tests) */
        STRATA_KERNELS_COUNT
};

/**
 * The activations other than ReLU that the act()/act_backward() kernels evaluate, with
 * PyTorch's formulas (nn.Tanh, nn.Sigmoid, nn.GELU with approximate 'none' and 'tanh',
 * nn.SiLU, nn.LeakyReLU).
 */
enum strata_activation {
        STRATA_ACT_TANH = 0,   /**< tanh(x) */
        STRATA_ACT_SIGMOID,    /**< 1 / (1 + exp(-x)) */
        STRATA_ACT_GELU,       /**< x / 2 (1 + erf(x / sqrt 2)) */
        STRATA_ACT_GELU_TANH,  /**< x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
        STRATA_ACT_SILU,       /**< x / (1 + exp(-x)) */
        STRATA_ACT_LEAKY_RELU, /**< x > 0 ? x : slope x */
        STRATA_ACT_COUNT
};

/** Optimizer update rules a driver implements as kernels (nn/ chooses one per step). */
enum strata_update_rule {
        STRATA_UPDATE_SGD = 0,      /**< p -= lr * (g + wd * p) */
        STRATA_UPDATE_SGD_MOMENTUM, /**< PyTorch SGD with momentum, dampening, Nesterov */
        STRATA_UPDATE_ADAMW,        /**< AdamW with decoupled weight decay */
};

/**
 * The scalars of one optimizer update at one step, computed once by nn/ from the
 * hyper-parameters and the step number, so that every driver evaluates the same formula.
 */
struct strata_update {
        enum strata_update_rule rule;
        float lr;           /**< SGD: learning rate */
        float weight_decay; /**< SGD: L2 term added to the gradient */
        float momentum;     /**< SGD: mu */
        float damp;         /**< SGD: 1 - dampening */
        float first;        /**< SGD: 1 on the first step (buffer := gradient), else 0 */
        float nesterov;     /**< SGD: 1 or 0 */
        float beta1, beta2; /**< AdamW moments' decay */
        float c2;           /**< AdamW: sqrt(1 - beta2^t) */
        float eps;          /**< AdamW */
        float decay;        /**< AdamW: 1 - lr * weight_decay */
        float step;         /**< AdamW: lr / (1 - beta1^t) */
};

/** Elementwise losses on float targets (pointwise_loss()); formulas as PyTorch's. */
enum strata_pointwise_loss {
        STRATA_PLOSS_MSE = 0,    /**< d^2, d = out - t */
        STRATA_PLOSS_L1,         /**< |d| */
        STRATA_PLOSS_HUBER,      /**< SmoothL1: 0.5 d^2 / beta when |d| < beta, else |d| - beta/2 */
        STRATA_PLOSS_BCE_LOGITS, /**< max(x, 0) - x t + log1p(exp(-|x|)), x = out */
        STRATA_PLOSS_COUNT
};

/** reserve() flags. */
#define STRATA_DEV_TF32 1u /**< GEMMs may use TF32 tensor cores (faster, ~10-bit mantissa) */

/**
 * One mixed-precision GEMM whose operands and result may each be stored in f32 or bf16
 * (gemm_lp_io()): C = alpha op(A) op(B) + beta C, row-major, op = transpose when ta / tb.
 */
struct strata_gemm_io {
        enum strata_dtype dt;    /**< the products' operand type (STRATA_BF16) */
        int ta, tb, m, n, k;
        float alpha, beta;       /**< beta must be 0 when C is bf16 */
        const void *a;           /**< A, stored as @c at */
        int lda;
        enum strata_dtype at;    /**< STRATA_F32 (rounded to bf16) or STRATA_BF16 (used as is) */
        const void *b;           /**< B, stored as @c bt */
        int ldb;
        enum strata_dtype bt;
        void *c;                 /**< C, stored as @c ct */
        int ldc;
        enum strata_dtype ct;    /**< STRATA_F32, or STRATA_BF16: the f32 result rounded once */
        const float *bias;       /**< bf16 C only: one f32 per column added before rounding */
};

/** strata_gemm_tree's op[j]: chunk j is computed onto the top entry (beta 1), not pushed. */
#define STRATA_TREE_ONTO 1u

/**
 * Invariant mode's weight gradient over one device's chunks (gemm_tree()): C (m x n) is the
 * fixed pairwise tree over the chunks' products A_j^T B_j, chunk j being rows
 * [lo[j], lo[j + 1]) of A (k x m, row-major: dy) and of B (k x n: x). The tree is a stack
 * of partial sums walked in chunk order: chunk j is pushed as gemm(1, 0, m, n, rows, 1, A_j,
 * lda, B_j, ldb, 0, entry, ldc), or with STRATA_TREE_ONTO in op[j] made onto the top entry
 * (the same gemm with beta 1); then, op[j] >> 1 times, the top entry is added into the one
 * below it (add(below, top)) and popped. One entry is left at the end: it is C. The result
 * has the bits of those calls made one after the other.
 */
struct strata_gemm_tree {
        int m, n;                 /**< C is m x n */
        const float *a;           /**< A: k rows of m, used transposed */
        int lda;
        const float *b;           /**< B: k rows of n */
        int ldb;
        float *c;                 /**< C, written once */
        int ldc;
        int leaves;               /**< chunks: 1 to 256 */
        const int *lo;            /**< leaves + 1 rising row offsets into A and B */
        const unsigned char *op;  /**< per chunk: STRATA_TREE_ONTO | additions after it << 1 */
};

/**
 * The kernels of a device: the math that modules, losses and optimizers run on its memory,
 * apart from device management (struct strata_device_ops). A new module, loss or activation
 * adds kernels here (optional ones NULL elsewhere) without touching reservation, binding or
 * copies. Matrices are row-major.
 */
struct strata_kernel_ops {
        /** C = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb. */
        void (*gemm)(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
        /** Each of @p rows rows of y (cols wide) := bias. */
        void (*fill_rows)(float *y, const float *bias, int rows, int cols);
        /** y = max(x, 0), n elements (in place allowed). */
        void (*relu)(const float *x, float *y, size_t n);
        /** dx = dy where y > 0 else 0 (in place allowed). */
        void (*relu_backward)(const float *y, const float *dy, float *dx, size_t n);

        /* ---- Activations other than ReLU: one pair for every kind ---- */

        /**
         * y = f(x) for the activation @p kind, n elements (x and y do not overlap); @p param
         * is LeakyReLU's negative slope, unused by the others.
         */
        void (*act)(enum strata_activation kind, float param, const float *x, float *y,
                    size_t n);
        /**
         * dx = dy * f'(x), given the input @p x and the output @p y of act() (each kind reads
         * the one its formula needs: Tanh and Sigmoid y, the others x).
         */
        void (*act_backward)(enum strata_activation kind, float param, const float *x,
                             const float *y, const float *dy, float *dx, size_t n);

        /** s[j] (+)= sum over rows of x[i][j]; accumulate when @p acc. */
        void (*col_sums)(const float *x, int rows, int cols, float *s, int acc);
        /**
         * Softmax cross-entropy on logits [rows, cols] with labels; returns the summed loss;
         * writes dlogits = (softmax - onehot) * scale when dlogits is not NULL; counts correct
         * argmax predictions into *correct when not NULL.
         */
        double (*softmax_xent)(const float *logits, const int32_t *labels, int rows, int cols,
                               float scale, float *dlogits, int *correct);
        /**
         * y = x * mask, mask from a counter-based stream: keep with probability 1-p. Element i
         * uses the stream's value number first + i, so a slice of a batch draws the same mask
         * as the whole batch would.
         */
        void (*dropout)(const float *x, float *y, float *mask, size_t n, float p, uint64_t seed,
                        uint64_t stream, uint64_t first);
        /** dst = src, n floats. */
        void (*copy)(float *dst, const float *src, size_t n);
        /** dst = value, n floats. */
        void (*fill)(float *dst, float value, size_t n);
        /** dst = a * b elementwise. */
        void (*mul)(const float *a, const float *b, float *dst, size_t n);

        /* ---- BatchNorm, optimizer and clipping: the math the modules used to do in place ---- */

        /**
         * out[j] = sum over rows of x[i][j] (center NULL) or of (x[i][j] - center[j])^2,
         * accumulated in double.
         */
        void (*col_stats)(const float *x, int rows, int cols, const float *center, float *out);
        /** dst[i] = src[i] / d (division, not multiplication by 1/d: bitwise as on the host). */
        void (*div)(float *dst, const float *src, float d, size_t n);
        /**
         * From the summed squared deviations @p sq of @p n rows: update the running statistics
         * running = [mean | var] with momentum @p mom (unbiased variance) and write
         * invstd = 1 / sqrt(var + eps).
         */
        void (*bn_moments)(const float *sq, const float *mean, float *running, float *invstd,
                           int f, int n, float mom, float eps);
        /** xhat = (x - mean) * invstd; y = xhat * g + b (training mode). */
        void (*bn_normalize)(const float *x, const float *mean, const float *invstd,
                             const float *g, const float *b, float *xhat, float *y, int rows,
                             int f);
        /** y = (x - running mean) / sqrt(running var + eps) * g + b (evaluation mode). */
        void (*bn_eval)(const float *x, const float *running, const float *g, const float *b,
                        float eps, float *y, int rows, int f);
        /**
         * sums = [sum dy | sum dy * xhat] over rows; db (+)= the first half and dg (+)= the
         * second, overwriting when @p fresh.
         */
        void (*bn_grad_sums)(const float *dy, const float *xhat, float *sums, float *dg,
                             float *db, int rows, int f, int fresh);
        /** dx = g * invstd / n * (n * dy - sum dy - xhat * sum dy*xhat), n rows in the batch. */
        void (*bn_dx)(const float *dy, const float *xhat, const float *sums, const float *g,
                      const float *invstd, float *dx, int rows, int f, int n);
        /**
         * One optimizer update of n parameters in place by the rule and scalars of @p u.
         * @p state holds the rule's slots one after the other, n floats each (SGD with
         * momentum: the buffer; AdamW: first then second moments).
         */
        void (*update)(const struct strata_update *u, float *p, float *g, float *state,
                       size_t n);
        /**
         * Optional: the update of elements [lo, hi) of the same n-element vectors only,
         * callable from several devices' threads at once on disjoint ranges. dp splits the
         * master's step across its devices with it; without it the master's device steps
         * alone.
         */
        void (*update_range)(const struct strata_update *u, float *p, float *g, float *state,
                             size_t n, size_t lo, size_t hi);
        /** Sum of squares of n floats, in double (waits for the device). */
        double (*sumsq)(const float *x, size_t n);
        /**
         * Optional: sumsq() continued from @p s over n more floats, so that
         * sumsq_from(sumsq(x, m), x + m, n) has the bits of sumsq(x, m + n) (sumsq() is
         * sumsq_from() from 0). zero2 then sums the squares of the gradient shard by shard,
         * owner after owner, without the whole vector. NULL: zero2 gathers it to clip.
         */
        double (*sumsq_from)(double s, const float *x, size_t n);
        /** x *= s. */
        void (*scale)(float *x, float s, size_t n);
        /** x = min(max(x, -v), v). */
        void (*clamp)(float *x, float v, size_t n);
        /**
         * Optional: non-zero when any of n floats is NaN or infinite (waits for the device),
         * in one pass cheaper than sumsq(); the runtime checks every step's gradients with it.
         * NULL: a non-finite sumsq() says so instead.
         */
        int (*nonfinite)(const float *x, size_t n);
        /**
         * Optional (invariant mode's chunks): dst[i] = dst[i] + src[i], n elements, one
         * rounding each: the communicator's sum of two, so a tree summed on the device and
         * one summed across devices give the same bits. NULL: invariant mode does not run.
         */
        void (*add)(float *dst, const float *src, size_t n);

        /* ---- Mixed precision (optional: without them only fp32 runs) ---- */

        /**
         * C = alpha op(A) op(B) + beta C, as gemm(), with the elements of A and B rounded to
         * @p dt (STRATA_BF16 or STRATA_F16, round to nearest even) and the products summed
         * in f32. @p scratch (64-byte aligned, gemm_lp_bytes()) receives the rounded
         * operands. Deterministic: the same call gives the same bits.
         */
        void (*gemm_lp)(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc, void *scratch);
        /**
         * Scratch bytes gemm_lp() needs for any call whose two operands hold at most
         * @p elems elements together and whose m, n and k are at most @p dim.
         */
        size_t (*gemm_lp_bytes)(enum strata_dtype dt, size_t elems, size_t dim);
        /**
         * Ready gemm_lp() for @p dt (JIT kernels) before the arenas seal, so that no call
         * compiles or allocates; STRATA_ENOTSUP when the device cannot run @p dt.
         */
        int (*prepare_lp)(enum strata_dtype dt);

        /* ---- Activations stored in bf16 (optional: without all three they stay f32) ---- */

        /**
         * gemm_lp() over operands and a result each stored in f32 or bf16 (struct
         * strata_gemm_io): a bf16 operand is used as stored, a bf16 C receives
         * alpha op(A) op(B) + bias rounded once to nearest even. Same scratch as gemm_lp().
         */
        void (*gemm_lp_io)(const struct strata_gemm_io *g, void *scratch);
        /** y = max(x, 0), n elements, x and y each stored in f32 or bf16 (bf16 y: rounded). */
        void (*relu_io)(const void *x, enum strata_dtype xt, void *y, enum strata_dtype yt,
                        size_t n);
        /** dx = dy where y > 0 else 0, with y stored in bf16. */
        void (*relu_backward_bf16)(const uint16_t *y, const float *dy, float *dx, size_t n);

        /* ---- Losses on float targets (optional: without it only label losses run) ---- */

        /**
         * Elementwise loss @p kind of @p out [rows, cols] against targets @p t [rows, cols]
         * (@p beta: Huber's): returns the sum over rows, in row order, of each row's sum, in
         * double; writes dout = d(loss)/d(out) * scale when @p dout is not NULL.
         */
        double (*pointwise_loss)(enum strata_pointwise_loss kind, float beta, const float *out,
                                 const float *t, int rows, int cols, float scale, float *dout);

        /* ---- Weights packed once (optional: without all three B is packed per call) ---- */

        /** Floats gemm_pack() writes for a B of @p n x @p k (row-major, used transposed). */
        size_t (*gemm_pack_floats)(int n, int k);
        /** B (@p n x @p k, rows @p ldb apart) packed as gemm() packs op(B) = B^T, into @p dst. */
        void (*gemm_pack)(const float *b, int ldb, int n, int k, float *dst);
        /**
         * gemm(0, 1, m, n, k, 1, a, lda, b, ldb, beta, c, ldc) reading op(B) from @p pb,
         * gemm_pack()'s copy of @p b: the same bits as gemm(), without packing B per call.
         */
        void (*gemm_pb)(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        const float *pb, float beta, float *c, int ldc);

        /* ---- Invariant mode's chunk tree in one GEMM (optional: NULL, a GEMM per chunk) ---- */

        /**
         * C = the chunks' tree of @p g (struct strata_gemm_tree), each C tile's partial sums
         * made in registers and the cache before one store, with the bits of the per-chunk
         * gemm() and add() calls it stands for. STRATA_OK; STRATA_EINVAL (a bad shape or a
         * tree that does not end in one entry: C untouched); STRATA_ENOTSUP (the device cannot
         * make this one in one call: the caller makes the per-chunk calls).
         */
        int (*gemm_tree)(const struct strata_gemm_tree *g);

        /* ---- Operands read in place (optional: NULL, every operand packed per call) ---- */

        /**
         * Optional (NULL: nothing to prepare). Called before the steps with each leading
         * dimension, in floats, at which gemm() will read a row-major operand (a Linear's
         * input and output gradient, its weight): a device that can read such an operand in
         * place instead of copying it prepares what does so now, not during a step. Any
         * other leading dimension still works. STRATA_OK; STRATA_EINVAL for @p ld < 1.
         */
        int (*gemm_ld)(int ld);
};

/**
 * Operations of a device driver: probe, memory (reservation, copies, views), binding and
 * synchronisation, collectives over its memory; its kernels in their own table.
 */
struct strata_device_ops {
        const char *name;
        /** Non-zero when the device can run here; @p why gets a reason otherwise. */
        int (*probe)(const char **why);
        /** The device's kernels (mandatory). */
        const struct strata_kernel_ops *kernels;

        /* ---- Memory ---- */

        /** Device bytes the driver itself takes per device beside the plan (BLAS workspace). */
        size_t device_overhead;
        /**
         * Optional: reserve @p dev_bytes of device memory and @p host_bytes of pinned host
         * memory for device @p ordinal, once, at init. NULL: the device computes in host
         * memory carved from the runtime's region (the host addresses it directly, nothing
         * is staged) — the CPU's case.
         */
        int (*reserve)(int ordinal, size_t dev_bytes, size_t host_bytes, unsigned flags,
                       void **dev, void **host);
        /** Optional: give back what reserve() took (teardown). */
        void (*unreserve)(int ordinal, void *dev, void *host);
        /**
         * Optional: before the arenas seal, make the driver ready for @p devices threads
         * computing at once (CPU: its GEMM kernels compiled), so nothing is mapped or looked
         * up during training.
         */
        int (*prepare)(int devices);
        /**
         * Optional: the bytes of scratch memory the driver needs per device, carved by the
         * runtime's plan (counted in strata_plan()'s per-device bytes) and handed to warm_up()
         * (CPU: the f32 GEMM's packing buffer). NULL: none. The same on every call.
         */
        size_t (*scratch_bytes)(void);
        /**
         * Optional: once on each device's worker thread before the arenas seal, with that
         * device's @p scratch (scratch_bytes() bytes, 64-byte aligned; NULL where there are
         * none): the calling thread's own until forget() (the first GEMM on a thread may set
         * up kernel internals).
         */
        void (*warm_up)(void *scratch);
        /**
         * Optional: at teardown, after the devices stopped: no thread uses @p scratch (a
         * warm_up() buffer) any more, so its memory may go.
         */
        void (*forget)(void *scratch);
        /** Optional: make @p ordinal the calling thread's device (its worker, before work). */
        int (*bind)(int ordinal);
        /** Copy @p bytes host -> device (the CPU's: a memory copy). */
        void (*to_device)(void *dst, const void *src, size_t bytes);
        /** Copy @p bytes device -> host and wait for it (the CPU's: a memory copy). */
        void (*to_host)(void *dst, const void *src, size_t bytes);
        /**
         * @p bytes of host memory at @p src as the device reads them: @p src itself where the
         * device addresses host memory, else a copy into the device buffer @p stage.
         */
        const void *(*device_view)(void *stage, const void *src, size_t bytes);
        /**
         * @p bytes of device memory at @p src as the host reads them (after the device's
         * queued work): @p src itself where the host addresses it, else a copy into the host
         * buffer @p host.
         */
        const void *(*host_view)(void *host, const void *src, size_t bytes);
        /** Optional: wait for the device's queued work; returns a status (errors surface). */
        int (*sync)(void);
        /**
         * Optional: one line naming reserved device @p ordinal and the host cores local to it
         * (hwloc), for `--verbose`; writes at most @p n bytes.
         */
        void (*describe)(int ordinal, char *buf, size_t n);
        /**
         * Optional: the OS indices of the host PUs close to reserved device @p ordinal (hwloc),
         * at most @p max of them; returns how many (0: no preference). Workers are placed
         * on those cores first.
         */
        int (*local_pus)(int ordinal, int *pus, int max);

        /* ---- Collectives over device memory (dp/ddp on a device the host cannot address) ---- */

        /**
         * Optional: dst[d][i] = sum over s of src[s][i] in source order, for every d < @p ndst
         * and i in [lo, hi), f32, queued on the calling thread's device. The buffers may
         * belong to other logical devices of this driver; a destination may be a source.
         * With @p mean the sum is divided by @p nsrc. Required, with copy_many, for the
         * multi-device strategies on a driver that reserves its own memory.
         */
        void (*reduce_many)(float *const *dst, int ndst, const float *const *src, int nsrc,
                            size_t lo, size_t hi, int mean);
        /** Optional: bytes [lo, hi) of @p src to every dst (device memory), queued. */
        void (*copy_many)(void *const *dst, int ndst, const void *src, size_t lo, size_t hi);
};

/**
 * @brief The name of the CPU kernels a run computes with: the f32 GEMMs' set and, when the
 *        GEMMs' operands are bf16, the bf16 GEMMs' ("libxsmm:avx512", "libxsmm:avx2",
 *        "libxsmm:avx512 bf16:avx512_bf16", "libxsmm:avx2 bf16:fma": bf16 operands summed
 *        by f32 fused multiply-adds where the CPU has no AVX512_BF16), as strata-train's
 *        banner, its --json and the trace's metadata show it.
 * @param kernels  The kernel set asked for (cfg.device.kernels).
 * @param compute  The GEMMs' operand type: STRATA_F32 (precision 32 and 16-mixed, whose f16
 *                 operands are multiplied by the f32 GEMMs) or STRATA_BF16 (bf16-mixed).
 * @return A static string, or NULL where this CPU cannot run that set (strata_init() then
 *         fails with STRATA_ENOTSUP and says why).
 */
const char *strata_kernel_set(enum strata_kernels kernels, enum strata_dtype compute);

/**
 * @brief The driver for an accelerator kind, after checking its mandatory operations.
 * @param kind  The accelerator.
 * @param out   Receives the driver.
 * @retval STRATA_OK, STRATA_EINVAL (unknown kind), STRATA_ENODEV (built without it, or its
 *         probe fails: the message gives the reason).
 */
int strata_device_driver(enum strata_accelerator kind, const struct strata_device_ops **out);

/**
 * @brief Check an application's own driver as strata_device_driver() checks a built-in one:
 *        every mandatory operation present, and its probe passes.
 * @retval STRATA_OK, STRATA_EINVAL (NULL or an operation missing), STRATA_ENODEV (probe).
 */
int strata_device_check(const struct strata_device_ops *d);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DEVICE_H */
