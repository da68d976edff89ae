/*
 * save_checkpoint / load_checkpoint: what a bitwise resume needs, through the runtime's
 * CheckpointIO. The tensors are enumerated from the parameter walk (strata_parameter), so this
 * file knows no module: device 0's parameter groups and running statistics, each trained
 * group's optimizer slots, the other devices' running statistics (ddp without SyncBatchNorm
 * lets them differ), and every device's optimizer step count; the header carries the global
 * step, the model's fingerprint, the world size and strategy, and the application's block.
 *
 * Saves happen between steps at an optimizer-step boundary (not inside an accumulation
 * window). A job whose optimizer state is sharded over several processes (zero1, zero2, fsdp)
 * saves together: every process calls it, each sends the pieces it holds (its shards, fsdp's
 * trained values among them, its devices' running statistics and step counts) to process 0
 * through the process layer's planned buffer, and process 0 alone writes the consolidated
 * file, every device of the job in global order; every process loads its own pieces from that
 * file. fsdp's export across processes is written so too. A load checks the header, every
 * table entry against this runtime's tensors and every tensor's checksum before it writes any
 * live state.
 */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "strata/version.h"
#include "nn/checkpoint.h"
#include "strategy/multi.h"

/* One tensor of the checkpoint, where it lives in this runtime. */
struct tensor {
        char name[STRATA__CKPT_NAME];
        uint32_t dtype, ndim;
        uint64_t shape[2];
        void *ptr;          /* device memory of replica dev, or host memory (dev < 0) */
        size_t bytes;
        int dev;
        int owner;          /* the global device that holds it (its process sends it) */
        int group, slot;    /* its group, the optimizer slot (-1: the values); sharded: its
                             * owners hold it */
        int sharded;
        int per_device;     /* one piece per device of shape[0] (the step counts) */
};

/* A save of every process of a job whose optimizer state is sharded over them (see above). */
static int across(const struct strata_runtime *rt)
{
        return rt->strategy->sharded && rt->world > rt->nreplicas;
}

/* The devices a checkpoint of this runtime holds: the job's when it saves across processes. */
static int ckpt_world(const struct strata_runtime *rt)
{
        return across(rt) ? rt->world : rt->nreplicas;
}

/* This process's replica of global device @p d, or -1 when another process holds it. */
static int local(const struct strata_runtime *rt, int d)
{
        int l = d - (across(rt) ? rt->rank0 : 0);

        return l >= 0 && l < rt->nreplicas ? l : -1;
}

static const char *const slot_names[2][2] = {
        { "momentum_buffer", NULL },  /* SGD */
        { "exp_avg", "exp_avg_sq" },  /* AdamW */
};

/*
 * Tensor @p i of a checkpoint of this model saved on @p world devices; -1 past the last. Its
 * pointer is where it lives in this runtime, or NULL for a device this runtime lacks.
 */
