/*
 * Invariant mode, a Linear's weight gradient over one device's chunks (nn/chunks.h): whether
 * its chunks may pair, a chunk computed onto its left sibling's sum with the bits of computing
 * it apart and adding (probed once per layer), the bias's column sums added onto that sum as
 * the tree adds, and the weights' tree made a block of output rows at a time where that gives
 * every bit (probed), or in one call of the kernels' chunk-tree GEMM where that gives every bit
 * (probed). Sums go through the chunks' tree (nn/chunks_tree.c), arithmetic through the
 * device's kernels. Decisions 0029, 0087, 0092 and 0095.
 */
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "kernel/philox.h"
#include "nn/chunks.h"

void strata__chunks_add_col_sums(const struct strata_step_ctx *c, const float *dy, int rows,
                                 int cols, float *db)
{
        c->k->col_sums(dy, rows, cols, c->chunks->spare, 0);
        c->chunks->k->add(db, c->chunks->spare, (size_t)cols);
}

/* Random values in [-1/2, 1/2) into @p p: the probe's rows. */
static void fill(float *p, size_t n, uint64_t stream)
{
        for (size_t i = 0; i < n; i++)
                p[i] = strata__uniform_at(0x5eed, stream, i) - 0.5f;
}

/*
 * Whether a Linear's backward (the replica marks them) computes a chunk onto its left
 * sibling's sum with the same bits as computing it apart and adding: its bias sum does by
 * construction (strata__chunks_add_col_sums), its weight gradient when the GEMM adds its
 * product to C with one rounding (beta = 1 over one block of k, which the BLAS's blocking
 * decides). Probed once per layer, on two chunks of random rows of its largest chunk, in the
 * tree's scratch: the rows in slot 0, the two ways into slot 1 and the batch_stats slot.
 */
int strata__chunks_probe_pairs(struct strata_layer *l, const struct strata_step_ctx *c)
{
        const struct strata_chunks *ch = c->chunks;
        struct strata_step_ctx cc = *c;
        size_t in = (size_t)l->in, out = (size_t)l->out, rows = 0;
        float *x0 = ch->tree, *x1, *dy;
        float *apart = ch->tree + ch->slot, *onto = ch->out, *grad = l->grad;
        int fresh = l->grad_fresh, same;

        for (int j = 0; j < ch->n; j++) /* the largest chunk: the most k of one GEMM */
                rows = (size_t)(ch->lo[j + 1] - ch->lo[j]) > rows ? (size_t)(ch->lo[j + 1] -
                                                                            ch->lo[j]) : rows;
        x1 = x0 + rows * in;
        dy = x1 + rows * in;
        if (c->x_type != STRATA_F32 || ch->n < 2 || !rows ||
            rows * (2 * in + out) > ch->slot || ch->levels < 2)
                return 0;
        fill(x0, rows * in, 1);
        fill(x1, rows * in, 2);
        fill(dy, rows * out, 3);
        cc.x_type = STRATA_F32;
        l->grad_fresh = 1;
        l->grad = apart;
        l->desc->ops->backward(l, &cc, x0, NULL, dy, NULL, (int)rows);
        l->grad = onto;
        l->desc->ops->backward(l, &cc, x1, NULL, dy, NULL, (int)rows);
        ch->k->add(apart, onto, l->nparam);
        l->desc->ops->backward(l, &cc, x0, NULL, dy, NULL, (int)rows);
        l->grad_fresh = 0;
        l->desc->ops->backward(l, &cc, x1, NULL, dy, NULL, (int)rows);
        same = memcmp(apart, onto, l->nparam * sizeof(float)) == 0;
        l->grad = grad;
        l->grad_fresh = fresh;
        return same;
}

/*
 * A Linear's weight gradient in row blocks (decision 0092). Each chunk's product writes the
 * whole [out x in] gradient, and the tree adds those: for a wide layer, passes of the whole
 * gradient through the last-level cache where normal ddp writes it once. Cut into blocks of
 * dW's output rows, the chunks' products and the tree's additions of one block stay in the
 * L2 before the next. An element of a product depends on its row, its column and k only
 * (decisions 0034, 0041), so every block holds the whole product's bits; the blocked tree is
 * probed against the whole one on the first batch of each size all the same, and kept only
 * where every bit agrees. A block is at most 256 KB, a multiple of the CPU GEMM's 32-row tiles
 * (at least one): the first Linear of 784 inputs makes 4 blocks of 64 rows (200 KB), two of
 * them live with the chunk's packed rows, within a 1 MB L2. Fewer, larger blocks pack each
 * chunk's rows fewer times (once a block).
 */
