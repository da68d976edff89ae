/*
 * A replica's layout: its two passes over the model (the shape pass sizes every module's
 * parameters, state, GEMM scratch and skip and fusion tables; the carve pass takes each
 * layer's vectors and buffers from the arenas, in the same order for planning and for the
 * device), and its deterministic initialisation. The passes over a batch are in
 * replica_pass.c, batch I/O and losses in replica_io.c, the optimizer side in replica_optim.c.
 * What a strategy shards is the replica's shard (nn/shard.c), invariant mode's passes its
 * chunks' (nn/chunks.c): the replica calls them, never the other way round.
 */
#include <string.h>

#include "strata/status.h"
#include "alloc/floats.h"
#include "base/base.h"
#include "nn/replica_private.h"
#include "nn/shape.h"

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

/*
 * The flat vectors of shard sizes @p z: the parameters and (reduced) gradients the replica
 * holds, the shard's buffers, and the optimizer state of one shard (all of it unsharded).
 */
static int layout_vectors(struct strata__replica *r, struct strata_arena *d,
                          const struct strata__shard_sizes *z, const struct strata_optim *o,
                          enum strata_dtype grad_comm, struct strata__shard *sh)
{
        if (strata__mul_size((size_t)strata_optim_state_per_param(o), z->len, &r->v.nopt))
                return strata__fail(STRATA_EOVERFLOW, "model: optimizer state of %zu "
                                    "parameters overflows a size", r->v.nparam);
        STRATA_TRY(strata__arena_floats(d, z->params, &r->v.params));
        STRATA_TRY(strata__arena_floats(d, z->grads, &r->v.grads));
        STRATA_TRY(strata__shard_layout(sh, d, z, grad_comm, r->v.k));
        return strata__arena_floats(d, r->v.nopt, &r->v.opt_state);
}

/* Inference only: the parameters alone (no gradients, no optimizer state: r->v.nopt 0). */
static int layout_weights(struct strata__replica *r, struct strata_arena *d,
                          struct strata__shard_sizes *z, struct strata__shard *sh)
{
        z->grads = 0;
        r->v.nopt = 0;
        STRATA_TRY(strata__arena_floats(d, z->params, &r->v.params));
        return strata__shard_layout(sh, d, z, STRATA_F32, r->v.k);
}

/*
 * The batch's staging: the activation gradients, the device's copy of its rows and targets
 * (@p tbytes), and where the device has memory of its own the host staging of the same and
 * the host image of its vectors; without, the host staging is the device's.
 */
static int layout_staging(struct strata__replica *r, const struct strata__replica_mem *mem,
                          int rows, int width, int in, size_t tbytes, int inference)
{
        struct strata_arena *d = mem->dev;
        size_t n;

        if (!inference) { /* the activation gradients: none without a backward */
                STRATA_TRY(strata__arena_floats(d, (size_t)rows * width, &r->dbuf[0]));
                STRATA_TRY(strata__arena_floats(d, (size_t)rows * width, &r->dbuf[1]));
        }
        STRATA_TRY(strata__arena_floats(d, (size_t)rows * in, &r->x_stage));
        STRATA_TRY(strata_arena_alloc(d, tbytes, 0, &r->y_stage));
        if (!mem->pinned) { /* the device reads host memory: nothing is staged */
                r->x_host = r->x_stage;
                r->y_host = r->y_stage;
                return STRATA_OK;
        }
        STRATA_TRY(strata__arena_floats(mem->pinned, (size_t)rows * in, &r->x_host));
        STRATA_TRY(strata_arena_alloc(mem->pinned, tbytes, 0, &r->y_host));
        /* Host image: parameters + state at init, then any one of the vectors read back. */
        n = r->v.nparam + r->nstate > r->v.nopt ? r->v.nparam + r->nstate : r->v.nopt;
        return strata__arena_floats(mem->pinned, n, &r->p_host);
}

/*
 * Skip connections: which module reads which earlier output, and the buffers that hold each
 * source's output gradient while the reverse pass goes from its last reader down to it.
 */
struct skips {
        short from[STRATA__MODULES_MAX];  /* module i reads output from[i] (-1 - k: input
                                           * k), else STRATA__NO_SOURCE */
        short last[STRATA__MODULES_MAX];  /* the last module that reads output i, or -1 */
        short slot[STRATA__MODULES_MAX];  /* source i's gradient buffer */
        size_t size[STRATA__MODULES_MAX]; /* floats of buffer k */
        int nslots;
        int merges;                       /* modules that read an earlier output or an
                                           * input (merge and branch modules) */
};

