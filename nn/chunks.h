/*
 * Invariant mode's chunks (nn/chunks.c; the tree over a device's chunks in nn/chunks_tree.c,
 * a Linear's weight gradient in nn/chunks_wgrad.c): one device's canonical chunks of the
 * global batch, the pairwise tree that combines their sums, and the passes of a layer and of
 * the loss over them (internal). A replica in invariant mode points to its chunks and calls
 * these entry points; the step context hands the same object to the modules (c->chunks).
 * Arithmetic goes through the device's kernels (struct strata_kernel_ops), as every module's
 * does. Decisions 0029 and 0030.
 */
#ifndef STRATA_NN_CHUNKS_H
#define STRATA_NN_CHUNKS_H

#include "strata/arena.h"
#include "strata/nn.h"

/** Invariant mode: chunks a global batch is cut into, by default and at most. */
#define STRATA__CHUNKS_DEFAULT 8
#define STRATA__CHUNKS_MAX 256

/** Invariant mode: most canonical blocks one device's chunks make (2 log2(256)). */
#define STRATA__BLOCKS_MAX 16

/**
 * A Linear's input gradient @p dx = @p dy W over @p rows rows: the GEMM its backward makes
 * (strata__linear_input_grad()), handed to the chunks by the replica (nn/modules.c is above
 * nn/chunks.c), which make it once over the device's rows where they can.
 */
typedef void (*strata__input_grad_fn)(const struct strata_layer *l,
                                      const struct strata_step_ctx *c, const float *dy,
                                      float *dx, int rows);

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
        int n;                          /* chunks of the device's rows */
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
        /* each block's loss, squared and absolute errors, then each output's own loss */
        double loss[STRATA__BLOCKS_MAX][3 + STRATA_MAX_OUTPUTS];
        unsigned char *batch_stats;     /* each layer's shape.batch_stats */
        unsigned char *linear;          /* each layer's STRATA__LIN_ flags: 0 a Linear not
                                         * probed yet; any other module neither pairs nor
                                         * runs in row blocks */
        signed char *whole_fwd;         /* 1 a Linear's f32 forward runs once over the device's
                                         * rows (probed: every row has its chunk's bits), -1
                                         * once per chunk, 0 a Linear not probed yet */
        signed char *whole_dx;          /* the same for its f32 input gradient */
        int nlayers;                    /* layers of the flags above */
        strata__input_grad_fn linear_dx; /* a Linear's input gradient, from the replica */
        int rows;                       /* the batch the chunks were last set for */
        const struct strata_kernel_ops *k; /* the device's: every addition of the tree */
};

/* A layer's flags in ch->linear, each probed once (decisions 0029, 0087, 0092). */
#define STRATA__LIN_PAIRS_KNOWN 1 /* whether its chunks pair is known */
#define STRATA__LIN_PAIRS 2       /* a chunk is computed onto its left sibling's sum, exactly */
#define STRATA__LIN_ROWS_KNOWN 4  /* whether its weight gradient runs in row blocks is known */
#define STRATA__LIN_ROWS 8        /* it does: every block has the whole product's bits */
#define STRATA__LIN_TREE_KNOWN 16 /* whether the kernels' gemm_tree() makes it is known */
#define STRATA__LIN_TREE 32       /* it does, with every bit of the chunks' GEMMs (0095) */
#define STRATA__LIN_TREE_NOT 64   /* it does not at this batch's size: probed at another */

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
 * Carve the chunks of plan @p cp for a model of @p nlayers layers, the largest with @p lmax
 * parameters, the widest @p width values a row: the chunks' bounds and each layer's flags
 * from @p a (descriptors), and from @p d the tree's scratch: cp->levels + 1 slots of @p lmax
 * floats, world x blocks more where blocks are gathered, and a row of the widest layer.
 * The kernels (ch->k) are the caller's to set; each layer's flags strata__chunks_layer()'s.
 */
int strata__chunks_layout(struct strata_chunks *ch, struct strata_arena *a,
                          struct strata_arena *d, const struct strata__chunk_plan *cp,
                          int nlayers, size_t lmax, int width);

/**
 * Layer @p i: whether it declares batch_stats (it runs once and combines its own chunks),
 * and, for a Linear, its input gradient @p linear_dx (strata__linear_input_grad; NULL for any
 * other module): its chunks may pair (probed at its first backward), and its f32 forward and
 * input gradient may run once over the device's rows (probed at their first batch).
 */
void strata__chunks_layer(struct strata_chunks *ch, int i, int batch_stats,
                          strata__input_grad_fn linear_dx);

/**
 * Rows [*lo, *hi) of a batch of @p rows that devices [g0, g1) of @p world hold when it is cut
 * into @p chunks chunks (what strata__chunks_set() gives those devices, together).
 */
void strata__chunks_rows(int rows, int chunks, int g0, int g1, int world, int *lo, int *hi);

/**
 * The chunks of global device @p g of @p world for a batch of @p rows rows cut into
 * @p chunks; the device's first row (global index) and its rows into *row0 and *nrows.
 */
void strata__chunks_set(struct strata_chunks *ch, int rows, int chunks, int g, int world,
                        int *row0, int *nrows);

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
 * Invariant mode: the tree over the device's chunks (@p ch) as the kernels' gemm_tree()
 * takes it: into @p op (ch->n bytes) each chunk's STRATA_TREE_ONTO and additions (<< 1), as
 * strata__chunks_sum() walks it with @p pairs. Returns the entries left: the device's blocks.
 */
int strata__chunks_program(const struct strata_chunks *ch, int pairs, unsigned char *op);

