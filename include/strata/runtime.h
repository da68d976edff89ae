/*
 * The runtime: one configuration, one memory region, one strategy driving the lifecycle.
 *
 *   strata_plan()     how many bytes the configuration needs (a dry run of the real layout)
 *   strata_plan_sync() / strata_sync_variant()  how it synchronises gradients (by name)
 *   strata_init()     setup_environment: carve the region, start the devices
 *   strata_connect()  connect + setup: initialise the model, broadcast it, seal every arena
 *   strata_train_step() / strata_eval_step() / strata_predict_step()
 *   strata_teardown() once, from any state
 *
 * After strata_connect() nothing allocates: the arenas are sealed and the step path only
 * computes.
 */
#ifndef STRATA_RUNTIME_H
#define STRATA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "strata/checkpoint.h"
#include "strata/comm.h"
#include "strata/data.h"
#include "strata/device.h"
#include "strata/nn.h"
#include "strata/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Pinning of the device threads (cfg.device.bind). */
enum strata_bind {
        STRATA_BIND_CORES = 0, /**< one core each, inside the calling thread's CPU set (default) */
        STRATA_BIND_NONE,      /**< no thread pinning and no NUMA memory binding */
};

/**
 * How the gradients of an accumulation window's micro-batches are summed across devices
 * (cfg.train.accumulate_reduce). Both give bitwise reproducible runs; each strategy that
 * reduces gradients (dp, ddp, spawn, mpi, zero1, zero2, fsdp) gives the same bits as every
 * other under the same value. Decisions 0036, 0047.
 */
enum strata_accumulate_reduce {
        /** Sum the window locally, reduce once at its end (no_sync; default): element i is
         *  sum over devices of (sum over micro-batches). */
        STRATA_ACCUMULATE_REDUCE_WINDOW = 0,
        /** Reduce every micro-batch and add the reduced gradients in micro-batch order
         *  (PyTorch DDP without no_sync, DeepSpeed ZeRO-2): sum over micro-batches of (sum over
         *  devices). Lets zero2 and fsdp keep only their shard of the accumulated gradients. */
        STRATA_ACCUMULATE_REDUCE_EACH,
};

/** Strategies. */
enum strata_strategy_kind {
        STRATA_STRATEGY_SINGLE = 0,
        STRATA_STRATEGY_DP,
        STRATA_STRATEGY_DDP,
        STRATA_STRATEGY_SPAWN, /**< ddp over the processes strata_spawn() forked */
        STRATA_STRATEGY_MPI,   /**< ddp over MPI processes, each with its devices */
        STRATA_STRATEGY_ZERO1, /**< ddp with the optimizer state sharded (ZeRO stage 1) */
        STRATA_STRATEGY_ZERO2, /**< zero1 with gradients reduce-scattered (ZeRO stage 2) */
        STRATA_STRATEGY_FSDP,  /**< zero2 with the parameters sharded too (ZeRO stage 3) */
        STRATA_STRATEGY_COUNT
};

/**
 * @brief The strategy called @p name ("single", "dp", "ddp", "zero1", ...), as the registry
 *        knows it.
 * @retval STRATA_OK, STRATA_EINVAL (NULL or unknown name; *out unchanged).
 */
int strata_strategy_from_name(const char *name, enum strata_strategy_kind *out);

/** @brief Name of a strategy kind ("?" when out of range or not built). */
const char *strata_strategy_name(enum strata_strategy_kind kind);

/*
 * The configuration's fields, each listed once, as X(path, type, field, kind, key): these lists
 * make struct strata_config and its sub-structs below, and the names strata_config_set() sets
 * fields by (strategy/runtime/config_keys.c). @c kind says how a value set by name is converted (INT:
 * an int or an enum, U64, SIZE, FLOAT, DOUBLE; NONE: not settable by name, @c key NULL); @c key
 * is that name (the flat names of before the sub-structs, kept). The optimizer's own list is
 * STRATA_OPTIM_FIELDS (strata/nn.h), its keys prefixed with "optim.".
 */

/** What is trained, and the memory it runs in: fields of struct strata_config itself. */
#define STRATA_CONFIG_RUN(X, g)                                                                    \
        X(g, const struct strata_model *, model, NONE, NULL) /* required */                        \
        X(g, int, batch, INT, "batch")                  /* largest global batch (required) */      \
        X(g, int, classes, INT, "classes")              /* the model's outputs (checked) */        \
        X(g, uint64_t, seed, U64, "seed")               /* parameter init and dropout streams */   \
        X(g, struct strata_models *, models, NONE, NULL) /* more models (NULL: cfg.model alone) */\
        X(g, void *, memory, NONE, NULL)                /* region (NULL: mapped at init) */        \
        X(g, size_t, memory_size, NONE, NULL)           /* its size */                             \
        X(g, int, verbose, INT, "verbose")              /* placement and memory on stderr */    \
        X(g, int, inference_only, INT, "inference_only") /* see below */

/** cfg.strategy: which strategy, over how many devices, and its options. */
#define STRATA_CONFIG_STRATEGY(X, g)                                                               \
        X(g, enum strata_strategy_kind, kind, INT, "strategy") /* default single */                \
        X(g, int, devices, INT, "devices")              /* default 1 */                            \
        X(g, int, sync_bn, INT, "sync_bn")              /* BatchNorm stats over all devices */     \
        X(g, int, replication_callbacks, NONE, NULL)    /* dp: modules' replicate() */             \
        X(g, size_t, bucket_bytes, SIZE, "bucket_bytes") /* ddp bucket cap (0 = 25 MB) */          \
        X(g, enum strata_dtype, grad_allreduce, INT, "grad_allreduce") /* see below */      \
        X(g, int, invariant, INT, "invariant")          /* see below */                            \
        X(g, int, chunks, INT, "chunks")                /* invariant: chunks a batch (0 = 8) */