/*
 * Give each source a buffer for the reverse pass: it is taken at its last reader's backward
 * (the first to write it) and free again once the source's own backward has read it, so a
 * source may take a buffer another one has finished with (the first free one, in buffer order:
 * the same on every device and in the plan). A buffer holds its largest user's @p width[i]
 * values a row, @p rows rows.
 */
static void skip_slots(struct skips *sk, int n, const int *width, int rows)
{
        short busy[STRATA__MODULES_MAX]; /* the source using buffer k, or -1 */

        sk->nslots = 0;
        for (int j = n - 1; j >= 0; j--) {
                int s = sk->from[j], k = 0;

                if (sk->last[j] >= 0) /* j's backward reads its buffer first: free after */
                        busy[sk->slot[j]] = -1;
                if (s < 0 || sk->last[s] != j)
                        continue;
                while (k < sk->nslots && busy[k] >= 0)
                        k++;
                if (k == sk->nslots)
                        sk->size[sk->nslots++] = 0;
                busy[k] = (short)s;
                sk->slot[s] = (short)k;
                if ((size_t)rows * (size_t)width[s] > sk->size[k])
                        sk->size[k] = (size_t)rows * (size_t)width[s];
        }
}

/*
 * The gradient buffers of @p sk from @p d, and each merge module's place in them: a source's
 * gskip, each reader's dskip (the last reader writes it, the others add in reverse order),
 * with the replica's per-module table of them from @p a. A chain (no merge module) has none:
 * its plan is what it was before skip connections existed.
 */
static int layout_skips(struct strata__replica *r, struct strata_arena *a,
                        struct strata_arena *d, const struct skips *sk, int n, int inference)
{
        float *buf[STRATA__MODULES_MAX] = { NULL };
        void *p;

        if (!sk->merges)
                return STRATA_OK; /* r->from and r->gskip stay NULL */
        STRATA_TRY(strata_arena_alloc(a, sizeof(short) * (size_t)n, 0, &p));
        r->from = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(float *) * (size_t)n, 0, &p));
        r->gskip = p;
        for (int k = 0; k < sk->nslots && !inference; k++) /* inference: no gradients */
                STRATA_TRY(strata__arena_floats(d, sk->size[k], &buf[k]));
        if (!r->v.layers)
                return STRATA_OK;
        for (int i = 0; i < n; i++) {
                int s = sk->from[i];

                r->from[i] = sk->from[i];
                r->gskip[i] = sk->last[i] >= 0 && !inference ? buf[sk->slot[i]] : NULL;
                r->v.layers[i].dskip = s >= 0 && !inference ? buf[sk->slot[s]] : NULL;
                r->v.layers[i].dskip_add = s >= 0 && sk->last[s] != i;
        }
        return STRATA_OK;
}

/*
 * Several inputs and outputs (r->io): each input's place in a row and, with more than one, the
 * buffer its rows are split into; each output's module, loss and weight, its loss gradient's
 * buffer (the last module's is dbuf[0], as without outputs) and, with more than one, its
 * targets'. A model that gives neither has none of these buffers.
 */
