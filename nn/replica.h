/*
 * A replica: one device's copy of the model with its gradients, optimizer state, activations
 * and staging, all carved from that device's arena. Strategies drive replicas; the same layout
 * code runs against a planning arena to size them (internal).
 */
#ifndef STRATA_NN_REPLICA_H
#define STRATA_NN_REPLICA_H

#include "strata/arena.h"
#include "strata/nn.h"
#include "strata/data.h"

struct strata__replica;

/** Invariant mode: chunks a global batch is cut into, by default and at most. */
#define STRATA__CHUNKS_DEFAULT 8
#define STRATA__CHUNKS_MAX 256

/** Invariant mode: most canonical blocks one device's chunks make (2 log2(256)). */
#define STRATA__BLOCKS_MAX 16

/**
 * Invariant mode: the canonical chunks of one device's rows. The global batch of B rows is
 * cut into C chunks (a power of two), chunk c holding rows [c B / C, (c + 1) B / C); device g
 * of D holds chunks [g C / D, (g + 1) C / D). Every GEMM and every sum over rows is computed
 * per chunk (the same shapes on any device count), and per-chunk sums are combined by the one
 * balanced pairwise tree over chunk indices 0..C-1 (strata__chunks_sum()). A device's chunks
 * make the tree's maximal aligned subtrees inside its range, its blocks: one when D is a
 * power of two, whose tops the devices complete with STRATA_OP_SUM_TREE; otherwise up to
 * @c blocks, gathered from every device and completed by each (strata__chunks_combine()).
 */
struct strata_chunks {
        int n;                          /* chunks of the device's rows; 0: normal mode */
        int *lo;                        /* n + 1: chunk j is the device's rows [lo[j], lo[j + 1]) */
        int row0;                       /* global index of the device's first row */
        int c0;                         /* global index of the device's first chunk */
        int total;                      /* C: chunks of the global batch */
        int world;                      /* D: devices sharing them */
        int nb;                         /* the device's blocks (the tree's subtrees it holds) */
        int defer;                      /* set by the strategy at setup: it sums the gradients
                                         * across devices itself (one block each, no
                                         * accumulation) */
        int blocks;                     /* most blocks of any device: a gathered share */
        float *tree;                    /* levels slots of @c slot floats: partial sums */
        float *out;                     /* one more slot: a batch_stats module's gradients */
        float *gathered;                /* D not a power of two: world x blocks slots, else NULL */
        float *spare;                   /* a row of the widest layer: a chunk's column sums */
        size_t slot;                    /* floats of a slot (the largest layer's parameters) */
        int levels;                     /* most partial sums pending at once */
        double loss[STRATA__BLOCKS_MAX][3]; /* each block's loss, squared and absolute errors */
};

/** Invariant mode: what C chunks over D devices need of each device, for a global batch. */
struct strata__chunk_plan {
        int chunks, world;
        int per;    /* most chunks of one device */
        int levels; /* most partial sums pending at once on one device */
        int blocks; /* most blocks of one device */
        int rows;   /* most rows of one device, for a batch of at most @c batch rows */
        int gather; /* D is not a power of two: blocks are gathered, not all-reduced */
};

/** Invariant mode: the plan of @p chunks chunks (a power of two) over @p world devices. */
void strata__chunks_plan(int chunks, int world, int batch, struct strata__chunk_plan *p);

/**
 * Invariant mode: completes the tree across devices for @p buf, the device's blocks (@p n
 * floats each, one after the other), when ch->gathered holds every device's (ch->blocks
 * slots of @p n each, in device order): the total into buf[0, n).
 */
void strata__chunks_combine(const struct strata_chunks *ch, size_t n, float *buf);

/**
 * Invariant mode: the tree over the blocks of every device: @p v holds @p w doubles per
 * device of @p chunks chunks over @p world, blocks of @p k values from @p at; the total of
 * value @p j.
 */
double strata__chunks_total(const double *v, int w, int at, int k, int j, int chunks,
                            int world, int blocks);

/**
 * A chunk's share of a sum: @p n floats into @p out for the device's rows [lo, lo + rows);
 * with @p onto, added onto what @p out holds with one rounding per element.
 */
typedef void (*strata__chunk_fn)(void *arg, int lo, int rows, float *out, int onto);

/**
 * Invariant mode: the pairwise tree over the device's chunks (c->chunks) of what @p leaf
 * writes for each (@p n floats, at most a slot); *sum points at the device's blocks (n floats
 * each, one after the other), in the tree's scratch until the next call. Not summed across
 * devices: c->all_sum does that, leaving the total in (*sum)[0, n). With @p pairs, a chunk
 * that is its left neighbour's sibling is computed onto that one's value (@p leaf's onto),
 * the same bits as computing it apart and adding, in one pass fewer.
 */
void strata__chunks_sum(const struct strata_step_ctx *c, size_t n, strata__chunk_fn leaf,
                        void *arg, int pairs, float **sum);

/**
 * Invariant mode, a Linear's chunk computed onto its left sibling's sum: @p db += the column
 * sums of @p dy (@p rows x @p cols) with one rounding per element, as the tree adds.
 */