/** cfg.device: the devices' driver and their threads. */
#define STRATA_CONFIG_DEVICE(X, g)                                                                 \
        X(g, enum strata_accelerator, accelerator, INT, "accelerator") /* default CPU */           \
        X(g, const struct strata_device_ops *, driver, NONE, NULL) /* NULL: the accelerator's */   \
        X(g, enum strata_bind, bind, INT, "bind")       /* pin threads (default) or not */         \
        X(g, enum strata_kernels, kernels, INT, "kernels") /* CPU kernel set (0: native) */       \
        X(g, double, timeout_s, DOUBLE, "timeout_s")    /* bound on every wait (0 = 300 s) */      \
        X(g, int, no_fusion, INT, "no_fusion")          /* see below */

/** cfg.train: how a training step goes. */
#define STRATA_CONFIG_TRAIN(X, g)                                                                  \
        X(g, int, accumulate, INT, "accumulate")        /* micro-batches a step (0 = 1) */         \
        X(g, float, clip_norm, FLOAT, "clip_norm")      /* clip to this global norm (0 = off) */   \
        X(g, float, clip_value, FLOAT, "clip_value")    /* clip to [-v, v] (0 = off) */            \
        X(g, int, allow_nonfinite, INT, "allow_nonfinite") /* see below */                         \
        X(g, enum strata_accumulate_reduce, accumulate_reduce, INT, "accumulate_reduce") /* below */

/** cfg.precision: the precision plugin and the GEMMs' arithmetic. */
#define STRATA_CONFIG_PRECISION(X, g)                                                              \
        X(g, enum strata_precision, kind, INT, "precision") /* default STRATA_PRECISION_32 */      \
        X(g, float, loss_scale_init, FLOAT, "loss_scale_init") /* 16-mixed (0 = 65536) */          \
        X(g, int, loss_scale_interval, INT, "loss_scale_interval") /* 16-mixed (0 = 2000) */       \
        X(g, int, allow_tf32, INT, "allow_tf32")        /* CUDA: TF32 GEMMs (default 0: FP32) */

/** cfg.checkpoint: where checkpoints are stored. */
#define STRATA_CONFIG_CHECKPOINT(X, g)                                                             \
        X(g, const struct strata_checkpoint_io *, io, NONE, NULL) /* NULL: POSIX files */

/** cfg.trace: the timeline and the stall report (strata/trace.h). */
#define STRATA_CONFIG_TRACE(X, g)                                                                  \
        X(g, const char *, path, NONE, NULL)            /* see below (NULL: no trace) */           \
        X(g, size_t, events, SIZE, "trace_events")      /* per device and flush (0 = 65536) */     \
        X(g, double, stall_s, DOUBLE, "stall_s")        /* see below */

/** cfg.process: the processes of an mpi or spawn job. */
#define STRATA_CONFIG_PROCESS(X, g)                                                                \
        X(g, int, count, INT, "processes")              /* see below */                            \
        X(g, const void *, mpi_comm, NONE, NULL)        /* mpi: the MPI_Comm * (NULL: world) */    \
        X(g, int, mpi_comm_fortran, INT, "mpi_comm_fortran") /* mpi_comm: Fortran's */             \
        X(g, int, mpi_allreduce, INT, "mpi_allreduce")  /* see below */

struct strata_runtime;

/** Most models one runtime trains (cfg.model is model 0; strata_models holds the others). */
#define STRATA_MAX_MODELS 8

/**
 * One model beside the configuration's own (strata_models_add(), strata_models_add_target()):
 * a trained model, with its module list, outputs and optimizer (learning rate and schedule
 * included), or a target copy of an earlier model, whose parameters follow its source's by
 * Polyak averaging and which has no gradients and no optimizer state.
 */
struct strata_model_entry {
        const struct strata_model *model; /**< its modules (a target: its source's) */
        int classes;                      /**< its outputs a row (a target: its source's) */
        int source;                       /**< a target: the model it copies; -1: trained */
        float tau;                        /**< a target: its Polyak weight, in (0, 1] */
        struct strata_optim optim;        /**< a trained model's optimizer and schedule */
};

/**
 * The models a runtime trains beside cfg.model (model 0), declared before strata_init() and
 * planned with it: entry[i] is model i + 1. cfg.models points to it (NULL: one model, which
 * costs what it always has). Start from STRATA_MODELS_INIT; fill it with strata_models_add()
 * and strata_models_add_target() only. Decision 0069.
 */
struct strata_models {
        int count;                                         /**< models beside model 0 */
        struct strata_model_entry entry[STRATA_MAX_MODELS - 1];
        const struct strata_runtime *in_use;               /**< the live runtime planned from it */
};

#define STRATA_MODELS_INIT { 0 }

/* The sub-structs, one per concern. */
struct strata_config_strategy {
        STRATA_CONFIG_STRATEGY(STRATA_CONFIG_FIELD, )
};
struct strata_config_device {
        STRATA_CONFIG_DEVICE(STRATA_CONFIG_FIELD, )
};
struct strata_config_train {
        STRATA_CONFIG_TRAIN(STRATA_CONFIG_FIELD, )
};
struct strata_config_precision {
        STRATA_CONFIG_PRECISION(STRATA_CONFIG_FIELD, )
};
struct strata_config_checkpoint {
        STRATA_CONFIG_CHECKPOINT(STRATA_CONFIG_FIELD, )
};
struct strata_config_trace {
        STRATA_CONFIG_TRACE(STRATA_CONFIG_FIELD, )
};
struct strata_config_process {
        STRATA_CONFIG_PROCESS(STRATA_CONFIG_FIELD, )
};