#define ROW_BLOCK_FLOATS 65536

/* dW rows a block holds for a Linear of @p in inputs. */
static int block_rows(int in)
{
        int r = ROW_BLOCK_FLOATS / (in > 0 ? in : 1) / 32 * 32;

        return r < 32 ? 32 : r;
}

/* Whether layer @p l may run in row blocks in this step: f32, two chunks, two blocks. */
static int eligible(const struct strata_layer *l, const struct strata_step_ctx *c)
{
        const struct strata_chunks *ch = c->chunks;

        return c->x_type == STRATA_F32 && c->compute == STRATA_F32 && ch->n > 1 &&
               l->failed == STRATA_OK && l->out > block_rows(l->in) && ch->tree;
}

/* Rows [o0, o0 + m) of a Linear's weight gradient over the chunks: what a leaf reads. */
struct wblock {
        const struct strata_layer *l;
        const struct strata_step_ctx *c;
        const float *x, *dy;
        int o0, m;
};

/*
 * Chunk [lo, lo + rows)'s product dy^T x over the block's rows into @p out (onto what it
 * holds, with @p onto): the GEMM of the Linear's backward (nn/modules.c), restricted to them.
 */
static void wblock_leaf(void *arg, int lo, int rows, float *out, int onto)
{
        const struct wblock *w = arg;
        int in = w->l->in, o = w->l->out;

        w->c->k->gemm(1, 0, w->m, in, rows, 1.0f, w->dy + (size_t)lo * o + w->o0, o,
                      w->x + (size_t)lo * in, in, onto ? 1.0f : 0.0f, out, in);
}

/* The chunks' tree of the weight gradient into @p dw, a block of rows at a time. */
static void weights(const struct strata_layer *l, const struct strata_step_ctx *c,
                    const float *x, const float *dy, int pairs, float *dw)
{
        struct wblock w = { l, c, x, dy, 0, 0 };
        int r = block_rows(l->in);
        float *sum;

        for (w.o0 = 0; w.o0 < l->out; w.o0 += r) {
                w.m = l->out - w.o0 < r ? l->out - w.o0 : r;
                strata__chunks_sum(c, (size_t)w.m * (size_t)l->in, wblock_leaf, &w, pairs,
                                   dw + (size_t)w.o0 * (size_t)l->in, &sum);
        }
}

/*
 * The kernels' chunk tree (decision 0095): the chunks' products and the tree's additions made
 * per tile of dW inside one GEMM call (gemm_tree()), dW stored once, where each chunk's
 * product wrote the whole dW and each addition read it back. The same operations on the same
 * values in the same order, so the same bits; probed all the same, against the tree just made
 * the other way, on the batch after the row blocks' probe (one extra pass a step), and kept
 * only where every bit agrees.
 */
static int tree_ok(const struct strata_layer *l, const struct strata_step_ctx *c)
{
        const struct strata_chunks *ch = c->chunks;

        return c->x_type == STRATA_F32 && c->compute == STRATA_F32 && ch->n > 1 &&
               l->failed == STRATA_OK && ch->tree && c->k->gemm_tree;
}

/* The chunks' tree of the weight gradient into @p dw in one gemm_tree() call. */
static int tree_weights(const struct strata_layer *l, const struct strata_step_ctx *c,
                        const float *x, const float *dy, int pairs, float *dw)
{
        const struct strata_chunks *ch = c->chunks;
        unsigned char op[STRATA__CHUNKS_MAX];

        if (strata__chunks_program(ch, pairs, op) != 1)
                return STRATA_ENOTSUP;
        return c->k->gemm_tree(&(struct strata_gemm_tree){ .m = l->out, .n = l->in, .a = dy,
                                                           .lda = l->out, .b = x, .ldb = l->in,
                                                           .c = dw, .ldc = l->in,
                                                           .leaves = ch->n, .lo = ch->lo,
                                                           .op = op });
}

