/*
 * Models: a sequence of modules over a batch of samples [rows, features], with a loss on the
 * last module's output (softmax cross-entropy unless the model names another). A merge module
 * (strata_add, strata_concat) also reads an earlier module's output (strata_module from), so a
 * model is a small static graph in execution order: ResNet blocks, a U-Net; it may take
 * several inputs (slices of the sample's row) and give several outputs, each with its own loss
 * and weight (struct strata_model inputs, outputs; strata_module branch). A sample may
 * carry a layout (struct strata_dims: channels and up to three spatial extents, PyTorch's
 * (C, D, H, W) order) that convolutions, pooling and upsampling read and declare.
 *
 * A module kind is a `static const struct strata_module_ops`. Its `shape` operation declares,
 * for an input width, the output width and the sizes of its parameters, running state and
 * saved activations, so that the runtime plans every byte before init. An application adds its
 * own modules by providing another ops table.
 */
#ifndef STRATA_NN_H
#define STRATA_NN_H

#include <stddef.h>
#include <stdint.h>

#include "strata/data.h"
#include "strata/device.h"
#include "strata/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct strata_layer;
struct strata_chunks; /* invariant mode's canonical chunks of a device's rows (opaque) */

/** What a group of a module's values is. */
enum strata_param_role {
        STRATA_ROLE_WEIGHT = 0, /**< trained: has a gradient and optimizer state */
        STRATA_ROLE_BIAS,       /**< trained: has a gradient and optimizer state */
        STRATA_ROLE_RUNNING,    /**< a running statistic (buffer): not trained, checkpointed */
        STRATA_ROLE_COUNT
};

/** Most parameter groups one module declares. */
#define STRATA_MAX_GROUPS 4

/** Most spatial dimensions of a sample (Conv3d's D, H, W). */
#define STRATA_MAX_SPATIAL 3

/** Most dimensions of a parameter tensor (Conv3d's weight: out, in, kD, kH, kW). */
#define STRATA_MAX_PARAM_DIMS 6

/**
 * A sample's layout, batch excluded, in PyTorch's order: @c channels values over @c ndim
 * spatial extents (0: a flat vector of @c channels features). A row is stored channel by
 * channel, each channel's extents with the last fastest: (C, D, H, W) in C, which is a
 * Fortran array (W, H, D, C) as it stands.
 */
struct strata_dims {
        int channels;                  /**< C, or the features of a flat vector */
        int ndim;                      /**< spatial dimensions: 0..STRATA_MAX_SPATIAL */
        int size[STRATA_MAX_SPATIAL];  /**< extents, outermost first; unused ones 0 */
};

/**
 * One named group of a module's parameters or buffers, as PyTorch names them ("weight",
 * "bias", "running_mean"). Trained groups are laid out in declaration order in the module's
 * slice of the device's flat parameter vector, buffers in its running state.
 */
struct strata_param_group {
        const char *name;        /**< stable, [a-z0-9_] (a '.' may join parts): checkpoint names */
        enum strata_dtype dtype; /**< storage type (STRATA_F32 today) */
        size_t count;            /**< elements */
        enum strata_param_role role;
        int ndim;                /**< 1..STRATA_MAX_PARAM_DIMS: the tensor's shape, as PyTorch's */
        /** extents whose product is count (unused ones 0; shape[1] = 1 when 1-D) */
        size_t shape[STRATA_MAX_PARAM_DIMS];
};

/** What a module needs for a given input width (all counts in floats). */
struct strata_module_shape {
        int out;            /**< output features */
        size_t params;      /**< trainable parameters (gradients have the same size) */
        size_t state;       /**< running state, not trained (BatchNorm statistics) */
        size_t aux_fixed;   /**< saved values independent of the batch size */
        size_t aux_per_row; /**< saved values per row of the batch */
        size_t ctx_per_copy; /**< bytes per copy of the context its copies share under dp */
        /**
         * Its parameters and buffers by name: trained groups must add up to @c params and
         * buffers to @c state. A module that declares none gets one group "param" (weight)
         * and one "state" (running) of those sizes.
         */
        int ngroups;
        struct strata_param_group groups[STRATA_MAX_GROUPS];
        /**
         * Mixed precision: elements of both operands of the module's largest strata_gemm(),
         * a fixed part plus a part per batch row (Linear: in * out, in + out); the runtime
         * sizes each device's GEMM scratch from them. 0: the module calls no strata_gemm().
         */
        size_t lp_fixed, lp_per_row;
        /**
         * Non-zero: the module reads its input and writes its output stored in bf16 when
         * the call's context says so (strata_step_ctx x_type, y_type). Under bf16-mixed the
         * runtime stores an activation in bf16 when the modules on both sides of it set this
         * (Linear and ReLU do); otherwise, and for the logits, activations are f32.
         */
        int bf16_io;
        /**
         * Non-zero: its rows are not independent (statistics over the batch, as BatchNorm's).
         * In invariant mode (strata_config strategy.invariant) such a module is called once
         * over a device's rows, combines its per-chunk sums itself (c->chunks) and across
         * devices (c->all_sum): its parameter gradients are the global batch's; a module
         * with 0 is called once per chunk, and may then keep no aux_fixed values.
         */
        int batch_stats;
        /**
         * The layout of its output sample (channels * extents == out). Left zero: the input's
         * layout when out equals the input width (elementwise modules), else a flat vector.
         */
        struct strata_dims out_dims;
        /**
         * Non-zero: the module computes in loops on the host over its buffers, not through
         * the kernels (the pools, Upsample, LayerNorm): a model with one is refused on a
         * driver whose devices have memory of their own.
         */
        int host_loops;
        /**
         * Non-zero: a merge module. Besides its input it reads the output of the earlier
         * module its strata_module @c from names (l->skip in forward and backward) and gives
         * that output's gradient (l->dskip); the runtime keeps the output, stored f32, and the
         * gradient's buffer until the reverse pass reaches that module (struct strata_layer).
         */
        int reads_from;
        /**
         * Non-zero: its forward and backward go through the batch one row at a time and call
         * the step context's row hooks (struct strata_step_ctx fused) on each row when the
         * runtime sets them, so that the row_wise modules after it run inside that loop while
         * the row's values are still in cache (the convolutions). Its backward does not read
         * its output (y). The results are the same bits either way.
         */
        int row_loop;
        /**
         * Non-zero: a call over one row (rows 1, that row's slices of x, y, dy, dx and of the
         * aux_per_row values) gives that row's values of a call over every row, and the module
         * has no parameters, state or aux_fixed values (ReLU, the pools): the runtime may run it
         * inside an earlier row_loop module's loop.
         */
        int row_wise;
        /**
         * Non-zero (row_wise modules): its forward may write y over x (the same pointer, both
         * f32) and its backward reads y, not x (ReLU): where it runs in the loop of the
         * row_loop module just before it, the runtime gives it that module's output buffer as
         * its own (one activation fewer to write and keep).
         */
        int in_place;
};