static int tensor_at(struct strata_runtime *rt, int world, int i, struct tensor *t)
{
        const struct strata__replica *r0 = &rt->replicas[0];
        int ngroups = strata__replica_nparams(r0);
        struct strata_param p;

        memset(t, 0, sizeof(*t));
        for (int g = 0; g < ngroups; g++) {
                strata__replica_param(r0, g, &p);
                if (i-- == 0) {
                        snprintf(t->name, sizeof(t->name), "%s", p.name);
                        t->ptr = p.value;
                        t->group = g;
                        t->slot = -1;
                        /* fsdp: trained values */
                        t->sharded = strata__shard_own_params(r0->shard) && p.grad;
                        break;
                }
                for (int s = 0; s < p.opt_slots; s++)
                        if (i-- == 0) {
                                snprintf(t->name, sizeof(t->name), "%.63s.%s", p.name,
                                         slot_names[p.opt_slots - 1][s]);
                                t->ptr = p.opt_state[s];
                                t->group = g;
                                t->slot = s;
                                t->sharded = strata__shard_count(r0->shard) > 1;
                                break;
                        }
                if (t->ptr || t->sharded)
                        break;
        }
        if (t->ptr || t->sharded) {
                t->dtype = STRATA_F32;
                t->ndim = (uint32_t)p.group.ndim;
                t->shape[0] = p.group.shape[0];
                t->shape[1] = p.group.ndim == 2 ? p.group.shape[1] : 1;
                t->bytes = p.group.count * sizeof(float);
                return STRATA_OK;
        }
        for (int d = 1; d < world; d++)
                for (int g = 0; g < ngroups; g++) {
                        int l = local(rt, d);

                        strata__replica_param(&rt->replicas[l >= 0 ? l : 0], g, &p);
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

static int count_tensors(struct strata_runtime *rt, int world)
{
        struct tensor t;
        int n = 0;

        while (tensor_at(rt, world, n, &t) == 0)
                n++;
        return n;
}

/* The model's identity: input width, classes, every group's name and shape. */
static uint64_t fingerprint(const struct strata_runtime *rt)
{
        const struct strata__replica *r0 = &rt->replicas[0];
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
static const void *host_bytes(struct strata_runtime *rt, const struct tensor *t)
{
        if (t->dev < 0 || !t->bytes)
                return t->ptr;
        return rt->dev->host_view(rt->replicas[t->dev].p_host, t->ptr, t->bytes);
}

/* Elements [*lo, *hi) of group @p p that shard @p k holds (empty: *lo == *hi). */
static void shard_part(const struct strata__replica *r, const struct strata_param *p, int k,
                       size_t *lo, size_t *hi)
{
        size_t a = (size_t)k * strata__shard_len(r->shard), b = a + strata__shard_len(r->shard);

        *lo = a > p->offset ? a - p->offset : 0;
        *hi = b > p->offset ? b - p->offset : 0;
        *hi = *hi < p->group.count ? *hi : p->group.count;
        *lo = *lo < *hi ? *lo : *hi;
}

/*
 * Piece @p k of tensor @p t: where it lives (ptr NULL: in another process, owner's), its
 * bytes, and where they start in the tensor. A sharded optimizer slot is in pieces, device
 * k's the part of the group in its shard (devices in order: the shards side by side are the
 * whole tensor, consolidated); the step counts one per device; any other tensor is one piece.
 * 1 for a piece (possibly empty), 0 past the last.
 */
static int piece(struct strata_runtime *rt, const struct tensor *t, int k,
                 struct tensor *out, size_t *at)
{
        const struct strata__replica *r0 = &rt->replicas[0];
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
        if (k >= strata__shard_count(r0->shard))
                return 0;
        strata__replica_param(&rt->replicas[l >= 0 ? l : 0], t->group, &p);
        shard_part(r0, &p, k, &lo, &hi);
        out->ptr = l < 0 ? NULL : t->slot < 0 ? p.value : p.opt_state[t->slot];
        out->bytes = (hi - lo) * sizeof(float);
        out->dev = l;
        out->owner = k;
        *at = lo * sizeof(float);
        return 1;
}

/*
 * Where a save's bytes go on the writing process: a checksum, and the file when @c io is set.
 * The first write error is kept and later writes are skipped, so a save across processes
 * still takes part in every transfer and all end together.
 */
struct sink {
        const struct strata_checkpoint_io *io;
        struct strata_ckpt_handle *h;
        uint32_t crc;
        int rc;
};

static void take(void *arg, const void *p, size_t n)
{
        struct sink *s = arg;

        s->crc = strata__crc32(s->crc, p, n);
        if (s->io && s->rc == STRATA_OK && n)
                s->rc = s->io->write(s->h, p, n);
}

/*
 * Tensor @p t's bytes in order, piece by piece, into @p s. Across processes every process
 * takes part (each piece comes from its owner's process) and only process 0's sink is fed.
 */
static int stream(struct strata_runtime *rt, const struct tensor *t, struct sink *s)
{
        struct tensor pc;
        size_t at;

        for (int k = 0; piece(rt, t, k, &pc, &at); k++) {
                if (!pc.bytes)
                        continue;
                if (!across(rt))
                        take(s, host_bytes(rt, &pc), pc.bytes);
                else
                        STRATA_TRY(strata__procs_to_zero(rt, pc.owner / rt->nreplicas,
                                                         pc.ptr, pc.bytes, take, s));
        }
        return STRATA_OK;
}

static const struct strata_checkpoint_io *io_of(const struct strata_runtime *rt)
{
        return rt->cfg.checkpoint.io ? rt->cfg.checkpoint.io : strata_checkpoint_file_io();
}

static int between_steps(const struct strata_runtime *rt, const char *what, const char *path)
{
        int s = strata__sm_state(&rt->sm);

        if (!path || !*path)
                return strata__fail(STRATA_EINVAL, "%s: path is NULL or empty", what);
        if (s != STRATA_STATE_READY)
                return strata__fail(STRATA_EBADSTATE, "%s: runtime is %s, not READY", what,
                                    strata_state_name(s));
        if (rt->micro != 0)
                return strata__fail(STRATA_EBADSTATE, "%s: inside an accumulation window "
                                    "(micro-batch %d of %d); checkpoint at an optimizer step",
                                    what, rt->micro, rt->cfg.train.accumulate);
        return STRATA_OK;
}

#define DATA_ALIGN 64

static void fill_header(struct strata_runtime *rt, struct strata__ckpt_header *hd, int n,
                        const void *app, size_t app_bytes)
{
        hd->version = STRATA_CKPT_VERSION;
        hd->byte_order = STRATA__CKPT_BOM;
        hd->header_bytes = sizeof(*hd);
        hd->entry_bytes = sizeof(struct strata__ckpt_entry);
        hd->ntensors = (uint32_t)n;
        hd->world = (uint32_t)ckpt_world(rt);
        hd->strategy = (uint32_t)rt->cfg.strategy.kind;
        hd->chunks = (uint32_t)strata__chunks(&rt->cfg);
        hd->lib_version = STRATA_VERSION_HEX;
        hd->step = rt->step;
        hd->fingerprint = fingerprint(rt);
        hd->precision = (uint32_t)rt->cfg.precision.kind;
        hd->loss_scale = rt->scaler.scale;
        hd->scale_growth = rt->scaler.growth;
        hd->scale_skipped = rt->scaler.skipped;
        hd->app_bytes = (uint32_t)app_bytes;
        if (app_bytes)
                memcpy(hd->app, app, app_bytes);
        hd->crc = strata__ckpt_header_crc(hd);
}

/*
 * The header, the table (each tensor's checksum streamed first) and the data into @p s (on a
 * process other than 0 of a save across processes: nothing, but every transfer).
 */
static int write_all(struct strata_runtime *rt, struct sink *s, const void *app,
                     size_t app_bytes)
{
        struct strata__ckpt_header hd = { .magic = STRATA__CKPT_MAGIC };
        static const unsigned char zero[DATA_ALIGN];
        int n = count_tensors(rt, ckpt_world(rt));
        struct sink sum = { 0 };
        uint64_t off;
        struct tensor t;

        fill_header(rt, &hd, n, app, app_bytes);
        take(s, &hd, sizeof(hd));
        off = STRATA__ALIGN_UP(sizeof(hd) + (uint64_t)n * sizeof(struct strata__ckpt_entry),
                               DATA_ALIGN);
        for (int i = 0; i < n; i++) {
                struct strata__ckpt_entry e = { 0 };

                tensor_at(rt, ckpt_world(rt), i, &t);
                memcpy(e.name, t.name, sizeof(e.name));
                e.dtype = t.dtype;
                e.ndim = t.ndim;
                memcpy(e.shape, t.shape, sizeof(e.shape));
                e.offset = off;
                e.bytes = t.bytes;
                sum.crc = 0;
                STRATA_TRY(stream(rt, &t, &sum));
                e.crc = sum.crc;
                take(s, &e, sizeof(e));
                off = STRATA__ALIGN_UP(off + t.bytes, DATA_ALIGN);
        }
        off = sizeof(hd) + (uint64_t)n * sizeof(struct strata__ckpt_entry);
        for (int i = 0; i < n; i++) {
                size_t pad = STRATA__ALIGN_UP(off, DATA_ALIGN) - off;

                tensor_at(rt, ckpt_world(rt), i, &t);
                take(s, zero, pad);
                STRATA_TRY(stream(rt, &t, s));
                off += pad + t.bytes;
        }
        return STRATA_OK;
}

/* A file's bytes in order into a sink: the checkpoint's (its application block) or the export's. */
struct content {
        int (*fill)(struct strata_runtime *rt, struct sink *s, const struct content *c);
        const char *what;       /* the API call, for messages */
        const void *app;
        size_t app_bytes;
};

static int checkpoint_fill(struct strata_runtime *rt, struct sink *s, const struct content *c)
{
        return write_all(rt, s, c->app, c->app_bytes);
}

/*
 * Write @p path on this process (process 0 of a job that saves across processes; the others
 * only send their pieces), commit or abort it; @p together: every process of the job calls
 * this, and all agree on the outcome.
 */
static int written(struct strata_runtime *rt, const char *path, const struct content *c,
                   int together)
{
        const struct strata_checkpoint_io *io = io_of(rt);
        struct sink s = { .h = &rt->ckpt };
        int writer = !across(rt) || rt->rank0 == 0, rc;

        memset(s.h, 0, sizeof(*s.h));
        s.h->fd = -1;
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
        STRATA_TRY(strata__procs_agree(rt, &rc));
        if (rc != STRATA_OK && !writer)
                return strata__fail(rc, "%s: process 0 could not write '%s' (%s)", c->what,
                                    path, strata_status_name(rc));
        return rc;
}

int strata_save_checkpoint(struct strata_runtime *rt, const char *path, const void *app,
                           size_t app_bytes)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(between_steps(rt, "save_checkpoint", path));
        if (app_bytes > STRATA_CKPT_APP_BYTES || (app_bytes && !app))
                return strata__fail(STRATA_EINVAL, "save_checkpoint: application block of %zu "
                                    "bytes (at most %d, non-NULL)", app_bytes,
                                    STRATA_CKPT_APP_BYTES);
        for (int d = 0; d < rt->nreplicas; d++)
                rt->ckpt_steps[d] = rt->replicas[d].opt_t;
        return written(rt, path,
                       &(struct content){ checkpoint_fill, "save_checkpoint", app, app_bytes },
                       across(rt));
}

/*
 * Naming what differs when a checkpoint holds another model or optimizer: the file's tensor
 * table against this runtime's tensors, entry by entry (read one at a time, nothing kept).
 */

/* The optimizer state a tensor's name says: 1 momentum_buffer, 2 exp_avg(_sq), 0 none. */
static int slot_kind(const char *name)
{
        const char *dot = strrchr(name, '.');

        if (!dot)
                return 0;
        if (!strcmp(dot + 1, "momentum_buffer"))
                return 1;
        return !strncmp(dot + 1, "exp_avg", 7) ? 2 : 0;
}

/* A parameter or buffer group of device 0 (not optimizer state, another device's, steps). */
static int is_group(const char *name)
{
        return !slot_kind(name) && strncmp(name, "replicas.", 9) != 0 &&
               strcmp(name, "optimizer.steps") != 0;
}

/* What one side (the file, or this runtime) holds. */
struct side {
        int slots;              /* the optimizer's state: slot_kind()'s largest */
        char bn[64];            /* its first BatchNorm running mean ("": none) */
        char group[80];         /* its @c k-th group: name and shape ("" past the last) */
};

static void side_add(struct side *s, const char *name, uint32_t ndim, const uint64_t *shape,
                     int *k)
{
        int kind = slot_kind(name);

        s->slots = kind > s->slots ? kind : s->slots;
        if (!s->bn[0] && strstr(name, "running_mean"))
                snprintf(s->bn, sizeof(s->bn), "%.56s", name);
        if (!is_group(name) || (*k)-- != 0)
                return;
        if (ndim == 2)
                snprintf(s->group, sizeof(s->group), "%.56s (%llu x %llu)", name,
                         (unsigned long long)shape[0], (unsigned long long)shape[1]);
        else
                snprintf(s->group, sizeof(s->group), "%.56s (%llu)", name,
                         (unsigned long long)shape[0]);
}

/* Both sides, with group @p k of each; -1 when the file's table cannot be read. */
static int sides(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                 struct strata_ckpt_handle *h, const struct strata__ckpt_header *hd,
                 uint64_t size, int k, struct side *f, struct side *r)
{
        struct strata__ckpt_entry e;
        struct tensor t;
        int kf = k, kr = k;

        memset(f, 0, sizeof(*f));
        memset(r, 0, sizeof(*r));
        if (size < sizeof(*hd) + (uint64_t)hd->ntensors * sizeof(e))
                return -1;
        for (uint32_t i = 0; i < hd->ntensors; i++) {
                if (io->read_at(h, &e, sizeof(e), sizeof(*hd) + (uint64_t)i * sizeof(e)))
                        return -1;
                e.name[sizeof(e.name) - 1] = '\0';
                side_add(f, e.name, e.ndim, e.shape, &kf);
        }
        for (int i = 0; tensor_at(rt, (int)hd->world, i, &t) == 0; i++)
                side_add(r, t.name, t.ndim, t.shape, &kr);
        return 0;
}

static const char *const optim_said[3] = {
        "sgd without momentum (no state)", "sgd with momentum (momentum_buffer)",
        "adamw (exp_avg, exp_avg_sq)",
};

/* The first difference of model or optimizer, as a status and a message naming it. */
static int name_difference(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                           struct strata_ckpt_handle *h, const struct strata__ckpt_header *hd,
                           uint64_t size, const char *path)
{
        struct side f, r;

        if (sides(rt, io, h, hd, size, 0, &f, &r))
                return strata__fail(STRATA_EFORMAT, "'%s' is truncated in its tensor table",
                                    path);
        if (!f.bn[0] != !r.bn[0])
                return strata__fail(STRATA_EINVAL, "'%s' holds another model: BatchNorm is %s "
                                    "in the checkpoint, %s in this model", path,
                                    f.bn[0] ? f.bn : "absent", r.bn[0] ? r.bn : "absent");
        for (int k = 0; hd->fingerprint != fingerprint(rt) && (f.group[0] || r.group[0]); k++) {
                sides(rt, io, h, hd, size, k, &f, &r);
                if (strcmp(f.group, r.group) != 0)
                        return strata__fail(STRATA_EINVAL, "'%s' holds another model: parameter "
                                            "group %d is %s in the checkpoint, %s in this model "
                                            "(module index and width in its name and shape)",
                                            path, k, f.group[0] ? f.group : "absent",
                                            r.group[0] ? r.group : "absent");
        }
        if (f.slots != r.slots)
                return strata__fail(STRATA_EINVAL, "'%s' holds another optimizer's state: %s "
                                    "in the checkpoint, %s in this run", path,
                                    optim_said[f.slots], optim_said[r.slots]);
        return strata__fail(STRATA_EINVAL, "'%s' holds another model (widths, modules or "
                            "parameter groups differ)", path);
}

/* The header is a Strata checkpoint's of this format, intact. */
static int check_header(const struct strata__ckpt_header *hd, const char *path)
{
        if (memcmp(hd->magic, STRATA__CKPT_MAGIC, sizeof(hd->magic)) != 0)
                return strata__fail(STRATA_EFORMAT, "'%s' is not a Strata checkpoint", path);
        if (hd->byte_order != STRATA__CKPT_BOM)
                return strata__fail(STRATA_EFORMAT, "'%s' was written with another byte order",
                                    path);
        if (hd->version != STRATA_CKPT_VERSION || hd->header_bytes != sizeof(*hd) ||
            hd->entry_bytes != sizeof(struct strata__ckpt_entry))
                return strata__fail(STRATA_EFORMAT, "'%s': format version %u, this library "
                                    "reads %d", path, hd->version, STRATA_CKPT_VERSION);
        if (hd->crc != strata__ckpt_header_crc(hd))
                return strata__fail(STRATA_EFORMAT, "'%s': header checksum mismatch (corrupt)",
                                    path);
        if (hd->world < 1 || hd->world > STRATA_MAX_DEVICES * STRATA_MAX_PROCESSES ||
            !strata__strategy_get((enum strata_strategy_kind)hd->strategy))
                return strata__fail(STRATA_EFORMAT, "'%s': world size %u or strategy %u invalid",
                                    path, hd->world, hd->strategy);
        if (hd->app_bytes > STRATA_CKPT_APP_BYTES)
                return strata__fail(STRATA_EFORMAT, "'%s': application block of %u bytes",
                                    path, hd->app_bytes);
        return STRATA_OK;
}

/* The file holds this runtime's model and optimizer (the same fingerprint and tensors). */
static int same_model(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                      struct strata_ckpt_handle *h, const struct strata__ckpt_header *hd,
                      uint64_t size, const char *path)
{
        if (hd->fingerprint == fingerprint(rt) &&
            hd->ntensors == (uint32_t)count_tensors(rt, (int)hd->world))
                return STRATA_OK;
        return name_difference(rt, io, h, hd, size, path);
}

/* Entry @p i matches this runtime's tensor @p t and lies inside the file. */
static int check_entry(const struct strata__ckpt_entry *e, const struct tensor *t,
                       uint64_t size, uint64_t after, const char *path)
{
        if (strncmp(e->name, t->name, sizeof(e->name)) != 0 || e->dtype != t->dtype ||
            e->ndim != t->ndim || e->shape[0] != t->shape[0] || e->shape[1] != t->shape[1] ||
            e->bytes != t->bytes)
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%.79s' where '%s' of %zu "
                                    "bytes was expected", path, e->name, t->name, t->bytes);
        if (e->offset < after || e->offset > size || e->bytes > size - e->offset)
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' lies outside the file "
                                    "(truncated?)", path, t->name);
        return STRATA_OK;
}