void strata__chunks_add_col_sums(const struct strata_step_ctx *c, const float *dy, int rows,
                                 int cols, float *db);

/**
 * Invariant mode: the chunks of replica @p r (global rank @p g of @p world devices) for a
 * batch of @p rows rows cut into @p chunks; r->rows and r->row0 then hold its share.
 */
void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world);

/**
 * Called after layer @p layer's gradients are complete during backward (layers run last to
 * first), or before a layer computes (fsdp's gather); a non-OK status stops the pass.
 */
typedef int (*strata__grad_ready_fn)(void *h, struct strata__replica *r, int layer);

struct strata__replica {
        int dev;
        const struct strata_device_ops *drv;
        const struct strata_kernel_ops *k; /* drv->kernels */
        const struct strata_loss_ops *loss; /* the model's */
        int nlayers;
        struct strata_layer *layers;
        float **y;                 /* output of each layer, stored as ytype says */
        enum strata_dtype *ytype;  /* f32, or bf16 between two bf16_io modules (bf16-mixed) */
        size_t *poff;              /* offset of each layer's parameters in the flat vector */
        float *params, *grads, *opt_state;
        size_t nparam, nopt;
        /*
         * Sharding (zero1, zero2): nshards devices each own shard_len elements of the flat
         * vector, from shard_lo (the last shard clipped at nparam); params and grads hold
         * nshards * shard_len floats (zero padding), opt_state slots of shard_len each.
         * Unsharded: nshards 1, shard_lo 0, shard_len nparam.
         */
        size_t shard_lo, shard_len;
        int nshards;
        /*
         * fsdp (own_params): params and grads hold the shard alone (shard_len floats: the
         * parameters and the reduced gradients). Every layer computes from lbuf (lbuf_len
         * floats, the largest layer), where fetch(fetch_h) gathers its parameters before its
         * forward and its backward (held: the layer lbuf holds, -1 none); layers' gradients go
         * to lgrad: one layer's, or a whole local vector at each layer's offset (lgrad_len
         * nshards * shard_len) where micro-batches accumulate or clipping gathers every shard.
         * zero2 (own_grads), where that is smaller than the whole vector: params whole, grads
         * the reduced shard alone (shard_len floats), layers' gradients to lgrad (the largest
         * layer's, lgrad_len), reduced to the owners after each layer's backward.
         */
        int own_params, own_grads, held;
        float *lbuf, *lgrad;
        size_t lbuf_len, lgrad_len;
        strata__grad_ready_fn fetch;
        void *fetch_h;
        float *dbuf[2];            /* ping-pong activation gradients */
        float *x_stage;            /* batch_to_device: the batch in device memory */
        void *y_stage;             /* its targets: int32 labels, or f32 [rows, out] */
        float *x_host;             /* host staging of the same (== x_stage without staging) */
        void *y_host;
        float *p_host;             /* staged devices: host image of parameters then state */
        size_t nstate;             /* floats of running state over all layers */
        const float *x;            /* current input (staging or caller's, read-only) */
        const void *targets;       /* current labels or float targets (device memory) */
        int out;                   /* width of the model's output (the last module's) */
        int rows;                  /* rows of the current batch */
        int row0;                  /* global index of its first row */
        double loss_sum;           /* summed loss of the current batch */
        int correct;
        double sse, sae;           /* float targets: summed squared and absolute errors */
        uint64_t opt_t;            /* optimizer steps taken */
        enum strata_dtype compute; /* GEMM operand type (the precision plugin's) */
        void *lp_scratch;          /* mixed precision: the GEMM scratch (NULL in fp32) */
        size_t lp_elems, lp_dim;   /* what it was sized for */
        void *grad_stage;          /* gradients in the all-reduce's type, when not f32 */
        struct strata__track *track; /* this device's track (kernel/trace.h), or NULL */
        struct strata_arena arena;
        struct strata_chunks chunks; /* invariant mode (chunks.n > 0) */
        unsigned char *batch_stats;  /* invariant mode: each layer's shape.batch_stats */
        signed char *pairs;          /* invariant mode: 1 a layer adds a chunk onto its left
                                      * sibling's sum exactly (probed), -1 not, 0 a Linear
                                      * not probed yet */
};

/** Where a replica's memory comes from (planning arenas only count). */
struct strata__replica_mem {
        struct strata_arena *host;   /* descriptors (host memory) */
        struct strata_arena *dev;    /* tensors: parameters, gradients, activations, state */
        struct strata_arena *pinned; /* host staging for transfers (NULL: none, host memory) */
        const struct strata_device_ops *drv;
};

/**
 * Elements each of @p shards devices owns of @p nparam: a 64-byte multiple (the
 * communicator's slice granularity; no two shards share a cache line), at least
 * nparam / shards; nparam itself when @p shards is 1.
 */
size_t strata__replica_shard_len(size_t nparam, int shards);