static int layout_io(struct strata__replica *r, const struct strata__replica_mem *mem,
                     const struct strata_model *m, const int *outw, int rows, int inference)
{
        struct strata__replica_io *io = &r->io;
        struct strata_arena *d = mem->dev;
        int at = 0, oat = 0;

        io->nin = m->ninputs;
        for (int k = 0; k < m->ninputs; k++) {
                io->in_off[k] = at;
                io->in_w[k] = m->inputs[k].features;
                at += io->in_w[k];
                if (m->ninputs > 1)
                        STRATA_TRY(strata__arena_floats(d, (size_t)rows * io->in_w[k],
                                                        &io->xin[k]));
        }
        io->nout = m->noutputs;
        at = 0;
        for (int k = 0; k < m->noutputs; k++) {
                const struct strata_model_output *o = &m->outputs[k];

                if (o->module != m->nmodules - 1 && !r->v.k->add)
                        return strata__fail(STRATA_ENOTSUP, "model output %d (module %d) is "
                                            "not the last module: the %s driver has no add "
                                            "kernel for its loss's gradient", k, o->module,
                                            r->drv->name);

                io->mod[k] = o->module;
                io->w[k] = outw[o->module];
                io->weight[k] = o->weight == 0.0f ? 1.0f : o->weight;
                io->loss[k] = strata__output_loss(m, k);
                io->label[k] = !io->loss[k]->float_targets;
                io->tw[k] = io->label[k] ? 1 : io->w[k];
                io->toff[k] = at;
                io->ooff[k] = oat;
                at += io->tw[k];
                oat += io->w[k];
                io->fwidth += io->label[k] ? 0 : io->w[k];
                if (o->module != m->nmodules - 1 && !inference)
                        STRATA_TRY(strata__arena_floats(d, (size_t)rows * io->w[k],
                                                        &io->gout[k]));
                if (m->noutputs <= 1)
                        continue;
                /* its targets: floats split from the row, or int32 labels made from it */
                STRATA_TRY(strata__arena_floats(d, (size_t)rows * io->tw[k], &io->tout[k]));
                if (io->label[k] && mem->pinned) {
                        void *p;

                        STRATA_TRY(strata_arena_alloc(mem->pinned, sizeof(int32_t) *
                                                      (size_t)rows, 0, &p));
                        io->lab_host[k] = p;
                } else if (io->label[k]) {
                        io->lab_host[k] = (int32_t *)(void *)io->tout[k];
                }
        }
        io->tdim = at;
        return STRATA_OK;
}

/* Whether module @p i is one of the model's outputs (its output is f32: a loss reads it). */
static int is_output(const struct strata_model *m, int i)
{
        for (int k = 0; k < m->noutputs; k++)
                if (m->outputs[k].module == i)
                        return 1;
        return 0;
}

/*
 * Which modules run inside a row_loop module's loop over rows (@p rl): the row_wise ones
 * (@p rw) that follow it in the chain, as long as no output in between is read by anything
 * but the next module (a merge or branch module, or a loss, reads every row at once). @p fl:
 * each module's last module its loop runs (itself when none); @p fh: a fused module's
 * row_loop module, else -1. Returns how many modules are fused.
 */
static int plan_fusion(const struct strata_model *m, const struct skips *sk,
                       const unsigned char *rl, const unsigned char *rw, short *fl, short *fh)
{
        int n = m->nmodules, fused = 0;

        for (int i = 0; i < n; i++) {
                fl[i] = (short)i;
                fh[i] = -1;
        }
        for (int i = 0; i < n; i++) {
                int j = i;

                while (rl[i] && j + 1 < n && rw[j + 1] && !m->modules[j + 1].branch &&
                       sk->from[j + 1] == STRATA__NO_SOURCE && sk->last[j] < 0 &&
                       !is_output(m, j))
                        fh[++j] = (short)i;
                fused += j - i;
                fl[i] = (short)j;
                i = j;
        }
        return fused;
}

/*
 * The fusion's tables (@p fl, @p fh of plan_fusion()) from @p a and one row's gradient
 * buffers, two of the widest input of a fused module, from @p d; none when nothing is fused
 * (r->fuse_last stays NULL).
 */
static int layout_fusion(struct strata__replica *r, struct strata_arena *a,
                         struct strata_arena *d, int n, const short *fl, const short *fh,
                         const int *outw, int inference)
{
        size_t w = 0;
        void *p, *q;

        for (int i = 0; i < n; i++)
                if (fh[i] >= 0 && (size_t)outw[i - 1] > w)
                        w = (size_t)outw[i - 1];
        if (!w)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(a, sizeof(short) * (size_t)n, 0, &p));
        STRATA_TRY(strata_arena_alloc(a, sizeof(short) * (size_t)n, 0, &q));
        if (!inference) { /* one row's gradients: none without a backward */
                STRATA_TRY(strata__arena_floats(d, w, &r->fuse_dx[0]));
                STRATA_TRY(strata__arena_floats(d, w, &r->fuse_dx[1]));
        }
        if (!r->v.layers)
                return STRATA_OK;
        memcpy(p, fl, sizeof(short) * (size_t)n);
        memcpy(q, fh, sizeof(short) * (size_t)n);
        r->fuse_last = p;
        r->fuse_head = q;
        return STRATA_OK;
}

/*
 * The shard and the chunks (invariant mode, else NULL) the replica points to, from the
 * descriptors' arena @p a: carved after every tensor, so they move none (NULL when planning).
 */
