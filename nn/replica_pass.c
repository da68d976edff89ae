/*
 * A replica's forward and backward passes over its modules. The row_wise modules after a
 * row_loop module run inside its loop over rows (plan_fusion() in replica.c, the row hooks
 * here; decision 0046); where the shard holds a layer's parameters elsewhere it fetches them
 * before the layer runs (nn/shard.c), invariant mode runs each module per chunk (nn/chunks.c).
 */
#include <stdatomic.h>

#include "strata/status.h"
#include "base/base.h"
#include "kernel/trace.h"
#include "nn/norm_tokens.h"
#include "nn/replica_private.h"
#include "nn/spatial.h"

/* What the passes show on the device's trace track. */
static const struct strata__span span_fwd = { "forward", "compute", "layer", 0 };
static const struct strata__span span_bwd = { "backward", "compute", "layer", 0 };

/* The step context with this replica's GEMM precision and scratch (storage types per call). */
static struct strata_step_ctx with_lp(const struct strata__replica *r,
                                      const struct strata_step_ctx *c)
{
        struct strata_step_ctx cc = *c;

        cc.compute = r->compute;
        cc.lp_scratch = r->lp_scratch;
        cc.lp_elems = r->lp_elems;
        cc.lp_dim = r->lp_dim;
        cc.chunks = r->v.chunks;
        return cc;
}

/* Source @p s of this batch: module s's output, or (-1 - k) input k's rows. */
static const float *source(const struct strata__replica *r, int s)
{
        if (s >= 0)
                return r->y[s];
        return r->io.nin > 1 ? r->io.xin[-1 - s] : r->x;
}

/* Module @p i's input source: the previous module's output, or what a branch's from names. */
static int input_of(const struct strata__replica *r, int i)
{
        const struct strata_module *d = r->v.layers[i].desc;

        return d->branch ? d->from : i - 1;
}

/*
 * Before layer @p i computes (forward or backward): its parameters fetched where the shard
 * holds them elsewhere, its span opened on the track (returned), its storage types set in
 * @p cc, a merge module's earlier output pointed to, and its failure cleared.
 */
static int layer_begin(struct strata__replica *r, struct strata_step_ctx *cc, int i,
                       const struct strata__span *span, uint64_t *t0)
{
        struct strata_layer *l = &r->v.layers[i];

        STRATA_TRY(strata__shard_fetch(r->v.shard, r, i, l->nparam));
        *t0 = strata__track_begin(r->v.track, span, l->desc->ops->name);
        cc->x_type = i > 0 && !l->desc->branch ? r->ytype[i - 1] : STRATA_F32;
        cc->y_type = r->ytype[i];
        if (r->from && r->from[i] != STRATA__NO_SOURCE) /* the earlier output, this batch's */
                l->skip = source(r, r->from[i]);
        l->failed = STRATA_OK;
        return STRATA_OK;
}

/*
 * The modules (head, last] that run inside row_loop module head's loop over rows (struct
 * strata_row_hooks first: the module's view of it), with the context of head's call.
 */
struct fused {
        struct strata_row_hooks hooks;
        struct strata__replica *r;
        const struct strata_step_ctx *c;
        int head, last;
        const float *dy; /* backward: module last's output gradient, every row */
};

/* Row @p row of rows of @p width values of @p type from @p base. */
static void *row_at(void *base, int row, int width, enum strata_dtype type)
{
        return (char *)base + (size_t)row * (size_t)width * strata_dtype_size(type);
}

/*
 * Fused module @p k's call over one row @p row: its context (storage types and row0 as its
 * own call's, no hooks) in @p cc, its saved values moved to the row's (returned: restore).
 */
static float *fused_row(const struct fused *f, int k, int row, struct strata_step_ctx *cc)
{
        struct strata_layer *l = &f->r->v.layers[k];
        float *aux = l->aux;

        *cc = *f->c;
        cc->fused = NULL;
        cc->row0 = f->c->row0 + row;
        cc->x_type = f->r->ytype[k - 1];
        cc->y_type = f->r->ytype[k];
        l->aux = aux ? aux + (size_t)row * l->naux_per_row : NULL;
        return aux;
}

/* struct strata_row_hooks forward: the fused modules over row @p row, in model order. */
static void fused_forward(const struct strata_row_hooks *h, int row)
{
        const struct fused *f = (const struct fused *)(const void *)h;
        struct strata__replica *r = f->r;

        for (int k = f->head + 1; k <= f->last; k++) {
                struct strata_layer *l = &r->v.layers[k];
                struct strata_step_ctx cc;
                float *aux = fused_row(f, k, row, &cc);

                l->desc->ops->forward(l, &cc, row_at(r->y[k - 1], row, l->in, cc.x_type),
                                      row_at(r->y[k], row, l->out, cc.y_type), 1);
                l->aux = aux;
        }
}

