/*
 * A replica: one device's copy of the model with its gradients, optimizer state, activations
 * and staging, all carved from that device's arena. Strategies drive replicas; the same layout
 * code runs against a planning arena to size them (internal). What a strategy shards of the
 * flat vectors is the replica's shard (nn/shard.h), invariant mode's chunks its chunks
 * (nn/chunks.h): objects of their own the replica points to and calls.
 */
#ifndef STRATA_NN_REPLICA_H
#define STRATA_NN_REPLICA_H

#include "strata/arena.h"
#include "strata/nn.h"
#include "strata/data.h"
#include "nn/chunks.h"
#include "nn/loss.h"
#include "nn/shard.h"

struct strata__replica; /* private to nn/ (nn/replica_private.h) */
struct strata__track;

/*
 * What strategies, checkpoints and the fingerprint see of a replica: its flat vectors, each
 * layer's place in them and the current batch's rows. Set by the replica's layout and its
 * load; read-only outside nn/ (a strategy changes a replica through the functions below).
 * It is the replica's first member: strata__replica_view() is a cast, free on the step path.
 * Its order keeps the replica's size (the runtime's plan) what it was before the view.
 */
struct strata__replica_view {
        int dev;                           /* the device (local index) */
        const struct strata_kernel_ops *k; /* the driver's kernels */
        int nlayers;                       /* modules, one layer each */
        struct strata_layer *layers;       /* each module's layer: its param, grad, state,
                                            * nparam (the length of its part of the vectors) */
        size_t *poff;                      /* offset of each layer's parameters in them */
        float *params, *grads, *opt_state; /* the flat vectors (the shard's part when sharded) */
        size_t nparam, nopt;               /* the model's parameters; optimizer state */
        struct strata__track *track;       /* this device's trace track, or NULL */
        struct strata__shard *shard;       /* strata__replica_shard() */
        struct strata_chunks *chunks;      /* strata__replica_chunkset() */
        int rows, row0;                    /* the current batch's rows, its first row's index */
        int out;                           /* a row of outputs (the model's output width) */
};

/** The view of replica @p r (its first member). */
static inline const struct strata__replica_view *
strata__replica_view(const struct strata__replica *r)
{
        return (const struct strata__replica_view *)(const void *)r;
}

/** What the device holds of the flat vectors (nn/shard.h): the shard's functions take it. */
static inline struct strata__shard *strata__replica_shard(const struct strata__replica *r)
{
        return strata__replica_view(r)->shard;
}

/** Invariant mode's chunks of replica @p r (nn/chunks.h), else NULL. */
static inline struct strata_chunks *strata__replica_chunkset(const struct strata__replica *r)
{
        return strata__replica_view(r)->chunks;
}

/** Bytes of one replica: the runtime carves its array of them (strategy/runtime/plan.c). */
extern const size_t strata__replica_bytes;

/** Replica @p d of the array @p reps of strata__replica_bytes each. */
static inline struct strata__replica *strata__replica_at(struct strata__replica *reps, int d)
{
        return (struct strata__replica *)(void *)((char *)reps +
                                                   (size_t)d * strata__replica_bytes);
}

/**
 * A replica's figures of its current batch (strata__replica_loss()): the summed loss, rows
 * predicted right, float targets' summed squared and absolute errors and, with several
 * outputs, each output's own loss and (label outputs) rows predicted right.
 */
struct strata__replica_metrics {
        double loss_sum, sse, sae;
        int correct, rows;
        double out_loss[STRATA_MAX_OUTPUTS];
        int out_correct[STRATA_MAX_OUTPUTS];
        unsigned char label[STRATA_MAX_OUTPUTS]; /* output k's loss takes labels */
};

/** Where a replica's memory comes from (planning arenas only count). */
struct strata__replica_mem {
        struct strata_arena *host;   /* descriptors (host memory) */
        struct strata_arena *dev;    /* tensors: parameters, gradients, activations, state */
        struct strata_arena *pinned; /* host staging for transfers (NULL: none, host memory) */
        const struct strata_device_ops *drv;
};