/**
 * Everything a run is made of. Start from STRATA_CONFIG_INIT or strata_config_init().
 *
 * What the lists' short notes leave out:
 * - inference_only: 1: a deployment runtime that predicts and evaluates only. Its plan holds
 *   the parameters, running statistics and the forward's buffers for @c batch rows, and no
 *   gradients, optimizer state, activation gradients or master copies (strata_plan_info's
 *   optimizer_bytes is 0). Weights come in with strata_load_weights() (a safetensors file, or
 *   a checkpoint of any optimizer: its weights only). strata_train_step(),
 *   strata_end_accumulation_window(), strata_save_checkpoint() and strata_load_checkpoint()
 *   refuse it (STRATA_EBADSTATE). Runs under strategy single, precision 32, not invariant;
 *   predict and eval give the bits a training runtime gives with the same weights.
 * - strategy.grad_allreduce (ddp, spawn, mpi): the type gradients are all-reduced in.
 *   STRATA_F32 (default): exact f32 sums. STRATA_BF16: half the bytes between devices and
 *   processes; each device's gradients are rounded to bf16, summed in f32 in the same fixed
 *   order (runs stay bitwise reproducible) and the sum rounded to bf16 once, as PyTorch DDP's
 *   bf16_compress_hook. Needs a host-memory driver (the CPU's).
 * - strategy.invariant: 1: every parameter bit and every loss depend only on the data, the
 *   model, the seed and the global batch, not on the device count or the processes. The
 *   batch is cut into strategy.chunks fixed chunks (a power of two, 1..256; 0 = 8), each
 *   computed with the same kernel shapes wherever it runs, and chunks are combined in one
 *   balanced pairwise tree over chunk indices (inside a device, then across devices). Runs
 *   under single, ddp, spawn, mpi, zero1, zero2 and fsdp on any device count (every process's)
 *   up to the chunk count, in host memory, with synchronised BatchNorm; anything else is
 *   refused with the reason. Checkpoints then resume bitwise on any of them.
 * - train.accumulate_reduce: with accumulate > 1, STRATA_ACCUMULATE_REDUCE_WINDOW (default:
 *   each device sums its micro-batches, the sum is reduced once) or
 *   STRATA_ACCUMULATE_REDUCE_EACH: every micro-batch's gradients are reduced layer by layer
 *   as its backward completes them and added, reduced, into the window's sum in micro-batch
 *   order. The two sum in different orders, so their bits differ; within one value every
 *   strategy and every split into processes gives the same bits. EACH costs a buffer of the
 *   largest layer's gradients and one collective per layer and micro-batch; in return zero2
 *   and fsdp keep only their shard of the window's gradients. It needs the driver's add
 *   kernel (the CPU's). In invariant mode the chunks' tree already sums every micro-batch
 *   across devices: both values run it unchanged.
 * - train.allow_nonfinite: 1: gradients are not checked and a step whose loss is NaN or
 *   infinite returns STRATA_OK (default 0: a NaN or infinite gradient, found and agreed by
 *   every device before the update, refuses the step, and a non-finite loss ends it, both
 *   with STRATA_ENONFINITE naming the step, so a diverging run stops).
 * - device.no_fusion: 1: every module runs on its own. By default (0) a convolution runs the
 *   ReLU and pooling that follow it inside its loop over samples, while a sample's output is
 *   in cache, wherever nothing else reads the outputs in between (not in invariant mode). The
 *   results are the same bits either way.
 * - precision.kind: mixed precision needs a driver with gemm_lp (the CPU's).
 * - trace.path: write a timeline of every device (Chrome Trace Event Format JSON, for Perfetto
 *   or chrome://tracing) to this file. It is written to a temporary file beside it and renamed
 *   at teardown, so the file at the path is always complete (a symlink's target is replaced;
 *   a device or FIFO is written in place). Events are 40 bytes each.
 * - trace.stall_s: report on stderr a device that waited this long at a collective, with where
 *   each late device is (0 = 60 s; negative: never).
 * - process.count (mpi, spawn): the processes of the job (0: from the launcher's environment or
 *   strata_spawn(); checked against the link at init). The memory plan needs it.
 * - process.mpi_comm_fortran: 1: mpi_comm points to a Fortran communicator handle (MPI_Fint),
 *   converted with MPI_Comm_f2c() (strata_config_set_mpi_comm()).
 * - process.mpi_allreduce: gradients through MPI_Allreduce: faster, but its summation order is
 *   Open MPI's, so results are not bitwise reproducible (default 0: Strata's fixed order).
 */
struct strata_config {
        unsigned struct_size; /**< sizeof(struct strata_config) (ABI check) */
        unsigned version;     /**< STRATA_VERSION_HEX the caller was built with */
        STRATA_CONFIG_RUN(STRATA_CONFIG_FIELD, )
        struct strata_config_strategy strategy;     /**< which strategy, devices, its options */
        struct strata_config_device device;         /**< accelerator, driver, threads, timeout */
        struct strata_optim optim;                  /**< default SGD lr 0.05 momentum 0.9 */
        struct strata_config_train train;           /**< accumulation, clipping, non-finite */
        struct strata_config_precision precision;   /**< precision plugin, loss scale, TF32 */
        struct strata_config_checkpoint checkpoint; /**< CheckpointIO */
        struct strata_config_trace trace;           /**< timeline and stall report */
        struct strata_config_process process;       /**< mpi and spawn jobs */
};

#define STRATA_CONFIG_INIT                                                                     \
        { .struct_size = sizeof(struct strata_config), .version = STRATA_VERSION_HEX,            \
          .strategy = { .kind = STRATA_STRATEGY_SINGLE, .devices = 1 },                         \
          .device = { .accelerator = STRATA_ACCEL_CPU }, .optim = STRATA_OPTIM_INIT }

/**
 * @brief Set @p cfg to the defaults of STRATA_CONFIG_INIT: the same thing as a function, for
 *        C++ (where the macro's designated initialisers warn) and Fortran. NULL is ignored.
 */
void strata_config_init(struct strata_config *cfg);

/**
 * @brief Set the numeric field @p key of @p cfg ("devices", "optim.lr", "timeout_s", ...: the
 *        struct's field names, nested ones with a dot) to @p value, for callers that cannot
 *        lay out the struct (Fortran, ctypes, configuration files). Enums take their values.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, no such field, or a value the field cannot hold:
 *         not integral for an integer, NaN or out of range; *cfg unchanged).
 */
int strata_config_set(struct strata_config *cfg, const char *key, double value);

/** @brief cfg->model = @p model (the model must outlive the runtime). */
int strata_config_set_model(struct strata_config *cfg, const struct strata_model *model);

