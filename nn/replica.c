/* Replica layout and the per-device forward/backward/optimizer passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "kernel/trace.h"
#include "base/base.h"
#include "data/gather.h"
#include "nn/optim.h"
#include "nn/replica.h"

static int alloc_f(struct strata_arena *a, size_t n, float **out)
{
        size_t bytes;
        void *p;

        if (strata__mul_size(n, sizeof(float), &bytes))
                return strata__fail(STRATA_EOVERFLOW, "replica: %zu floats overflow", n);
        STRATA_TRY(strata_arena_alloc(a, bytes, 0, &p));
        *out = p;
        return STRATA_OK;
}

static int bad_name(const char *s)
{
        size_t n = 0;

        if (!s || !*s)
                return 1;
        for (; s[n]; n++)
                if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
                        return 1;
        return n > 24;
}

/*
 * Check module @p i's parameter groups against its sizes, or give it the default ones
 * ("param" and "state") when it declares none.
 */
static int check_groups(struct strata_module_shape *s, int i)
{
        size_t trained = 0, running = 0;

        if (s->ngroups == 0) {
                if (s->params)
                        s->groups[s->ngroups++] = (struct strata_param_group){
                                "param", STRATA_F32, s->params, STRATA_ROLE_WEIGHT, 1,
                                { s->params, 1 } };
                if (s->state)
                        s->groups[s->ngroups++] = (struct strata_param_group){
                                "state", STRATA_F32, s->state, STRATA_ROLE_RUNNING, 1,
                                { s->state, 1 } };
                return STRATA_OK;
        }
        if (s->ngroups < 0 || s->ngroups > STRATA_MAX_GROUPS)
                return strata__fail(STRATA_EINVAL, "module %d declares %d parameter groups "
                                                   "(0..%d)", i, s->ngroups, STRATA_MAX_GROUPS);
        for (int k = 0; k < s->ngroups; k++) {
                const struct strata_param_group *g = &s->groups[k];

                if (bad_name(g->name) || g->dtype != STRATA_F32 ||
                    (unsigned)g->role >= STRATA_ROLE_COUNT || g->ndim < 1 || g->ndim > 2 ||
                    g->shape[0] * (g->ndim == 2 ? g->shape[1] : 1) != g->count)
                        return strata__fail(STRATA_EINVAL, "module %d, group %d (%s): name must "
                                                           "be [a-z0-9_]{1,24}, dtype f32, "
                                                           "shape matching count %zu", i, k,
                                            g->name ? g->name : "NULL", g->count);
                if (g->role == STRATA_ROLE_RUNNING)
                        running += g->count;
                else
                        trained += g->count;
        }
        if (trained != s->params || running != s->state)
                return strata__fail(STRATA_EINVAL, "module %d: groups hold %zu trained and %zu "
                                                   "running values; it declares %zu and %zu",
                                    i, trained, running, s->params, s->state);
        return STRATA_OK;
}

/* Module @p l's sizes and checked parameter groups for input width @p in. */
static int shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_module_ops *ops = l->desc->ops;

        if (!ops || !ops->shape || !ops->forward || !ops->backward)
                return strata__fail(STRATA_EINVAL, "module %d has no complete ops table",
                                    l->index);
        memset(s, 0, sizeof(*s));
        STRATA_TRY(ops->shape(l, in, s));
        if (s->out <= 0)
                return strata__fail(STRATA_EINVAL, "module %d declares width %d", l->index,
                                    s->out);
        return check_groups(s, l->index);
}

/* Mixed precision: the GEMM scratch for the largest GEMM any module declares. */
static int layout_lp(struct strata__replica *r, const struct strata__replica_mem *mem,
                     size_t elems, size_t dim, enum strata_dtype compute)
{
        const struct strata_kernel_ops *k = mem->drv->kernels;
        void *p;

        r->compute = compute;
        if (compute == STRATA_F32)
                return STRATA_OK;
        if (!k->gemm_lp || !k->gemm_lp_bytes || !k->prepare_lp)
                return strata__fail(STRATA_ENOTSUP, "the %s driver has no mixed-precision GEMM "
                                    "(gemm_lp): only precision 32 runs on it", mem->drv->name);
        r->lp_elems = elems;
        r->lp_dim = dim;
        if (elems == 0)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(mem->dev, k->gemm_lp_bytes(compute, elems, dim), 64, &p));
        r->lp_scratch = p;
        return STRATA_OK;
}

