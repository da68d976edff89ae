/*
 * Invariant mode's passes over one device's canonical chunks (struct strata_chunks,
 * nn/replica.h): a module whose rows are independent runs once per chunk, so every GEMM and
 * every sum over rows has the chunk's shape on any device count; parameter gradients, loss
 * sums and a batch_stats module's sums are combined by one pairwise tree over the chunks,
 * whose top the devices complete with the communicator's pairwise-tree sum. The tree's
 * partial sums live in the replica's scratch (log2(chunks) + 1 slots), planned with it.
 */
#include "strata/status.h"
#include "arch/reduce.h"
#include "nn/replica.h"

/* a[i] = a[i] + b[i]: the one addition of the tree, the same one the communicator's makes. */
static void add(float *a, const float *b, size_t n)
{
        void *dst[1] = { a };
        const void *src[2] = { a, b };

        strata__reduce_many(STRATA_F32, STRATA__SUM, dst, 1, src, 2, 0, n, 0);
}

void strata__chunks_sum(const struct strata_step_ctx *c, size_t n, strata__chunk_fn leaf,
                        void *arg, float **sum)
{
        const struct strata_chunks *ch = c->chunks;
        int size[32], top = 0;

        for (int j = 0; j < ch->n; j++) {
                leaf(arg, ch->lo[j], ch->lo[j + 1] - ch->lo[j], ch->tree + (size_t)top * ch->slot);
                size[top++] = 1;
                while (top > 1 && size[top - 1] == size[top - 2]) {
                        add(ch->tree + (size_t)(top - 2) * ch->slot,
                            ch->tree + (size_t)(top - 1) * ch->slot, n);
                        size[top - 2] *= 2;
                        top--;
                }
        }
        *sum = ch->tree; /* n is a power of two: one partial sum is left */
}

void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world)
{
        int per = chunks / world, c0 = g * per;
        long lo = (long)rows * c0 / chunks;

        r->chunks.n = per;
        r->chunks.row0 = (int)lo;
        for (int j = 0; j <= per; j++)
                r->chunks.lo[j] = (int)((long)rows * (c0 + j) / chunks - lo);
        r->row0 = (int)lo;
        r->rows = r->chunks.lo[per];
}

/* Byte offset of row @p row of a [rows, width] activation stored as @p t. */
static size_t at(int row, int width, enum strata_dtype t)
{
        return (size_t)row * (size_t)width * strata_dtype_size(t);
}

void strata__chunks_forward(struct strata__replica *r, struct strata_layer *l,
                            const struct strata_step_ctx *c, const void *x, void *y)
{
        const struct strata_chunks *ch = &r->chunks;
        struct strata_step_ctx cc = *c;
        float *aux = l->aux;

        for (int j = 0; j < ch->n && l->failed == STRATA_OK; j++) {
                int lo = ch->lo[j];

                cc.row0 = ch->row0 + lo;
                l->aux = aux ? aux + (size_t)lo * l->naux_per_row : NULL;
                l->desc->ops->forward(l, &cc, (const float *)((const char *)x +
                                                              at(lo, l->in, c->x_type)),
                                      (float *)((char *)y + at(lo, l->out, c->y_type)),
                                      ch->lo[j + 1] - lo);
        }
        l->aux = aux;
}

/* What one chunk's backward needs: the layer's pass, with the chunk's rows. */
struct bwd {
        struct strata_layer *l;
        struct strata_step_ctx c;
        const void *x, *y;
        const float *dy;
        float *dx;
        float *aux;
};

/* Chunk [lo, lo + rows): its input gradient in place, its parameter gradients into @p out. */
static void bwd_leaf(void *arg, int lo, int rows, float *out)
{
        struct bwd *b = arg;
        struct strata_layer *l = b->l;

        b->c.row0 = b->c.chunks->row0 + lo;
        l->aux = b->aux ? b->aux + (size_t)lo * l->naux_per_row : NULL;
        l->grad = out;
        l->grad_fresh = 1;
        if (l->failed != STRATA_OK)
                return;
        l->desc->ops->backward(l, &b->c, (const float *)((const char *)b->x +
                                                         at(lo, l->in, b->c.x_type)),
                               (const float *)((const char *)b->y + at(lo, l->out, b->c.y_type)),
                               b->dy + (size_t)lo * l->out,
                               b->dx ? b->dx + (size_t)lo * l->in : NULL, rows);
}