/**
 * @brief cfg->process.mpi_comm = @p comm: the communicator strategy mpi joins the processes of
 *        (duplicated at init; @p comm must stay valid until strata_init() returns). @p comm is
 *        a C `MPI_Comm *` or, with @p fortran non-zero, a Fortran handle (`MPI_Fint *`: the
 *        integer of `use mpi`, the MPI_VAL of mpi_f08's type(MPI_Comm)) that the MPI link
 *        converts with MPI_Comm_f2c(). NULL: MPI_COMM_WORLD.
 * @retval STRATA_OK, STRATA_EINVAL (@p cfg NULL).
 */
int strata_config_set_mpi_comm(struct strata_config *cfg, const void *comm, int fortran);

/** @brief sizeof(struct strata_config): the storage a foreign caller reserves for one. */
size_t strata_config_bytes(void);

/** Result of strata_plan(). */
struct strata_plan_info {
        size_t bytes;       /**< region size needed when the region is aligned to @c align */
        size_t align;       /**< alignment the region start must have for @c bytes to be exact */
        size_t params;      /**< trainable parameters of the model */
        size_t per_device;  /**< bytes of each device's sub-arena */
        size_t device_bytes; /**< per device, in device memory (0 when the host's serves) */
        size_t pinned_bytes; /**< per device, pinned host staging (0 when not needed) */
        /** per device, the optimizer state in @c per_device (zero1/zero2: one shard's) */
        size_t optimizer_bytes;
        /** parameters each device owns: @c params, or one shard's (zero1/zero2, padded) */
        size_t shard_params;
        /**
         * fsdp: per device, the buffers a gathered layer lives in (its parameters, and its
         * gradients or a whole local gradient vector), in @c per_device; 0 otherwise
         */
        size_t layer_bytes;
};

/** Metrics of one step, already reduced across devices. */
struct strata_metrics {
        double loss;   /**< mean loss over the batch (its sum under STRATA_REDUCTION_SUM) */
        int correct;   /**< correct argmax predictions (labels; see @c corrects) */
        int rows;      /**< rows in the batch */
        /**
         * Float targets: mean squared and mean absolute error over rows * outputs, each
         * device's sums (rows in order) added in global device order like the loss; 0 with
         * labels.
         */
        double mse, mae;
        /**
         * Several outputs (strata_model.noutputs; 0 for a model without them): each output's
         * own loss, @c losses[k] for @c outputs[k], unweighted and with the model's
         * reduction, the value that output's loss alone would report; @c loss is
         * sum(weight_k * losses[k]) up to rounding. Each device's sums are added across
         * devices and processes in the same fixed order as the loss's (in invariant mode the
         * same bits on any device count). 0 past @c noutputs.
         */
        int noutputs;
        double losses[STRATA_MAX_OUTPUTS]; /**< each output's loss (see @c noutputs) */
        /**
         * Outputs whose loss takes labels (cross-entropy): @c corrects[k], output k's rows
         * whose argmax is its label, its accuracy corrects[k] / rows (0 for a float output
         * and past @c noutputs). With outputs, @c correct is the first label output's (0:
         * none). Integer counts: the same on any device count.
         */
        int corrects[STRATA_MAX_OUTPUTS];
};

struct strata_runtime;

/**
 * @brief Compute the exact memory a configuration needs, without touching any memory.
 *        The accelerator's driver must be loadable but not its device: a GPU job is planned
 *        on a machine without the GPU (strata_init() then needs it).
 * @retval STRATA_OK, STRATA_EINVAL (the message names the bad field), STRATA_EOVERFLOW,
 *         STRATA_ENODEV (the accelerator's driver is not built or cannot be loaded).
 */
int strata_plan(const struct strata_config *cfg, struct strata_plan_info *out);

/**
 * @brief The synchronisation variant a configuration plans, by name: how its strategy sums
 *        gradients across devices and steps ("buckets", "each", "own-grads", "layer",
 *        "whole", "invariant", ...; decision 0062), from a dry run of the layout, without
 *        touching any memory. One choice waits for the replicas' modules, which
 *        strata_sync_variant() then names: ddp's, zero1's and zero2's "invariant" becomes
 *        "tree" where the buckets complete invariant mode's chunks' tree (a power of two of
 *        devices, one batch a window, no module completing its own gradients).
 * @retval STRATA_OK (*@p name a static string), STRATA_EINVAL (@p cfg invalid, @p name NULL;
 *         *@p name untouched).
 */
int strata_plan_sync(const struct strata_config *cfg, const char **name);

/**
 * @brief The synchronisation variant runtime @p rt runs, by name, picked once at strata_init()
 *        (strata_plan_sync() lists the names).
 * @retval STRATA_OK (*@p name a static string), STRATA_EINVAL (@p rt or @p name NULL).
 */
int strata_sync_variant(const struct strata_runtime *rt, const char **name);

/**
 * @brief setup_environment: validate, carve the region, pick and start the devices.
 *
 * With cfg->memory NULL one region of the planned size is mapped. A region too small fails
 * with STRATA_ENOMEM and a message stating the bytes required. On failure nothing is kept and
 * *rt is untouched.
 */
int strata_init(struct strata_runtime **rt, const struct strata_config *cfg);

/**
 * @brief connect + setup: initialise parameters (same values on every device), reset the
 *        optimizer, seal all arenas. Legal once, right after strata_init().
 */
int strata_connect(struct strata_runtime *rt);

/**
 * @brief One training step on @p b: batch_start, training_step (forward + loss), backward,
 *        optimizer_step, batch_end.
 * @param m Optional metrics of the step.
 * @retval STRATA_OK; STRATA_EINVAL for a bad batch (state unchanged); STRATA_EBADSTATE when
 *         not READY; a device error moves the runtime to its error state; STRATA_ENONFINITE
 *         (unless cfg.train.allow_nonfinite) when a gradient is NaN or infinite: nothing was
 *         applied (parameters, optimizer state and step counts unchanged; 16-mixed skips
 *         such a step without an error), or when the step's loss is NaN or infinite with
 *         finite gradients: the step was taken. The runtime stays READY either way; the
 *         next batch may follow. @p b may have fewer rows than devices: the devices past
 *         its rows take part with none.
 */
int strata_train_step(struct strata_runtime *rt, const struct strata_batch *b,
                      struct strata_metrics *m);