struct strata_row_hooks;

/**
 * How a loss reduces over the batch (PyTorch's `reduction`). Mean divides by the rows (label
 * losses) or by rows * outputs (float-target losses), as PyTorch's defaults do.
 */
enum strata_reduction {
        STRATA_REDUCTION_MEAN = 0, /**< the default */
        STRATA_REDUCTION_SUM,
        STRATA_REDUCTION_COUNT
};

/**
 * Per-call context handed to forward/backward, const to the module. Its sections: read-only
 * (what a module reads) and runtime-private (the runtime's own, and what strata_gemm() reads:
 * a module leaves them alone); nothing in it is module-writable. The fields keep the order of
 * earlier releases (a module built against libstrata.so.0 reads them where they were), so the
 * sections interleave.
 */
struct strata_step_ctx {
        /* read-only */
        const struct strata_kernel_ops *k;   /**< the device's kernels */
        uint64_t seed;                       /**< run seed */
        uint64_t step;                       /**< global step, for random streams */
        int train;                           /**< training (1) or evaluation (0) mode */
        int rows_global;                     /**< rows of the whole batch across devices */
        float loss_scale;                    /**< dlogits scale: 1 / (rows_global * accumulate) */
        int rank, world;                     /**< this device and the device count */
        int row0;                            /**< global index of this device's first row */
        int sync;                            /**< synchronise statistics across devices */
        /**
         * Sum @p n floats in place across all devices (device order; in invariant mode the
         * pairwise tree over devices); NULL on one device.
         */
        int (*all_sum)(const struct strata_step_ctx *c, float *buf, size_t n);
        /** Barrier across all devices; NULL on one device. */
        int (*barrier)(const struct strata_step_ctx *c);
        /* runtime-private */
        void *h;                             /**< the strategy's handle for the two above */
        /* read-only */
        /** GEMM operand type: STRATA_F32, or STRATA_BF16 / STRATA_F16 under mixed precision. */
        enum strata_dtype compute;
        /* runtime-private (strata_gemm()'s, and the built-in modules' bf16 GEMMs) */
        void *lp_scratch;                    /**< the device's GEMM scratch (mixed precision) */
        size_t lp_elems, lp_dim;             /**< what the scratch was sized for */
        /* read-only */
        /**
         * How this call's x and y are stored: STRATA_F32, or STRATA_BF16 (the pointers then
         * hold uint16_t bf16 values) only for a module that declared bf16_io. Gradients (dy,
         * dx) are always f32.
         */
        enum strata_dtype x_type, y_type;
        /** The model's loss settings (strata_model): its reduction and Huber's beta. */
        enum strata_reduction reduction;
        float loss_beta;
        /**
         * Invariant mode: the canonical chunks of this call's rows (the built-in batch_stats
         * modules read them); NULL otherwise. row0 is then the first row of the call.
         */
        const struct strata_chunks *chunks;
        /**
         * For a module that declared row_loop: the modules after it that run inside its loop
         * over rows (struct strata_row_hooks); NULL: none (the module runs alone).
         */
        const struct strata_row_hooks *fused;
};

/**
 * The row_wise modules that run inside a row_loop module's loop over rows, as the runtime
 * gives them (struct strata_step_ctx fused): the module calls forward after each row of its
 * output is final and backward before each row of its own backward.
 */
struct strata_row_hooks {
        /** The fused modules' forward over row @p row of this call, from the module's output. */
        void (*forward)(const struct strata_row_hooks *h, int row);
        /**
         * The fused modules' backward over row @p row of this call; returns the row's gradient
         * of the module's output (out floats, valid until the next call), which the module uses
         * instead of dy's row (dy is then the last fused module's output gradient).
         */
        const float *(*backward)(const struct strata_row_hooks *h, int row);
};

/**
 * @brief The GEMM a module runs: C = alpha op(A) op(B) + beta C, row-major, op = transpose
 *        when @p ta / @p tb. In fp32 it is the driver's gemm; under mixed precision
 *        (c->compute bf16 or f16) A and B are rounded to that type (round to nearest even)
 *        and the products summed in f32 (the driver's gemm_lp), autocast's rule for
 *        matrix products. A call larger than the module declared (lp_fixed, lp_per_row)
 *        runs in fp32.
 */
void strata_gemm(const struct strata_step_ctx *c, int ta, int tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *cm, int ldc);

/** Operations of a module kind. */
struct strata_module_ops {
        const char *name;
        /** Validate the module against its input width and declare sizes. */
        int (*shape)(const struct strata_layer *l, int in, struct strata_module_shape *out);
        /** Initialise parameters and state (deterministic from @p seed and layer index). */
        void (*init)(struct strata_layer *l, uint64_t seed);
        /** y = f(x) for @p rows rows. */
        void (*forward)(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows);
        /**
         * Accumulate parameter gradients (overwrite when l->grad_fresh) and, when dx is not
         * NULL, write the input gradient.
         */
        void (*backward)(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         const float *y, const float *dy, float *dx, int rows);
        /**
         * Optional (dp): called after every replication, for copy 0 first and then the others,
         * with a context of ctx_per_copy * copies bytes shared by the copies of this module.
         */
        int (*replicate)(struct strata_layer *copy, void *ctx, int copy_id, int copies);
};

/**
 * An unstructured mesh's connectivity, given once by the application (graph networks:
 * strata_gather, strata_scatter). Edge e goes from node src[e] to node dst[e]; both arrays,
 * of @c edges int32 values each, are the application's and must stay valid and unchanged for
 * the runtime's life (the modules read them in every step, never copy them). Checked when the
 * model is planned: counts positive, every index in [0, nodes) (a refusal names the edge, the
 * array and the value), and the samples' layouts matching the counts.
 */
struct strata_mesh {
        int nodes;          /**< nodes (> 0): the extent of a (C, nodes) node sample */
        int edges;          /**< edges (> 0): the extent of a (C, edges) edge sample */
        const int32_t *src; /**< [edges] each edge's source node */
        const int32_t *dst; /**< [edges] each edge's destination node */
};

/** strata_module graph for strata_gather: which end of each edge it reads. */
enum strata_gather_side {
        STRATA_GATHER_SRC = 0, /**< y[:, e] = x[:, src[e]] (default) */
        STRATA_GATHER_DST,     /**< y[:, e] = x[:, dst[e]] */
        STRATA_GATHER_COUNT
};

