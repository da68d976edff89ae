/*
 * Replica layout and the per-device forward/backward/optimizer passes. What a strategy shards
 * is the replica's shard (nn/shard.c), invariant mode's passes its chunks' (nn/chunks.c), a
 * batch's rows the data layer's gathers (data/gather.c): the replica calls them, never the
 * other way round. The row_wise modules after a row_loop module run inside its loop over
 * rows (plan_fusion(), the row hooks; decision 0046).
 */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "alloc/floats.h"
#include "kernel/trace.h"
#include "base/base.h"
#include "data/gather.h"
#include "nn/optim.h"
#include "nn/replica.h"
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
        if (strata__mul_size((size_t)strata_optim_state_per_param(o), z->len, &r->nopt))
                return strata__fail(STRATA_EOVERFLOW, "model: optimizer state of %zu "
                                    "parameters overflows a size", r->nparam);
        STRATA_TRY(strata__arena_floats(d, z->params, &r->params));
        STRATA_TRY(strata__arena_floats(d, z->grads, &r->grads));
        STRATA_TRY(strata__shard_layout(sh, d, z, grad_comm, r->k));
        return strata__arena_floats(d, r->nopt, &r->opt_state);
}

/*
 * The batch's staging: the activation gradients, the device's copy of its rows and targets
 * (@p tbytes), and where the device has memory of its own the host staging of the same and
 * the host image of its vectors; without, the host staging is the device's.
 */
static int layout_staging(struct strata__replica *r, const struct strata__replica_mem *mem,
                          int rows, int width, int in, size_t tbytes)
{
        struct strata_arena *d = mem->dev;
        size_t n;

        STRATA_TRY(strata__arena_floats(d, (size_t)rows * width, &r->dbuf[0]));
        STRATA_TRY(strata__arena_floats(d, (size_t)rows * width, &r->dbuf[1]));
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
        n = r->nparam + r->nstate > r->nopt ? r->nparam + r->nstate : r->nopt;
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
                        struct strata_arena *d, const struct skips *sk, int n)
{
        float *buf[STRATA__MODULES_MAX];
        void *p;

        if (!sk->merges)
                return STRATA_OK; /* r->from and r->gskip stay NULL */
        STRATA_TRY(strata_arena_alloc(a, sizeof(short) * (size_t)n, 0, &p));
        r->from = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(float *) * (size_t)n, 0, &p));
        r->gskip = p;
        for (int k = 0; k < sk->nslots; k++)
                STRATA_TRY(strata__arena_floats(d, sk->size[k], &buf[k]));
        if (!r->layers)
                return STRATA_OK;
        for (int i = 0; i < n; i++) {
                int s = sk->from[i];

                r->from[i] = sk->from[i];
                r->gskip[i] = sk->last[i] >= 0 ? buf[sk->slot[i]] : NULL;
                r->layers[i].dskip = s >= 0 ? buf[sk->slot[s]] : NULL;
                r->layers[i].dskip_add = s >= 0 && sk->last[s] != i;
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
                     const struct strata_model *m, const int *outw, int rows)
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

                if (o->module != m->nmodules - 1 && !r->k->add)
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
                if (o->module != m->nmodules - 1)
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
                         const int *outw)
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
        STRATA_TRY(strata__arena_floats(d, w, &r->fuse_dx[0]));
        STRATA_TRY(strata__arena_floats(d, w, &r->fuse_dx[1]));
        if (!r->layers)
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
        r->shard = p;
        if (!ch)
                return STRATA_OK;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*ch), 0, &p));
        if (p)
                memcpy(p, ch, sizeof(*ch));
        r->chunks = p;
        return STRATA_OK;
}