/** What strata__replica_layout() shards besides the optimizer state (its @p how). */
#define STRATA__SHARD_PARAMS 1u /* fsdp: the parameters and reduced gradients too */
#define STRATA__SHARD_WHOLE_GRADS 2u /* with them: layers' gradients in a whole local vector */
#define STRATA__SHARD_GRADS 4u /* zero2: the reduced gradients alone, where that is smaller */

/**
 * Carve a replica for @p model. For a device that computes in host memory (no pinned arena)
 * the host and device arenas may be one; the staging then aliases the device buffers and
 * costs nothing. A @p compute type other than
 * f32 adds the driver's GEMM scratch for the largest GEMM a module declares; a @p grad_comm
 * type other than f32 adds a copy of the gradients in that type (grad_stage), where a
 * strategy that all-reduces them in it stages them. Under bf16 compute on a driver with the
 * bf16 activation operations, each activation between two modules that declare bf16_io is
 * stored in bf16. With @p shards > 1 the optimizer state holds one shard
 * (strata__replica_shard_len()) and the parameters and gradients are padded to whole shards;
 * with STRATA__SHARD_PARAMS in @p how they hold one shard, and the layers compute from a
 * layer buffer (own_params); with STRATA__SHARD_GRADS the gradients hold one shard and the
 * layers write theirs to a buffer of the largest layer (own_grads), when a shard and that
 * buffer are fewer floats than the whole padded vector. @p chunks (invariant mode, else NULL)
 * adds the pairwise tree's scratch: levels + 1 slots of the largest layer's parameters, and
 * world x blocks more where blocks are gathered.
 */
int strata__replica_layout(struct strata__replica *r, const struct strata__replica_mem *mem,
                           const struct strata_model *model, const struct strata_optim *o,
                           int rows_max, int dev, enum strata_dtype compute,
                           enum strata_dtype grad_comm, int shards, unsigned how,
                           const struct strata__chunk_plan *chunks);

/** Sharded replicas: this replica owns shard @p rank (its global device rank). */
void strata__replica_set_shard(struct strata__replica *r, int rank);

/**
 * Initialise parameters and state deterministically from @p seed; zero optimizer state. With
 * own_params only zeros: the strategy initialises each layer into the layer buffer and keeps
 * its shard's part (strata__replica_keep()).
 */
void strata__replica_init(struct strata__replica *r, uint64_t seed);

/**
 * One tiny GEMM on this thread, before the arenas seal: the first GEMM may set up BLAS
 * internals. Drivers with their own memory warm up when they reserve it.
 */
void strata__replica_warm_up(const struct strata__replica *r);

/**
 * batch_to_device: rows [lo, lo + rows) of @p b become this replica's input (x, targets).
 * f32 rows are read in place, indexed and f64 rows gathered (converted to f32) into the host
 * staging; the device reads them there or gets a copy (its device_view); targets (labels, or
 * float targets for a loss that takes them) only with @p with_labels.
 */
void strata__replica_load(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows, int with_labels);

/** Forward through every module (logits in r->y[last]); a module's collective may fail. */
int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c);

/** The loss of model @p m (softmax cross-entropy when it names none). */
const struct strata_loss_ops *strata__loss_of(const struct strata_model *m);

/**
 * Loss (summed into r->loss_sum) and, when @p grad, dlogits scaled by c->loss_scale; with
 * float targets also the summed squared and absolute errors (r->sse, r->sae).
 */
void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad);

/*
 * Invariant mode (nn/chunks.c), for one layer @p l of @p r: forward once per chunk (a module
 * whose rows are independent); backward once per chunk, or once for a batch_stats module,
 * the gradients combined by the chunks' tree, summed across devices (c->all_sum) and folded
 * into the window's (returns a collective's failure or the module's); the loss, its metrics
 * and its gradient per chunk, sums combined by the tree.
 */
void strata__chunks_forward(struct strata__replica *r, struct strata_layer *l,
                            const struct strata_step_ctx *c, const void *x, void *y);
int strata__chunks_backward(struct strata__replica *r, struct strata_layer *l,
                            const struct strata_step_ctx *c, const void *x, const float *dy,
                            float *dx);
void strata__chunks_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad);

/** Backward through every module from the loss gradient. */
int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c,
                             strata__grad_ready_fn ready, void *h);

/**
 * Clip the gradients (global norm over the flat vector, then value); 0 disables each. With
 * own_params the norm is lgrad's, where the strategy gathered every shard's gradients, and
 * the shard is clipped.
 */
void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value);

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

/** Elements of the flat vector r->params holds: all, or with own_params its shard's. */
size_t strata__replica_owned(const struct strata__replica *r);

/** own_params: the shard's part of layer @p i's parameters, from the layer buffer. */
void strata__replica_keep(struct strata__replica *r, int i);

/** own_params: the shard's part of layer @p i's gradients (whole, reduced), from its grad. */
void strata__replica_keep_grads(struct strata__replica *r, int i);

/** Offset of layer @p i's parameters in the flat vector. */
size_t strata__replica_param_offset(const struct strata__replica *r, int i);

#endif /* STRATA_NN_REPLICA_H */