/** strata_module graph for strata_scatter: how a node reduces its incoming edges. */
enum strata_scatter_reduce {
        STRATA_SCATTER_SUM = 0, /**< y[:, n] = the sum over edges e with dst[e] = n (default) */
        STRATA_SCATTER_MEAN,    /**< that sum over their count (0 for a node without any) */
        STRATA_SCATTER_COUNT
};

/** How a convolution reads past its input's edges (PyTorch's padding_mode). */
enum strata_padding_mode {
        STRATA_PAD_ZEROS = 0,  /**< "zeros" (default) */
        STRATA_PAD_CIRCULAR,   /**< "circular": periodic */
        STRATA_PAD_REFLECT,    /**< "reflect": mirrored, edge excluded */
        STRATA_PAD_REPLICATE,  /**< "replicate": the edge value */
        STRATA_PAD_COUNT
};

/** How Upsample interpolates (PyTorch's mode; linear is bilinear/trilinear by dimension). */
enum strata_upsample_mode {
        STRATA_UPSAMPLE_NEAREST = 0, /**< "nearest" (default) */
        STRATA_UPSAMPLE_LINEAR,      /**< "linear", "bilinear", "trilinear" (align_corners=False) */
        STRATA_UPSAMPLE_COUNT
};

/** strata_module padding: PyTorch's padding='same' (stride 1; odd total split low first). */
#define STRATA_PADDING_SAME (-1)
/** strata_module padding past the first dimension: an explicit 0 (0 means "as the first"). */
#define STRATA_PADDING_NONE (-2)

/**
 * One module of a model description.
 *
 * The per-dimension arrays hold PyTorch's int-or-tuple arguments, outermost spatial dimension
 * first; an entry past the first that is 0 takes the first's value, so {3} is 3 in every
 * dimension and {3, 5} is (3, 5). A padding of 0 past the first dimension is written
 * STRATA_PADDING_NONE ({1, STRATA_PADDING_NONE} is (1, 0)).
 */
struct strata_module {
        const struct strata_module_ops *ops;
        int out;     /**< Linear: output features; Conv: output channels */
        float p;     /**< Dropout: drop probability */
        float eps;   /**< BatchNorm, LayerNorm: epsilon (0 = 1e-5) */
        float decay; /**< BatchNorm: running-average momentum (0 = 0.1) */
        float slope; /**< LeakyReLU: negative slope (0 = 0.01; must be finite) */
        int kernel[STRATA_MAX_SPATIAL];   /**< Conv, pooling: kernel size */
        int stride[STRATA_MAX_SPATIAL];   /**< Conv: 0 = 1; pooling: 0 = the kernel size */
        int padding[STRATA_MAX_SPATIAL];  /**< Conv, pooling: each side; or STRATA_PADDING_SAME */
        int dilation[STRATA_MAX_SPATIAL]; /**< Conv, MaxPool: 0 = 1 */
        int scale[STRATA_MAX_SPATIAL];    /**< Upsample: integer scale factor (0 = 2) */
        int padding_mode; /**< Conv: enum strata_padding_mode */
        int mode;         /**< Upsample: enum strata_upsample_mode */
        int no_bias;      /**< Conv: non-zero for PyTorch's bias=False */
        /**
         * Merge modules (strata_add, strata_concat): which earlier module's output this one
         * reads besides its input, by index in the model: 0 up to this module's index - 1, or
         * -1 for the model's input. A skip connection of PyTorch's forward: with
         * `h = modules[from](...)` it is `x + h` or `torch.cat((x, h), dim=1)`, x the previous
         * module's output. Other modules ignore it (0 when left unset) unless @c branch is
         * set. -1 - k names the model's input k (struct strata_model inputs): -1 is input 0.
         */
        int from;
        /**
         * Non-zero: a module that is not a merge module takes its input from what @c from
         * names (an earlier module's output or the model's input k) instead of the previous
         * module's output, so a branch starts there: a second input's own layers, a second
         * head on a shared trunk. 0 (the default): the previous module's output.
         */
        int branch;
        /**
         * Spectral convolutions (strata_spectralconv1d, 2d): the lowest frequencies kept in
         * each spatial dimension, PyTorch's modes (1-D) or modes1, modes2 (2-D); past the
         * first, 0 takes the first's value.
         */
        int modes[STRATA_MAX_SPATIAL];
        /** MultiheadAttention (strata_mha): heads, each of E / heads features (must divide E) */
        int heads;
        /** MultiheadAttention: non-zero masks every key after its query (0 or 1) */
        int causal;
        /**
         * LayerNorm, RMSNorm: normalise over the sample's last norm_dims dimensions of
         * (C, spatial...), PyTorch's normalized_shape (1 on a sequence (L, E): each token);
         * 0: all of them
         */
        int norm_dims;
        /**
         * Graph modules: strata_gather's enum strata_gather_side, strata_scatter's
         * enum strata_scatter_reduce.
         */
        int graph;
        /**
         * Graph modules (strata_gather, strata_scatter): the mesh whose edges they follow,
         * the application's, valid for the runtime's life; NULL is refused. Other modules
         * ignore it.
         */
        const struct strata_mesh *mesh;
};

/**
 * A loss kind: a `static const` table, as a module kind is. It compares the model's output
 * with the batch's targets, summed over rows in row order, so the value and gradient do not
 * depend on how rows are split between devices beyond that order. The runtime divides the
 * sum by the batch's rows (mean reduction) and scales the gradient likewise
 * (c->loss_scale); a loss that averages over a row's outputs too divides each row's value
 * and gradient by @p outputs itself when c->reduction is STRATA_REDUCTION_MEAN.
 */
struct strata_loss_ops {
        const char *name;
        /**
         * Validate @p b's targets (and for float targets its inputs) on the host before a
         * step, for a model of @p outputs outputs; STRATA_EINVAL with a message naming the
         * row, column and value at fault.
         */
        int (*check)(const struct strata_batch *b, int outputs);
        /**
         * The loss summed over @p rows rows of @p out [rows, outputs] against @p targets
         * (the batch's targets for these rows, in device memory: int32 labels, or f32
         * values [rows, outputs] with float_targets). When @p dout is not NULL it receives
         * d(loss)/d(out) multiplied by c->loss_scale; when @p correct is not NULL it
         * receives the rows predicted right (classification).
         */
        double (*forward)(const struct strata_step_ctx *c, const float *out,
                          const void *targets, int rows, int outputs, float *dout,
                          int *correct);
        /**
         * Non-zero: the loss takes the batch's float targets (t, tdim == outputs), staged
         * per device as f32; 0: int32 labels (y).
         */
        int float_targets;
};