/*
 * Module k - 1 is the built-in ReLU inside head's loop, its output and module k's f32: where
 * module k is the built-in MaxPool 2 x 2 (strata__maxpool_relu_backward() checks it), their
 * backwards run as one, the same bits, and the ReLU's output is not read again (0109).
 */
static int relu_pool(const struct strata__replica *r, int k, int head)
{
        return k - 1 > head && r->v.layers[k - 1].desc->ops == &strata_relu &&
               r->ytype[k - 1] == STRATA_F32 && r->ytype[k] == STRATA_F32;
}

#ifdef STRATA_TESTING
_Atomic int strata__replica_folds; /* device threads count together */
#endif

/*
 * struct strata_row_hooks backward: the fused modules over row @p row in reverse order, from
 * the last one's output gradient through the two row buffers; the head's output gradient.
 */
static const float *fused_backward(const struct strata_row_hooks *h, int row)
{
        const struct fused *f = (const struct fused *)(const void *)h;
        struct strata__replica *r = f->r;
        const float *g = f->dy + (size_t)row * (size_t)r->v.layers[f->last].out;

        for (int k = f->last, b = 0; k > f->head; k--, b ^= 1) {
                struct strata_layer *l = &r->v.layers[k];
                struct strata_step_ctx cc;
                float *aux = fused_row(f, k, row, &cc);
                int both = relu_pool(r, k, f->head) &&
                           strata__maxpool_relu_backward(l, row_at(r->y[k], row, l->out,
                                                                   cc.y_type),
                                                         g, r->fuse_dx[b], 1);

                if (!both)
                        l->desc->ops->backward(l, &cc,
                                               row_at(r->y[k - 1], row, l->in, cc.x_type),
                                               row_at(r->y[k], row, l->out, cc.y_type), g,
                                               r->fuse_dx[b], 1);
                l->aux = aux;
                g = r->fuse_dx[b];
                k -= both; /* the ReLU's backward ran with the pool's */
#ifdef STRATA_TESTING
                atomic_fetch_add_explicit(&strata__replica_folds, both, memory_order_relaxed);
#endif
        }
        return g;
}

/* The last module that module @p i's loop over rows runs (itself when it runs none). */
static int fused_last(const struct strata__replica *r, int i)
{
        return r->fuse_last ? r->fuse_last[i] : i;
}

/* Whether module @p i's output is one of the model's outputs. */
static int is_out(const struct strata__replica *r, int i)
{
        for (int k = 0; k < r->io.nout; k++)
                if (r->io.mod[k] == i)
                        return 1;
        return 0;
}

/*
 * Modules i, i + 1, i + 2 are `tokens layernorm(dims=1) tokens` over a (C, P) sample with
 * LayerNorm(C) on each token, each reading the one before, f32 outputs, the first two read
 * by nothing else nor model outputs, none in a row loop, outside invariant mode's chunks: the
 * pass runs them as LayerNorm(C) on the (C, P) sample itself (nn/norm_tokens.c), the same
 * bits without the two transposes (decision 0090). Checked where the pass meets them (a few
 * comparisons a step): a table of it would be plan bytes.
 */
#ifdef STRATA_TESTING
int strata__replica_unfused;
#endif

static int ln_between_tokens(const struct strata__replica *r, int i)
{
        const struct strata_layer *t = &r->v.layers[i];

#ifdef STRATA_TESTING
        if (strata__replica_unfused)
                return 0;
#endif
        /* Module i closing an earlier `tokens layernorm` takes no window: the forward (going
         * up) and the backward (going down) then find the same windows in a longer chain. */
        if (i >= 2 && r->v.layers[i - 2].desc->ops == &strata_tokens &&
            r->v.layers[i - 1].desc->ops == &strata_layernorm)
                return 0;
        if (i < 1 || i + 2 >= r->v.nlayers || t->desc->ops != &strata_tokens || r->v.chunks ||
            r->v.layers[i + 2].desc->ops != &strata_tokens ||
            !strata__ln_tokens_fits(&r->v.layers[i + 1], t->in_dims.channels))
                return 0;
        for (int k = i - 1; k <= i + 2; k++)
                if (r->ytype[k] != STRATA_F32)
                        return 0;
        for (int k = i; k <= i + 2; k++)
                if (r->v.layers[k].desc->branch || (k < i + 2 && is_out(r, k)) ||
                    fused_last(r, k) != k || (r->fuse_head && r->fuse_head[k] >= 0))
                        return 0;
        for (int j = 0; r->from && j < r->v.nlayers; j++)
                if (r->from[j] == i || r->from[j] == i + 1)
                        return 0;
        return 1;
}