/**
 * @brief The next strata_train_step() ends the accumulation window wherever it stands: after
 *        its backward the gradients are reduced and the optimizer steps, and the next
 *        micro-batch opens a new window. For an epoch whose batch count is not a multiple of
 *        cfg.train.accumulate, called before its last batch, as PyTorch Lightning steps on an
 *        epoch's last batch. Each micro-batch's loss is still divided by accumulate (the
 *        partial window's gradient is the mean over a full window's rows, as in Lightning).
 *        Without accumulation, or on a window's last micro-batch, it changes nothing.
 * @retval STRATA_OK; STRATA_EINVAL (not a live runtime); STRATA_EBADSTATE (not READY).
 */
int strata_end_accumulation_window(struct strata_runtime *rt);

/**
 * @brief Evaluate a batch (eval-mode modules, no gradients): validation_step.
 */
int strata_eval_step(struct strata_runtime *rt, const struct strata_batch *b,
                     struct strata_metrics *m);

/**
 * @brief The model's outputs for a batch: predict_step. @p out receives rows * outputs f32
 *        values (outputs: cfg.classes, the model's last width; logits or regression values),
 *        row after row; @p b needs only its inputs (x, or images with index), rows and dim.
 *        Under several processes each process writes the rows its devices computed.
 * @param capacity The values @p out holds: fewer than rows * outputs is refused, nothing
 *        written.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, a bad batch, @p capacity too small; nothing
 *         written); STRATA_EBADSTATE (not READY).
 */
int strata_predict_step(struct strata_runtime *rt, const struct strata_batch *b, float *out,
                        size_t capacity);

/**
 * @brief The gradient of a loss with respect to the model's input, given its gradient @p dout
 *        with respect to the model's outputs: forward in training mode, backward from
 *        @p dout, and the input's gradient into @p dx (rows x the model's input width, row
 *        after row). Nothing is trained: no gradient is reduced across devices, no optimizer
 *        steps, and the next training step starts its gradients afresh (running statistics
 *        of BatchNorm do move, as in any training-mode forward). What an actor's update
 *        through a critic needs (DDPG: dQ/da of a critic whose input row is the state and
 *        the action); decision 0069.
 * @param dout @p dout_count values: the batch's rows x outputs, row after row.
 * @param capacity The values @p dx holds: fewer than rows x input width is refused.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, a bad batch, too little room; nothing written);
 *         STRATA_EBADSTATE (not READY, or inside an accumulation window); STRATA_ENOTSUP (a
 *         strategy other than single, ddp, spawn, mpi, zero1 and zero2, a driver with memory
 *         of its own, a model whose input several modules read, with several outputs, or
 *         invariant mode).
 */
int strata_input_grad(struct strata_runtime *rt, const struct strata_batch *b,
                      const float *dout, size_t dout_count, float *dx, size_t capacity);

/**
 * @brief teardown: stop the devices, complete the trace file, release a mapped region. Legal
 *        once from any state; the runtime pointer is invalid afterwards.
 * @retval STRATA_OK; STRATA_EIO when the trace could not be completed (everything else is
 *         still released); STRATA_ETIMEDOUT when a device that timed out earlier still had
 *         not returned 1 s into the teardown: its thread is abandoned (the message says which
 *         device and where it was), and the memory region and device reservations stay
 *         mapped because it may still use them. Teardown never waits longer than that.
 */
int strata_teardown(struct strata_runtime *rt);

/**
 * @brief Enable replication callbacks on a DataParallel configuration: after every
 *        replication each module's replicate() runs for copy 0, then the other copies, with a
 *        context shared by the copies (jactorch's patch_replication_callback).
 * @retval STRATA_OK, STRATA_EINVAL (NULL or not a dp configuration).
 */
int strata_patch_replication_callback(struct strata_config *cfg);

/** @brief 1: this process holds global rank 0 (always, for the single-process strategies). */
int strata_is_global_zero(const struct strata_runtime *rt);

/** @brief The root device: where dp keeps its master copy; 0. */
int strata_root_device(const struct strata_runtime *rt);

/** @brief 1: the strategy handles gradient accumulation itself (no_sync on micro-batches). */
int strata_handles_gradient_accumulation(const struct strata_runtime *rt);

/** @brief Number of devices. */
int strata_world_size(const struct strata_runtime *rt);

/**
 * @brief The global rank of this process's device @p dev (0 <= dev < the configuration's
 *        devices): its place among strata_world_size() devices, in the order a batch's rows
 *        are split (device g computes rows [rows g / world, rows (g + 1) / world)); @p dev
 *        itself in a job of one process.
 * @return The rank; -1 for a runtime that is not live or a device out of range.
 */
int strata_device_rank(const struct strata_runtime *rt, int dev);

/**
 * @brief Reduce across devices in place: bufs[d] is device d's buffer of @p count elements;
 *        afterwards every buffer holds the reduction (combined in device order).
 */
int strata_reduce(struct strata_runtime *rt, void *const *bufs, size_t count,
                  enum strata_dtype dt, enum strata_reduce_op op);

/** @brief All-gather: recv[d] receives world * count elements, device k's at k * count. */
int strata_all_gather(struct strata_runtime *rt, const void *const *send, void *const *recv,
                      size_t count, enum strata_dtype dt);

/** @brief Broadcast bufs[src] to every device's buffer. */
int strata_broadcast(struct strata_runtime *rt, void *const *bufs, size_t count,
                     enum strata_dtype dt, int src);

/** @brief Barrier across the devices. */
int strata_barrier(struct strata_runtime *rt);

/** @brief *out = all flags true (@p all) or any flag true; flags[d] is device d's. */
int strata_reduce_boolean_decision(struct strata_runtime *rt, const int *flags, int all,
                                   int *out);

/**
 * @brief Ask every runtime of this process to stop at its next step boundary. Async-signal-safe
 *        (one lock-free atomic store): call it from a SIGINT/SIGTERM handler. From then on
 *        strata_train_step() returns STRATA_ESTOPPED at the start of the next optimizer step
 *        (a pending accumulation window is completed first) and strata_eval_step() /
 *        strata_predict_step() at once, doing nothing; the runtime stays READY, so the
 *        application can save a checkpoint and tear down.
 */