/* Pass 1: every table entry and every tensor's checksum; nothing live is touched. */
static int validate(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                    struct strata_ckpt_handle *h, uint64_t size,
                    struct strata__ckpt_header *hd, const char *path)
{
        unsigned char buf[16384];
        uint64_t after;
        int n;

        if (size < sizeof(*hd))
                return strata__fail(STRATA_EFORMAT, "'%s' is truncated (%llu bytes)", path,
                                    (unsigned long long)size);
        STRATA_TRY(io->read_at(h, hd, sizeof(*hd), 0));
        STRATA_TRY(check_header(hd, path));
        STRATA_TRY(same_model(rt, io, h, hd, size, path));
        n = (int)hd->ntensors;
        after = sizeof(*hd) + (uint64_t)n * sizeof(struct strata__ckpt_entry);
        for (int i = 0; i < n; i++) {
                struct strata__ckpt_entry e;
                struct tensor t;
                uint32_t crc = 0;

                STRATA_TRY(io->read_at(h, &e, sizeof(e), sizeof(*hd) + (uint64_t)i * sizeof(e)));
                tensor_at(rt, (int)hd->world, i, &t);
                STRATA_TRY(check_entry(&e, &t, size, after, path));
                for (uint64_t o = 0; o < e.bytes; o += sizeof(buf)) {
                        size_t k = e.bytes - o < sizeof(buf) ? (size_t)(e.bytes - o) : sizeof(buf);

                        STRATA_TRY(io->read_at(h, buf, k, e.offset + o));
                        crc = strata__crc32(crc, buf, k);
                }
                if (crc != e.crc)
                        return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' checksum "
                                            "mismatch (corrupt)", path, t.name);
                after = e.offset + e.bytes;
        }
        return STRATA_OK;
}