/* The forward of modules i .. i + 2 (ln_between_tokens()) from @p x, module i - 1's output. */
static int ln_tokens_forward(struct strata__replica *r, struct strata_step_ctx *cc, int i,
                             const float *x)
{
        uint64_t t0;

        STRATA_TRY(layer_begin(r, cc, i + 1, &span_fwd, &t0));
        strata__ln_tokens_forward(&r->v.layers[i + 1], x, r->y[i + 2], r->v.rows,
                                  r->v.layers[i].in_dims.channels);
        strata__track_end(r->v.track, t0, i + 1);
        return STRATA_OK;
}

int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c0)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        const float *x;

        strata__shard_release(r->v.shard); /* a step or a load may have changed the shards */
        for (int i = 0; i < r->v.nlayers; i++) {
                struct strata_layer *l = &r->v.layers[i];
                struct fused f = { { fused_forward, fused_backward }, r, c, i,
                                   fused_last(r, i), NULL };
                uint64_t t0;

                x = source(r, input_of(r, i));
                if (ln_between_tokens(r, i)) {
                        STRATA_TRY(ln_tokens_forward(r, &cc, i, x));
                        i += 2;
                        continue;
                }
                STRATA_TRY(layer_begin(r, &cc, i, &span_fwd, &t0));
                cc.fused = f.last > i ? &f.hooks : NULL;
                if (cc.chunks)
                        strata__chunks_forward(l, c, x, r->y[i], r->v.rows);
                else
                        l->desc->ops->forward(l, c, x, r->y[i], r->v.rows);
                cc.fused = NULL;
                strata__track_end(r->v.track, t0, i);
                if (l->failed != STRATA_OK)
                        return l->failed;
                i = f.last; /* the modules its loop ran */
        }
        return STRATA_OK;
}

/*
 * Where module @p l's backward writes its input's gradient: the chain's next buffer, or for a
 * branch the gradient of the output it reads (the buffer itself when it is that output's last
 * reader, else the chain's free buffer, added on after).
 */
static float *dx_of(const struct strata__replica *r, const struct strata_layer *l, int cur)
{
        if (!l->desc->branch || l->dskip_add)
                return r->dbuf[cur ^ 1];
        return l->dskip;
}

/*
 * Module @p i's output gradient in @p g, in a fixed order: the next module's (the chain's,
 * or the loss's for the last module), then the merge and branch modules' (gskip), then its
 * loss's when it is an output before the last module. Where the next module is a branch the
 * chain gives nothing: the first of the others is copied in.
 */
static void out_grad(const struct strata__replica *r, int i, float *g)
{
        const float *part[2] = { r->gskip ? r->gskip[i] : NULL, NULL };
        size_t n = (size_t)r->v.rows * (size_t)r->v.layers[i].out;
        int chain = i == r->v.nlayers - 1 || !r->v.layers[i + 1].desc->branch;

        for (int k = 0; k < r->io.nout; k++)
                if (r->io.mod[k] == i && r->io.gout[k])
                        part[1] = r->io.gout[k];
        for (int j = 0; j < 2; j++) {
                if (!part[j])
                        continue;
                if (chain)
                        r->v.k->add(g, part[j], n);
                else
                        r->v.k->copy(g, part[j], n);
                chain = 1;
        }
}

/*
 * The backward of modules i - 2 .. i (ln_between_tokens(r, i - 2)) from dbuf[@p cur] into the
 * buffer module i - 2's backward fills, the next-but-one; the hooks in the order the three
 * modules' backwards would call them.
 */
static int ln_tokens_backward(struct strata__replica *r, struct strata_step_ctx *cc, int i,
                              int cur, strata__grad_ready_fn ready, void *h, int each)
{
        struct strata_layer *ln = &r->v.layers[i - 1];
        int first = ln->grad_fresh;
        uint64_t t0;

        r->v.layers[i].grad_fresh = 0;
        r->v.layers[i - 2].grad_fresh = 0;
        if (ready)
                STRATA_TRY(ready(h, r, i));
        STRATA_TRY(layer_begin(r, cc, i - 1, &span_bwd, &t0));
        if (each)
                ln->grad_fresh = 1;
        strata__ln_tokens_backward(ln, source(r, i - 3), r->dbuf[cur],
                                   dx_of(r, &r->v.layers[i - 2], cur), r->v.rows,
                                   r->v.layers[i - 2].in_dims.channels);
        strata__track_end(r->v.track, t0, i - 1);
        ln->grad_fresh = 0;
        if (ready)
                STRATA_TRY(ready(h, r, i - 1));
        if (each)
                strata__shard_accumulate(r->v.shard, r->v.grads, ln->grad, r->v.poff[i - 1],
                                         ln->nparam, first);
        if (ready)
                STRATA_TRY(ready(h, r, i - 2));
        return STRATA_OK;
}