/** What a replica is laid out for: one plan, the same for every device but @c dev. */
struct strata__replica_plan {
        const struct strata_model *model;
        const struct strata_optim *optim;
        int rows_max;                   /* most rows of one device's share of a batch */
        int dev;                        /* the device (local index) */
        enum strata_dtype compute;      /* GEMM operand type (the precision plugin's) */
        enum strata_dtype grad_comm;    /* the gradients' all-reduce type */
        int shards;                     /* devices the optimizer state is sharded over */
        unsigned how;                   /* what else is sharded (STRATA__SHARD_*) */
        const struct strata__chunk_plan *chunks; /* invariant mode, else NULL */
        int fuse;                       /* run row_wise modules in a row_loop module's loop */
        int inference;                  /* forward only: no gradients nor optimizer state */
};

/**
 * Carve a replica for plan @p p. For a device that computes in host memory (no pinned arena)
 * the host and device arenas may be one; the staging then aliases the device buffers and
 * costs nothing. A compute type other than f32 adds the driver's GEMM scratch for the largest
 * GEMM a module declares. Under bf16 compute on a driver with the bf16 activation operations,
 * each activation between two modules that declare bf16_io is stored in bf16, unless a merge
 * module reads it (a skip source's output is f32). Each skip source gets a buffer for the
 * gradient its readers give it, from the backward of its last reader to its own; sources whose
 * spans do not overlap share one (struct strata_layer dskip). The shard
 * (strata__shard_plan(), strata__shard_layout(): shards, how, grad_comm) sizes the parameter
 * and gradient vectors and adds its buffers; the optimizer state holds one shard. Invariant
 * mode's chunks add the pairwise tree's scratch (strata__chunks_layout()). The shard's sizes
 * go to @p sizes when not NULL (planning reads them: the arenas hold nothing then).
 */
int strata__replica_layout(struct strata__replica *r, const struct strata__replica_mem *mem,
                           const struct strata__replica_plan *p,
                           struct strata__shard_sizes *sizes);

/**
 * Initialise parameters and state deterministically from @p seed; zero optimizer state. With
 * own_params (the shard's) only zeros: the strategy initialises each layer into the layer
 * buffer and keeps its shard's part (strata__replica_keep()).
 */
void strata__replica_init(struct strata__replica *r, uint64_t seed);

/**
 * Inference replicas (@p inference) on a driver with the optional gemm_pack / gemm_pb:
 * each Linear's packed weight (its aux, naux_fixed floats) from @p d, after the carve pass;
 * planning counts the same bytes. Training replicas: nothing. Decision 0078.
 */
int strata__packed_plan(struct strata__replica *r, struct strata_arena *d,
                        const struct strata_model *m, int inference);

/**
 * Declare to @p r's driver (the optional gemm_ld) the leading dimensions its Linears' fp32
 * GEMMs read row-major operands at: each one's input and weight (in floats apart) and output
 * gradient (out): a CPU driver then reads them in place instead of packing them (decision
 * 0122). Laid-out replicas only (a planning pass has no layers); before the steps.
 */
int strata__packed_lds(const struct strata__replica *r);

/**
 * Rewrite every packed weight of @p r from its weights: after anything writes them (connect's
 * initialisation, load_weights). Nothing for a replica without packed weights.
 */
void strata__packed_refresh(struct strata__replica *r);

/**
 * One tiny GEMM on this thread, before the arenas seal: the first GEMM may set up BLAS
 * internals. Drivers with their own memory warm up when they reserve it.
 */
void strata__replica_warm_up(const struct strata__replica *r);

/**
 * batch_to_device: rows [lo, lo + rows) of @p b become this replica's input (x, targets), as
 * the data layer gives them (strata__batch_inputs(), strata__batch_targets(): in place, or
 * gathered into the host staging); the device reads them there or gets a copy (its
 * device_view); targets (labels, or float targets for a loss that takes them) only with
 * @p with_labels.
 */
void strata__replica_load(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows, int with_labels);

/**
 * Invariant mode: the chunks of replica @p r (global rank @p g of @p world devices) for a
 * batch of @p rows rows cut into @p chunks; the view's rows and row0 then hold its share.
 */
void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world);

#ifdef STRATA_TESTING
/** Tests only: non-zero runs `tokens layernorm tokens` as three modules (decision 0090). */
extern int strata__replica_unfused;
/** Tests only: the rows whose ReLU and MaxPool backwards ran as one (decision 0109). */
extern _Atomic int strata__replica_folds;
#endif

/** Forward through every module (each output kept for the loss); a module's collective may fail. */
int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c);

