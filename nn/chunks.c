/*
 * Invariant mode's passes over one device's canonical chunks (struct strata_chunks,
 * nn/chunks.h): a module whose rows are independent runs once per chunk, so every GEMM and
 * every sum over rows has the chunk's shape on any device count; parameter gradients, loss
 * sums and a batch_stats module's sums are combined by one pairwise tree over chunk indices.
 * A device evaluates the subtrees inside its range (its blocks); the devices complete the
 * tree with the communicator's pairwise-tree sum, or from every device's gathered blocks
 * (strata__chunks_combine()). The partial sums live in the chunks' scratch, planned with the
 * replica that points to them (strata__chunks_plan(), strata__chunks_layout()); every addition
 * is the device's add kernel, the communicator's sum of two. Decisions 0029 and 0030.
 */
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "alloc/floats.h"
#include "base/base.h"
#include "nn/chunks.h"
#include "nn/chunks_stack.h"

/* a[i] = a[i] + b[i]: the one addition of the tree, the same one the communicator's makes. */
static void add(const struct strata_chunks *ch, float *a, const float *b, size_t n)
{
        ch->k->add(a, b, n);
}

/* Device g's chunks [*a, *b) of @p chunks over @p world. */
static void range(int chunks, int world, int g, int *a, int *b)
{
        *a = (int)((long)g * chunks / world);
        *b = (int)((long)(g + 1) * chunks / world);
}

/* The blocks of chunks [c0, c0 + n); @p depth: most entries at once. */
static int stack_walk(int c0, int n, int *depth)
{
        struct stack s = { .top = 0 };

        for (int j = 0; j < n; j++)
                for (push(&s, c0 + j); siblings(&s);)
                        pop(&s);
        *depth = s.depth;
        return s.top;
}

void strata__chunks_plan(int chunks, int world, int batch, struct strata__chunk_plan *p)
{
        *p = (struct strata__chunk_plan){ .chunks = chunks, .world = world,
                                          .gather = (world & (world - 1)) != 0 };
        for (int g = 0; g < world; g++) {
                int a, b, depth, nb;

                range(chunks, world, g, &a, &b);
                nb = stack_walk(a, b - a, &depth);
                p->per = b - a > p->per ? b - a : p->per;
                p->levels = depth > p->levels ? depth : p->levels;
                p->blocks = nb > p->blocks ? nb : p->blocks;
        }
        /* chunks [a, b) of a batch of at most B rows: at most ceil(B (b - a) / C) rows */
        p->rows = (int)(((long)batch * p->per + chunks - 1) / chunks);
}

/* Which device's range holds chunk @p c. */
static int owner(int c, int chunks, int world)
{
        int g = (int)(((long)c * world) / chunks), a, b;

        for (range(chunks, world, g, &a, &b); c < a; range(chunks, world, --g, &a, &b))
                ;
        for (; c >= b; range(chunks, world, ++g, &a, &b))
                ;
        return g;
}

/*
 * The tree's node [lo, lo + size) from the blocks of every device: the index (device x
 * blocks + block) of the block holding it, after adding the right half into the left.
 */
typedef void (*add_fn)(void *arg, int into, int from);

static int node(int lo, int size, int chunks, int world, int blocks, add_fn fn, void *arg)
{
        int g = owner(lo, chunks, world), a, b, k = 0, left, right;

        range(chunks, world, g, &a, &b);
        if (lo + size <= b) { /* inside one device's range: one of its blocks */
                for (int at = a; at < lo; k++) { /* the blocks before it */
                        int s = 1;

                        while (at % (2 * s) == 0 && at + 2 * s <= b)
                                s *= 2;
                        at += s;
                }
                return g * blocks + k;
        }
        left = node(lo, size / 2, chunks, world, blocks, fn, arg);
        right = node(lo + size / 2, size / 2, chunks, world, blocks, fn, arg);
        fn(arg, left, right);
        return left;
}

struct float_blocks {
        const struct strata_chunks *ch;
        float *p;
        size_t n;
};

static void add_floats(void *arg, int into, int from)
{
        struct float_blocks *f = arg;

        add(f->ch, f->p + (size_t)into * f->n, f->p + (size_t)from * f->n, f->n);
}