/* Tensor piece @p t from file offset @p off into live state. */
static int restore_piece(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                         struct strata_ckpt_handle *h, const struct tensor *t, uint64_t off)
{
        void *dst;

        if (!t->ptr || !t->bytes)
                return STRATA_OK;
        /* device memory is read into its replica's host staging, then copied */
        dst = t->dev < 0 || !rt->replicas[t->dev].p_host ? t->ptr : rt->replicas[t->dev].p_host;
        STRATA_TRY(io->read_at(h, dst, t->bytes, off));
        if (dst != t->ptr)
                rt->dev->to_device(t->ptr, dst, t->bytes);
        return STRATA_OK;
}

/*
 * Pass 2: the validated tensors into live state (those of devices this process lacks
 * skipped; a sharded optimizer slot's parts to their owners, whatever the saving run's
 * devices); *steps0 gets the saving run's device 0's step count.
 */
static int restore(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                   struct strata_ckpt_handle *h, int world, uint64_t *steps0)
{
        struct strata__ckpt_entry e;
        struct tensor t, pc;
        int n = count_tensors(rt, world);
        size_t at;

        for (int i = 0; i < n; i++) {
                STRATA_TRY(io->read_at(h, &e, sizeof(e),
                                       sizeof(struct strata__ckpt_header) +
                                               (uint64_t)i * sizeof(e)));
                tensor_at(rt, world, i, &t);
                for (int k = 0; piece(rt, &t, k, &pc, &at); k++)
                        STRATA_TRY(restore_piece(rt, io, h, &pc, e.offset + at));
                if (t.per_device)
                        STRATA_TRY(io->read_at(h, steps0, sizeof(*steps0), e.offset));
        }
        return STRATA_OK;
}