/**
 * Loss (summed, with its other figures, for strata__replica_metrics()) and, when @p grad,
 * dlogits scaled by c->loss_scale; with float targets also the summed squared and absolute
 * errors.
 */
void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad);

/**
 * The model's outputs of the current batch to host memory @p dst: the view's rows rows of out
 * values, each output's in turn (strata_predict_step()'s values).
 */
void strata__replica_outputs_to_host(const struct strata__replica *r, float *dst);

/**
 * Backward through every module from the loss gradient, the strategy's layer hook after each
 * layer's (strata__replica_set_hooks(): its ready where this backward ends the accumulation
 * window, @p sync, else its micro). Where the shard reduces every micro-batch
 * (strata__shard_each()), each layer writes its micro-batch's gradients alone to the layer
 * buffer, the hook reduces them there, and what the replica holds of them is added into its
 * gradients, the window's sum.
 */
int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c,
                             int sync);

/**
 * STRATA_OK when strata__replica_input_grad() can run on @p r: one module reads the model's
 * input (no skip connection or branch), one output, no chunks; STRATA_ENOTSUP otherwise.
 */
int strata__replica_input_grad_check(const struct strata__replica *r);

/**
 * After a training-mode forward: the backward pass from the caller's output gradient @p dout
 * (host memory, the batch's rows x the model's outputs; this replica's rows taken from row0)
 * instead of the loss's, as an accumulation micro-batch (the hooks' micro: none under ddp),
 * the module that reads the input writing its input's gradient, which goes to @p dx (host,
 * rows x input width, this replica's rows at row0). Its parameters' gradients are not kept:
 * the next backward overwrites them.
 */
int strata__replica_input_grad(struct strata__replica *r, const struct strata_step_ctx *c,
                               const float *dout, float *dx);

/**
 * The strategy's upcalls (its layer hooks and fetch), each called with @p h: given once, at
 * connect, and kept in the replica's shard.
 */
void strata__replica_set_hooks(struct strata__replica *r,
                               const struct strata__replica_hooks *hooks, void *h);

/**
 * Clip the gradients (global norm over the flat vector, then value); 0 disables each. With
 * own_params the norm is the shard's layer gradients', where the strategy gathered every
 * shard's gradients, and the shard is clipped.
 */
void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value);

/**
 * strata__replica_clip() given the global sum of squares @p ss of the reduced gradients
 * (used when @p max_norm > 0): zero2 with own_grads, whose replica holds its shard alone,
 * has the owners sum it shard after shard.
 */
void strata__replica_clip_sumsq(struct strata__replica *r, float max_norm, float max_value,
                                double ss);

/**
 * Loss scaling: divide the gradients by @p scale unless one is not finite; returns 1 when one
 * is not (the step must be skipped), else 0.
 */
int strata__replica_unscale(struct strata__replica *r, float scale);

/** Non-zero when one of the gradients is NaN or infinite (the driver's cheapest check). */
int strata__replica_nonfinite(const struct strata__replica *r);

/**
 * The gradients are used up (a skipped optimizer step, or dp's master took them): parameters
 * and step count unchanged; the next backward overwrites them.
 */
void strata__replica_skip(struct strata__replica *r);

/**
 * Optimizer update of the flat parameters (of the replica's shard only when sharded); marks
 * gradients fresh for the next backward.
 */
void strata__replica_step(struct strata__replica *r, const struct strata_optim *o);

/**
 * Elements [lo, hi) of the optimizer update of @p r at its current step count (opt_t, which
 * the caller advanced), written to @p p (r's parameters or a copy holding the same values),
 * reading r's gradients and optimizer state. Needs the driver's update_range; disjoint ranges
 * may run on several threads at once and together give bitwise strata__replica_step().
 */
void strata__replica_step_range(const struct strata__replica *r, const struct strata_optim *o,
                                float *p, size_t lo, size_t hi);

/** Non-zero when one of gradients [lo, hi) is NaN or infinite (a range of the check above). */
int strata__replica_nonfinite_range(const struct strata__replica *r, size_t lo, size_t hi);

