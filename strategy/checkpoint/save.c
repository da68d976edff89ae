/*
 * save_checkpoint: what a bitwise resume needs, through the runtime's CheckpointIO; and what
 * the checkpoint's other files share (checkpoint.h). The tensors are enumerated from the
 * parameter walk (strata_parameter), so this file knows no module: device 0's parameter groups
 * and running statistics, each trained group's optimizer slots, the other devices' running
 * statistics (ddp without SyncBatchNorm lets them differ), and every device's optimizer step
 * count; the header carries the global step, the model's fingerprint, the world size and
 * strategy, and the application's block. load.c reads the same tensors back; export.c writes
 * the parameter groups through the same writer.
 *
 * Saves happen between steps at an optimizer-step boundary (not inside an accumulation
 * window). A job whose optimizer state is sharded over several processes (zero1, zero2, fsdp)
 * saves together: every process calls it, each sends the pieces it holds (its shards, fsdp's
 * trained values among them, its devices' running statistics and step counts) to process 0
 * through the runtime's job (its planned buffer), and process 0 alone writes the consolidated
 * file, every device of the job in global order.
 */
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "strata/version.h"
#include "nn/checkpoint.h"
#include "strategy/job.h"
#include "strategy/checkpoint/checkpoint.h"

/* This process's replica of global device @p d, or -1 when another process holds it. */
static int local(const struct strata_runtime *rt, int d)
{
        int l = d - (strata__ckpt_across(rt) ? rt->rank0 : 0);

        return l >= 0 && l < rt->nreplicas ? l : -1;
}

static const char *const slot_names[2][2] = {
        { "momentum_buffer", NULL },  /* SGD */
        { "exp_avg", "exp_avg_sq" },  /* AdamW */
};

/*
 * Group @p g of device 0 (@p p) as a tensor: its values (@p slot -1) or its optimizer slot
 * @p slot, into @p t, which the caller has zeroed.
 */
static void group_tensor(const struct strata__replica *r0, const struct strata_param *p, int g,
                         int slot, struct strata__ckpt_tensor *t)
{
        if (slot < 0) {
                snprintf(t->name, sizeof(t->name), "%s", p->name);
                t->ptr = p->value;
                /* fsdp: trained values */
                t->sharded = strata__shard_own_params(strata__replica_shard(r0)) && p->grad;
        } else {
                snprintf(t->name, sizeof(t->name), "%.63s.%s", p->name,
                         slot_names[p->opt_slots - 1][slot]);
                t->ptr = p->opt_state[slot];
                t->sharded = strata__shard_count(strata__replica_shard(r0)) > 1;
        }
        t->group = g;
        t->slot = slot;
        t->dtype = STRATA_F32;
        /* the file's tensors are 1-D or 2-D: a Conv weight [out, in, k...] is [out, in * k...] */
        t->ndim = p->group.ndim > 2 ? 2 : (uint32_t)p->group.ndim;
        t->shape[0] = p->group.shape[0];
        t->shape[1] = p->group.shape[0] ? p->group.count / p->group.shape[0] : 1;
        t->bytes = p->group.count * sizeof(float);
}

void strata__ckpt_values(const struct strata_runtime *rt, int g, struct strata__ckpt_tensor *t)
{
        struct strata_param p;

        strata__replica_param(strata__rep(rt, 0), g, &p);
        memset(t, 0, sizeof(*t));
        group_tensor(strata__rep(rt, 0), &p, g, -1, t);
}