/**
 * Invariant mode: the pairwise tree over the device's chunks (c->chunks) of what @p leaf
 * writes for each (@p n floats, at most a slot); *sum points at the device's blocks (n floats
 * each, one after the other), in the tree's scratch until the next call. Not summed across
 * devices: c->all_sum does that, leaving the total in (*sum)[0, n). With @p pairs, a chunk
 * that is its left neighbour's sibling is computed onto that one's value (@p leaf's onto),
 * the same bits as computing it apart and adding, in one pass fewer. With @p root (a device
 * of one block, not gathered), the sum is made there instead of in the scratch: *sum is root.
 */
void strata__chunks_sum(const struct strata_step_ctx *c, size_t n, strata__chunk_fn leaf,
                        void *arg, int pairs, float *root, float **sum);

/**
 * Invariant mode, a Linear's chunk computed onto its left sibling's sum: @p db += the column
 * sums of @p dy (@p rows x @p cols) with one rounding per element, as the tree adds.
 */
void strata__chunks_add_col_sums(const struct strata_step_ctx *c, const float *dy, int rows,
                                 int cols, float *db);

/**
 * Invariant mode, a Linear (@p l): whether its backward computes a chunk onto its left
 * sibling's sum with the bits of computing it apart and adding (nn/chunks_wgrad.c), probed
 * on random rows in the tree's scratch, which it leaves free again.
 */
int strata__chunks_probe_pairs(struct strata_layer *l, const struct strata_step_ctx *c);

/**
 * Invariant mode, a Linear (@p l) whose weight gradient was probed to run in the kernels'
 * chunk tree (gemm_tree()) or in row blocks, in f32: its gradient over the device's chunks
 * made in @p grad (a fresh gradient, the device's one block, none gathered), the weights in
 * one gemm_tree() call or a block of output rows at a time, the bias, and with @p dx each
 * chunk's input gradient, the same bits as the chunks' tree over whole products
 * (nn/chunks_wgrad.c). Returns 0, having done nothing, where it does not apply.
 */
int strata__chunks_wgrad(const struct strata_layer *l, const struct strata_step_ctx *c,
                         const void *x, const float *dy, float *dx, float *grad);

/**
 * Invariant mode, a Linear (@p l) not probed yet, whose gradient the chunks' tree over whole
 * products just made in @p grad from @p x and @p dy: whether the row blocks of
 * strata__chunks_wgrad() give every bit of it (the first batch of each size), or, those known
 * at an earlier batch, whether the kernels' chunk tree does.
 */
void strata__chunks_wgrad_probe(const struct strata_layer *l, const struct strata_step_ctx *c,
                                const void *x, const float *dy, const float *grad);

/**
 * Layer @p l's forward over the device's chunks (c->chunks), as its module's forward: once
 * per chunk, or once over the @p rows rows for a module that declares batch_stats.
 */
void strata__chunks_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const void *x, void *y, int rows);

/**
 * Layer @p l's backward over the device's chunks, as its module's backward: once per chunk,
 * or once for a batch_stats module; the parameter gradients combined by the chunks' tree,
 * summed across devices (c->all_sum, unless the strategy defers it) and folded into the
 * window's. Returns a collective's failure or the module's.
 */
int strata__chunks_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const void *x, const void *y, const float *dy, float *dx, int rows);

/** nn/modules.c: a Linear's input gradient (a strata__input_grad_fn). */
void strata__linear_input_grad(const struct strata_layer *l, const struct strata_step_ctx *c,
                               const float *dy, float *dx, int rows);

/** A loss over the device's chunks: what it reads, and the sums it gives (the blocks in order). */
struct strata__chunks_loss {
        const struct strata_loss_ops *loss;
        const float *out;               /* the model's output, [rows, width] */
        const void *targets;            /* labels, float targets, or NULL */
        int width;
        float *dout;                    /* the output's gradient, or NULL: none */
        double sum, sse, sae;           /* the loss, squared and absolute errors */
        int correct;                    /* rows predicted right (several outputs: this one's) */
        /* several outputs: this one's weight in the loss (0: none, the loss as it is) */
        float weight;
        double own;                     /* several outputs: this one's loss, unweighted */
};

/**
 * The loss, its metrics and its gradient per chunk, the sums combined by the tree; each
 * block's kept (ch->loss) for the tree across devices. Several outputs (@p n of them in
 * @p s): each chunk's loss is their weighted sum in order (each gradient scaled by its
 * weight) before the tree, so the sums do not depend on the devices; the device's figures go
 * to s[0] (but each output's rows predicted right to its s[k].correct). Each output's
 * unweighted loss goes through the same tree beside them (s[k].own, and each block's after
 * the errors).
 */
void strata__chunks_loss(struct strata_chunks *ch, const struct strata_step_ctx *c,
                         struct strata__chunks_loss *s, int n);

/**
 * Block @p b's loss (@p j 0), squared (1) or absolute errors (2), output j - 3's own loss
 * (several outputs); 0 past the device's.
 */
double strata__chunks_block_loss(const struct strata_chunks *ch, int b, int j);

/** Whether the device's blocks are gathered (D not a power of two); 0 for NULL chunks. */
int strata__chunks_gathered(const struct strata_chunks *ch);

/** Whether layer @p i declares batch_stats. */
int strata__chunks_batch_stats(const struct strata_chunks *ch, int i);

/** The strategy sums the gradients across devices itself (@p on); nothing for NULL chunks. */
void strata__chunks_set_defer(struct strata_chunks *ch, int on);

/** Whether the strategy sums the gradients across devices itself; 0 for NULL chunks. */
int strata__chunks_defer(const struct strata_chunks *ch);

#endif /* STRATA_NN_CHUNKS_H */