/** Softmax cross-entropy over int32 class labels (PyTorch's CrossEntropyLoss). */
extern const struct strata_loss_ops strata_softmax_cross_entropy;
/** MSELoss: (out - t)^2. */
extern const struct strata_loss_ops strata_mse;
/** L1Loss: |out - t| (gradient sign(out - t), 0 at 0 as PyTorch's). */
extern const struct strata_loss_ops strata_l1;
/**
 * SmoothL1Loss(beta) (model's loss_beta, 0 = 1.0): 0.5 d^2 / beta where |d| < beta, else
 * |d| - 0.5 beta. PyTorch's HuberLoss(delta) is beta times it at beta = delta.
 */
extern const struct strata_loss_ops strata_huber;
/**
 * BCEWithLogitsLoss: max(x, 0) - x t + log(1 + exp(-|x|)) on logits x, targets in [0, 1].
 */
extern const struct strata_loss_ops strata_bce_with_logits;
/**
 * The output's gradient given by the caller as the float targets t (an actor's dQ/da, taken
 * from its critic with strata_model_input_grad()): value sum(t out), gradient t; with
 * STRATA_REDUCTION_SUM the step applies t as it is.
 */
extern const struct strata_loss_ops strata_given_gradient;

/** Most inputs and outputs of a model (struct strata_model inputs, outputs). */
#define STRATA_MAX_INPUTS 8
#define STRATA_MAX_OUTPUTS 8

/**
 * One of a model's several inputs: @c features consecutive values of the sample's row (input 0
 * first, then 1, ...), with their own layout. A module reads input k through its
 * strata_module from (-1 - k); module 0 reads input 0.
 */
struct strata_model_input {
        int features;            /**< its values a sample (> 0) */
        struct strata_dims dims; /**< its layout (channels 0: a flat vector of features) */
};

/**
 * One of a model's outputs: a module's output with its own loss and weight. With several
 * outputs the targets row (strata_batch t, tdim: strata_model_targets()) holds each output's
 * targets in turn (output 0's first): a float-target loss's @c width values, a label loss's
 * (softmax cross-entropy's) one value, its class index, a whole number in [0, width) stored
 * as a float (checked before a step, the message naming output, row and column). The loss
 * the runtime minimises and reports is the sum of weight * that output's loss, in the list's
 * order. One output with a label loss is the model without outputs: its labels are y.
 */
struct strata_model_output {
        int module;                         /**< its module's index, 0..nmodules - 1 */
        const struct strata_loss_ops *loss; /**< NULL: the model's loss */
        float weight;                       /**< finite, >= 0 (0: 1.0) */
};

/**
 * A model: input width, modules in order (the last one's output are the logits), its loss,
 * and optionally its input sample's layout. Several inputs and outputs (TorchFort's
 * multi-argument training) are given in @c inputs and @c outputs; with none, the model has
 * one input (in_features, in_dims) and one output, the last module's, with @c loss.
 */
struct strata_model {
        int in_features;
        int nmodules;
        const struct strata_module *modules;
        const struct strata_loss_ops *loss; /**< NULL: strata_softmax_cross_entropy */
        enum strata_reduction reduction;    /**< mean (default) or sum over the batch */
        float loss_beta;                    /**< strata_huber's beta (0: 1.0) */
        /**
         * The input sample's layout (channels * extents == in_features); channels 0: a flat
         * vector of in_features. Convolutions need it: the IDX images are {1, 2, {28, 28}}.
         * Left zero when @c ninputs is given (each input has its layout there).
         */
        struct strata_dims in_dims;
        /**
         * 0: one input (in_features, in_dims). 1..STRATA_MAX_INPUTS: the sample's row is the
         * inputs' values in turn, in_features their sum.
         */
        int ninputs;
        struct strata_model_input inputs[STRATA_MAX_INPUTS];
        /**
         * 0: one output, the last module's, with @c loss and weight 1 (the targets are that
         * loss's). 1..STRATA_MAX_OUTPUTS: these outputs, each a different module, the last
         * module among them, each with its loss (mse, l1, huber, bce_with_logits, or
         * softmax cross-entropy on two classes or more); a row of strata_predict_step()'s
         * values (cfg.classes) is their widths' sum, a row of targets is described at
         * struct strata_model_output.
         */
        int noutputs;
        struct strata_model_output outputs[STRATA_MAX_OUTPUTS];
};

/**
 * A module instance on one device (filled by the runtime). Its sections: read-only (the runtime
 * sets them and the module reads them; the module writes the arrays that param, grad, state,
 * aux and dskip point to, never the pointers) and module-writable (what the module's replicate,
 * forward and backward set); no field is private to the runtime. The fields keep the order of
 * earlier releases (a module built against libstrata.so.0 reads them where they were), so the
 * sections interleave.
 */
struct strata_layer {
        /* read-only */
        const struct strata_module *desc;
        int index;       /**< position in the model */
        int in, out;     /**< widths */
        float *param;    /**< desc's parameters (a slice of the device's flat vector) */
        float *grad;     /**< gradients, same layout */
        float *state;    /**< running state */
        float *aux;      /**< saved activations: aux_fixed + rows * aux_per_row */
        size_t nparam, nstate, naux_fixed, naux_per_row;
        int grad_fresh;  /**< next backward overwrites the gradients */
        /* module-writable */
        void *shared;    /**< dp: the context its copies share (set by replicate) */
        int copy_id;     /**< dp: which copy this is */
        int copies;      /**< dp: how many copies share the context */
        int failed;      /**< a collective inside forward/backward failed: its status */
        /* read-only */
        int ngroups;     /**< its parameter groups (from shape, checked) */
        struct strata_param_group groups[STRATA_MAX_GROUPS];
        /** its input sample's layout (a flat vector of @c in when the model gives none) */
        struct strata_dims in_dims;
        struct strata_dims out_dims; /**< its output's (struct strata_module_shape out_dims) */
        /**
         * Set by the runtime before shape when desc->from names the model's input (-1) or an
         * earlier module: that output's width and layout, and the module's kind ("input" for
         * -1). from_width 0 when it names none (a merge module's shape refuses that).
         */
        int from_width;
        struct strata_dims from_dims;
        const char *from_name;
        /**
         * A merge module (shape reads_from), in forward and backward: that output's rows of
         * this call, [rows, from_width] f32 (the runtime keeps a skip source's output f32).
         */
        const float *skip;
        /**
         * A merge module's backward: where the gradient of @c skip goes, [rows, from_width]
         * (NULL: none is needed, from -1). Written, or added onto when @c dskip_add (a later
         * module reading the same output wrote it first); the runtime adds the sum to the
         * gradient of that output before the module that gave it runs its backward.
         */
        float *dskip;
        int dskip_add;
};

/**
 * One parameter or buffer group of one device's copy of the model with everything that
 * belongs to it, found without knowing the module (strata_parameter()). Pointers are into
 * the device's memory (host-addressable only when the driver reserves none of its own).
 */