/*
 * Device 0's parameters and optimizer state are every replica's: ddp and dp keep them equal
 * between steps (zero1 and zero2: the parameters; each device holds its shard of the state). Resharded (another device count or strategy), every device takes device
 * 0's step count, and devices the saving run lacked take device 0's running statistics.
 */
static void spread(struct strata_runtime *rt, int world, int resharded, uint64_t steps0)
{
        const struct strata__replica *r0 = &rt->replicas[0];
        int first = across(rt) ? rt->rank0 : 0; /* the global rank of replica 0 */

        for (int d = 0; d < rt->nreplicas; d++) {
                struct strata__replica *r = &rt->replicas[d];

                r->opt_t = resharded ? steps0 : rt->ckpt_steps[d];
                for (int i = 0; i < r->nlayers; i++) {
                        r->layers[i].grad_fresh = 1;
                        if (first + d >= world && r->layers[i].nstate)
                                rt->dev->kernels->copy(r->layers[i].state,
                                                       r0->layers[i].state,
                                                       r->layers[i].nstate);
                }
                /* fsdp: each device restored its shard */
                if (d == 0 || strata__shard_own_params(r->shard))
                        continue;
                rt->dev->kernels->copy(r->params, r0->params, r0->nparam);
                if (strata__shard_count(r->shard) == 1) /* sharded: each restored its own */
                        rt->dev->kernels->copy(r->opt_state, r0->opt_state, r0->nopt);
        }
}