void strata__chunks_combine(const struct strata_chunks *ch, size_t n, float *buf)
{
        struct float_blocks f = { ch, ch->gathered, n };
        int top = node(0, ch->total, ch->total, ch->world, ch->blocks, add_floats, &f);

        memcpy(buf, f.p + (size_t)top * n, n * sizeof(float));
}

static void add_doubles(void *arg, int into, int from)
{
        double *v = arg;

        v[into] += v[from];
}

double strata__chunks_total(const double *v, int w, int at, int k, int j, int chunks,
                            int world, int blocks)
{
        /* the values, added in place: world x blocks <= world x ceil(C / world) <= 2 C */
        double tmp[2 * STRATA__CHUNKS_MAX];

        if (world < 1 || blocks < 1 || (long)world * blocks > 2 * STRATA__CHUNKS_MAX)
                return 0.0; /* never: world <= chunks <= STRATA__CHUNKS_MAX at init */
        for (int g = 0; g < world; g++)
                for (int b = 0; b < blocks; b++)
                        tmp[g * blocks + b] = v[g * w + at + b * k + j];
        return tmp[node(0, chunks, chunks, world, blocks, add_doubles, tmp)];
}

/*
 * The pairwise tree keeps at most cp->levels partial sums at once, and a batch_stats module's
 * gradients one slot more; a slot holds the largest layer. Where blocks are gathered, every
 * device's cp->blocks slots too; and a row of the widest layer.
 */
int strata__chunks_layout(struct strata_chunks *ch, struct strata_arena *a,
                          struct strata_arena *d, const struct strata__chunk_plan *cp,
                          int nlayers, size_t lmax, int width)
{
        size_t n, g = 0;
        void *p;

        *ch = (struct strata_chunks){ .n = cp->per, .levels = cp->levels, .blocks = cp->blocks,
                                      .slot = lmax };
        STRATA_TRY(strata_arena_alloc(a, sizeof(int) * ((size_t)cp->per + 1), 0, &p));
        ch->lo = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)nlayers, 0, &p));
        ch->batch_stats = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)nlayers, 0, &p));
        ch->linear = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)nlayers, 0, &p));
        ch->whole_fwd = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)nlayers, 0, &p));
        ch->whole_dx = p;
        ch->nlayers = nlayers;
        STRATA_TRY(strata__arena_floats(d, (size_t)width, &ch->spare));
        if (strata__mul_size(lmax, (size_t)cp->levels + 1, &n) ||
            (cp->gather && strata__mul_size(lmax, (size_t)cp->world * (size_t)cp->blocks, &g)))
                return strata__fail(STRATA_EOVERFLOW, "invariant mode: %d slots of %zu floats "
                                    "overflow", cp->levels + 1 + cp->world * cp->blocks, lmax);
        STRATA_TRY(strata__arena_floats(d, n, &ch->tree));
        if (ch->tree)
                ch->out = ch->tree + (size_t)cp->levels * lmax;
        if (cp->gather)
                STRATA_TRY(strata__arena_floats(d, g, &ch->gathered));
        return STRATA_OK;
}

void strata__chunks_layer(struct strata_chunks *ch, int i, int batch_stats,
                          strata__input_grad_fn linear_dx)
{
        int linear = linear_dx != NULL;

        if (ch->batch_stats)
                ch->batch_stats[i] = batch_stats != 0;
        if (ch->linear) /* a Linear's chunks may pair, its weight gradient run in row blocks
                         * or in the kernels' chunk tree */
                ch->linear[i] = linear ? 0 : STRATA__LIN_PAIRS_KNOWN | STRATA__LIN_ROWS_KNOWN |
                                                     STRATA__LIN_TREE_KNOWN;
        if (ch->whole_fwd) /* a Linear's GEMMs over rows may run once: probed at first use */
                ch->whole_fwd[i] = ch->whole_dx[i] = linear ? 0 : -1;
        if (linear)
                ch->linear_dx = linear_dx;
}

/*
 * A batch of another size: the GEMMs over rows have other row counts, and the weight
 * gradient's row blocks and chunk tree other k, probed again (the tree also where it failed:
 * the kernels may refuse one size's rows and take another's).
 */