/*
 * The backward pass; with @p din, the module that reads the model's input (the first: the
 * caller checked that no other does) also writes its input's gradient, into the chain's free
 * buffer, and *din points to it.
 */
static int backward(struct strata__replica *r, const struct strata_step_ctx *c0, int sync,
                    const float **din)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        int cur = 0, each = strata__shard_each(r->v.shard);
        void *h;
        strata__grad_ready_fn ready = strata__shard_ready(r->v.shard, sync, &h);

        for (int i = r->v.nlayers - 1; i >= 0; i--) {
                struct strata_layer *l = &r->v.layers[i];
                int src = input_of(r, i), head = r->fuse_head ? r->fuse_head[i] : -1;
                const float *x = source(r, src);
                float *dx = src < 0 && !din ? NULL : dx_of(r, l, cur);
                int first = l->grad_fresh; /* the window's first backward */
                struct fused f = { { fused_forward, fused_backward }, r, c, i,
                                   fused_last(r, i), r->dbuf[cur] };
                uint64_t t0;

                /* its output's gradient from the merge and branch modules that read it and
                 * its loss, after the next module's: every reader ran its backward already
                 * (inside a fused group only the last module's output has any) */
                out_grad(r, i, r->dbuf[cur]);
                if (head >= 0) { /* it runs in module head's loop, from this gradient */
                        l->grad_fresh = 0;
                        if (ready)
                                STRATA_TRY(ready(h, r, i));
                        continue;
                }
                if (i >= 3 && ln_between_tokens(r, i - 2)) { /* its output is a (C, P) one */
                        STRATA_TRY(ln_tokens_backward(r, &cc, i, cur, ready, h, each));
                        i -= 2;
                        cur ^= 1; /* three modules: the buffers swapped three times */
                        continue;
                }
                /* the forward's last layer is still there: the fetch keeps it */
                STRATA_TRY(layer_begin(r, &cc, i, &span_bwd, &t0));
                if (each) /* this micro-batch's own gradients, in the layer buffer */
                        l->grad_fresh = 1;
                cc.fused = f.last > i ? &f.hooks : NULL;
                if (cc.chunks)
                        l->failed = strata__chunks_backward(l, c, x, r->y[i], r->dbuf[cur], dx,
                                                            r->v.rows);
                else
                        l->desc->ops->backward(l, c, x, r->y[i], r->dbuf[cur], dx, r->v.rows);
                cc.fused = NULL;
                strata__track_end(r->v.track, t0, i);
                l->grad_fresh = 0;
                if (l->failed != STRATA_OK)
                        return l->failed;
                if (l->desc->branch && dx && l->dskip_add) /* onto its source's gradient */
                        r->v.k->add(l->dskip, dx, (size_t)r->v.rows * (size_t)l->in);
                if (ready)
                        STRATA_TRY(ready(h, r, i));
                /* each: reduced by the hook, added into the window's sum */
                if (each)
                        strata__shard_accumulate(r->v.shard, r->v.grads, l->grad, r->v.poff[i],
                                                 l->nparam, first);
                if (src < 0 && din)
                        *din = dx;
                cur ^= 1;
        }
        return STRATA_OK;
}

int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c,
                             int sync)
{
        return backward(r, c, sync, NULL);
}

int strata__replica_input_grad_check(const struct strata__replica *r)
{
        if (r->from || r->io.nout > 1 || r->v.chunks)
                return strata__fail(STRATA_ENOTSUP, "input gradient: the model reads its input "
                                    "in one module and has one output, outside invariant "
                                    "mode (decision 0069)");
        return STRATA_OK;
}

int strata__replica_input_grad(struct strata__replica *r, const struct strata_step_ctx *c,
                               const float *dout, float *dx)
{
        size_t w = (size_t)r->v.out, in = (size_t)r->v.layers[0].in, rows = (size_t)r->v.rows;
        const float *din = NULL;

        r->drv->to_device(r->dbuf[0], dout + (size_t)r->v.row0 * w, rows * w * sizeof(float));
        STRATA_TRY(backward(r, c, 0, &din));
        for (int i = 0; i < r->v.nlayers; i++) /* its parameters' gradients are not kept */
                r->v.layers[i].grad_fresh = 1;
        if (rows && din)
                r->drv->to_host(dx + (size_t)r->v.row0 * in, din, rows * in * sizeof(float));
        return STRATA_OK;
}