/* The device's gradient @p sum of layer @p l, summed across devices, into the window's. */
static int fold(struct strata__replica *r, struct strata_layer *l, const struct strata_step_ctx *c,
                float *sum, float *grad, int fresh)
{
        if (c->all_sum && c->world > 1)
                STRATA_TRY(c->all_sum(c, sum, l->nparam));
        if (fresh)
                r->k->copy(grad, sum, l->nparam);
        else
                add(grad, sum, l->nparam);
        return STRATA_OK;
}

int strata__chunks_backward(struct strata__replica *r, struct strata_layer *l,
                            const struct strata_step_ctx *c, const void *x, const float *dy,
                            float *dx)
{
        struct bwd b = { l, *c, x, r->y[l->index], dy, dx, l->aux };
        float *grad = l->grad, *sum = r->chunks.out;
        int fresh = l->grad_fresh;

        if (r->batch_stats[l->index]) { /* one call: it combines its own chunks */
                l->grad = sum;
                l->grad_fresh = 1;
                l->desc->ops->backward(l, c, x, r->y[l->index], dy, dx, r->rows);
        } else if (!l->nparam) {
                for (int j = 0; j < r->chunks.n; j++)
                        bwd_leaf(&b, r->chunks.lo[j], r->chunks.lo[j + 1] - r->chunks.lo[j],
                                 NULL);
        } else {
                strata__chunks_sum(c, l->nparam, bwd_leaf, &b, &sum);
        }
        l->aux = b.aux;
        l->grad = grad;
        l->grad_fresh = fresh;
        if (l->failed != STRATA_OK || !l->nparam)
                return l->failed;
        return fold(r, l, c, sum, grad, fresh);
}

/* The loss of one chunk, with its metrics, in doubles. */
struct loss_sums {
        double v[4]; /* loss, correct, squared and absolute errors */
};

static void loss_chunk(struct strata__replica *r, const struct strata_step_ctx *c, int grad,
                       int lo, int rows, struct loss_sums *s)
{
        const float *out = r->y[r->nlayers - 1] + (size_t)lo * r->out;
        const void *t = r->targets;
        int correct = 0;

        if (t)
                t = r->loss->float_targets ? (const void *)((const float *)t + (size_t)lo * r->out)
                                           : (const void *)((const int32_t *)t + lo);
        s->v[0] = r->loss->forward(c, out, t, rows, r->out,
                                   grad ? r->dbuf[0] + (size_t)lo * r->out : NULL, &correct);
        s->v[1] = correct;
        s->v[2] = s->v[3] = 0.0;
        if (r->loss->float_targets) {
                s->v[1] = 0.0;
                s->v[2] = r->k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, t, rows, r->out,
                                               0.0f, NULL);
                s->v[3] = r->k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, t, rows, r->out,
                                               0.0f, NULL);
        }
}

void strata__chunks_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata_chunks *ch = &r->chunks;
        struct loss_sums st[32];
        int size[32], top = 0;

        for (int j = 0; j < ch->n; j++) {
                loss_chunk(r, c, grad, ch->lo[j], ch->lo[j + 1] - ch->lo[j], &st[top]);
                size[top++] = 1;
                while (top > 1 && size[top - 1] == size[top - 2]) {
                        for (int k = 0; k < 4; k++)
                                st[top - 2].v[k] += st[top - 1].v[k];
                        size[top - 2] *= 2;
                        top--;
                }
        }
        r->loss_sum = st[0].v[0];
        r->correct = (int)st[0].v[1];
        r->sse = st[0].v[2];
        r->sae = st[0].v[3];
}