static void reprobe(struct strata_chunks *ch)
{
        for (int i = 0; i < ch->nlayers; i++) {
                ch->whole_fwd[i] = ch->whole_fwd[i] > 0 ? 0 : ch->whole_fwd[i];
                ch->whole_dx[i] = ch->whole_dx[i] > 0 ? 0 : ch->whole_dx[i];
                if (ch->linear[i] & STRATA__LIN_ROWS)
                        ch->linear[i] = (unsigned char)(ch->linear[i] & ~(STRATA__LIN_ROWS |
                                                                          STRATA__LIN_ROWS_KNOWN));
                if (ch->linear[i] & (STRATA__LIN_TREE | STRATA__LIN_TREE_NOT))
                        ch->linear[i] = (unsigned char)(ch->linear[i] & ~(STRATA__LIN_TREE |
                                                                          STRATA__LIN_TREE_KNOWN |
                                                                          STRATA__LIN_TREE_NOT));
        }
}

void strata__chunks_rows(int rows, int chunks, int g0, int g1, int world, int *lo, int *hi)
{
        int a, b, unused;

        range(chunks, world, g0, &a, &unused);
        range(chunks, world, g1 - 1, &unused, &b);
        *lo = (int)((long)rows * a / chunks);
        *hi = (int)((long)rows * b / chunks);
}

void strata__chunks_set(struct strata_chunks *ch, int rows, int chunks, int g, int world,
                        int *row0, int *nrows)
{
        int a, b, depth;
        long lo;

        range(chunks, world, g, &a, &b);
        lo = (long)rows * a / chunks;
        if (rows != ch->rows)
                reprobe(ch);
        ch->rows = rows;
        ch->n = b - a;
        ch->c0 = a;
        ch->total = chunks;
        ch->world = world;
        ch->nb = stack_walk(a, b - a, &depth);
        ch->row0 = (int)lo;
        for (int j = 0; j <= b - a; j++)
                ch->lo[j] = (int)((long)rows * (a + j) / chunks - lo);
        *row0 = (int)lo;
        *nrows = ch->lo[b - a];
}

/* Byte offset of row @p row of a [rows, width] activation stored as @p t. */
static size_t at(int row, int width, enum strata_dtype t)
{
        return (size_t)row * (size_t)width * strata_dtype_size(t);
}

/* Most rows of one of the device's chunks. */
static size_t chunk_rows_max(const struct strata_chunks *ch)
{
        size_t rows = 0;

        for (int j = 0; j < ch->n; j++)
                if ((size_t)(ch->lo[j + 1] - ch->lo[j]) > rows)
                        rows = (size_t)(ch->lo[j + 1] - ch->lo[j]);
        return rows;
}

/*
 * A Linear's f32 GEMMs over rows (its forward, its input gradient) give every row the bits of
 * its chunk's call wherever the device's kernels give a row bits that do not depend on the
 * call's row count (every CPU kernel set: tests/drivers/cpu_kernel_sets.c); they then run
 * once over the device's rows. Whether they do is probed on the first batch of each size:
 * the call over the rows, then each chunk's call into the tree's scratch (free outside a
 * backward's sum), compared with its rows and copied over them where they differ (the
 * chunks' bits always win). *flag: 0 not probed, 1 once over the rows, -1 once per chunk.
 */
typedef void (*rows_fn)(void *arg, int lo, int rows, float *out);

static int whole(const signed char *flag, const struct strata_layer *l,
                 const struct strata_step_ctx *c)
{
        return flag[l->index] >= 0 && c->compute == STRATA_F32 && c->x_type == STRATA_F32 &&
               c->y_type == STRATA_F32;
}