int strata__replica_layout(struct strata__replica *r, const struct strata__replica_mem *mem,
                           const struct strata__replica_plan *pl,
                           struct strata__shard_sizes *sizes)
{
        const struct strata_model *m = pl->model;
        const struct strata__chunk_plan *chunks = pl->chunks;
        struct strata_module_shape s;
        struct strata_arena *a = mem->host, *d = mem->dev;
        struct strata__shard_sizes z;
        struct strata__shard sh;
        struct strata_chunks ch;
        size_t nparam = 0, nstate = 0, off = 0, lp_elems = 0, tbytes, lmax = 0;
        int rows = pl->rows_max, in = m->in_features, width = in;
        int bf16 = bf16_activations(mem->drv, pl->compute);
        unsigned char io[STRATA__MODULES_MAX]; /* each module's bf16_io */
        unsigned char rl[STRATA__MODULES_MAX], rw[STRATA__MODULES_MAX]; /* row_loop, row_wise */
        unsigned char ip[STRATA__MODULES_MAX]; /* in_place */
        enum strata_dtype prev = STRATA_F32;   /* the previous module's output type */
        int fused;
        short fl[STRATA__MODULES_MAX], fh[STRATA__MODULES_MAX]; /* plan_fusion()'s */
        int outw[STRATA__MODULES_MAX];         /* each module's output width */
        struct strata__shape_walk walk;
        struct skips sk;
        void *p;

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
        memset(r, 0, sizeof(*r));
        r->dev = pl->dev;
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
        sk.merges = 0;
        STRATA_TRY(strata__shape_start(m, &walk));
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_layer tmp;
                int reads;

                sk.last[i] = -1;