/* Whether activations between bf16_io modules are stored in bf16 (the driver has the ops). */
static int bf16_activations(const struct strata_device_ops *d, enum strata_dtype compute)
{
        const struct strata_kernel_ops *k = d->kernels;

        return compute == STRATA_BF16 && k->gemm_lp_io && k->relu_io && k->relu_backward_bf16;
}

size_t strata__replica_shard_len(size_t nparam, int shards)
{
        size_t line = 64 / sizeof(float);

        if (shards <= 1)
                return nparam;
        return ((nparam + (size_t)shards - 1) / (size_t)shards + line - 1) / line * line;
}

/*
 * The flat vectors: @p np floats of parameters and @p ng of (reduced) gradients, then, where
 * a strategy shards them, the layer buffer of @p lbuf floats every layer computes from and
 * @p lgrad floats where the layers' gradients go (none when 0).
 */
static int layout_vectors(struct strata__replica *r, struct strata_arena *d, size_t np,
                          size_t ng, size_t lbuf, size_t lgrad)
{
        r->lbuf_len = lbuf;
        r->lgrad_len = lgrad;
        STRATA_TRY(alloc_f(d, np, &r->params));
        STRATA_TRY(alloc_f(d, ng, &r->grads));
        if (lbuf)
                STRATA_TRY(alloc_f(d, lbuf, &r->lbuf));
        return lgrad ? alloc_f(d, lgrad, &r->lgrad) : STRATA_OK;
}

/* Where layer @p l at offset @p off of the flat vector reads its parameters, writes gradients. */
static void layer_vectors(struct strata__replica *r, struct strata_layer *l, size_t off)
{
        if (r->own_grads) {
                l->param = r->params + off;
                l->grad = r->lgrad;
                return;
        }
        if (!r->own_params) {
                l->param = r->params ? r->params + off : NULL;
                l->grad = r->grads ? r->grads + off : NULL;
                return;
        }
        l->param = r->lbuf;
        l->grad = r->lgrad_len > r->lbuf_len ? r->lgrad + off : r->lgrad;
}

/*
 * Invariant mode: the pairwise tree keeps at most cp->levels partial sums at once, and a
 * batch_stats module's gradients one slot more; a slot holds the largest layer. Where blocks
 * are gathered, every device's cp->blocks slots too; and a row of the widest layer.
 */
static int layout_chunks(struct strata__replica *r, struct strata_arena *a,
                         struct strata_arena *d, const struct strata__chunk_plan *cp,
                         size_t lmax, int width)
{
        size_t n, g = 0;
        void *p;

        if (!cp)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(a, sizeof(int) * ((size_t)cp->per + 1), 0, &p));
        r->chunks.lo = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)r->nlayers, 0, &p));
        r->batch_stats = p;
        STRATA_TRY(strata_arena_alloc(a, (size_t)r->nlayers, 0, &p));
        r->pairs = p;
        STRATA_TRY(alloc_f(d, (size_t)width, &r->chunks.spare));
        r->chunks.n = cp->per;
        r->chunks.levels = cp->levels;
        r->chunks.blocks = cp->blocks;
        r->chunks.slot = lmax;
        if (strata__mul_size(lmax, (size_t)cp->levels + 1, &n) ||
            (cp->gather && strata__mul_size(lmax, (size_t)cp->world * (size_t)cp->blocks, &g)))
                return strata__fail(STRATA_EOVERFLOW, "invariant mode: %d slots of %zu floats "
                                    "overflow", cp->levels + 1 + cp->world * cp->blocks, lmax);
        STRATA_TRY(alloc_f(d, n, &r->chunks.tree));
        if (r->chunks.tree)
                r->chunks.out = r->chunks.tree + (size_t)cp->levels * lmax;
        if (cp->gather)
                STRATA_TRY(alloc_f(d, g, &r->chunks.gathered));
        return STRATA_OK;
}