int strata__ckpt_tensor_at(struct strata_runtime *rt, int world, int i,
                           struct strata__ckpt_tensor *t)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        int ngroups = strata__replica_nparams(r0);
        struct strata_param p;

        memset(t, 0, sizeof(*t));
        for (int g = 0; g < ngroups; g++) {
                strata__replica_param(r0, g, &p);
                for (int s = -1; s < p.opt_slots; s++) /* the values, then each slot */
                        if (i-- == 0) {
                                group_tensor(r0, &p, g, s, t);
                                break;
                        }
                if (t->ptr || t->sharded) /* found, where this runtime holds it */
                        return STRATA_OK;
        }
        for (int d = 1; d < world; d++)
                for (int g = 0; g < ngroups; g++) {
                        int l = local(rt, d);

                        strata__replica_param(strata__rep(rt, l >= 0 ? l : 0), g, &p);
                        if (p.group.role != STRATA_ROLE_RUNNING || i-- != 0)
                                continue;
                        snprintf(t->name, sizeof(t->name), "replicas.%d.%.56s", d, p.name);
                        t->dtype = STRATA_F32;
                        t->ndim = 1;
                        t->shape[0] = p.group.count;
                        t->shape[1] = 1;
                        t->ptr = l >= 0 ? p.value : NULL;
                        t->bytes = p.group.count * sizeof(float);
                        t->dev = l;
                        t->owner = d;
                        return STRATA_OK;
                }
        if (i-- == 0) {
                snprintf(t->name, sizeof(t->name), "optimizer.steps");
                t->dtype = STRATA_I64;
                t->ndim = 1;
                t->shape[0] = (uint64_t)world;
                t->shape[1] = 1;
                t->bytes = sizeof(uint64_t) * (size_t)world;
                t->dev = -1;
                t->per_device = 1;
                return STRATA_OK;
        }
        return -1;
}

int strata__ckpt_count(struct strata_runtime *rt, int world)
{
        struct strata__ckpt_tensor t;
        int n = 0;

        while (strata__ckpt_tensor_at(rt, world, n, &t) == 0)
                n++;
        return n;
}

uint64_t strata__ckpt_fingerprint(const struct strata_runtime *rt)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        uint64_t h = 0xcbf29ce484222325ull;
        int dims[2] = { rt->cfg.model->in_features, rt->cfg.classes };
        struct strata_param p;

        h = strata__crc32((uint32_t)h, dims, sizeof(dims)) ^ (h << 32);
        for (int g = 0; g < strata__replica_nparams(r0); g++) {
                strata__replica_param(r0, g, &p);
                h = h * 0x100000001b3ull ^ strata__crc32(0, p.name, strlen(p.name));
                h = h * 0x100000001b3ull ^ strata__crc32(0, p.group.shape, sizeof(p.group.shape));
        }
        return h;
}

/* A host view of @p t's bytes (device memory goes through its replica's pinned image). */
static const void *host_bytes(struct strata_runtime *rt, const struct strata__ckpt_tensor *t)
{
        if (t->dev < 0 || !t->bytes)
                return t->ptr;
        return rt->dev->host_view(strata__replica_host_image(strata__rep(rt, t->dev)), t->ptr,
                                  t->bytes);
}

/* Elements [*lo, *hi) of group @p p that shard @p k holds (empty: *lo == *hi). */
static void shard_part(const struct strata__replica *r, const struct strata_param *p, int k,
                       size_t *lo, size_t *hi)
{
        size_t len = strata__shard_len(strata__replica_shard(r)), a = (size_t)k * len, b = a + len;

        *lo = a > p->offset ? a - p->offset : 0;
        *hi = b > p->offset ? b - p->offset : 0;
        *hi = *hi < p->group.count ? *hi : p->group.count;
        *lo = *lo < *hi ? *lo : *hi;
}

int strata__ckpt_piece(struct strata_runtime *rt, const struct strata__ckpt_tensor *t, int k,
                       struct strata__ckpt_tensor *out, size_t *at)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        int l = local(rt, k);
        struct strata_param p;
        size_t lo, hi;

        *out = *t;
        *at = 0;
        if (t->per_device) {
                out->ptr = l >= 0 ? &rt->ckpt_steps[l] : NULL;
                out->bytes = sizeof(uint64_t);
                out->owner = k;
                *at = (size_t)k * sizeof(uint64_t);
                return (uint64_t)k < t->shape[0];
        }
        if (!t->sharded)
                return k == 0;
        if (k >= strata__shard_count(strata__replica_shard(r0)))
                return 0;
        strata__replica_param(strata__rep(rt, l >= 0 ? l : 0), t->group, &p);
        shard_part(r0, &p, k, &lo, &hi);
        out->ptr = l < 0 ? NULL : t->slot < 0 ? p.value : p.opt_state[t->slot];
        out->bytes = (hi - lo) * sizeof(float);
        out->dev = l;
        out->owner = k;
        *at = lo * sizeof(float);
        return 1;
}

void strata__ckpt_take(void *arg, const void *p, size_t n)
{
        struct strata__ckpt_sink *s = arg;

        s->crc = strata__crc32(s->crc, p, n);
        if (s->io && s->rc == STRATA_OK && n)
                s->rc = s->io->write(s->h, p, n);
}