/* Rows [0, ch->lo[n]) of @p w values each into @p dst through @p fn, as *flag says. */
static void over_rows(const struct strata_chunks *ch, signed char *flag, rows_fn fn, void *arg,
                      size_t w, float *dst)
{
        int same = 1;

        if (!*flag && ch->n > 1 && chunk_rows_max(ch) * w > (size_t)(ch->levels + 1) * ch->slot)
                *flag = -1; /* a chunk's rows do not fit in the scratch: never probed */
        if (*flag < 0) {
                for (int j = 0; j < ch->n; j++)
                        fn(arg, ch->lo[j], ch->lo[j + 1] - ch->lo[j],
                           dst + (size_t)ch->lo[j] * w);
                return;
        }
        fn(arg, 0, ch->lo[ch->n], dst);
        for (int j = 0; !*flag && ch->n > 1 && j < ch->n; j++) {
                size_t n = (size_t)(ch->lo[j + 1] - ch->lo[j]) * w;
                float *mine = dst + (size_t)ch->lo[j] * w;

                fn(arg, ch->lo[j], ch->lo[j + 1] - ch->lo[j], ch->tree);
                if (memcmp(mine, ch->tree, n * sizeof(float))) {
                        same = 0;
                        ch->k->copy(mine, ch->tree, n);
                }
        }
        if (!*flag)
                *flag = same ? 1 : -1;
}

/* What a Linear's forward over rows reads. */
struct fwd {
        struct strata_layer *l;
        struct strata_step_ctx c;
        const float *x;
};

static void fwd_rows(void *arg, int lo, int rows, float *out)
{
        struct fwd *f = arg;

        f->c.row0 = f->c.chunks->row0 + lo;
        f->l->desc->ops->forward(f->l, &f->c, f->x + (size_t)lo * f->l->in, out, rows);
}

/* What a Linear's input gradient over rows reads. */
struct dx_pass {
        const struct strata_layer *l;
        const struct strata_step_ctx *c;
        const float *dy;
};

static void dx_rows(void *arg, int lo, int rows, float *out)
{
        struct dx_pass *d = arg;

        d->c->chunks->linear_dx(d->l, d->c, d->dy + (size_t)lo * d->l->out, out, rows);
}

void strata__chunks_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const void *x, void *y, int rows)
{
        const struct strata_chunks *ch = c->chunks;
        struct strata_step_ctx cc = *c;
        float *aux = l->aux;
        const float *skip = l->skip;

        if (ch->batch_stats[l->index]) { /* one call: it combines its own chunks */
                l->desc->ops->forward(l, c, x, y, rows);
                return;
        }
        if (whole(ch->whole_fwd, l, c)) {
                struct fwd f = { l, *c, x };

                over_rows(ch, &ch->whole_fwd[l->index], fwd_rows, &f, (size_t)l->out, y);
                return;
        }
        for (int j = 0; j < ch->n && l->failed == STRATA_OK; j++) {
                int lo = ch->lo[j];

                cc.row0 = ch->row0 + lo;
                l->aux = aux ? aux + (size_t)lo * l->naux_per_row : NULL;
                l->skip = skip ? skip + (size_t)lo * (size_t)l->from_width : NULL;
                l->desc->ops->forward(l, &cc, (const float *)((const char *)x +
                                                              at(lo, l->in, c->x_type)),
                                      (float *)((char *)y + at(lo, l->out, c->y_type)),
                                      ch->lo[j + 1] - lo);
        }
        l->aux = aux;
        l->skip = skip;
}

/* What one chunk's backward needs: the layer's pass, with the chunk's rows. */
struct bwd {
        struct strata_layer *l;
        struct strata_step_ctx c;
        const void *x, *y;
        const float *dy;
        float *dx;
        float *aux;
        const float *skip; /* a merge module's earlier output and its gradient, every row */
        float *dskip;
};

/*
 * Chunk [lo, lo + rows): its input gradient in place, its parameter gradients into @p out
 * (onto what it holds, with @p onto).
 */
static void bwd_leaf(void *arg, int lo, int rows, float *out, int onto)
{
        struct bwd *b = arg;
        struct strata_layer *l = b->l;

        b->c.row0 = b->c.chunks->row0 + lo;
        l->aux = b->aux ? b->aux + (size_t)lo * l->naux_per_row : NULL;
        l->skip = b->skip ? b->skip + (size_t)lo * (size_t)l->from_width : NULL;
        l->dskip = b->dskip ? b->dskip + (size_t)lo * (size_t)l->from_width : NULL;
        l->grad = out;
        l->grad_fresh = !onto;
        if (l->failed != STRATA_OK)
                return;
        l->desc->ops->backward(l, &b->c, (const float *)((const char *)b->x +
                                                         at(lo, l->in, b->c.x_type)),
                               (const float *)((const char *)b->y + at(lo, l->out, b->c.y_type)),
                               b->dy + (size_t)lo * l->out,
                               b->dx ? b->dx + (size_t)lo * l->in : NULL, rows);
}