/* The shard sizes, and the optimizer state of one shard (all of it unsharded). */
static int layout_shards(struct strata__replica *r, const struct strata_optim *o, int shards,
                         size_t *npad)
{
        r->nshards = shards > 1 ? shards : 1;
        r->shard_len = strata__replica_shard_len(r->nparam, r->nshards);
        if (strata__mul_size(r->shard_len, (size_t)r->nshards, npad) ||
            strata__mul_size((size_t)strata_optim_state_per_param(o), r->shard_len, &r->nopt))
                return strata__fail(STRATA_EOVERFLOW, "model: optimizer state of %zu "
                                    "parameters overflows a size", r->nparam);
        return STRATA_OK;
}

int strata__replica_layout(struct strata__replica *r, const struct strata__replica_mem *mem,
                           const struct strata_model *m, const struct strata_optim *o,
                           int rows, int dev, enum strata_dtype compute,
                           enum strata_dtype grad_comm, int shards, unsigned how,
                           const struct strata__chunk_plan *chunks)
{
        struct strata_module_shape s;
        struct strata_arena *a = mem->host, *d = mem->dev;
        size_t nparam = 0, nstate = 0, off = 0, lp_elems = 0, tbytes, npad, lmax = 0;
        int in = m->in_features, width = in, bf16 = bf16_activations(mem->drv, compute);
        unsigned char io[256]; /* each module's bf16_io */
        void *p;

        if (m->nmodules <= 0 || m->nmodules > 256)
                return strata__fail(STRATA_EINVAL, "model has %d modules (1..256)", m->nmodules);
        if (m->loss && (!m->loss->check || !m->loss->forward))
                return strata__fail(STRATA_EINVAL, "the model's loss %s lacks check or forward",
                                    m->loss->name ? m->loss->name : "(unnamed)");
        if (strata__loss_of(m)->float_targets && !mem->drv->kernels->pointwise_loss)
                return strata__fail(STRATA_ENOTSUP, "the %s driver has no pointwise_loss "
                                    "kernel: float targets do not run on it", mem->drv->name);
        memset(r, 0, sizeof(*r));
        r->dev = dev;
        r->drv = mem->drv;
        r->k = mem->drv->kernels;
        r->loss = strata__loss_of(m);
        r->nlayers = m->nmodules;
        STRATA_TRY(strata_arena_alloc(a, sizeof(struct strata_layer) * (size_t)m->nmodules, 0, &p));
        r->layers = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(float *) * (size_t)m->nmodules, 0, &p));
        r->y = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(size_t) * (size_t)m->nmodules, 0, &p));
        r->poff = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(enum strata_dtype) * (size_t)m->nmodules, 0,
                                      &p));
        r->ytype = p;
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_layer tmp = { .desc = &m->modules[i], .index = i, .in = in };

                STRATA_TRY(shape(&tmp, in, &s));
                if (strata__add_size(nparam, s.params, &nparam) ||
                    strata__add_size(nstate, s.state, &nstate))
                        return strata__fail(STRATA_EOVERFLOW, "model: parameters or state of "
                                            "modules 0..%d overflow a size", i);
                if (s.lp_per_row > ((size_t)1 << 40) / (size_t)(rows > 0 ? rows : 1) ||
                    s.lp_fixed > ((size_t)1 << 42))
                        return strata__fail(STRATA_EOVERFLOW, "module %d declares a GEMM of "
                                            "%zu + %zu per row elements", i, s.lp_fixed,
                                            s.lp_per_row);
                if (s.lp_fixed + (size_t)rows * s.lp_per_row > lp_elems)
                        lp_elems = s.lp_fixed + (size_t)rows * s.lp_per_row;
                io[i] = bf16 && s.bf16_io;
                if (chunks && !s.batch_stats && s.aux_fixed)
                        return strata__fail(STRATA_ENOTSUP, "invariant mode: module %d (%s) "
                                            "keeps aux_fixed values but declares no "
                                            "batch_stats: it cannot run once per chunk", i,
                                            m->modules[i].ops->name);
                lmax = s.params > lmax ? s.params : lmax;
                in = s.out;
                width = in > width ? in : width;
        }
        r->out = in;
        r->nparam = nparam;
        r->nstate = nstate;
        STRATA_TRY(layout_shards(r, o, shards, &npad));
        /* fsdp: one shard of the parameters and reduced gradients, the layer buffer, and one
         * layer's gradients (or a whole local vector); zero2 where it is smaller: the whole
         * parameters, one shard of the reduced gradients, and one layer's gradients */
        r->own_params = (how & STRATA__SHARD_PARAMS) != 0;
        r->own_grads = !r->own_params && (how & STRATA__SHARD_GRADS) && r->nshards > 1 &&
                       r->shard_len + lmax < npad;
        if (r->own_params)
                STRATA_TRY(layout_vectors(r, d, r->shard_len, r->shard_len, lmax,
                                          how & STRATA__SHARD_WHOLE_GRADS ? npad : lmax));
        else if (r->own_grads)
                STRATA_TRY(layout_vectors(r, d, npad, r->shard_len, 0, lmax));
        else
                STRATA_TRY(layout_vectors(r, d, npad, npad, 0, 0));
        if (grad_comm != STRATA_F32) {
                STRATA_TRY(strata_arena_alloc(d, npad * strata_dtype_size(grad_comm), 64, &p));
                r->grad_stage = p;
        }
        STRATA_TRY(alloc_f(d, r->nopt, &r->opt_state));
        STRATA_TRY(layout_chunks(r, a, d, chunks, lmax, width));
        in = m->in_features;
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_layer *l = r->layers ? &r->layers[i] : NULL; /* NULL: planning */
                struct strata_layer tmp = { .desc = &m->modules[i], .index = i, .in = in };
                enum strata_dtype yt = i + 1 < m->nmodules && io[i] && io[i + 1] ? STRATA_BF16
                                                                               : STRATA_F32;

                STRATA_TRY(shape(&tmp, in, &s)); /* as in the first pass: shapes are pure */
                if (r->layers) {
                        *l = (struct strata_layer){ .desc = &m->modules[i], .index = i, .in = in,
                                                    .out = s.out, .nparam = s.params,
                                                    .nstate = s.state,
                                                    .naux_fixed = s.aux_fixed,
                                                    .naux_per_row = s.aux_per_row,
                                                    .grad_fresh = 1,
                                                    .ngroups = s.ngroups };
                        memcpy(l->groups, s.groups, sizeof(l->groups));
                        r->poff[i] = off;
                        r->ytype[i] = yt;
                        if (r->batch_stats)
                                r->batch_stats[i] = s.batch_stats != 0;
                        if (r->pairs) /* a Linear's chunks may pair: probed at its backward */
                                r->pairs[i] = m->modules[i].ops == &strata_linear ? 0 : -1;
                        layer_vectors(r, l, off);
                }
                off += s.params;
                STRATA_TRY(strata_arena_alloc(d, (size_t)rows * s.out * strata_dtype_size(yt), 0,
                                              &p));
                if (r->layers)
                        r->y[i] = p;
                STRATA_TRY(alloc_f(d, s.state, r->layers ? &l->state : &(float *){ 0 }));
                STRATA_TRY(alloc_f(d, s.aux_fixed + (size_t)rows * s.aux_per_row,
                                   r->layers ? &l->aux : &(float *){ 0 }));
                in = s.out;
        }
        /* A row's targets: one int32 label, or one f32 per output. */
        tbytes = (size_t)rows * (r->loss->float_targets ? sizeof(float) * (size_t)r->out
                                                        : sizeof(int32_t));
        /* Every GEMM dimension is a layer width or the rows. */
        STRATA_TRY(layout_lp(r, mem, lp_elems, (size_t)(rows > width ? rows : width), compute));
        STRATA_TRY(alloc_f(d, (size_t)rows * width, &r->dbuf[0]));
        STRATA_TRY(alloc_f(d, (size_t)rows * width, &r->dbuf[1]));
        STRATA_TRY(alloc_f(d, (size_t)rows * m->in_features, &r->x_stage));
        STRATA_TRY(strata_arena_alloc(d, tbytes, 0, &r->y_stage));
        if (!mem->pinned) { /* the device reads host memory: nothing is staged */
                r->x_host = r->x_stage;
                r->y_host = r->y_stage;
                return STRATA_OK;
        }
        STRATA_TRY(alloc_f(mem->pinned, (size_t)rows * m->in_features, &r->x_host));
        STRATA_TRY(strata_arena_alloc(mem->pinned, tbytes, 0, &r->y_host));
        /* Host image: parameters + state at init, then any one of the vectors read back. */
        return alloc_f(mem->pinned, nparam + nstate > r->nopt ? nparam + nstate : r->nopt,
                       &r->p_host);
}