static int layout_parts(struct strata__replica *r, struct strata_arena *a,
                        const struct strata__shard *sh, const struct strata_chunks *ch)
{
        void *p;

        STRATA_TRY(strata_arena_alloc(a, sizeof(*sh), 0, &p));
        if (p)
                memcpy(p, sh, sizeof(*sh));
        r->v.shard = p;
        if (!ch)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*ch), 0, &p));
        if (p)
                memcpy(p, ch, sizeof(*ch));
        r->v.chunks = p;
        return STRATA_OK;
}

/* What the shape pass finds of every module, for the carve pass. */
struct shapes {
        size_t nparam, nstate;                 /* the model's parameters, running state */
        size_t lp_elems;                       /* the largest GEMM's scratch elements */
        size_t lmax;                           /* the largest layer's parameters */
        int width;                             /* the widest row: the input or an output */
        unsigned char io[STRATA__MODULES_MAX]; /* each module's bf16_io */
        unsigned char rl[STRATA__MODULES_MAX]; /* row_loop (fusion may run others in it) */
        unsigned char rw[STRATA__MODULES_MAX]; /* row_wise (may run in another's loop) */
        unsigned char ip[STRATA__MODULES_MAX]; /* in_place */
        int outw[STRATA__MODULES_MAX];         /* each module's output width */
        struct skips sk;
};

/* What a model needs of its driver and of itself before any module is shaped. */
static int layout_check(const struct strata_model *m, const struct strata__replica_mem *mem,
                        const struct strata__chunk_plan *chunks)
{
        if (m->nmodules <= 0 || m->nmodules > STRATA__MODULES_MAX)
                return strata__fail(STRATA_EINVAL, "model has %d modules (1..%d)", m->nmodules,
                                    STRATA__MODULES_MAX);
        if (m->loss && (!m->loss->check || !m->loss->forward))
                return strata__fail(STRATA_EINVAL, "the model's loss %s lacks check or forward",
                                    m->loss->name ? m->loss->name : "(unnamed)");
        if (strata__float_outputs(m) && !mem->drv->kernels->pointwise_loss)
                return strata__fail(STRATA_ENOTSUP, "the %s driver has no pointwise_loss "
                                    "kernel: float targets do not run on it", mem->drv->name);
        if (chunks && !mem->drv->kernels->add)
                return strata__fail(STRATA_ENOTSUP, "the %s driver has no add kernel: "
                                    "invariant mode does not run on it", mem->drv->name);
        return STRATA_OK;
}

/* Module @p i's shape @p s checked against the driver and the plan, its sizes into @p sh. */
static int shape_module(const struct strata__replica_mem *mem,
                        const struct strata__replica_plan *pl, int i,
                        const struct strata_module_shape *s, int bf16, struct shapes *sh)
{
        const struct strata_model *m = pl->model;
        int rows = pl->rows_max, reads;

        if (strata__add_size(sh->nparam, s->params, &sh->nparam) ||
            strata__add_size(sh->nstate, s->state, &sh->nstate))
                return strata__fail(STRATA_EOVERFLOW, "model: parameters or state of "
                                    "modules 0..%d overflow a size", i);
        if (s->lp_per_row > ((size_t)1 << 40) / (size_t)(rows > 0 ? rows : 1) ||
            s->lp_fixed > ((size_t)1 << 42))
                return strata__fail(STRATA_EOVERFLOW, "module %d declares a GEMM of "
                                    "%zu + %zu per row elements", i, s->lp_fixed,
                                    s->lp_per_row);
        if (s->lp_fixed + (size_t)rows * s->lp_per_row > sh->lp_elems)
                sh->lp_elems = s->lp_fixed + (size_t)rows * s->lp_per_row;
        if (s->host_loops && mem->drv->reserve)
                return strata__fail(STRATA_ENOTSUP, "module %d (%s) computes on the "
                                    "host: the %s driver's devices have memory of "
                                    "their own", i, m->modules[i].ops->name,
                                    mem->drv->name);
        sh->io[i] = bf16 && s->bf16_io;
        /* invariant mode calls modules once per chunk: none runs in another's loop */
        sh->rl[i] = pl->fuse && !pl->chunks && s->row_loop;
        sh->rw[i] = s->row_wise && !s->params && !s->state && !s->aux_fixed;
        sh->ip[i] = s->in_place;
        sh->outw[i] = s->out;
        reads = s->reads_from || m->modules[i].branch;
        sh->sk.from[i] = reads ? (short)m->modules[i].from : STRATA__NO_SOURCE;
        sh->sk.merges += reads != 0;
        if (reads && sh->sk.from[i] >= 0)
                sh->sk.last[sh->sk.from[i]] = (short)i;
        if (reads && !mem->drv->kernels->add)
                return strata__fail(STRATA_ENOTSUP, "module %d (%s) reads an earlier "
                                    "output: the %s driver has no add kernel for its "
                                    "gradient", i, m->modules[i].ops->name,
                                    mem->drv->name);
        if (pl->chunks && !s->batch_stats && s->aux_fixed)
                return strata__fail(STRATA_ENOTSUP, "invariant mode: module %d (%s) "
                                    "keeps aux_fixed values but declares no "
                                    "batch_stats: it cannot run once per chunk", i,
                                    m->modules[i].ops->name);
        sh->lmax = s->params > sh->lmax ? s->params : sh->lmax;
        sh->width = s->out > sh->width ? s->out : sh->width;
        return STRATA_OK;
}