struct strata_param {
        char name[64];                 /**< "layers.<module index>.<group name>" */
        int layer;                     /**< module index */
        struct strata_param_group group; /**< as the module declared it */
        /**
         * the values (fp32 training: also the master copy); under fsdp, where a device holds
         * only its shard, the values of elements [shard_lo, shard_hi), as opt_state
         */
        float *value;
        /**
         * gradient (NULL for buffers); fsdp: as value. After a split ddp step (threads of one
         * process, the buckets and tree variants, f32, no clipping or loss scale) the devices'
         * sum only in this device's part of the step, elsewhere this device's own sum (a
         * bucket of at most 64 floats: the sum everywhere; decision 0096)
         */
        float *grad;
        int opt_slots;                 /**< optimizer-state slots: 0, 1 (momentum), 2 (AdamW) */
        /**
         * each slot's values for elements [shard_lo, shard_hi) of this group (NULL: none).
         * Current as of the call: a later split ddp step updates each part in its own device's
         * replica only (decision 0100), so read the state again after it
         */
        float *opt_state[2];
        float *master;                 /**< fp32 master copy when values are lower precision */
        size_t offset;                 /**< in the flat parameter (or running-state) vector */
        /** the elements this device owns: [0, count), or its shard's part (zero1, zero2, fsdp) */
        size_t shard_lo, shard_hi;
};

/** The built-in modules (PyTorch semantics and default initialisation). */
extern const struct strata_module_ops strata_linear;     /**< y = x W^T + b */
extern const struct strata_module_ops strata_relu;       /**< y = max(x, 0) */
extern const struct strata_module_ops strata_batchnorm1d; /**< per-feature batch normalisation */
extern const struct strata_module_ops strata_dropout;    /**< inverted dropout, counter RNG */

/*
 * Activations beside ReLU, PyTorch's formulas: they keep f32 activations under bf16-mixed and
 * save nothing of their own (their backward reads the input or output the replica keeps).
 */
extern const struct strata_module_ops strata_tanh;       /**< "tanh": tanh(x) */
extern const struct strata_module_ops strata_sigmoid;    /**< "sigmoid": 1 / (1 + exp(-x)) */
extern const struct strata_module_ops strata_gelu;       /**< "gelu": x Phi(x), with erf */
extern const struct strata_module_ops strata_gelu_tanh;  /**< "gelu-tanh": approximate='tanh' */
extern const struct strata_module_ops strata_silu;       /**< "silu": x sigmoid(x) */
extern const struct strata_module_ops strata_leaky_relu; /**< "leaky-relu": slope below 0 */

/*
 * Convolutions, PyTorch's Conv1d/2d/3d: in channels from the input's layout (which must have
 * 1, 2 or 3 spatial dimensions: set the model's in_dims), out channels strata_module out,
 * kernel, stride, dilation, padding (per side, or STRATA_PADDING_SAME) and padding_mode
 * (zeros, circular, reflect, replicate; reflect pads less than the extent, circular at most
 * it), a bias unless no_bias. Groups "weight" [out, in, k...] and "bias" [out], initialised
 * as PyTorch's (uniform, bound 1 / sqrt(in * kernel volume)). Forward and backward are GEMMs
 * (strata_gemm()) over columns unfolded into the module's saved values, K x P floats a row
 * (K = in * kernel volume, P the output positions); the unfolding runs on the host, so they
 * need a device whose memory is the host's (the CPU driver; host_loops).
 */
extern const struct strata_module_ops strata_conv1d; /**< "conv1d": input (C, W) */
extern const struct strata_module_ops strata_conv2d; /**< "conv2d": input (C, H, W) */
extern const struct strata_module_ops strata_conv3d; /**< "conv3d": input (C, D, H, W) */

/*
 * Spatial modules (nn/pool.c, nn/upsample.c, nn/norm.c), PyTorch's classes and defaults over
 * a sample's layout (strata_layer in_dims: the model's in_dims, or what the module before
 * declares). Pooling has one table per dimension as PyTorch has one class: a pool over a
 * sample of another dimension is refused by its shape. Rows are independent (invariant mode
 * runs them per chunk); activations stay f32 under mixed precision. They compute in host loops
 * over the device's memory (the CPU driver), Flatten through the kernels: a model with a pool,
 * Upsample or LayerNorm is refused on a driver whose devices have memory of their own (CUDA)
 * for now.
 */
/**
 * "maxpool1d", "maxpool2d", "maxpool3d": MaxPool with strata_module kernel, stride (0: the
 * kernel), padding (read as -inf, at most half the kernel) and dilation (0: 1), ceil_mode off.
 * Each output keeps the first maximum of its window in scan order (a NaN wins, as PyTorch's);
 * its backward routes the gradient to it (the index saved per output in aux). A window that
 * dilation leaves wholly in the padding gives -inf and no gradient.
 */
extern const struct strata_module_ops strata_maxpool1d;
extern const struct strata_module_ops strata_maxpool2d; /**< see strata_maxpool1d */
extern const struct strata_module_ops strata_maxpool3d; /**< see strata_maxpool1d */
/**
 * "avgpool1d", "avgpool2d", "avgpool3d": AvgPool with kernel, stride (0: the kernel) and
 * padding (at most half the kernel), count_include_pad=True, ceil_mode off; no dilation.
 */
extern const struct strata_module_ops strata_avgpool1d;
extern const struct strata_module_ops strata_avgpool2d; /**< see strata_avgpool1d */
extern const struct strata_module_ops strata_avgpool3d; /**< see strata_avgpool1d */
/**
 * "upsample": Upsample over a sample of 1 to 3 spatial dimensions by the integer factors
 * strata_module scale (0: 2), mode nearest or linear (linear, bilinear or trilinear by the
 * sample's dimensions; align_corners=False, the source index clamped at 0); its backward is
 * the adjoint.
 */
extern const struct strata_module_ops strata_upsample;
/**
 * "flatten": nn.Flatten(): the same values as a flat vector (output layout {in}); a copy,
 * since every module's output has a buffer of its own.
 */
extern const struct strata_module_ops strata_flatten;
/**
 * "layernorm": LayerNorm over the whole sample, normalized_shape its (C, D, H, W) (or its
 * features when flat), or over its last strata_module norm_dims dimensions (1 on a sequence
 * (L, E): LayerNorm(E) on each token); biased variance, eps from strata_module eps (0: 1e-5),
 * sums in double; groups "weight" (init 1) and "bias" (init 0) shaped as the normalized shape.
 */
extern const struct strata_module_ops strata_layernorm;
/**
 * RMSNorm (PyTorch's nn.RMSNorm(normalized_shape)) over the sample's last strata_module
 * norm_dims dimensions, 0 for the whole sample: y = x / sqrt(mean(x^2) + eps) * weight; eps 0
 * is FLT_EPSILON (PyTorch's None for float32). Its weight, "weight", has normalized_shape.
 */