/* Device memory the host cannot touch: initialise a host image, then copy it over. */
static void init_through_host(struct strata__replica *r, uint64_t seed)
{
        float *state = r->p_host + r->nparam;

        for (int i = 0; i < r->nlayers; i++) {
                struct strata_layer *l = &r->layers[i];
                float *dp = l->param, *ds = l->state;

                l->param = r->p_host + r->poff[i];
                l->state = state;
                if (l->desc->ops->init)
                        l->desc->ops->init(l, seed);
                if (l->nstate)
                        r->drv->to_device(ds, state, l->nstate * sizeof(float));
                state += l->nstate;
                l->param = dp;
                l->state = ds;
        }
        r->drv->to_device(r->params, r->p_host, r->nparam * sizeof(float));
}

void strata__replica_init(struct strata__replica *r, uint64_t seed)
{
        size_t n = r->own_params ? r->shard_len : r->shard_len * (size_t)r->nshards;
        size_t ng = r->own_grads ? r->shard_len : n;

        r->held = -1;
        if (r->own_params) {
                r->k->fill(r->params, 0.0f, n); /* the strategy keeps each layer's part */
        } else if (!r->p_host) {
                for (int i = 0; i < r->nlayers; i++)
                        if (r->layers[i].desc->ops->init)
                                r->layers[i].desc->ops->init(&r->layers[i], seed);
        } else {
                init_through_host(r, seed);
        }
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
        r->k->fill(r->grads, 0.0f, ng);
        if (!r->own_params && n > r->nparam) /* whole shards: zero padding */
                r->k->fill(r->params + r->nparam, 0.0f, n - r->nparam);
        if (r->nopt)
                r->k->fill(r->opt_state, 0.0f, r->nopt);
        r->opt_t = 0;
}