/*
 * The shape pass: every module shaped in turn (nn/shape.c's walk), its sizes summed and its
 * flags kept in @p sh; the model's output width in r->v.out. Allocates nothing.
 */
static int shape_pass(struct strata__replica *r, const struct strata__replica_mem *mem,
                      const struct strata__replica_plan *pl, struct shapes *sh)
{
        const struct strata_model *m = pl->model;
        int bf16 = bf16_activations(mem->drv, pl->compute);
        struct strata__shape_walk walk;

        sh->nparam = sh->nstate = sh->lp_elems = sh->lmax = 0;
        sh->width = m->in_features;
        sh->sk.merges = 0;
        STRATA_TRY(strata__shape_start(m, &walk));
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_module_shape s;
                struct strata_layer tmp;

                sh->sk.last[i] = -1;
                STRATA_TRY(strata__shape_step(m, i, &walk, &tmp, &s));
                STRATA_TRY(shape_module(mem, pl, i, &s, bf16, sh));
        }
        return strata__shape_finish(m, &walk, &r->v.out, NULL);
}

/* Layer @p l (module @p i, shape @p s, parameters at @p off) set from its shape. */
static void carve_layer(struct strata__replica *r, const struct strata__replica_plan *pl,
                        int i, const struct strata_module_shape *s, size_t off,
                        struct strata__shard *shard, struct strata_chunks *ch)
{
        struct strata_layer *l = &r->v.layers[i];

        l->nparam = s->params;
        l->nstate = s->state;
        l->naux_fixed = s->aux_fixed;
        l->naux_per_row = s->aux_per_row;
        l->grad_fresh = 1;
        l->ngroups = s->ngroups;
        memcpy(l->groups, s->groups, sizeof(l->groups));
        r->v.poff[i] = off;
        if (pl->chunks)
                strata__chunks_layer(ch, i, s->batch_stats,
                                     pl->model->modules[i].ops == &strata_linear
                                             ? strata__linear_input_grad : NULL);
        strata__shard_layer_vectors(shard, r->v.params, r->v.grads, off, &l->param, &l->grad);
}

/*
 * The carve pass: each module shaped again (shapes are pure) and its layer, output, running
 * state and saved values taken from the device arena @p d in model order; with r->v.layers
 * NULL (planning) only the sizes count.
 */