                STRATA_TRY(strata__shape_step(m, i, &walk, &tmp, &s));
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
                if (s.host_loops && mem->drv->reserve)
                        return strata__fail(STRATA_ENOTSUP, "module %d (%s) computes on the "
                                            "host: the %s driver's devices have memory of "
                                            "their own", i, m->modules[i].ops->name,
                                            mem->drv->name);
                io[i] = bf16 && s.bf16_io;
                /* invariant mode calls modules once per chunk: none runs in another's loop */
                rl[i] = pl->fuse && !chunks && s.row_loop;
                rw[i] = s.row_wise && !s.params && !s.state && !s.aux_fixed;
                ip[i] = s.in_place;
                outw[i] = s.out;
                reads = s.reads_from || m->modules[i].branch;
                sk.from[i] = reads ? (short)m->modules[i].from : STRATA__NO_SOURCE;
                sk.merges += reads != 0;
                if (reads && sk.from[i] >= 0)
                        sk.last[sk.from[i]] = (short)i;
                if (reads && !mem->drv->kernels->add)
                        return strata__fail(STRATA_ENOTSUP, "module %d (%s) reads an earlier "
                                            "output: the %s driver has no add kernel for its "
                                            "gradient", i, m->modules[i].ops->name,
                                            mem->drv->name);
                if (chunks && !s.batch_stats && s.aux_fixed)
                        return strata__fail(STRATA_ENOTSUP, "invariant mode: module %d (%s) "
                                            "keeps aux_fixed values but declares no "
                                            "batch_stats: it cannot run once per chunk", i,
                                            m->modules[i].ops->name);
                lmax = s.params > lmax ? s.params : lmax;
                in = s.out;
                width = in > width ? in : width;
        }
        STRATA_TRY(strata__shape_finish(m, &walk, &r->out, NULL));
        skip_slots(&sk, m->nmodules, outw, rows);
        r->nparam = nparam;
        r->nstate = nstate;
        STRATA_TRY(strata__shard_plan(nparam, lmax, pl->shards, pl->how, &z));
        if (sizes)
                *sizes = z;
        STRATA_TRY(layout_vectors(r, d, &z, pl->optim, pl->grad_comm, &sh));
        if (chunks) {
                STRATA_TRY(strata__chunks_layout(&ch, a, d, chunks, m->nmodules, lmax, width));
                ch.k = r->k;
        }
        fused = plan_fusion(m, &sk, rl, rw, fl, fh);
        STRATA_TRY(strata__shape_start(m, &walk));
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_layer *l = r->layers ? &r->layers[i] : NULL; /* NULL: planning */
                struct strata_layer tmp;
                /* bf16 between two bf16_io modules, unless a merge or branch module or a
                 * loss reads it */
                enum strata_dtype yt = i + 1 < m->nmodules && io[i] && io[i + 1] &&
                                       sk.last[i] < 0 && !m->modules[i + 1].branch &&
                                       !is_output(m, i) ? STRATA_BF16 : STRATA_F32;

                /* as in the first pass: shapes are pure */
                STRATA_TRY(strata__shape_step(m, i, &walk, &tmp, &s));
                if (r->layers) {
                        *l = tmp;
                        l->nparam = s.params;
                        l->nstate = s.state;
                        l->naux_fixed = s.aux_fixed;
                        l->naux_per_row = s.aux_per_row;
                        l->grad_fresh = 1;
                        l->ngroups = s.ngroups;
                        memcpy(l->groups, s.groups, sizeof(l->groups));
                        r->poff[i] = off;
                        r->ytype[i] = yt;
                        if (chunks)
                                strata__chunks_layer(&ch, i, s.batch_stats,
                                                     m->modules[i].ops == &strata_linear
                                                             ? strata__linear_input_grad
                                                             : NULL);
                        strata__shard_layer_vectors(&sh, r->params, r->grads, off, &l->param,
                                                    &l->grad);
                }
                off += s.params;
                if (i > 0 && fh[i] == i - 1 && ip[i] && yt == STRATA_F32 && prev == STRATA_F32) {
                        /* in place over its row_loop module's output, which nothing else
                         * reads: that module's backward reads no y, its own no x */
                        if (r->layers)
                                r->y[i] = r->y[i - 1];
                } else {
                        STRATA_TRY(strata_arena_alloc(d, (size_t)rows * s.out *
                                                                 strata_dtype_size(yt),
                                                      0, &p));
                        if (r->layers)
                                r->y[i] = p;
                }
                prev = yt;
                STRATA_TRY(strata__arena_floats(d, s.state,
                                                r->layers ? &l->state : &(float *){ 0 }));
                STRATA_TRY(strata__arena_floats(d, s.aux_fixed + (size_t)rows * s.aux_per_row,
                                                r->layers ? &l->aux : &(float *){ 0 }));
                in = s.out;
        }
        STRATA_TRY(layout_skips(r, a, d, &sk, m->nmodules));
        if (fused)
                STRATA_TRY(layout_fusion(r, a, d, m->nmodules, fl, fh, outw));
        STRATA_TRY(layout_io(r, mem, m, outw, rows));
        /* A row's targets: one int32 label, or a row of f32 (one per output, or io's). */
        r->float_row = strata__float_row(m);
        tbytes = (size_t)rows * (!r->float_row ? sizeof(int32_t)
                                 : sizeof(float) * (size_t)(m->noutputs > 1 ? r->io.tdim
                                                                            : r->out));
        /* Every GEMM dimension is a layer width or the rows. */
        STRATA_TRY(layout_lp(r, mem, lp_elems, (size_t)(rows > width ? rows : width),
                             pl->compute));
        STRATA_TRY(layout_staging(r, mem, rows, width, m->in_features, tbytes));
        return layout_parts(r, a, &sh, chunks ? &ch : NULL);
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
        const struct strata__shard_sizes *z = &r->shard->size;
        size_t n = z->params;

        strata__shard_release(r->shard);
        if (z->own_params) {
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
        r->k->fill(r->grads, 0.0f, z->grads);
        if (!z->own_params && n > r->nparam) /* whole shards: zero padding */
                r->k->fill(r->params + r->nparam, 0.0f, n - r->nparam);
        if (r->nopt)
                r->k->fill(r->opt_state, 0.0f, r->nopt);
        r->opt_t = 0;
}

void strata__replica_warm_up(const struct strata__replica *r)
{
        if (r->drv->warm_up)
                r->drv->warm_up(r->scratch);
}