void strata__replica_warm_up(const struct strata__replica *r)
{
        if (r->drv->warm_up)
                r->drv->warm_up();
}

/* What a replica's passes show on its device's trace track. */
static const struct strata__span span_load = { "load batch", "data", "rows", 0 };
static const struct strata__span span_fwd = { "forward", "compute", "layer", 0 };
static const struct strata__span span_loss = { "loss", "compute", "rows", 0 };
static const struct strata__span span_bwd = { "backward", "compute", "layer", 0 };
static const struct strata__span span_clip = { "clip gradients", "compute", NULL, 0 };
static const struct strata__span span_step = { "optimizer step", "compute", "step", 0 };

static void load(struct strata__replica *r, const struct strata_batch *b, int lo, int rows,
                 int with_labels);

void strata__replica_load(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows, int with_labels)
{
        uint64_t t0 = strata__track_begin(r->track, &span_load, NULL);

        load(r, b, lo, rows, with_labels);
        strata__track_end(r->track, t0, rows);
}

/*
 * Rows [lo, lo + rows) of @p base (@p width values of @p type a row; indexed through
 * b->index when the batch has one) converted to f32 into @p host.
 */
static void gather(const struct strata_batch *b, const void *base, enum strata_dtype type,
                   int width, int lo, int rows, float *host)
{
        size_t skip = b->index ? 0 : (size_t)lo * (size_t)width;

        strata__gather_values(strata__values_at(base, type, skip), type,
                              b->index ? b->index + lo : NULL, rows, width, host);
}

/* This replica's rows of @p b's inputs, as f32 the device reads. */
static const float *load_x(struct strata__replica *r, const struct strata_batch *b, int lo,
                           int rows)
{
        const float *x = r->x_host;

        if (b->images)
                strata__gather_rows(b->images, b->index + lo, rows, b->dim, b->scale, b->shift,
                                    r->x_host);
        else if (strata__batch_in_place(b, b->xtype))
                x = b->x + (size_t)lo * b->dim;
        else
                gather(b, b->x, b->xtype, b->dim, lo, rows, r->x_host);
        return r->drv->device_view(r->x_stage, x, sizeof(float) * (size_t)rows * b->dim);
}