static int carve_pass(struct strata__replica *r, struct strata_arena *d,
                      const struct strata__replica_plan *pl, const struct shapes *sh,
                      const short *fh, struct strata__shard *shard, struct strata_chunks *ch)
{
        const struct strata_model *m = pl->model;
        enum strata_dtype prev = STRATA_F32;   /* the previous module's output type */
        int rows = pl->rows_max;
        struct strata__shape_walk walk;
        size_t off = 0;
        void *p;

        STRATA_TRY(strata__shape_start(m, &walk));
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_layer *l = r->v.layers ? &r->v.layers[i] : NULL; /* NULL: planning */
                struct strata_module_shape s;
                struct strata_layer tmp;
                /* bf16 between two bf16_io modules, unless a merge or branch module or a
                 * loss reads it */
                enum strata_dtype yt = i + 1 < m->nmodules && sh->io[i] && sh->io[i + 1] &&
                                       sh->sk.last[i] < 0 && !m->modules[i + 1].branch &&
                                       !is_output(m, i) ? STRATA_BF16 : STRATA_F32;

                STRATA_TRY(strata__shape_step(m, i, &walk, &tmp, &s));
                if (r->v.layers) {
                        *l = tmp;
                        r->ytype[i] = yt;
                        carve_layer(r, pl, i, &s, off, shard, ch);
                }
                off += s.params;
                if (i > 0 && fh[i] == i - 1 && sh->ip[i] && yt == STRATA_F32 &&
                    prev == STRATA_F32) {
                        /* in place over its row_loop module's output, which nothing else
                         * reads: that module's backward reads no y, its own no x */
                        if (r->v.layers)
                                r->y[i] = r->y[i - 1];
                } else {
                        STRATA_TRY(strata_arena_alloc(d, (size_t)rows * s.out *
                                                                 strata_dtype_size(yt),
                                                      0, &p));
                        if (r->v.layers)
                                r->y[i] = p;
                }
                prev = yt;
                STRATA_TRY(strata__arena_floats(d, s.state,
                                                r->v.layers ? &l->state : &(float *){ 0 }));
                STRATA_TRY(strata__arena_floats(d, s.aux_fixed + (size_t)rows * s.aux_per_row,
                                                r->v.layers ? &l->aux : &(float *){ 0 }));
        }
        return STRATA_OK;
}

/* The replica's descriptors: its identity and per-module tables from the host arena @p a. */
static int layout_tables(struct strata__replica *r, struct strata_arena *a,
                         const struct strata__replica_mem *mem,
                         const struct strata__replica_plan *pl)
{
        const struct strata_model *m = pl->model;
        void *p;

        memset(r, 0, sizeof(*r));
        r->v.dev = pl->dev;
        r->drv = mem->drv;
        r->v.k = mem->drv->kernels;
        r->loss = strata__loss_of(m);
        r->v.nlayers = m->nmodules;
        STRATA_TRY(strata_arena_alloc(a, sizeof(struct strata_layer) * (size_t)m->nmodules, 0, &p));
        r->v.layers = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(float *) * (size_t)m->nmodules, 0, &p));
        r->y = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(size_t) * (size_t)m->nmodules, 0, &p));
        r->v.poff = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(enum strata_dtype) * (size_t)m->nmodules, 0,
                                      &p));
        r->ytype = p;
        return STRATA_OK;
}

int strata__replica_layout(struct strata__replica *r, const struct strata__replica_mem *mem,
                           const struct strata__replica_plan *pl,
                           struct strata__shard_sizes *sizes)
{
        const struct strata_model *m = pl->model;
        const struct strata__chunk_plan *chunks = pl->chunks;
        struct strata_arena *a = mem->host, *d = mem->dev;
        struct strata__shard_sizes z;
        struct strata__shard shard;
        struct strata_chunks ch;
        struct shapes sh;
        size_t tbytes;
        int rows = pl->rows_max, fused;
        short fl[STRATA__MODULES_MAX], fh[STRATA__MODULES_MAX]; /* plan_fusion()'s */

        STRATA_TRY(layout_check(m, mem, chunks));
        STRATA_TRY(layout_tables(r, a, mem, pl));
        STRATA_TRY(shape_pass(r, mem, pl, &sh));
        skip_slots(&sh.sk, m->nmodules, sh.outw, rows);
        r->v.nparam = sh.nparam;
        r->nstate = sh.nstate;
        STRATA_TRY(strata__shard_plan(sh.nparam, sh.lmax, pl->shards, pl->how, &z));
        if (sizes)
                *sizes = z;
        if (pl->inference)
                STRATA_TRY(layout_weights(r, d, &z, &shard));
        else
                STRATA_TRY(layout_vectors(r, d, &z, pl->optim, pl->grad_comm, &shard));
        if (chunks) {
                STRATA_TRY(strata__chunks_layout(&ch, a, d, chunks, m->nmodules, sh.lmax,
                                                 sh.width));
                ch.k = r->v.k;
        }
        fused = plan_fusion(m, &sh.sk, sh.rl, sh.rw, fl, fh);
        STRATA_TRY(carve_pass(r, d, pl, &sh, fh, &shard, &ch));
        STRATA_TRY(strata__packed_plan(r, d, m, pl->inference)); /* after carve: aux */
        STRATA_TRY(strata__packed_lds(r));
        STRATA_TRY(layout_skips(r, a, d, &sh.sk, m->nmodules, pl->inference));
        if (fused)
                STRATA_TRY(layout_fusion(r, a, d, m->nmodules, fl, fh, sh.outw, pl->inference));
        STRATA_TRY(layout_io(r, mem, m, sh.outw, rows, pl->inference));
        /* A row's targets: one int32 label, or a row of f32 (one per output, or io's). */
        r->float_row = strata__float_row(m);
        tbytes = (size_t)rows * (!r->float_row ? sizeof(int32_t)
                                 : sizeof(float) * (size_t)(m->noutputs > 1 ? r->io.tdim
                                                                            : r->v.out));
        /* Every GEMM dimension is a layer width or the rows. */
        STRATA_TRY(layout_lp(r, mem, sh.lp_elems,
                             (size_t)(rows > sh.width ? rows : sh.width), pl->compute));
        STRATA_TRY(layout_staging(r, mem, rows, sh.width, m->in_features, tbytes,
                                  pl->inference));
        return layout_parts(r, a, &shard, chunks ? &ch : NULL);
}