int strata__ckpt_stream(struct strata_runtime *rt, const struct strata__ckpt_tensor *t,
                        struct strata__ckpt_sink *s)
{
        struct strata__ckpt_tensor pc;
        size_t at;

        for (int k = 0; strata__ckpt_piece(rt, t, k, &pc, &at); k++) {
                if (!pc.bytes)
                        continue;
                if (!strata__ckpt_across(rt))
                        strata__ckpt_take(s, host_bytes(rt, &pc), pc.bytes);
                else
                        STRATA_TRY(rt->job->to_zero(rt, pc.owner / rt->nreplicas, pc.ptr,
                                                    pc.bytes, strata__ckpt_take, s));
        }
        return STRATA_OK;
}

const struct strata_checkpoint_io *strata__ckpt_io(struct strata_runtime *rt,
                                                   struct strata_ckpt_handle **h)
{
        *h = &rt->ckpt;
        memset(*h, 0, sizeof(**h));
        (*h)->fd = -1;
        return rt->cfg.checkpoint.io ? rt->cfg.checkpoint.io : strata_checkpoint_file_io();
}

int strata__ckpt_between_steps(const struct strata_runtime *rt, const char *what,
                               const char *path)
{
        int s;

        STRATA_TRY(strata__check_rt(rt));
        s = strata__sm_state(&rt->sm);
        if (!path || !*path)
                return strata__fail(STRATA_EINVAL, "%s: path is NULL or empty", what);
        if (s != STRATA_STATE_READY)
                return strata__fail(STRATA_EBADSTATE, "%s: runtime is %s, not READY", what,
                                    strata_state_name(s));
        if (rt->micro != 0)
                return strata__fail(STRATA_EBADSTATE, "%s: inside an accumulation window "
                                    "(micro-batch %d of %d); checkpoint at an optimizer step",
                                    what, rt->micro, rt->cfg.train.accumulate);
        strata__dev_opt_whole(rt); /* the state is written and read whole, from device 0's */
        return STRATA_OK;
}

#define DATA_ALIGN 64

/*
 * The model's loss and its modules' kinds into @p hd (as many whole names as fit), which a
 * load compares with its own: an activation, a Dropout or a BatchNorm more or less is named.
 */
static void model_kinds(const struct strata_model *m, struct strata__ckpt_header *hd)
{
        size_t at = 0;

        snprintf(hd->loss, sizeof(hd->loss), "%s", strata__loss_of(m)->name);
        hd->nmodules = (uint32_t)m->nmodules;
        for (int i = 0; i < m->nmodules; i++) {
                const char *name = m->modules[i].ops->name ? m->modules[i].ops->name : "?";
                size_t n = strlen(name) + (at > 0);

                if (at + n >= sizeof(hd->modules))
                        break;
                snprintf(hd->modules + at, sizeof(hd->modules) - at, "%s%s", at ? " " : "",
                         name);
                at += n;
        }
}

static void fill_header(struct strata_runtime *rt, struct strata__ckpt_header *hd, int n,
                        const void *app, size_t app_bytes)
{
        hd->version = STRATA_CKPT_VERSION;
        hd->byte_order = STRATA__CKPT_BOM;
        hd->header_bytes = sizeof(*hd);
        hd->entry_bytes = sizeof(struct strata__ckpt_entry);
        hd->ntensors = (uint32_t)n;
        hd->world = (uint32_t)strata__ckpt_world(rt);
        hd->strategy = (uint32_t)rt->cfg.strategy.kind;
        hd->chunks = (uint32_t)strata__invariant_chunks(&rt->cfg);
        hd->lib_version = STRATA_VERSION_HEX;
        hd->step = rt->step;
        hd->fingerprint = strata__ckpt_fingerprint(rt);
        hd->precision = (uint32_t)rt->cfg.precision.kind;
        hd->loss_scale = rt->scaler.scale;
        hd->scale_growth = rt->scaler.growth;
        hd->scale_skipped = rt->scaler.skipped;
        hd->app_bytes = (uint32_t)app_bytes;
        if (app_bytes)
                memcpy(hd->app, app, app_bytes);
        model_kinds(rt->cfg.model, hd);
        hd->crc = strata__crc32_header(hd);
}

/*
 * The header, the table (each tensor's checksum streamed first) and the data into @p s (on a
 * process other than 0 of a save across processes: nothing, but every transfer).
 */