/* This replica's rows of @p b's float targets, as f32 the device reads. */
static const void *load_t(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows)
{
        const void *t = r->y_host;

        if (strata__batch_in_place(b, b->ttype))
                t = (const float *)b->t + (size_t)lo * b->tdim;
        else
                gather(b, b->t, b->ttype, b->tdim, lo, rows, r->y_host);
        return r->drv->device_view(r->y_stage, t, sizeof(float) * (size_t)rows * b->tdim);
}

/*
 * batch_to_device (see strata__replica_load): f32 rows are taken where they lie, indexed or
 * f64 rows are gathered and converted into the host staging; the device's view of them is
 * the rows themselves where it reads host memory, else a copy into its staging.
 */
static void load(struct strata__replica *r, const struct strata_batch *b, int lo, int rows,
                 int with_labels)
{
        r->rows = rows;
        r->row0 = lo;
        r->x = load_x(r, b, lo, rows);
        r->targets = NULL;
        if (with_labels && r->loss->float_targets && b->t)
                r->targets = load_t(r, b, lo, rows);
        else if (with_labels && b->y)
                r->targets = r->drv->device_view(r->y_stage, b->y + lo,
                                                 sizeof(int32_t) * (size_t)rows);
}

/* The step context with this replica's GEMM precision and scratch (storage types per call). */
static struct strata_step_ctx with_lp(const struct strata__replica *r,
                                      const struct strata_step_ctx *c)
{
        struct strata_step_ctx cc = *c;

        cc.compute = r->compute;
        cc.lp_scratch = r->lp_scratch;
        cc.lp_elems = r->lp_elems;
        cc.lp_dim = r->lp_dim;
        cc.chunks = r->chunks.n ? &r->chunks : NULL;
        return cc;
}

/* own_params: layer @p i's parameters gathered into the layer buffer unless it holds them. */
static int fetch(struct strata__replica *r, int i)
{
        if (!r->fetch || !r->layers[i].nparam || r->held == i)
                return STRATA_OK;
        r->held = -1;
        STRATA_TRY(r->fetch(r->fetch_h, r, i));
        r->held = i;
        return STRATA_OK;
}

int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c0)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        const float *x = r->x;

        r->held = -1; /* a step or a load may have changed the shards since */
        for (int i = 0; i < r->nlayers; i++) {
                struct strata_layer *l = &r->layers[i];
                uint64_t t0;

                STRATA_TRY(fetch(r, i));
                t0 = strata__track_begin(r->track, &span_fwd, l->desc->ops->name);

                cc.x_type = i > 0 ? r->ytype[i - 1] : STRATA_F32;
                cc.y_type = r->ytype[i];
                l->failed = STRATA_OK;
                if (cc.chunks && !r->batch_stats[i])
                        strata__chunks_forward(r, l, c, x, r->y[i]);
                else
                        l->desc->ops->forward(l, c, x, r->y[i], r->rows);
                strata__track_end(r->track, t0, i);
                if (l->failed != STRATA_OK)
                        return l->failed;
                x = r->y[i];
        }
        return STRATA_OK;
}

void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata_layer *last = &r->layers[r->nlayers - 1];
        uint64_t t0 = strata__track_begin(r->track, &span_loss, NULL);

        const float *out = r->y[r->nlayers - 1];

        if (r->chunks.n) {
                strata__chunks_loss(r, c, grad);
                strata__track_end(r->track, t0, r->rows);
                return;
        }
        r->loss_sum = r->loss->forward(c, out, r->targets, r->rows, last->out,
                                       grad ? r->dbuf[0] : NULL, &r->correct);
        if (r->loss->float_targets) {
                r->correct = 0;
                r->sse = r->k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, r->targets, r->rows,
                                              last->out, 0.0f, NULL);
                r->sae = r->k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, r->targets, r->rows,
                                              last->out, 0.0f, NULL);
        }
        strata__track_end(r->track, t0, r->rows);
}