/* What a replica's passes show on its device's trace track. */
static const struct strata__span span_load = { "load batch", "data", "rows", 0 };
static const struct strata__span span_fwd = { "forward", "compute", "layer", 0 };
static const struct strata__span span_loss = { "loss", "compute", "rows", 0 };
static const struct strata__span span_bwd = { "backward", "compute", "layer", 0 };
static const struct strata__span span_clip = { "clip gradients", "compute", NULL, 0 };
static const struct strata__span span_step = { "optimizer step", "compute", "step", 0 };

/*
 * Split @p n parts of @p rows rows of @p width values at @p src into their buffers @p dst,
 * part k the @p w[k] values at @p off[k] of each row (the driver's copy, row by row).
 */
static void split_rows(const struct strata__replica *r, const float *src, int rows, int width,
                       int n, const int *off, const int *w, float *const *dst)
{
        for (int k = 0; k < n; k++)
                for (int i = 0; i < rows; i++)
                        r->k->copy(dst[k] + (size_t)i * w[k],
                                   src + (size_t)i * width + off[k], (size_t)w[k]);
}

/*
 * batch_to_device (see strata__replica_load): the data layer gives the rows where they lie or
 * gathers them into the host staging; the device's view of them is the rows themselves where
 * it reads host memory, else a copy into its staging.
 */
static void load(struct strata__replica *r, const struct strata_batch *b, int lo, int rows,
                 int with_labels)
{
        struct strata__replica_io *io = &r->io;
        const float *t = NULL;

        r->rows = rows;
        r->row0 = lo;
        r->x = r->drv->device_view(r->x_stage, strata__batch_inputs(b, lo, rows, r->x_host),
                                   sizeof(float) * (size_t)rows * b->dim);
        if (io->nin > 1)
                split_rows(r, r->x, rows, b->dim, io->nin, io->in_off, io->in_w, io->xin);
        r->targets = NULL;
        if (with_labels && r->float_row && b->t) {
                t = strata__batch_targets(b, lo, rows, r->y_host);
                r->targets = r->drv->device_view(r->y_stage, t,
                                                 sizeof(float) * (size_t)rows * b->tdim);
        } else if (with_labels && b->y) {
                r->targets = r->drv->device_view(r->y_stage, b->y + lo,
                                                 sizeof(int32_t) * (size_t)rows);
        }
        io->t[0] = r->targets;
        for (int k = 0; io->nout > 1 && k < io->nout; k++) {
                io->t[k] = NULL;
                if (!r->targets)
                        continue;
                if (!io->label[k]) { /* its columns of the rows */
                        split_rows(r, r->targets, rows, io->tdim, 1, &io->toff[k], &io->tw[k],
                                   &io->tout[k]);
                        io->t[k] = io->tout[k];
                        continue;
                }
                for (int i = 0; i < rows; i++) /* its class index, checked an integer */
                        io->lab_host[k][i] = (int32_t)t[(size_t)i * io->tdim + io->toff[k]];
                io->t[k] = r->drv->device_view(io->tout[k], io->lab_host[k],
                                               sizeof(int32_t) * (size_t)rows);
        }
}

void strata__replica_load(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows, int with_labels)
{
        uint64_t t0 = strata__track_begin(r->track, &span_load, NULL);

        load(r, b, lo, rows, with_labels);
        strata__track_end(r->track, t0, rows);
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
        cc.chunks = r->chunks;
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
        const struct strata_module *d = r->layers[i].desc;

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
        struct strata_layer *l = &r->layers[i];

        STRATA_TRY(strata__shard_fetch(r->shard, r, i, l->nparam));
        *t0 = strata__track_begin(r->track, span, l->desc->ops->name);
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
        struct strata_layer *l = &f->r->layers[k];
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
                struct strata_layer *l = &r->layers[k];
                struct strata_step_ctx cc;
                float *aux = fused_row(f, k, row, &cc);

                l->desc->ops->forward(l, &cc, row_at(r->y[k - 1], row, l->in, cc.x_type),
                                      row_at(r->y[k], row, l->out, cc.y_type), 1);
                l->aux = aux;
        }
}