extern const struct strata_module_ops strata_rmsnorm;
/**
 * Multi-head self-attention over a sequence sample (L, E) laid out as PyTorch's batch_first
 * (N, L, E): a layout of L channels over one extent E (input(L,E) in the model line). PyTorch's
 * nn.MultiheadAttention(E, heads, batch_first=True) called as attn(x, x, x): a fused QKV
 * projection (in_proj_weight [3E, E], in_proj_bias), softmax(Q K^T / sqrt(E / heads)) V per
 * head, with strata_module causal PyTorch's causal attn_mask, and out_proj (weight, bias).
 */
extern const struct strata_module_ops strata_mha;
/**
 * A learned positional embedding: y = x + weight, weight of the sample's shape ([L, E] for a
 * sequence), initialised to zero (the ViT convention's parameter, a model's pos_embed).
 */
extern const struct strata_module_ops strata_posembed;
/**
 * A (C, spatial...) sample as a sequence (L, E) = (the spatial extents' product, C): PyTorch's
 * x.flatten(2).transpose(1, 2), the step of a ViT's patch embedding after its strided
 * convolution; on a sequence (L, E) it gives (E, L), so two undo each other.
 */
extern const struct strata_module_ops strata_tokens;
/**
 * "gather": node features to edges over the module's mesh, (C, nodes) to (C, edges):
 * y[:, e] = x[:, src[e]] (graph STRATA_GATHER_SRC) or x[:, dst[e]] (STRATA_GATHER_DST),
 * PyTorch's x.index_select(-1, src). Its backward sums each node's edges in ascending edge
 * order.
 */
extern const struct strata_module_ops strata_gather;
/**
 * "scatter": edge features to their destination nodes over the module's mesh, (C, edges) to
 * (C, nodes): each node's sum over its incoming edges in ascending edge order (PyTorch's
 * zeros.index_add_(-1, dst, x)), or that sum over their count (graph STRATA_SCATTER_MEAN;
 * 0 for a node without incoming edges). The same bits every run and on any device count.
 */
extern const struct strata_module_ops strata_scatter;

/*
 * Merge modules: skip connections, which make a model a small static graph (ResNet blocks, a
 * U-Net). Each reads the output of the earlier module its strata_module from names (-1: the
 * model's input) besides its input x, the previous module's output. No parameters; rows are
 * independent; activations on both sides stay f32 under mixed precision. The skip's gradient
 * is summed into that module's output gradient in a fixed order (the later reader first), so
 * runs repeat bitwise. They need the device's add kernel.
 */
/** "add": y = x + skip, both of the same layout (PyTorch's residual `x + h`). */
extern const struct strata_module_ops strata_add;
/**
 * "concat": y = x's channels then skip's (torch.cat((x, h), dim=1)); both of the same
 * spatial extents, or both flat vectors (their features then).
 */
extern const struct strata_module_ops strata_concat;

/*
 * Spectral convolutions (nn/spectral.c; decision 0061), the Fourier layer of Fourier neural
 * operators as the reference FNO writes it: per sample, the real FFT of each input channel over
 * its spatial extents (torch.fft.rfft, rfft2), the kept frequencies multiplied by complex
 * weights and summed over input channels, the others zero, and the inverse real FFT back to the
 * input's extents (irfft, irfft2: scaled by 1 / points). In channels and extents from the input's
 * layout, out channels strata_module out, no bias. The weights do not depend on the extents, so
 * a model trained at one resolution runs at another with the same values. Complex weights are
 * stored as torch.view_as_real() gives them, (real, imaginary) pairs in the last dimension,
 * initialised as the reference (both parts uniform in [0, 1 / (in * out))). FFTs are FFTW's in
 * fp32 under every precision, planned at connect (never during a step), computed on the host
 * (host_loops: the CPU driver). Rows are independent.
 */
/**
 * "spectralconv1d": input (C, W), modes[0] the frequencies 0..modes-1 kept (1 to W / 2 + 1);
 * group "weights1" [in, out, modes, 2].
 */
extern const struct strata_module_ops strata_spectralconv1d;
/**
 * "spectralconv2d": input (C, H, W), the rows 0..modes1-1 (weights1) and H-modes1..H-1
 * (weights2) of the columns 0..modes2-1 (modes1 1 to H / 2, modes2 1 to W / 2 + 1); groups
 * "weights1" and "weights2" [in, out, modes1, modes2, 2].
 */
extern const struct strata_module_ops strata_spectralconv2d;
/**
 * "spectralconv3d": input (C, D, H, W), the planes 0..modes1-1 and D-modes1..D-1 times the rows
 * 0..modes2-1 and H-modes2..H-1 of the columns 0..modes3-1 (modes1 1 to D / 2, modes2 1 to
 * H / 2, modes3 1 to W / 2 + 1); groups "weights1" (low planes, low rows), "weights2" (high,
 * low), "weights3" (low, high), "weights4" (high, high) [in, out, modes1, modes2, modes3, 2].
 */
extern const struct strata_module_ops strata_spectralconv3d;

/**
 * @brief The built-in module "linear", "relu", "batchnorm1d", "dropout", "tanh", "sigmoid",
 *        "gelu", "gelu-tanh", "silu", "leaky-relu", "maxpool1d" (2d, 3d), "avgpool1d" (2d,
 *        3d), "upsample", "flatten", "layernorm", "conv1d" (2d, 3d), "spectralconv1d" (2d, 3d),
 *        "add" or "concat" (NULL: no such).
 */
const struct strata_module_ops *strata_module_ops_by_name(const char *name);