int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c0,
                             strata__grad_ready_fn ready, void *h)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        int cur = 0;

        for (int i = r->nlayers - 1; i >= 0; i--) {
                struct strata_layer *l = &r->layers[i];
                const float *x = i > 0 ? r->y[i - 1] : r->x;
                float *dx = i > 0 ? r->dbuf[cur ^ 1] : NULL;
                uint64_t t0;

                STRATA_TRY(fetch(r, i)); /* the forward's last layer is still there */
                t0 = strata__track_begin(r->track, &span_bwd, l->desc->ops->name);

                cc.x_type = i > 0 ? r->ytype[i - 1] : STRATA_F32;
                cc.y_type = r->ytype[i];
                l->failed = STRATA_OK;
                if (cc.chunks)
                        l->failed = strata__chunks_backward(r, l, c, x, r->dbuf[cur], dx);
                else
                        l->desc->ops->backward(l, c, x, r->y[i], r->dbuf[cur], dx, r->rows);
                strata__track_end(r->track, t0, i);
                l->grad_fresh = 0;
                if (l->failed != STRATA_OK)
                        return l->failed;
                if (ready)
                        STRATA_TRY(ready(h, r, i));
                cur ^= 1;
        }
        return STRATA_OK;
}

/* The reduced gradients the replica holds: every element's, or with own_params or own_grads
 * its shard's. */
static size_t grads_held(const struct strata__replica *r)
{
        return r->own_params || r->own_grads ? r->shard_len : r->nparam;
}

void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value)
{
        uint64_t t0;

        if (!(max_norm > 0.0f) && !(max_value > 0.0f))
                return;
        t0 = strata__track_begin(r->track, &span_clip, NULL);
        if (max_norm > 0.0f) {
                double ss = r->k->sumsq(r->own_params ? r->lgrad : r->grads, r->nparam);
                /* PyTorch clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above. */
                float scale = (float)(max_norm / (sqrt(ss) + 1e-6));

                if (scale < 1.0f)
                        r->k->scale(r->grads, scale, grads_held(r));
        }
        if (max_value > 0.0f)
                r->k->clamp(r->grads, max_value, grads_held(r));
        strata__track_end(r->track, t0, 0);
}

int strata__replica_unscale(struct strata__replica *r, float scale)
{
        /* f32 squares cannot overflow a double: a non-finite sum is a non-finite gradient. */
        if (!isfinite(r->k->sumsq(r->grads, grads_held(r))))
                return 1;
        r->k->scale(r->grads, 1.0f / scale, grads_held(r)); /* a power of two: exact */
        return 0;
}

int strata__replica_nonfinite(const struct strata__replica *r)
{
        if (r->k->nonfinite)
                return r->k->nonfinite(r->grads, grads_held(r));
        return !isfinite(r->k->sumsq(r->grads, grads_held(r)));
}

void strata__replica_skip(struct strata__replica *r)
{
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
}

void strata__replica_step_range(const struct strata__replica *r, const struct strata_optim *o,
                                float *p, size_t lo, size_t hi)
{
        struct strata_update u;

        strata__optim_scalars(o, r->opt_t, &u);
        r->k->update_range(&u, p, r->grads, r->opt_state, r->nparam, lo, hi);
}

int strata__replica_nparams(const struct strata__replica *r)
{
        int n = 0;

        for (int i = 0; i < r->nlayers; i++)
                n += r->layers[i].ngroups;
        return n;
}

void strata__replica_set_shard(struct strata__replica *r, int rank)
{
        if (r->nshards > 1)
                r->shard_lo = (size_t)rank * r->shard_len;
}

/*
 * The elements [*lo, *hi) of the group of @p count at @p poff that lie in the replica's shard,
 * and where their optimizer state starts (of slot 0; slot j is shard_len further each).
 */
static size_t group_shard(const struct strata__replica *r, size_t poff, size_t count,
                          size_t *lo, size_t *hi)
{
        size_t s0 = r->shard_lo, s1 = r->shard_lo + r->shard_len;

        *lo = s0 > poff ? s0 - poff : 0;
        *hi = s1 > poff ? s1 - poff : 0;
        *lo = *lo < count ? *lo : count;
        *hi = *hi < count ? *hi : count;
        *hi = *hi > *lo ? *hi : *lo;
        return poff + *lo - s0;
}