/*
 * struct strata_row_hooks backward: the fused modules over row @p row in reverse order, from
 * the last one's output gradient through the two row buffers; the head's output gradient.
 */
static const float *fused_backward(const struct strata_row_hooks *h, int row)
{
        const struct fused *f = (const struct fused *)(const void *)h;
        struct strata__replica *r = f->r;
        const float *g = f->dy + (size_t)row * (size_t)r->layers[f->last].out;

        for (int k = f->last, b = 0; k > f->head; k--, b ^= 1) {
                struct strata_layer *l = &r->layers[k];
                struct strata_step_ctx cc;
                float *aux = fused_row(f, k, row, &cc);

                l->desc->ops->backward(l, &cc, row_at(r->y[k - 1], row, l->in, cc.x_type),
                                       row_at(r->y[k], row, l->out, cc.y_type), g,
                                       r->fuse_dx[b], 1);
                l->aux = aux;
                g = r->fuse_dx[b];
        }
        return g;
}

/* The last module that module @p i's loop over rows runs (itself when it runs none). */
static int fused_last(const struct strata__replica *r, int i)
{
        return r->fuse_last ? r->fuse_last[i] : i;
}

int strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c0)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        const float *x;

        strata__shard_release(r->shard); /* a step or a load may have changed the shards */
        for (int i = 0; i < r->nlayers; i++) {
                struct strata_layer *l = &r->layers[i];
                struct fused f = { { fused_forward, fused_backward }, r, c, i,
                                   fused_last(r, i), NULL };
                uint64_t t0;

                x = source(r, input_of(r, i));
                STRATA_TRY(layer_begin(r, &cc, i, &span_fwd, &t0));
                cc.fused = f.last > i ? &f.hooks : NULL;
                if (cc.chunks)
                        strata__chunks_forward(l, c, x, r->y[i], r->rows);
                else
                        l->desc->ops->forward(l, c, x, r->y[i], r->rows);
                cc.fused = NULL;
                strata__track_end(r->track, t0, i);
                if (l->failed != STRATA_OK)
                        return l->failed;
                i = f.last; /* the modules its loop ran */
        }
        return STRATA_OK;
}

void strata__replica_outputs_to_host(const struct strata__replica *r, float *dst)
{
        const struct strata__replica_io *io = &r->io;

        if (io->nout <= 1) { /* the last module's output */
                r->drv->to_host(dst, r->y[r->nlayers - 1],
                                sizeof(float) * (size_t)r->rows * (size_t)r->out);
                return;
        }
        for (int i = 0; i < r->rows; i++)
                for (int k = 0; k < io->nout; k++)
                        r->drv->to_host(dst + (size_t)i * r->out + io->ooff[k],
                                        r->y[io->mod[k]] + (size_t)i * io->w[k],
                                        sizeof(float) * (size_t)io->w[k]);
}

/* Invariant mode: the loss over the chunks, the device's sums its blocks' in order. */
static void loss_chunks(struct strata__replica *r, const struct strata_step_ctx *c,
                        const float *out, int grad)
{
        struct strata__chunks_loss cl = { .loss = r->loss, .out = out, .targets = r->targets,
                                          .width = r->out, .dout = grad ? r->dbuf[0] : NULL };

        strata__chunks_loss(r->chunks, c, &cl, 1);
        r->loss_sum = cl.sum;
        r->correct = cl.correct;
        r->sse = cl.sse;
        r->sae = cl.sae;
}

/*
 * The outputs' rows predicted right: each label output's (from @p cl), the first one's as the
 * model's.
 */
static void outputs_correct(struct strata__replica *r, const struct strata__chunks_loss *cl)
{
        const struct strata__replica_io *io = &r->io;

        r->correct = 0;
        for (int k = io->nout - 1; k >= 0; k--) {
                r->out_correct[k] = io->label[k] ? cl[k].correct : 0;
                if (io->label[k])
                        r->correct = cl[k].correct;
        }
}