/*
 * Layer @p l's gradient @p sum, the device's blocks (summed across devices when @p across;
 * a batch_stats module's is the global batch's already), into the window's.
 */
static int fold(struct strata_layer *l, const struct strata_step_ctx *c, float *sum,
                float *grad, int fresh, int across)
{
        const struct strata_chunks *ch = c->chunks;

        if (across && c->all_sum && c->world > 1)
                STRATA_TRY(c->all_sum(c, sum, l->nparam));
        if (fresh && sum != grad)
                ch->k->copy(grad, sum, l->nparam);
        else if (!fresh)
                add(ch, grad, sum, l->nparam);
        return STRATA_OK;
}

int strata__chunks_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const void *x, const void *y, const float *dy, float *dx, int rows)
{
        const struct strata_chunks *ch = c->chunks;
        int stats = ch->batch_stats[l->index];
        int dx_once = dx && !stats && l->nparam && whole(ch->whole_dx, l, c);
        struct bwd b = { l, *c, x, y, dy, dx_once ? NULL : dx, l->aux, l->skip, l->dskip };
        float *grad = l->grad, *sum = ch->out;
        int fresh = l->grad_fresh;

        if (stats) { /* one call: it combines its own chunks */
                l->grad = sum;
                l->grad_fresh = 1;
                l->desc->ops->backward(l, c, x, y, dy, dx, rows);
        } else if (!l->nparam) {
                for (int j = 0; j < ch->n; j++)
                        bwd_leaf(&b, ch->lo[j], ch->lo[j + 1] - ch->lo[j], NULL, 0);
        } else {
                unsigned char *f = &ch->linear[l->index];
                /* a fresh gradient, one block, none gathered: the tree's sum made in place
                 * (decision 0087), a Linear's weights in row blocks where probed (0092) */
                float *root = fresh && ch->nb == 1 && !ch->gathered ? grad : NULL;

                if (!(*f & STRATA__LIN_PAIRS_KNOWN))
                        *f |= STRATA__LIN_PAIRS_KNOWN |
                              (strata__chunks_probe_pairs(l, c) ? STRATA__LIN_PAIRS : 0);
                if (root && strata__chunks_wgrad(l, c, x, dy, b.dx, root)) {
                        sum = root;
                } else {
                        strata__chunks_sum(c, l->nparam, bwd_leaf, &b, *f & STRATA__LIN_PAIRS,
                                           root, &sum);
                        if (root)
                                strata__chunks_wgrad_probe(l, c, x, dy, root);
                }
        }
        l->aux = b.aux;
        l->skip = b.skip;
        l->dskip = b.dskip;
        l->grad = grad;
        l->grad_fresh = fresh;
        if (l->failed != STRATA_OK || !l->nparam)
                return l->failed;
        STRATA_TRY(fold(l, c, sum, grad, fresh, !stats && !ch->defer));
        if (dx_once) { /* the tree's scratch is free again */
                struct dx_pass d = { l, c, dy };

                over_rows(ch, &ch->whole_dx[l->index], dx_rows, &d, (size_t)l->in, dx);
        }
        return STRATA_OK;
}

/* The loss of one chunk, with its metrics, in doubles. */
struct loss_sums {
        /* loss, correct, squared and absolute errors, then each output's own loss */
        double v[4 + STRATA_MAX_OUTPUTS];
        int c[STRATA_MAX_OUTPUTS]; /* several outputs: each one's correct (not the tree's) */
};