/**
 * Elements [lo, hi) of @p r's optimizer update, in place, each block of them then copied into
 * the @p nto replicas @p to (same model, same layout, host memory) while it is in the
 * first-level cache: the parameters only, pushed by their owner (decision 0121). The optimizer
 * state of [lo, hi) stays in @p r alone (decision 0100: its other replicas read it in no step;
 * strata__replica_state_part() copies it where a whole state is read). The step count advances
 * and the gradients are marked fresh. Ranges that together cover the vector, run on replicas
 * holding the same values, leave every replica's parameters, and the state in each range's own
 * replica, bitwise as strata__replica_step() would (every rule is elementwise). Needs the
 * driver's update_range.
 */
void strata__replica_step_part(struct strata__replica *r, const struct strata_optim *o,
                               size_t lo, size_t hi, struct strata__replica *const *to, int nto);

/**
 * Elements [lo, hi) of every slot of @p src's optimizer state into @p dst's (same model, same
 * layout, host memory): what a split step's update left in @p src alone.
 */
void strata__replica_state_part(struct strata__replica *dst, const struct strata__replica *src,
                                size_t lo, size_t hi);

/**
 * Polyak averaging of a target copy @p t towards its source @p s, a replica of the same model
 * on the same device: t's parameters become (1 - @p tau) t + @p tau s (@p tau 1: a copy). Its
 * running statistics, gradients and optimizer state are not touched. Host memory only.
 */
void strata__replica_polyak(struct strata__replica *t, const struct strata__replica *s,
                            float tau);

/** Parameter and buffer groups over every layer (strata__replica_param()'s index range). */
int strata__replica_nparams(const struct strata__replica *r);

/**
 * Group @p index of the replica, layers in order and each layer's groups in declaration
 * order, with its gradient, optimizer-state slots and offsets; 0, or -1 past the last.
 */
int strata__replica_param(const struct strata__replica *r, int index, struct strata_param *out);

/** own_params: the shard's part of layer @p i's parameters, from the layer buffer. */
void strata__replica_keep(struct strata__replica *r, int i);

/** own_params: the shard's part of layer @p i's gradients (whole, reduced), from its grad. */
void strata__replica_keep_grads(struct strata__replica *r, int i);

/** Offset of layer @p i's parameters in the flat vector. */
size_t strata__replica_param_offset(const struct strata__replica *r, int i);

/** Fill @p m with the figures of replica @p r's current batch. */
void strata__replica_metrics(const struct strata__replica *r, struct strata__replica_metrics *m);

/** Each output's width (several outputs: struct strata_model outputs' order). */
const int *strata__replica_output_widths(const struct strata__replica *r);

/** The float outputs' widths' sum (several outputs; the elements of a row's errors). */
int strata__replica_float_width(const struct strata__replica *r);

/**
 * Without chunks: the current batch is rows [@p row0, @p row0 + @p rows) of it (the
 * strategy's split); strata__replica_load() then loads them.
 */
void strata__replica_set_rows(struct strata__replica *r, int row0, int rows);

/** Optimizer steps taken (the update's step count). */
uint64_t strata__replica_steps(const struct strata__replica *r);

/** Set the optimizer's step count to @p t (a checkpoint's, or dp's split step's). */
void strata__replica_set_steps(struct strata__replica *r, uint64_t t);

/**
 * Where the layout put replica @p r: its arena @p arena (kept, to seal and count refusals)
 * and the driver's scratch @p scratch for its device (or NULL).
 */
void strata__replica_place(struct strata__replica *r, void *scratch,
                           const struct strata_arena *arena);

/** The trace track @p t the replica's passes record on (NULL: none). */
void strata__replica_set_track(struct strata__replica *r, struct strata__track *t);

/** The replica's arena (strata__replica_place()). */
struct strata_arena *strata__replica_arena(struct strata__replica *r);

/** The driver's scratch for the replica's device (strata__replica_place()), or NULL. */
void *strata__replica_scratch(const struct strata__replica *r);

/**
 * The host image of a device that has memory of its own (parameters and state at init, then
 * any one vector read back), else NULL (the device's memory is host memory).
 */
float *strata__replica_host_image(const struct strata__replica *r);

/**
 * Lay out a replica for plan @p p against planning arenas (strata__replica_layout() with a
 * replica of its own, not kept): what the view says of it to @p v, the shard's sizes to
 * @p sizes.
 */
int strata__replica_plan_only(const struct strata__replica_mem *mem,
                              const struct strata__replica_plan *p,
                              struct strata__shard_sizes *sizes,
                              struct strata__replica_view *v);

#endif /* STRATA_NN_REPLICA_H */