/*
 * Several outputs: each output's loss with its weight, in the list's order: its gradient
 * scaled by the weight (the loss scale times it) into its buffer, each output's own loss and
 * (label outputs) rows predicted right, the weighted sum of the losses and the plain sums of
 * the errors over every float output. Invariant mode: per chunk, each block the outputs'
 * weighted sum in the same order, so the tree is as a single output's.
 */
static void loss_outputs(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata__replica_io *io = &r->io;
        struct strata__chunks_loss cl[STRATA_MAX_OUTPUTS];
        struct strata_step_ctx cc = *c;

        r->loss_sum = r->sse = r->sae = 0.0;
        for (int k = 0; k < io->nout; k++)
                cl[k] = (struct strata__chunks_loss){
                        .loss = io->loss[k], .out = r->y[io->mod[k]], .targets = io->t[k],
                        .width = io->w[k], .weight = io->weight[k],
                        .dout = !grad ? NULL : io->gout[k] ? io->gout[k] : r->dbuf[0] };
        if (r->chunks) {
                strata__chunks_loss(r->chunks, c, cl, io->nout);
                r->loss_sum = cl[0].sum;
                r->sse = cl[0].sse;
                r->sae = cl[0].sae;
                for (int k = 0; k < io->nout; k++)
                        r->out_loss[k] = cl[k].own;
                outputs_correct(r, cl);
                return;
        }
        for (int k = 0; k < io->nout; k++) {
                const float *out = cl[k].out;
                float *dout = cl[k].dout;

                cc.loss_scale = c->loss_scale * io->weight[k];
                r->out_loss[k] = io->loss[k]->forward(&cc, out, io->t[k], r->rows, io->w[k],
                                                      dout, io->label[k] ? &cl[k].correct
                                                                         : NULL);
                r->loss_sum += (double)io->weight[k] * r->out_loss[k];
                if (io->label[k])
                        continue;
                r->sse += r->k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, io->t[k], r->rows,
                                               io->w[k], 0.0f, NULL);
                r->sae += r->k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, io->t[k], r->rows,
                                               io->w[k], 0.0f, NULL);
        }
        outputs_correct(r, cl);
}

void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata_layer *last = &r->layers[r->nlayers - 1];
        uint64_t t0 = strata__track_begin(r->track, &span_loss, NULL);

        const float *out = r->y[r->nlayers - 1];

        if (r->io.nout) {
                loss_outputs(r, c, grad);
                strata__track_end(r->track, t0, r->rows);
                return;
        }
        if (r->chunks) {
                loss_chunks(r, c, out, grad);
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
        size_t n = (size_t)r->rows * (size_t)r->layers[i].out;
        int chain = i == r->nlayers - 1 || !r->layers[i + 1].desc->branch;

        for (int k = 0; k < r->io.nout; k++)
                if (r->io.mod[k] == i && r->io.gout[k])
                        part[1] = r->io.gout[k];
        for (int j = 0; j < 2; j++) {
                if (!part[j])
                        continue;
                if (chain)
                        r->k->add(g, part[j], n);
                else
                        r->k->copy(g, part[j], n);
                chain = 1;
        }
}

int strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c0,
                             strata__grad_ready_fn ready, void *h)
{
        struct strata_step_ctx cc = with_lp(r, c0), *c = &cc;
        int cur = 0, each = strata__shard_each(r->shard);

        for (int i = r->nlayers - 1; i >= 0; i--) {
                struct strata_layer *l = &r->layers[i];
                int src = input_of(r, i), head = r->fuse_head ? r->fuse_head[i] : -1;
                const float *x = source(r, src);
                float *dx = src < 0 ? NULL : dx_of(r, l, cur);
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
                /* the forward's last layer is still there: the fetch keeps it */
                STRATA_TRY(layer_begin(r, &cc, i, &span_bwd, &t0));
                if (each) /* this micro-batch's own gradients, in the layer buffer */
                        l->grad_fresh = 1;
                cc.fused = f.last > i ? &f.hooks : NULL;
                if (cc.chunks)
                        l->failed = strata__chunks_backward(l, c, x, r->y[i], r->dbuf[cur], dx,
                                                            r->rows);
                else
                        l->desc->ops->backward(l, c, x, r->y[i], r->dbuf[cur], dx, r->rows);
                cc.fused = NULL;
                strata__track_end(r->track, t0, i);
                l->grad_fresh = 0;
                if (l->failed != STRATA_OK)
                        return l->failed;
                if (l->desc->branch && dx && l->dskip_add) /* onto its source's gradient */
                        r->k->add(l->dskip, dx, (size_t)r->rows * (size_t)l->in);
                if (ready)
                        STRATA_TRY(ready(h, r, i));
                /* each: reduced by the hook, added into the window's sum */
                if (each)
                        strata__shard_accumulate(r->shard, r->grads, l->grad, r->poff[i],
                                                 l->nparam, first);
                cur ^= 1;
        }
        return STRATA_OK;
}

/* The reduced gradients the replica holds (its shard's under zero2 and fsdp). */
static size_t grads_held(const struct strata__replica *r)
{
        return strata__shard_grads_held(r->shard);
}

void strata__replica_clip_sumsq(struct strata__replica *r, float max_norm, float max_value,
                                double ss)
{
        uint64_t t0;

        if (!(max_norm > 0.0f) && !(max_value > 0.0f))
                return;
        t0 = strata__track_begin(r->track, &span_clip, NULL);
        if (max_norm > 0.0f) {
                /* PyTorch clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above. */
                float scale = (float)(max_norm / (sqrt(ss) + 1e-6));

                if (scale < 1.0f)
                        r->k->scale(r->grads, scale, grads_held(r));
        }
        if (max_value > 0.0f)
                r->k->clamp(r->grads, max_value, grads_held(r));
        strata__track_end(r->track, t0, 0);
}

void strata__replica_clip(struct strata__replica *r, float max_norm, float max_value)
{
        double ss = 0.0;

        if (max_norm > 0.0f) {
                const float *g = strata__shard_own_params(r->shard)
                                         ? strata__shard_layer_grads(r->shard) : r->grads;

                ss = r->k->sumsq(g, r->nparam);
        }
        strata__replica_clip_sumsq(r, max_norm, max_value, ss);
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

size_t strata__replica_param_offset(const struct strata__replica *r, int i)
{
        return r->poff[i];
}

void strata__replica_keep(struct strata__replica *r, int i)
{
        strata__shard_keep(r->shard, r->params, strata__shard_layer_buffer(r->shard), r->poff[i],
                           r->layers[i].nparam);
}

void strata__replica_keep_grads(struct strata__replica *r, int i)
{
        strata__shard_keep(r->shard, r->grads, r->layers[i].grad, r->poff[i],
                           r->layers[i].nparam);
}

void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world)
{
        strata__chunks_set(r->chunks, rows, chunks, g, world, &r->row0, &r->rows);
}

void strata__replica_step(struct strata__replica *r, const struct strata_optim *o)
{
        struct strata_update u;
        uint64_t t0 = strata__track_begin(r->track, &span_step, NULL);
        size_t at = strata__shard_at(r->shard, 0), gat = strata__shard_at(r->shard, 1);

        r->opt_t++;
        strata__optim_scalars(o, r->opt_t, &u);
        /* unsharded: shard_lo 0, shard_len nparam; sharded: padding updates zeros to zeros;
         * own_params: the vectors are the shard; own_grads: the gradients are */
        r->k->update(&u, r->params + at, r->grads + gat, r->opt_state,
                     strata__shard_len(r->shard));
        strata__track_end(r->track, t0, (int64_t)r->opt_t);
        for (int i = 0; i < r->nlayers; i++)
                r->layers[i].grad_fresh = 1;
}