static int write_all(struct strata_runtime *rt, struct strata__ckpt_sink *s, const void *app,
                     size_t app_bytes)
{
        struct strata__ckpt_header hd = { .magic = STRATA__CKPT_MAGIC };
        static const unsigned char zero[DATA_ALIGN];
        int n = strata__ckpt_count(rt, strata__ckpt_world(rt));
        struct strata__ckpt_sink sum = { 0 };
        uint64_t off;
        struct strata__ckpt_tensor t;

        fill_header(rt, &hd, n, app, app_bytes);
        strata__ckpt_take(s, &hd, sizeof(hd));
        off = STRATA__ALIGN_UP(strata__ckpt_entry_at((uint64_t)n), DATA_ALIGN);
        for (int i = 0; i < n; i++) {
                struct strata__ckpt_entry e = { 0 };

                strata__ckpt_tensor_at(rt, strata__ckpt_world(rt), i, &t);
                memcpy(e.name, t.name, sizeof(e.name));
                e.dtype = t.dtype;
                e.ndim = t.ndim;
                memcpy(e.shape, t.shape, sizeof(e.shape));
                e.offset = off;
                e.bytes = t.bytes;
                sum.crc = 0;
                STRATA_TRY(strata__ckpt_stream(rt, &t, &sum));
                e.crc = sum.crc;
                strata__ckpt_take(s, &e, sizeof(e));
                off = STRATA__ALIGN_UP(off + t.bytes, DATA_ALIGN);
        }
        off = strata__ckpt_entry_at((uint64_t)n);
        for (int i = 0; i < n; i++) {
                size_t pad = STRATA__ALIGN_UP(off, DATA_ALIGN) - off;

                strata__ckpt_tensor_at(rt, strata__ckpt_world(rt), i, &t);
                strata__ckpt_take(s, zero, pad);
                STRATA_TRY(strata__ckpt_stream(rt, &t, s));
                off += pad + t.bytes;
        }
        return STRATA_OK;
}

static int checkpoint_fill(struct strata_runtime *rt, struct strata__ckpt_sink *s,
                           const struct strata__ckpt_content *c)
{
        return write_all(rt, s, c->app, c->app_bytes);
}

int strata__ckpt_written(struct strata_runtime *rt, const char *path,
                         const struct strata__ckpt_content *c, int together)
{
        struct strata__ckpt_sink s = { 0 };
        const struct strata_checkpoint_io *io = strata__ckpt_io(rt, &s.h);
        int writer = !strata__ckpt_across(rt) || rt->rank0 == 0, rc;

        if (writer) {
                s.rc = io->create(io->ctx, path, s.h);
                if (s.rc != STRATA_OK && !together)
                        return s.rc;
                s.io = s.rc == STRATA_OK ? io : NULL;
        }
        rc = c->fill(rt, &s, c);
        if (rc == STRATA_OK)
                rc = s.rc;
        if (s.io && rc != STRATA_OK)
                io->abort(s.h);
        else if (s.io)
                rc = io->commit(s.h);
        if (!together || rc == STRATA_ETIMEDOUT || rc == STRATA_EABORTED)
                return rc; /* a transfer failed: the job is failing already */
        STRATA_TRY(rt->job->agree(rt, &rc));
        if (rc != STRATA_OK && !writer)
                return strata__fail(rc, "%s: process 0 could not write '%s' (%s)", c->what,
                                    path, strata_status_name(rc));
        return rc;
}

int strata_save_checkpoint(struct strata_runtime *rt, const char *path, const void *app,
                           size_t app_bytes)
{
        const struct strata__ckpt_content c = { checkpoint_fill, "save_checkpoint", app,
                                                app_bytes };

        STRATA_TRY(strata__ckpt_between_steps(rt, "save_checkpoint", path));
        STRATA_TRY(strata__training_only(rt, "save_checkpoint"));
        if (app_bytes > STRATA_CKPT_APP_BYTES || (app_bytes && !app))
                return strata__fail(STRATA_EINVAL, "save_checkpoint: application block of %zu "
                                    "bytes (at most %d, non-NULL)", app_bytes,
                                    STRATA_CKPT_APP_BYTES);
        for (int d = 0; d < rt->nreplicas; d++)
                rt->ckpt_steps[d] = strata__replica_steps(strata__rep(rt, d));
        return strata__ckpt_written(rt, path, &c, strata__ckpt_across(rt));
}