/* Device memory the host cannot touch: initialise a host image, then copy it over. */
static void init_through_host(struct strata__replica *r, uint64_t seed)
{
        float *state = r->p_host + r->v.nparam;

        for (int i = 0; i < r->v.nlayers; i++) {
                struct strata_layer *l = &r->v.layers[i];
                float *dp = l->param, *ds = l->state;

                l->param = r->p_host + r->v.poff[i];
                l->state = state;
                if (l->desc->ops->init)
                        l->desc->ops->init(l, seed);
                if (l->nstate)
                        r->drv->to_device(ds, state, l->nstate * sizeof(float));
                state += l->nstate;
                l->param = dp;
                l->state = ds;
        }
        r->drv->to_device(r->v.params, r->p_host, r->v.nparam * sizeof(float));
}

void strata__replica_init(struct strata__replica *r, uint64_t seed)
{
        const struct strata__shard_sizes *z = &r->v.shard->size;
        size_t n = z->params;

        strata__shard_release(r->v.shard);
        if (z->own_params) {
                r->v.k->fill(r->v.params, 0.0f, n); /* the strategy keeps each layer's part */
        } else if (!r->p_host) {
                for (int i = 0; i < r->v.nlayers; i++)
                        if (r->v.layers[i].desc->ops->init)
                                r->v.layers[i].desc->ops->init(&r->v.layers[i], seed);
        } else {
                init_through_host(r, seed);
        }
        for (int i = 0; i < r->v.nlayers; i++)
                r->v.layers[i].grad_fresh = 1;
        if (z->grads) /* none inference only */
                r->v.k->fill(r->v.grads, 0.0f, z->grads);
        if (!z->own_params && n > r->v.nparam) /* whole shards: zero padding */
                r->v.k->fill(r->v.params + r->v.nparam, 0.0f, n - r->v.nparam);
        if (r->v.nopt)
                r->v.k->fill(r->v.opt_state, 0.0f, r->v.nopt);
        r->opt_t = 0;
}

void strata__replica_warm_up(const struct strata__replica *r)
{
        if (r->drv->warm_up)
                r->drv->warm_up(r->scratch);
}

const size_t strata__replica_bytes = sizeof(struct strata__replica);

int strata__replica_plan_only(const struct strata__replica_mem *mem,
                              const struct strata__replica_plan *p,
                              struct strata__shard_sizes *sizes,
                              struct strata__replica_view *v)
{
        struct strata__replica tmp;

        STRATA_TRY(strata__replica_layout(&tmp, mem, p, sizes));
        *v = tmp.v;
        return STRATA_OK;
}

void strata__replica_place(struct strata__replica *r, void *scratch,
                           const struct strata_arena *arena)
{
        r->scratch = scratch;
        r->arena = *arena;
}

void strata__replica_set_track(struct strata__replica *r, struct strata__track *t)
{
        r->v.track = t;
}

struct strata_arena *strata__replica_arena(struct strata__replica *r)
{
        return &r->arena;
}

void *strata__replica_scratch(const struct strata__replica *r)
{
        return r->scratch;
}

float *strata__replica_host_image(const struct strata__replica *r)
{
        return r->p_host;
}
