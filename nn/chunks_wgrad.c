/*
 * Invariant mode, a Linear's weight gradient over one device's chunks (nn/chunks.h): whether
 * its chunks may pair, a chunk computed onto its left sibling's sum with the bits of computing
 * it apart and adding (probed once per layer), and the bias's column sums added onto that sum
 * as the tree adds. Arithmetic goes through the device's kernels. Decisions 0029 and 0087.
 */
#include <string.h>

#include "strata/device.h"
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

