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

/* struct strata__replica from: a module that reads no earlier output (nor branches off one). */
#define STRATA__NO_SOURCE (-32768)

/*
 * A model's several inputs and outputs (struct strata_model inputs, outputs) on one replica:
 * where each input's values lie in a row and the buffer its rows are split into, and each
 * output's module, loss, weight, targets and loss gradient. nin and nout 0: the model gives
 * none (one input, the last module's output with the model's loss): nothing here is used.
 * With several outputs a label output's class index is one float of the targets row, made an
 * int32 label as the rows load (lab_host, then the device's view in tout).
 */
struct strata__replica_io {
        int nin, nout;
        int in_off[STRATA_MAX_INPUTS], in_w[STRATA_MAX_INPUTS];
        float *xin[STRATA_MAX_INPUTS];     /* input k's rows of this batch (nin > 1) */
        int mod[STRATA_MAX_OUTPUTS];       /* output k's module */
        int w[STRATA_MAX_OUTPUTS], toff[STRATA_MAX_OUTPUTS]; /* its width, place in targets */
        int ooff[STRATA_MAX_OUTPUTS];      /* its place in a row of predictions */
        int tw[STRATA_MAX_OUTPUTS];        /* its values in a row of targets (label: 1) */
        int tdim;                          /* a row of targets: the tw's sum (nout > 1) */
        int fwidth;                        /* the float outputs' widths' sum */
        unsigned char label[STRATA_MAX_OUTPUTS]; /* its loss takes labels */
        int32_t *lab_host[STRATA_MAX_OUTPUTS];   /* a label output's labels, host (nout > 1) */
        float weight[STRATA_MAX_OUTPUTS];
        const struct strata_loss_ops *loss[STRATA_MAX_OUTPUTS];
        float *gout[STRATA_MAX_OUTPUTS];   /* its loss gradient (the last module's: dbuf[0]) */
        float *tout[STRATA_MAX_OUTPUTS];   /* its targets split from the row (nout > 1; a
                                            * label output's int32 labels, device memory) */
        const void *t[STRATA_MAX_OUTPUTS]; /* its targets of this batch */
};

struct strata__replica {
        int dev;
        const struct strata_device_ops *drv;
        const struct strata_kernel_ops *k; /* drv->kernels */
        const struct strata_loss_ops *loss; /* the model's */
        int nlayers;
        struct strata_layer *layers;
        float **y;                 /* output of each layer, stored as ytype says */
        enum strata_dtype *ytype;  /* f32, or bf16 between two bf16_io modules (bf16-mixed) */
        short *from;               /* each merge or branch module's source (-1 - k: input
                                    * k), else STRATA__NO_SOURCE; NULL: the model has none */
        float **gskip;             /* a skip source's output gradient from its readers, else
                                    * NULL: added to its gradient before its backward */
        short *fuse_last;          /* a row_loop module: the last module its loop over rows
                                    * runs (itself when none); NULL: no module is fused */
        short *fuse_head;          /* a module run inside another's loop: that one, else -1 */
        float *fuse_dx[2];         /* one row's gradients between the fused modules */
        size_t *poff;              /* offset of each layer's parameters in the flat vector */
        float *params, *grads, *opt_state;
        size_t nparam, nopt;       /* the model's parameters; optimizer state (one shard's) */
        struct strata__shard *shard; /* what the device holds of the flat vectors */
        float *dbuf[2];            /* ping-pong activation gradients */
        float *x_stage;            /* batch_to_device: the batch in device memory */
        void *y_stage;             /* its targets: int32 labels, or f32 [rows, out] */
        float *x_host;             /* host staging of the same (== x_stage without staging) */
        void *y_host;
        float *p_host;             /* staged devices: host image of parameters then state */
        size_t nstate;             /* floats of running state over all layers */
        const float *x;            /* current input (staging or caller's, read-only) */
        const void *targets;       /* current labels or float targets (device memory) */
        int out;                   /* a row of targets: the last module's width, or the
                                    * outputs' widths' sum (io.nout) */
        struct strata__replica_io io; /* several inputs and outputs */
        int rows;                  /* rows of the current batch */
        int row0;                  /* global index of its first row */
        double loss_sum;           /* summed loss of the current batch */
        double out_loss[STRATA_MAX_OUTPUTS]; /* several outputs: each one's, unweighted */
        int out_correct[STRATA_MAX_OUTPUTS]; /* each label output's rows predicted right */
        int correct;               /* labels: rows predicted right (the first label output's) */
        int float_row;             /* targets are a row of floats (strata__float_row()) */
        double sse, sae;           /* float targets: summed squared and absolute errors */
        uint64_t opt_t;            /* optimizer steps taken */
        enum strata_dtype compute; /* GEMM operand type (the precision plugin's) */
        void *lp_scratch;          /* mixed precision: the GEMM scratch (NULL in fp32) */
        size_t lp_elems, lp_dim;   /* what it was sized for */
        struct strata__track *track; /* this device's track (kernel/trace.h), or NULL */
        void *scratch;             /* the driver's scratch for this device (plan.c), or NULL */
        struct strata_arena arena;
        struct strata_chunks *chunks; /* invariant mode, else NULL */
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
 * batch of @p rows rows cut into @p chunks; r->rows and r->row0 then hold its share.
 */
void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world);

/** Forward through every module (logits in r->y[last]); a module's collective may fail. */
int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c);

/**
 * Loss (summed into r->loss_sum) and, when @p grad, dlogits scaled by c->loss_scale; with
 * float targets also the summed squared and absolute errors (r->sse, r->sae).
 */
void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad);

/**
 * The model's outputs of the current batch to host memory @p dst: r->rows rows of r->out
 * values, each output's in turn (strata_predict_step()'s values).
 */
void strata__replica_outputs_to_host(const struct strata__replica *r, float *dst);

/**
 * Backward through every module from the loss gradient, @p ready(@p h, r, layer) after each
 * layer's. Where the shard reduces every micro-batch (strata__shard_each()), each layer
 * writes its micro-batch's gradients alone to the layer buffer, @p ready reduces them there,
 * and what the replica holds of them is added into its gradients, the window's sum.
 */
int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c,
                             strata__grad_ready_fn ready, void *h);

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

/** A skipped optimizer step: parameters and step count unchanged; the next backward overwrites. */
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

#endif /* STRATA_NN_REPLICA_H */