/*
 * Whether the run goes on bit for bit: on the saving run's devices and strategy, or in
 * invariant mode with the same chunks on any (every replica then holds the same state), and
 * never across a change of mode.
 */
static int bitwise(const struct strata_runtime *rt, const struct strata__ckpt_header *hd,
                   int resharded)
{
        return hd->chunks == (uint32_t)strata__chunks(&rt->cfg) && (!resharded || hd->chunks);
}

int strata_load_checkpoint(struct strata_runtime *rt, const char *path, void *app,
                           size_t app_cap, size_t *app_bytes, struct strata_ckpt_info *info)
{
        const struct strata_checkpoint_io *io;
        struct strata__ckpt_header hd;
        struct strata_ckpt_handle *h;
        uint64_t size = 0, steps0 = 0;
        int rc, resharded;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(between_steps(rt, "load_checkpoint", path));
        if (app_cap && !app)
                return strata__fail(STRATA_EINVAL, "load_checkpoint: application buffer NULL");
        io = io_of(rt);
        h = &rt->ckpt;
        memset(h, 0, sizeof(*h));
        h->fd = -1;
        STRATA_TRY(io->open(io->ctx, path, h, &size));
        rc = validate(rt, io, h, size, &hd, path);
        if (rc == STRATA_OK && hd.app_bytes > app_cap && app_cap)
                rc = strata__fail(STRATA_EINVAL, "load_checkpoint: application block is %u "
                                  "bytes, buffer %zu", hd.app_bytes, app_cap);
        if (rc != STRATA_OK) {
                io->close(h);
                return rc;
        }
        rc = restore(rt, io, h, (int)hd.world, &steps0);
        io->close(h);
        if (rc != STRATA_OK) {
                /* Live state is partly overwritten: the runtime cannot go on. */
                (void)strata__sm_dispatch(&rt->sm, STRATA__EV_EXCEPTION, NULL);
                return rc;
        }
        resharded = hd.world != (uint32_t)ckpt_world(rt) ||
                    hd.strategy != (uint32_t)rt->cfg.strategy.kind;
        spread(rt, (int)hd.world, resharded, steps0);
        if (rt->dev->sync)
                STRATA_TRY(rt->dev->sync());
        rt->step = hd.step;
        /* The masters are f32 in every precision; the loss scaler goes on where it was. */
        if (hd.precision == STRATA_PRECISION_16_MIXED && hd.loss_scale > 0.0f &&
            isfinite(hd.loss_scale)) {
                rt->scaler.scale = hd.loss_scale;
                rt->scaler.growth = hd.scale_growth;
                rt->scaler.skipped = hd.scale_skipped;
        }
        if (app_cap)
                memcpy(app, hd.app, hd.app_bytes);
        if (app_bytes)
                *app_bytes = hd.app_bytes;
        if (info)
                *info = (struct strata_ckpt_info){ .step = hd.step, .world = (int)hd.world,
                                                   .strategy = (int)hd.strategy,
                                                   .bitwise = bitwise(rt, &hd, resharded) };
        return STRATA_OK;
}