/* Group @p g's trained values at @p poff, with its shard and optimizer slots, into @p out. */
static void trained_group(const struct strata__replica *r, const struct strata_param_group *g,
                          size_t poff, struct strata_param *out)
{
        size_t at = group_shard(r, poff, g->count, &out->shard_lo, &out->shard_hi);
        int slots = r->shard_len ? (int)(r->nopt / r->shard_len) : 0;
        /* own_params: the shard's part, as the optimizer state */
        size_t v = !r->own_params ? poff : out->shard_hi > out->shard_lo ? at : 0;
        size_t gv = !r->own_grads ? v : out->shard_hi > out->shard_lo ? at : 0;

        out->value = r->params + v;
        out->grad = r->grads + gv;
        out->opt_slots = slots;
        for (int j = 0; j < slots && out->shard_hi > out->shard_lo; j++)
                out->opt_state[j] = r->opt_state + r->shard_len * (size_t)j + at;
}

int strata__replica_param(const struct strata__replica *r, int index, struct strata_param *out)
{
        size_t poff = 0, soff = 0;

        for (int i = 0; i < r->nlayers; i++) {
                const struct strata_layer *l = &r->layers[i];
                size_t lsoff = 0; /* a layer's running state is its own vector */

                for (int k = 0; k < l->ngroups; k++) {
                        const struct strata_param_group *g = &l->groups[k];
                        int running = g->role == STRATA_ROLE_RUNNING;

                        if (index-- == 0) {
                                memset(out, 0, sizeof(*out));
                                snprintf(out->name, sizeof(out->name), "layers.%d.%s", i,
                                         g->name);
                                out->layer = i;
                                out->group = *g;
                                out->offset = running ? soff : poff;
                                out->shard_hi = g->count;
                                if (running) {
                                        out->value = l->state + lsoff;
                                        return STRATA_OK;
                                }
                                trained_group(r, g, poff, out);
                                return STRATA_OK;
                        }
                        if (running) {
                                soff += g->count;
                                lsoff += g->count;
                        } else {
                                poff += g->count;
                        }
                }
        }
        return -1;
}

size_t strata__replica_param_offset(const struct strata__replica *r, int i)
{
        return r->poff[i];
}

size_t strata__replica_owned(const struct strata__replica *r)
{
        if (!r->own_params)
                return r->nparam;
        if (r->shard_lo >= r->nparam)
                return 0;
        return r->nparam - r->shard_lo < r->shard_len ? r->nparam - r->shard_lo : r->shard_len;
}

/* Layer @p i's elements in this device's shard: from @p layer (the layer's) into @p shard. */
static void keep(struct strata__replica *r, int i, float *shard, const float *layer)
{
        size_t lo = r->poff[i], hi = lo + r->layers[i].nparam;
        size_t a = lo > r->shard_lo ? lo : r->shard_lo;
        size_t b = hi < r->shard_lo + r->shard_len ? hi : r->shard_lo + r->shard_len;

        if (b > a)
                r->k->copy(shard + (a - r->shard_lo), layer + (a - lo), b - a);
}

void strata__replica_keep(struct strata__replica *r, int i)
{
        keep(r, i, r->params, r->lbuf);
}

void strata__replica_keep_grads(struct strata__replica *r, int i)
{
        keep(r, i, r->grads, r->layers[i].grad);
}

void strata__replica_step(struct strata__replica *r, const struct strata_optim *o)
{
        struct strata_update u;
        uint64_t t0 = strata__track_begin(r->track, &span_step, NULL);
        size_t at = r->own_params ? 0 : r->shard_lo, gat = r->own_grads ? 0 : at;

        r->opt_t++;
        strata__optim_scalars(o, r->opt_t, &u);
        /* unsharded: shard_lo 0, shard_len nparam; sharded: padding updates zeros to zeros;
         * own_params: the vectors are the shard; own_grads: the gradients are */
        r->k->update(&u, r->params + at, r->grads + gat, r->opt_state, r->shard_len);
        strata__track_end(r->track, t0, (int64_t)r->opt_t);
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
}