void strata_request_stop(void);

/** @brief 1 after strata_request_stop() until strata_clear_stop(). Async-signal-safe. */
int strata_stop_requested(void);

/**
 * @brief Forget a stop request (steps run again). In a job of several processes call it on
 *        every process: the stop they agreed on is forgotten too, so a request made after it
 *        stops every process at one step boundary again, after the next step's exchange.
 */
void strata_clear_stop(void);

/** @brief Current lifecycle state (enum strata_state). */
int strata_state(const struct strata_runtime *rt);

/**
 * @brief Device @p dev's flat parameter vector (read-only view), for checkpoints and tests.
 *
 * On a device whose memory the host cannot address (CUDA) the view is a copy in the device's
 * pinned staging, valid until the next call that reads or steps that device. Under fsdp a
 * device holds only its shard: elements [g * L, g * L + n) of the flat vector, g its global
 * rank and L strata_plan_info.shard_params (n less than L for the last shards, 0 past the end).
 * @retval STRATA_OK, STRATA_EINVAL (NULL or dev out of range), STRATA_EBADSTATE (not connected).
 */
int strata_parameters(const struct strata_runtime *rt, int dev, const float **p, size_t *n);

/**
 * @brief The optimizer state of device @p dev: @p n floats (momentum, or AdamW m then v) and
 *        the step counter. Under zero1, zero2 and fsdp the state of the device's shard (each slot
 *        strata_plan_info.shard_params floats). Current as of the call: a split ddp step keeps
 *        each part of the state in its own device's replica only and the call makes every
 *        replica's whole again (decision 0100), so call it again after a step. It then writes
 *        the replicas: not at the same time as another call on this runtime.
 */
int strata_optimizer_state(const struct strata_runtime *rt, int dev, const float **state,
                           size_t *n, uint64_t *step);

/**
 * @brief How many parameter and buffer groups the model has (the index range of
 *        strata_parameter()).
 * @retval STRATA_OK, STRATA_EINVAL (NULL), STRATA_EBADSTATE (not connected).
 */
int strata_parameter_count(const struct strata_runtime *rt, int *n);

/**
 * @brief Group @p index of device @p dev's copy of the model: its stable name
 *        ("layers.0.weight"), declared shape and role, and pointers to its values, gradient
 *        and optimizer state, without knowing the module. Modules in order, each module's
 *        groups in the order it declares them; trained groups tile the flat parameter vector.
 *        An inference-only runtime's groups have no gradient (NULL) and no optimizer slots.
 *        After a split ddp step it makes the optimizer state whole, as
 *        strata_optimizer_state() does: not at the same time as another call on this runtime.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, @p dev or @p index out of range; *out unchanged);
 *         STRATA_EBADSTATE (not connected).
 */
int strata_parameter(const struct strata_runtime *rt, int dev, int index,
                     struct strata_param *out);

/**
 * @brief Copy the values of group @p index of device @p dev's model into @p out: the whole
 *        group, or under fsdp the part of it the device holds (elements [shard_lo, shard_hi)
 *        of strata_parameter()); *@p n gets how many. For callers that cannot follow
 *        strata_parameter()'s pointers (Fortran).
 * @param capacity The values @p out holds: fewer than the group's is refused, nothing written.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, @p dev or @p index out of range, @p capacity too
 *         small); STRATA_EBADSTATE (not connected); STRATA_ENOTSUP (device memory).
 */
int strata_parameter_copy(const struct strata_runtime *rt, int dev, int index, float *out,
                          size_t capacity, size_t *n);

/**
 * @brief The model's outputs a sample (cfg.classes): what strata_predict_step() writes a row.
 * @retval STRATA_OK; STRATA_EINVAL (NULL, not a runtime).
 */
int strata_outputs(const struct strata_runtime *rt, int *outputs);

/**
 * @brief Set the base learning rate (cfg.optim.lr) the following optimizer steps use: what a
 *        rate that follows a metric (struct strata_plateau) applies between steps. The
 *        schedule, if any, scales from it; a checkpoint does not keep it (the application's
 *        block does). Every process of a job must set the same rate.
 * @retval STRATA_OK; STRATA_EINVAL (NULL runtime, lr not finite and > 0; nothing changed);
 *         STRATA_EBADSTATE (not READY).
 */
int strata_set_lr(struct strata_runtime *rt, float lr);

/**
 * @brief save_checkpoint: everything a bitwise resume needs (parameters, optimizer state and
 *        step counts, running statistics of every device, the global step) and @p app_bytes
 *        (at most STRATA_CKPT_APP_BYTES) of the application's own state, written atomically
 *        through cfg.checkpoint.io. Between steps, at an optimizer-step boundary. zero1,
 *        zero2 and fsdp across processes: every process calls it (the same path); process 0
 *        writes the one consolidated file from the pieces the others send, and all return the
 *        same status.
 * @retval STRATA_OK; STRATA_EINVAL (NULL or empty path, block too large); STRATA_EBADSTATE
 *         (not READY, or inside an accumulation window); STRATA_EIO (the message says which
 *         call failed; the previous file at @p path is intact).
 */
int strata_save_checkpoint(struct strata_runtime *rt, const char *path, const void *app,
                           size_t app_bytes);

/**
 * @brief load_checkpoint: validate @p path completely (header, every tensor's name, shape and
 *        checksum, the model) and only then restore it; the application's block goes to
 *        @p app (@p app_cap bytes, *app_bytes its length); @p info (optional) says what was
 *        loaded. A checkpoint of another device count or replicated strategy (single, dp,
 *        ddp) loads too: training continues from its replicated state, info->bitwise is 0.
 * @retval STRATA_OK; STRATA_EINVAL (bad argument, another model); STRATA_EFORMAT (not a
 *         checkpoint, truncated, corrupt, other version); STRATA_EBADSTATE. On any of these
 *         nothing changed. An I/O error after validation (the file changed under the reader)
 *         leaves the runtime in its error state.
 */
int strata_load_checkpoint(struct strata_runtime *rt, const char *path, void *app,
                           size_t app_cap, size_t *app_bytes, struct strata_ckpt_info *info);