/* One safetensors header entry for parameter group @p p at data offset @p off. */
static int st_entry(char *buf, size_t n, const struct strata_param *p, uint64_t off, int first)
{
        if (p->group.ndim == 2)
                return snprintf(buf, n, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],"
                                "\"data_offsets\":[%llu,%llu]}", first ? "" : ",", p->name,
                                p->group.shape[0], p->group.shape[1], (unsigned long long)off,
                                (unsigned long long)(off + p->group.count * sizeof(float)));
        return snprintf(buf, n, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                        "\"data_offsets\":[%llu,%llu]}", first ? "" : ",", p->name,
                        p->group.shape[0], (unsigned long long)off,
                        (unsigned long long)(off + p->group.count * sizeof(float)));
}

static const char st_meta[] = ",\"__metadata__\":{\"format\":\"pt\",\"producer\":\"strata\"}}";

/* The header into @p s (NULL: only measured into *len), padded with spaces to 8 bytes. */
static int st_header(struct strata_runtime *rt, struct sink *s, uint64_t *len)
{
        const struct strata__replica *r0 = &rt->replicas[0];
        uint64_t off = 0, total = 1;
        struct strata_param p;
        char buf[256];

        if (s)
                take(s, "{", 1);
        for (int g = 0; g < strata__replica_nparams(r0); g++) {
                int k;

                strata__replica_param(r0, g, &p);
                k = st_entry(buf, sizeof(buf), &p, off, g == 0);
                if (k < 0 || (size_t)k >= sizeof(buf))
                        return strata__fail(STRATA_EOVERFLOW, "safetensors: entry too long");
                if (s)
                        take(s, buf, (size_t)k);
                total += (uint64_t)k;
                off += p.group.count * sizeof(float);
        }
        total += sizeof(st_meta) - 1;
        if (s) {
                static const char spaces[8] = "       ";

                take(s, st_meta, sizeof(st_meta) - 1);
                take(s, spaces, (size_t)(*len - total));
        }
        *len = (total + 7) / 8 * 8;
        return STRATA_OK;
}