/**
 * @brief A model from one line of text, as the tool's --model and Fortran take it:
 *        "input(1,28,28) conv2d(32,3,padding=1) relu maxpool2d(2) flatten linear(10)".
 *
 * Modules are separated by spaces: a built-in module's name (strata_module_ops_by_name()),
 * then its arguments in parentheses, positional first and then name=value, as PyTorch's
 * constructors take them: linear(out), conv1d/2d/3d(out, kernel, stride=, padding= (a count
 * or same), dilation=, padding_mode=zeros|circular|reflect|replicate, bias=true|false),
 * maxpool*d(kernel, stride=, padding=, dilation=), avgpool*d(kernel, stride=, padding=),
 * upsample(scale, mode=nearest|linear|bilinear|trilinear), dropout(p), leaky-relu(slope),
 * batchnorm1d(eps=, momentum=), layernorm(eps=), spectralconv1d(out, modes),
 * spectralconv2d(out, modes1, modes2), spectralconv3d(out, modes1, modes2, modes3), add(from)
 * and concat(from) (the earlier module's index from 0, or input: the model's input;
 * required); the others take none. A per-dimension value is written 3x5 (PyTorch's (3, 5)).
 * An optional first input(C, D, H, W) sets the model's in_dims and in_features; without it
 * they are left as they were (in_dims cleared). A skip connection is written as its index:
 * "input(1,8,8) conv2d(4,3,padding=1) relu conv2d(4,3,padding=1) add(from=1)" is a residual
 * block over modules 2 and 3.
 * Several inputs and outputs (struct strata_model inputs, outputs): one input(...) for each
 * input, before the modules (two or more set ninputs and inputs, in_features their sum);
 * from=inputK names input K (input is input0); from= on a module that merges nothing starts a
 * branch there (strata_module branch); output(loss,weight=w) after a module makes it an output
 * with that loss (mse, l1, huber, bce; none: the model's) and weight (1 when not given):
 * "input(4) input(2) linear(8) relu linear(8,from=input1) add(from=1) linear(3) output(mse)
 * linear(1,from=3) output(bce,weight=0.5)".
 *
 * @param line  The text (NUL-terminated).
 * @param mods  Room for @p max modules, which @p model's modules then point to.
 * @param model Receives nmodules, modules and, from input(...), in_features and in_dims (or
 *              ninputs and inputs), from output(...) noutputs and outputs (none: 0); its
 *              loss and reduction are kept. Unchanged when the line is refused.
 * @retval STRATA_OK, or STRATA_EINVAL naming the module and the argument at fault. Shapes
 *         are not checked: strata_model_output() does.
 */
int strata_model_parse(const char *line, struct strata_module *mods, int max,
                       struct strata_model *model);

/**
 * @brief sizeof(struct strata_module): the storage a foreign caller (Python's ctypes) reserves
 *        for each module strata_model_parse() fills, without mirroring the struct.
 */
size_t strata_module_bytes(void);

/**
 * @brief The layout of @p m's output, every module's shape checked in order as strata_init()
 *        checks them; with outputs (m->noutputs) a flat vector of their widths' sum (a row
 *        of strata_predict_step()'s values, cfg.classes), the outputs checked too.
 * @retval STRATA_OK, or STRATA_EINVAL naming the module whose input does not fit (with both
 *         shapes), *out unchanged.
 */
int strata_model_output(const struct strata_model *m, struct strata_dims *out);

/**
 * @brief The values of a row of @p m's targets, checked as strata_model_output() checks the
 *        model: with several outputs each float output's width plus one per label output
 *        (its class index), the batch's tdim; with float targets otherwise the output's
 *        width; with labels 1 (the batch's y, one int32 a row).
 * @param widths NULL, or STRATA_MAX_OUTPUTS ints: each output's width (its classes for a
 *        label output), 0 past m->noutputs.
 * @retval STRATA_OK, or STRATA_EINVAL as strata_model_output() (NULL @p values too),
 *         *values and @p widths unchanged.
 */
int strata_model_targets(const struct strata_model *m, int *values, int *widths);

/**
 * @brief The built-in loss called @p name (its ops table's name: "softmax_cross_entropy",
 *        "mse", ...), for callers that cannot name the table (Fortran); NULL: no such loss.
 */
const struct strata_loss_ops *strata_loss_ops_by_name(const char *name);

/**
 * Precision plugins, by Lightning's names. Master weights, gradients and optimizer state are
 * f32 in all three; what changes is the GEMMs' operands (strata_gemm()).
 */
enum strata_precision {
        STRATA_PRECISION_32 = 0,     /**< "32": f32 everywhere (default) */
        STRATA_PRECISION_BF16_MIXED, /**< "bf16-mixed": GEMM operands bf16, f32 accumulation */
        STRATA_PRECISION_16_MIXED,   /**< "16-mixed": GEMM operands f16, dynamic loss scaling */
        STRATA_PRECISION_COUNT
};

/**
 * Dynamic loss scaling (16-mixed), PyTorch's GradScaler: the loss gradient is multiplied by
 * @c scale; before the optimizer step the gradients are divided by it, and when any is not
 * finite on any device every device skips the step and the scale halves; after @c interval
 * clean steps in a row it doubles.
 */
struct strata_grad_scaler {
        float scale;       /**< the scale the next backward carries (default 65536) */
        uint32_t growth;   /**< clean optimizer steps since the scale last changed */
        uint32_t interval; /**< clean steps before it doubles (default 2000) */
        uint64_t skipped;  /**< optimizer steps skipped for non-finite gradients */
};

/**
 * @brief Lightning's name of @p p ("32", "bf16-mixed", "16-mixed"), or NULL when out of range.
 */
const char *strata_precision_name(enum strata_precision p);

/**
 * @brief The precision called @p name: "32" (also "32-true"), "bf16-mixed", "16-mixed".
 * @retval STRATA_OK, STRATA_EINVAL (NULL or unknown name; *out unchanged).
 */
int strata_precision_parse(const char *name, enum strata_precision *out);

/** Optimizer kinds. */
enum strata_optim_kind {
        STRATA_OPTIM_SGD = 0,
        STRATA_OPTIM_ADAMW = 1,
};

/** Learning-rate schedules, as PyTorch's schedulers stepped once per optimizer step. */
enum strata_lr_schedule {
        STRATA_LR_CONSTANT = 0, /**< lr */
        STRATA_LR_STEP,         /**< StepLR: lr * gamma^floor(k / step_size) */
        STRATA_LR_COSINE,       /**< CosineAnnealingLR: min + (lr - min)(1 + cos(pi k / T)) / 2 */
        STRATA_LR_MULTISTEP,    /**< MultiStepLR: lr * gamma^(milestones <= k) */
        STRATA_LR_ONECYCLE,     /**< OneCycleLR (cosine, two phases, lr only): lr is the peak */
        STRATA_LR_SCHEDULE_COUNT
};

/**
 * Optimizer hyper-parameters (PyTorch semantics). The learning rate of optimizer step t
 * (from 1) is strata_optim_lr(): with warm-up, steps 1..warmup use lr * t / warmup (a linear
 * warm-up); after it the schedule runs with k = t - warmup - 1 steps done. A schedule's only
 * state is the step count, so a checkpoint's step counts restore it. ONECYCLE takes lr as its
 * peak and t_max as its total steps; it cycles the rate only (PyTorch's cycle_momentum=False).
 * A rate that follows a metric (ReduceLROnPlateau) is struct strata_plateau, below.
 */
/*
 * Its fields, listed once as X(path, type, field, kind, key): this list makes the struct and
 * the names strata_config_set() sets them by ("optim." key; see STRATA_CONFIG_RUN in
 * strata/runtime.h for what kind and key mean).
 */