/* Whether gemm_tree() gives every bit of @p grad's weights, the chunks' tree made otherwise. */
static void probe_tree(const struct strata_layer *l, const struct strata_step_ctx *c,
                       const float *x, const float *dy, const float *grad)
{
        const struct strata_chunks *ch = c->chunks;
        unsigned char *f = &ch->linear[l->index];
        int rc;

        if ((*f & STRATA__LIN_TREE_KNOWN) || !tree_ok(l, c))
                return;
        *f |= STRATA__LIN_TREE_KNOWN; /* into the batch_stats slot, free in a Linear's pass */
        rc = tree_weights(l, c, x, dy, (*f & STRATA__LIN_PAIRS) != 0, ch->out);
        if (rc == STRATA_OK &&
            !memcmp(grad, ch->out, (size_t)l->in * (size_t)l->out * sizeof(float)))
                *f |= STRATA__LIN_TREE;
        else if (rc == STRATA_ENOTSUP) /* the device's rows past the kernels' buffer: a
                                          smaller batch may fit; other bits are refused for good */
                *f |= STRATA__LIN_TREE_NOT;
}

/* What a chunk's bias sums read. */
struct bias {
        const struct strata_step_ctx *c;
        const float *dy;
        int out;
};

/* Chunk [lo, lo + rows)'s column sums of dy into @p db, or added onto it as the tree adds. */
static void bias_leaf(void *arg, int lo, int rows, float *db, int onto)
{
        const struct bias *b = arg;
        const float *dy = b->dy + (size_t)lo * (size_t)b->out;

        if (onto)
                strata__chunks_add_col_sums(b->c, dy, rows, b->out, db);
        else
                b->c->k->col_sums(dy, rows, b->out, db, 0);
}

int strata__chunks_wgrad(const struct strata_layer *l, const struct strata_step_ctx *c,
                         const void *x, const float *dy, float *dx, float *grad)
{
        const struct strata_chunks *ch = c->chunks;
        int pairs = (ch->linear[l->index] & STRATA__LIN_PAIRS) != 0;
        struct bias b = { c, dy, l->out };
        float *sum;

        if (!(ch->linear[l->index] & STRATA__LIN_TREE) || !tree_ok(l, c) ||
            tree_weights(l, c, x, dy, pairs, grad) != STRATA_OK) {
                if (!(ch->linear[l->index] & STRATA__LIN_ROWS) || !eligible(l, c))
                        return 0;
                weights(l, c, x, dy, pairs, grad);
                probe_tree(l, c, x, dy, grad);
        }
        strata__chunks_sum(c, (size_t)l->out, bias_leaf, &b, pairs,
                           grad + (size_t)l->in * (size_t)l->out, &sum);
        for (int j = 0; dx && j < ch->n; j++) /* the chunks' input gradients, as their leaves */
                ch->linear_dx(l, c, dy + (size_t)ch->lo[j] * (size_t)l->out,
                              dx + (size_t)ch->lo[j] * (size_t)l->in, ch->lo[j + 1] - ch->lo[j]);
        return 1;
}

void strata__chunks_wgrad_probe(const struct strata_layer *l, const struct strata_step_ctx *c,
                                const void *x, const float *dy, const float *grad)
{
        const struct strata_chunks *ch = c->chunks;
        unsigned char *f = &ch->linear[l->index];

        if (*f & STRATA__LIN_ROWS_KNOWN) { /* probed at an earlier batch: now the tree */
                probe_tree(l, c, x, dy, grad);
                return;
        }
        if (l->out <= block_rows(l->in)) { /* one block: nothing to cut */
                *f |= STRATA__LIN_ROWS_KNOWN;
                return;
        }
        if (!eligible(l, c))
                return;
        /* into the batch_stats slot; the blocks' partial sums below it, in the tree's slots */
        weights(l, c, x, dy, (*f & STRATA__LIN_PAIRS) != 0, ch->out);
        *f |= STRATA__LIN_ROWS_KNOWN;
        if (!memcmp(grad, ch->out, (size_t)l->in * (size_t)l->out * sizeof(float)))
                *f |= STRATA__LIN_ROWS;
}