/**
 * @brief Device 0's parameters and running statistics as safetensors (u64 header length,
 *        JSON header, little-endian f32 data), named as a PyTorch module holding the same
 *        layers in `self.layers = nn.Sequential(...)` names them (`layers.0.weight`); written
 *        atomically through cfg.checkpoint.io. BatchNorm's num_batches_tracked is not
 *        exported (load with strict=False). Across the processes of zero1, zero2 or fsdp,
 *        process 0 writes: under fsdp, whose parameters are sharded, every process calls it
 *        (the same path) and all return the same status; the other processes' calls write
 *        nothing under zero1 and zero2.
 * @retval As strata_save_checkpoint().
 */
int strata_export_safetensors(struct strata_runtime *rt, const char *path);

/**
 * @brief strata_export_safetensors() with @p n pairs of the application's metadata after the
 *        file's own ("format": "pt", "producer": "strata") in its "__metadata__" (JSON
 *        strings, escaped): what a reader needs beside the weights, such as the model line
 *        and the input transform.
 * @retval As strata_export_safetensors(); STRATA_EINVAL also for more than
 *         STRATA_EXPORT_META pairs, a NULL or empty key, a NULL value, a key or value too
 *         long, a key of the export's own or one given twice (nothing written).
 */
int strata_export_safetensors_meta(struct strata_runtime *rt, const char *path,
                                   const struct strata_meta_entry *meta, int n);

/**
 * @brief load_weights: the tensors of safetensors file @p path into the model's parameter
 *        and buffer groups by the names strata_export_safetensors() writes (a PyTorch
 *        state_dict's names of the equivalent module), F32, F64, BF16 or F16 converted to the
 *        parameters' f32. Strict (STRATA_WEIGHTS_STRICT): every group present with its
 *        shape and no other tensor, else the file is refused naming each offending tensor
 *        with both shapes, and nothing changes. STRATA_WEIGHTS_PARTIAL loads the tensors
 *        that fit and lists the others in @p info. Between steps under every strategy (fsdp:
 *        each device fills its shard; across processes every process calls it with the same
 *        file); every device takes the values; optimizer state and step counts start at zero
 *        (the global step and the loss scaler are kept). The header is parsed in fixed
 *        memory: a malformed or hostile file is refused with a message. @p path may also be
 *        a Strata checkpoint: its weights (device 0's values and running statistics) load
 *        whatever its optimizer, strategy or device count, its training state passed over
 *        and each tensor used checked against its checksum.
 * @param info Optional: what was loaded and left, and the file's metadata; filled on refusal
 *        too.
 * @retval STRATA_OK; STRATA_EINVAL (bad argument or flags; the file does not fit the model,
 *         or in partial mode nothing of it does); STRATA_EFORMAT (not safetensors or a
 *         checkpoint, malformed, truncated, corrupt, a tensor twice); STRATA_EBADSTATE (not
 *         READY or inside an accumulation window); STRATA_EIO. On any of these nothing
 *         changed, except an I/O error while values were read (the file changed under the
 *         reader), which leaves the runtime in its error state.
 */
int strata_load_weights(struct strata_runtime *rt, const char *path, unsigned flags,
                        struct strata_weights_info *info);

/** Memory figures of a runtime. */
struct strata_memory_info {
        size_t planned;      /**< strata_plan() bytes */
        size_t used;         /**< high-water mark over all arenas */
        uint64_t refusals;   /**< allocations refused after sealing (must stay 0) */
};

/** @brief Memory planned, used and refused. */
int strata_memory(const struct strata_runtime *rt, struct strata_memory_info *out);

/**
 * @brief The loss scaler's state (16-mixed: the scale the next backward carries, clean steps,
 *        skipped steps).
 *
 * Under 32 and bf16-mixed the loss is not scaled and the state stays at its initial values.
 * @retval STRATA_OK, STRATA_EINVAL (@p rt not live or @p out NULL).
 */
int strata_grad_scaler_state(const struct strata_runtime *rt, struct strata_grad_scaler *out);

/*
 * Several models on one runtime (decision 0069). cfg.model is model 0, which every call above
 * acts on; cfg.models declares the others before strata_init(), and the calls below take a
 * model's index. Every model is planned with the runtime and runs on its workers; each has its
 * own optimizer, learning rate schedule, step counts, checkpoint and export. A target copy
 * has no gradients and no optimizer: strata_model_polyak_update() moves it. Under single,
 * ddp, spawn, mpi, zero1 and zero2 (decision 0116), in host memory, outside invariant mode.
 */

/**
 * @brief Declare a trained model beside the configuration's own: its modules @p model (which
 *        must outlive the runtime), @p classes outputs a row and optimizer @p optim (copied;
 *        NULL: STRATA_OPTIM_INIT). Model i's parameters start from cfg.seed + i x
 *        0x9e3779b97f4a7c15 (each model its own values, the same on every device).
 * @param index Optional: the model's index (1 for the first).
 * @retval STRATA_OK; STRATA_EINVAL (NULL @p s or @p model, an empty model, classes < 1, an
 *         invalid optimizer, STRATA_MAX_MODELS reached); STRATA_EBADSTATE (a live runtime was
 *         planned from @p s: models are added before strata_init()). @p s unchanged on error.
 */
int strata_models_add(struct strata_models *s, const struct strata_model *model, int classes,
                      const struct strata_optim *optim, int *index);

/**
 * @brief Declare a target copy of model @p source (0, or one declared before it): the same
 *        modules, parameters that start as its source's and follow them by Polyak averaging,
 *        p' = (1 - @p tau) p' + @p tau p at each strata_model_polyak_update(); no gradients,
 *        no optimizer state, no training step.
 * @retval STRATA_OK; STRATA_EINVAL (NULL @p s, @p source not declared or the target itself,
 *         @p tau outside (0, 1], STRATA_MAX_MODELS reached); STRATA_EBADSTATE (in use by a
 *         live runtime). @p s unchanged on error.
 */
int strata_models_add_target(struct strata_models *s, int source, float tau, int *index);