/*
 * The safetensors file into @p s: the header's length, the header, every group's values (fsdp's
 * trained values from their owners, piece by piece, across processes through process 0).
 */
static int st_fill(struct strata_runtime *rt, struct sink *s, const struct content *c)
{
        uint64_t len = 0, le;
        struct strata_param p;

        (void)c;
        STRATA_TRY(st_header(rt, NULL, &len));
        le = len; /* little-endian u64: the byte order checkpoints are written in */
        take(s, &le, sizeof(le));
        STRATA_TRY(st_header(rt, s, &len));
        for (int g = 0; g < strata__replica_nparams(&rt->replicas[0]); g++) {
                struct tensor t = { .dev = 0, .group = g, .slot = -1 };

                strata__replica_param(&rt->replicas[0], g, &p);
                t.ptr = p.value;
                t.bytes = p.group.count * sizeof(float);
                /* fsdp: from the owners */
                t.sharded = strata__shard_own_params(rt->replicas[0].shard) && p.grad;
                STRATA_TRY(stream(rt, &t, s));
        }
        return STRATA_OK;
}

int strata_export_safetensors(struct strata_runtime *rt, const char *path)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(between_steps(rt, "export_safetensors", path));
        /* across processes fsdp's values are in every process: all call it, process 0 writes */
        return written(rt, path, &(struct content){ st_fill, "export_safetensors", NULL, 0 },
                       across(rt) && strata__shard_own_params(rt->replicas[0].shard));
}