#define STRATA_OPTIM_FIELDS(X, g)                                                              \
        X(g, enum strata_optim_kind, kind, INT, "kind")                                        \
        X(g, float, lr, FLOAT, "lr")                                                           \
        X(g, float, momentum, FLOAT, "momentum")         /* SGD */                             \
        X(g, float, dampening, FLOAT, "dampening")       /* SGD */                             \
        X(g, int, nesterov, INT, "nesterov")             /* SGD */                             \
        X(g, float, weight_decay, FLOAT, "weight_decay") /* SGD: L2; AdamW: decoupled */       \
        X(g, float, beta1, FLOAT, "beta1")               /* AdamW (0 = 0.9) */                 \
        X(g, float, beta2, FLOAT, "beta2")               /* AdamW (0 = 0.999) */               \
        X(g, float, eps, FLOAT, "eps")                   /* AdamW (0 = 1e-8) */                \
        X(g, enum strata_lr_schedule, schedule, INT, "schedule") /* default constant */        \
        X(g, uint64_t, warmup, U64, "warmup")            /* linear warm-up steps (0: none) */  \
        X(g, uint64_t, step_size, U64, "step_size")      /* STEP: steps between decays */      \
        X(g, float, gamma, FLOAT, "gamma")               /* STEP: decay factor */              \
        X(g, uint64_t, t_max, U64, "t_max")              /* COSINE: steps to lr_min */         \
        X(g, float, lr_min, FLOAT, "lr_min")             /* COSINE: final learning rate */  \
        X(g, float, pct_start, FLOAT, "pct_start")       /* ONECYCLE: rising part (0: 0.3) */  \
        X(g, float, div_factor, FLOAT, "div_factor")     /* ONECYCLE: lr / start (0: 25) */    \
        X(g, float, final_div_factor, FLOAT, "final_div_factor") /* ONECYCLE: start / end    \
                                                                    (0: 1e4) */

/** One field of a configuration list: its declaration. */
#define STRATA_CONFIG_FIELD(g, type, field, kind, key) type field;

/** Milestones a MULTISTEP schedule holds at most. */
#define STRATA_LR_MILESTONES 16

struct strata_optim {
        STRATA_OPTIM_FIELDS(STRATA_CONFIG_FIELD, )
        /** MULTISTEP: the schedule steps k at which the rate is multiplied by gamma, strictly
         *  ascending, each > 0, the list ended by the first 0 (an array: not set by name) */
        uint64_t milestones[STRATA_LR_MILESTONES];
};

/** Default optimizer: SGD, lr 0.05, momentum 0.9, constant learning rate. */
#define STRATA_OPTIM_INIT                                                                      \
        { STRATA_OPTIM_SGD, 0.05f, 0.9f, 0.0f, 0, 0.0f, 0.9f, 0.999f, 1e-8f, STRATA_LR_CONSTANT, \
          0, 0, 0.0f, 0, 0.0f, 0.0f, 0.0f, 0.0f, { 0 } }

/**
 * @brief The learning rate of optimizer step @p t (from 1) under @p o's schedule and warm-up.
 *        A constant schedule without warm-up returns o->lr itself, bit for bit.
 */
float strata_optim_lr(const struct strata_optim *o, uint64_t t);

/** @brief Floats of optimizer state per parameter (SGD with momentum 1, AdamW 2, else 0). */
int strata_optim_state_per_param(const struct strata_optim *o);

/**
 * @brief Validate an optimizer configuration.
 * @retval STRATA_OK, or STRATA_EINVAL with a message naming the bad value.
 */
int strata_optim_check(const struct strata_optim *o);

/**
 * ReduceLROnPlateau (PyTorch's, threshold_mode "rel"): the learning rate multiplied by
 * @c factor (never below @c min_lr) once a metric has not improved for more than @c patience
 * evaluations, then @c cooldown evaluations of rest. The configuration is public, the state
 * (set by strata_plateau_start(), advanced by strata_plateau_step()) is read-only: a
 * checkpoint keeps the whole struct to continue it. The application applies the rate with
 * strata_set_lr().
 */
struct strata_plateau {
        /* public: the configuration (STRATA_PLATEAU_INIT: PyTorch's defaults) */
        int mode_max;           /**< 1: a larger metric is better (an accuracy); 0: smaller */
        float factor;           /**< in (0, 1): the rate's multiplier on a plateau */
        int patience;           /**< evaluations without improvement tolerated (>= 0) */
        float threshold;        /**< relative improvement that counts (>= 0) */
        int cooldown;           /**< evaluations after a reduction that count as no plateau */
        float min_lr;           /**< the floor (>= 0) */
        /* read-only: the state */
        double lr;              /**< the current rate (a float's value: what steps use) */
        double best;            /**< the best metric so far (+-inf: none) */
        int bad;                /**< evaluations since the best */
        int cooldown_left;      /**< evaluations of rest left */
        int reductions;         /**< reductions so far */
};

/** PyTorch's defaults: min mode, factor 0.1, patience 10, threshold 1e-4, no cooldown. */
#define STRATA_PLATEAU_INIT { 0, 0.1f, 10, 1e-4f, 0, 0.0f, 0.0, 0.0, 0, 0, 0 }

/**
 * @brief Check @p p's configuration and start it at the rate @p lr (no metric seen yet).
 * @retval STRATA_OK, or STRATA_EINVAL naming the bad value (@p p unchanged).
 */
int strata_plateau_start(struct strata_plateau *p, float lr);

/**
 * @brief One evaluation's @p metric (a NaN never improves): *@p lr receives the rate to use
 *        from now on, reduced when this evaluation ends a plateau.
 * @retval STRATA_OK, or STRATA_EINVAL (NULL, or @p p never started; @p p unchanged).
 */
int strata_plateau_step(struct strata_plateau *p, double metric, float *lr);

/**
 * @brief One optimizer update of @p n parameters in place.
 * @param o     Hyper-parameters.
 * @param t     Step number, starting at 1 (AdamW bias correction; SGD momentum start).
 * @param p     Parameters.
 * @param g     Gradients (SGD with weight decay adds to them).
 * @param state strata_optim_state_per_param(o) * n floats.
 */
void strata_optim_update(const struct strata_optim *o, uint64_t t, float *p, float *g,
                         float *state, size_t n);

/**
 * @brief The same update restricted to elements [@p lo, @p hi) of an @p n-parameter vector.
 *
 * @p p, @p g and @p state describe the whole vector, laid out as for strata_optim_update()
 * (AdamW: first moments then second moments, n each). Updates are elementwise, so ranges that
 * cover [0, n) give bitwise the result of one whole update; ranges may run on different
 * threads at once. @p hi is clamped to @p n; an empty range does nothing.
 */
void strata_optim_update_range(const struct strata_optim *o, uint64_t t, float *p, float *g,
                               float *state, size_t n, size_t lo, size_t hi);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_NN_H */