static void loss_chunk(const struct strata__chunks_loss *in, const struct strata_step_ctx *c,
                       int lo, int rows, struct loss_sums *s)
{
        const struct strata_loss_ops *loss = in->loss;
        size_t at = (size_t)lo * (size_t)in->width;
        const float *out = in->out + at;
        const void *t = in->targets;
        int correct = 0;

        if (t)
                t = loss->float_targets ? (const void *)((const float *)t + at)
                                        : (const void *)((const int32_t *)t + lo);
        s->v[0] = loss->forward(c, out, t, rows, in->width, in->dout ? in->dout + at : NULL,
                                &correct);
        s->v[1] = correct;
        s->v[2] = s->v[3] = 0.0;
        if (loss->float_targets) {
                s->v[1] = 0.0;
                s->v[2] = c->k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, t, rows, in->width,
                                               0.0f, NULL);
                s->v[3] = c->k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, t, rows, in->width,
                                               0.0f, NULL);
        }
}

/* Several outputs' losses of one chunk: each weighted (its gradient too), summed in order. */
static void loss_chunk_outputs(const struct strata__chunks_loss *in, int n,
                               const struct strata_step_ctx *c, int lo, int rows,
                               struct loss_sums *s)
{
        struct strata_step_ctx cc = *c;
        struct loss_sums one;

        for (int k = 0; k < n; k++) {
                cc.loss_scale = c->loss_scale * in[k].weight;
                loss_chunk(&in[k], &cc, lo, rows, k ? &one : s);
                s->c[k] = (int)(k ? one.v[1] : s->v[1]);
                if (k == 0) {
                        s->v[4] = s->v[0];
                        s->v[0] *= in[k].weight;
                        continue;
                }
                s->v[4 + k] = one.v[0];
                s->v[0] += (double)in[k].weight * one.v[0];
                for (int j = 1; j < 4; j++)
                        s->v[j] += one.v[j];
        }
}

void strata__chunks_loss(struct strata_chunks *ch, const struct strata_step_ctx *c,
                         struct strata__chunks_loss *in, int n)
{
        struct loss_sums st[2 * STRATA__BLOCKS_MAX] = { { { 0 }, { 0 } } };
        struct stack s = { .top = 0 };
        int outputs = n > 1 || in->weight != 0.0f;
        int w = outputs ? 4 + n : 4; /* the sums the tree adds: each output's own after four */
        int correct[STRATA_MAX_OUTPUTS] = { 0 }; /* each output's, integers: in any order */

        for (int j = 0; j < ch->n; j++) {
                if (outputs) {
                        loss_chunk_outputs(in, n, c, ch->lo[j], ch->lo[j + 1] - ch->lo[j],
                                           &st[s.top]);
                        for (int k = 0; k < n; k++)
                                correct[k] += st[s.top].c[k];
                } else
                        loss_chunk(in, c, ch->lo[j], ch->lo[j + 1] - ch->lo[j], &st[s.top]);
                for (push(&s, ch->c0 + j); siblings(&s); pop(&s))
                        for (int k = 0; k < w; k++)
                                st[s.top - 2].v[k] += st[s.top - 1].v[k];
        }
        in->correct = 0;
        in->sum = in->sse = in->sae = 0.0; /* the device's own figures: the blocks in order */
        for (int k = 0; k < n; k++)
                in[k].own = 0.0;
        for (int b = 0; b < s.top; b++) { /* the blocks, for the tree across devices */
                ch->loss[b][0] = st[b].v[0];
                ch->loss[b][1] = st[b].v[2];
                ch->loss[b][2] = st[b].v[3];
                in->correct += (int)st[b].v[1];
                in->sum += st[b].v[0];
                in->sse += st[b].v[2];
                in->sae += st[b].v[3];
                for (int k = 4; k < w; k++) {
                        ch->loss[b][k - 1] = st[b].v[k];
                        in[k - 4].own += st[b].v[k];
                }
        }
        for (int k = 0; outputs && k < n; k++)
                in[k].correct = correct[k];
}

double strata__chunks_block_loss(const struct strata_chunks *ch, int b, int j)
{
        return b < ch->nb ? ch->loss[b][j] : 0.0;
}

int strata__chunks_gathered(const struct strata_chunks *ch)
{
        return ch && ch->gathered;
}

int strata__chunks_batch_stats(const struct strata_chunks *ch, int i)
{
        return ch->batch_stats[i];
}

void strata__chunks_set_defer(struct strata_chunks *ch, int on)
{
        if (ch)
                ch->defer = on;
}

int strata__chunks_defer(const struct strata_chunks *ch)
{
        return ch && ch->defer;
}