/**
 * @brief The models runtime @p rt trains, model 0 included (1 without cfg.models).
 * @retval STRATA_OK, STRATA_EINVAL (not a live runtime, @p n NULL).
 */
int strata_model_count(const struct strata_runtime *rt, int *n);

/**
 * @brief strata_train_step() on model @p model (0: strata_train_step() itself), with its own
 *        optimizer and step count, on the runtime's workers.
 * @retval As strata_train_step(); STRATA_EINVAL also for an unknown model or a target copy
 *         (nothing runs).
 */
int strata_model_train_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                            struct strata_metrics *m);

/**
 * @brief strata_end_accumulation_window() of model @p model: each model has its own window.
 * @retval As strata_end_accumulation_window(); STRATA_EINVAL also for an unknown model or a
 *         target copy.
 */
int strata_model_end_accumulation_window(struct strata_runtime *rt, int model);

/**
 * @brief strata_eval_step() on model @p model (a target copy too).
 * @retval As strata_eval_step(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_eval_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                           struct strata_metrics *m);

/**
 * @brief strata_predict_step() on model @p model (a target copy too): its outputs, rows x its
 *        classes, into @p out.
 * @retval As strata_predict_step(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_predict_step(struct strata_runtime *rt, int model, const struct strata_batch *b,
                              float *out, size_t capacity);

/**
 * @brief strata_model_train_step() of each of the @p n trained models @p models, in that
 *        order, on the one batch @p b: the batch is checked for every model and agreed
 *        between the job's processes once (one exchange where n calls make n), then each
 *        model steps as its own call would (the same bits). @p m: @p n metrics, or NULL.
 * @retval As strata_model_train_step(); STRATA_EINVAL also for @p models NULL, @p n not in
 *         [1, models of @p rt], a model named twice. Nothing runs when an argument or the
 *         batch is refused (the message names the model); a step's failure ends the call
 *         there, the models before it having stepped. With @p m NULL on every process of the job
 *         the losses are judged together after the last model's step (the processes exchange
 *         metrics once, over 2 to 4 processes with the net link's gradients not at all: the
 *         verdicts cross with the last model's gradients (not under process.mpi_allreduce),
 *         and a message prints this process's loss, NaN where only another process's was not
 *         finite; where one process passes metrics, none holds): a loss
 *         that is not finite, its step taken, is STRATA_ENONFINITE naming the model after
 *         every later model stepped too, in preference to the last model's refusal (named
 *         after it) or a stop request between the models (one process; the request stays for
 *         the next call). A gradient that is not finite still ends the call at once, nothing
 *         changed. A trace records a held step's loss as this process's devices' mean (NaN
 *         where another process's loss was not finite, 0 where this process had no rows, on a
 *         step whose verdicts crossed).
 */
int strata_models_train_step(struct strata_runtime *rt, const int *models, int n,
                             const struct strata_batch *b, struct strata_metrics *m);

/**
 * @brief strata_model_predict_step() of each of the @p n models @p models (targets too) on
 *        the one batch @p b, model models[k]'s outputs (rows x its classes, at most
 *        @p capacity values) into @p out[k]; checked for every model and agreed between the
 *        processes once.
 * @retval As strata_model_predict_step(); STRATA_EINVAL also for @p models or @p out NULL,
 *         @p n not in [1, models of @p rt], a model named twice. Nothing is written when an
 *         argument or the batch is refused.
 */
int strata_models_predict_step(struct strata_runtime *rt, const int *models, int n,
                               const struct strata_batch *b, float *const *out,
                               size_t capacity);

/**
 * @brief Polyak averaging of target copy @p target on every device: each parameter p' of it
 *        becomes (1 - tau) p' + tau p, p its source's (f32, element by element: the same bits
 *        on every device and machine). Running statistics are not averaged.
 * @retval STRATA_OK; STRATA_EINVAL (not a live runtime, an unknown model, a trained model);
 *         STRATA_EBADSTATE (not READY). Nothing changes on error.
 */
int strata_model_polyak_update(struct strata_runtime *rt, int target);

/**
 * @brief strata_parameters() of model @p model: device @p dev's flat parameter vector.
 * @retval STRATA_OK, STRATA_EINVAL (NULL, unknown model, @p dev out of range),
 *         STRATA_EBADSTATE (not connected).
 */
int strata_model_parameters(const struct strata_runtime *rt, int model, int dev,
                            const float **p, size_t *n);

/**
 * @brief strata_save_checkpoint() of model @p model alone (its section of the run: its
 *        parameters, optimizer state and step counts, and @p app), to @p path.
 * @retval As strata_save_checkpoint(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_save_checkpoint(struct strata_runtime *rt, int model, const char *path,
                                 const void *app, size_t app_bytes);

/**
 * @brief strata_load_checkpoint() into model @p model: a checkpoint of a model of the same
 *        modules (strata_model_save_checkpoint() of it, or strata_save_checkpoint()).
 * @retval As strata_load_checkpoint(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_load_checkpoint(struct strata_runtime *rt, int model, const char *path,
                                 void *app, size_t app_cap, size_t *app_bytes,
                                 struct strata_ckpt_info *info);

/**
 * @brief strata_load_weights() into model @p model (a target copy too): a safetensors file or
 *        a checkpoint of a model of the same modules, e.g. strata_model_export_safetensors()
 *        of it; its optimizer state and step counts start at zero.
 * @retval As strata_load_weights(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_load_weights(struct strata_runtime *rt, int model, const char *path,
                              unsigned flags, struct strata_weights_info *info);

/**
 * @brief strata_input_grad() of model @p model (a target copy too): DDPG's actor update
 *        takes the critic's gradient with respect to the action columns of its input.
 * @retval As strata_input_grad(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_input_grad(struct strata_runtime *rt, int model, const struct strata_batch *b,
                            const float *dout, size_t dout_count, float *dx, size_t capacity);

/**
 * @brief strata_export_safetensors() of model @p model (a target copy too).
 * @retval As strata_export_safetensors(); STRATA_EINVAL also for an unknown model.
 */
int strata_model_export_safetensors(struct strata_runtime *rt, int model, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_RUNTIME_H */
