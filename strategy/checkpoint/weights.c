/*
 * load_weights: a safetensors file's tensors into the model's parameter and buffer groups by
 * the names the export writes (PyTorch's state_dict names), in two passes like a checkpoint's
 * load. The first streams the header (nn/safetensors.h: fixed memory, any length) and matches
 * every tensor to a group: its name, its shape, a dtype that converts (f32, f64, bf16, f16);
 * a Strata checkpoint's table is matched the same way (its weights whatever its optimizer,
 * strategy or device count; its training state passed over, each used tensor's checksum
 * verified);
 * strict, anything else (a group the file lacks, a tensor of another shape, a tensor the
 * model has no group for) refuses the file naming each, and nothing changes. The second
 * converts each matched tensor to f32 into device 0's group, or under fsdp into each local
 * device's shard of it (the checkpoint's pieces), then gives the other replicas device 0's
 * values and running statistics and zeroes every optimizer slot and step count: the weights
 * are a fresh start, not a resumed run. Every process of a job calls it with the same file.
 */
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "nn/safetensors.h"
#include "nn/shape.h"
#include "strategy/checkpoint/checkpoint.h"

/* Groups a model can have: every module's, at most STRATA_MAX_GROUPS each. */
#define MAX_GROUPS (STRATA__MODULES_MAX * STRATA_MAX_GROUPS)

/* What the header said of each group. */
enum { ABSENT, MATCHED, DIFFERS };

struct match {
        unsigned char state[MAX_GROUPS];
        unsigned char dtype[MAX_GROUPS];
        uint64_t at[MAX_GROUPS];        /* its data's file offset */
        struct strata_weights_info *info;
        size_t len;                     /* of info->left */
};

/* @p n extents @p s as "[a, b]" into @p out. */
static void shape_text(char *out, size_t cap, const uint64_t *s, int n)
{
        size_t at = (size_t)snprintf(out, cap, "[");

        for (int d = 0; d < n && at < cap; d++)
                at += (size_t)snprintf(out + at, cap - at, "%s%llu", d ? ", " : "",
                                       (unsigned long long)s[d]);
        if (at < cap)
                snprintf(out + at, cap - at, "]");
}

static void group_shape(char *out, size_t cap, const struct strata_param *p)
{
        uint64_t s[STRATA_MAX_PARAM_DIMS];

        for (int d = 0; d < p->group.ndim && d < STRATA_MAX_PARAM_DIMS; d++)
                s[d] = p->group.shape[d];
        shape_text(out, cap, s, p->group.ndim);
}

/* One tensor left, "name: why", onto the report (cut with "..." when full). */
static void left(struct match *m, const char *name, const char *why)
{
        char *out = m->info->left;
        size_t cap = sizeof(m->info->left);
        int n;

        if (m->len + 4 >= cap)
                return;
        n = snprintf(out + m->len, cap - m->len, "%s%s: %s", m->len ? "; " : "", name, why);
        if (n < 0 || m->len + (size_t)n >= cap - 4)
                snprintf(out + cap - 4, 4, "...");
        m->len = n < 0 ? cap : m->len + (size_t)n;
}

/* The group of device 0 named @p name, or -1. */
static int group_named(const struct strata__replica *r0, const char *name,
                       struct strata_param *p)
{
        for (int g = 0; g < strata__replica_nparams(r0); g++)
                if (strata__replica_param(r0, g, p) == 0 && !strcmp(p->name, name))
                        return g;
        return -1;
}

/*
 * BatchNorm's step counter (PyTorch's "<module>.num_batches_tracked" beside its running_mean),
 * which the model does not keep: a state_dict's copy of it is passed over.
 */
static int step_counter(const struct strata__replica *r0, const char *name)
{
        const char *dot = strrchr(name, '.');
        char mean[STRATA__ST_NAME + 16];
        struct strata_param p;

        if (!dot || strcmp(dot + 1, "num_batches_tracked") != 0)
                return 0;
        snprintf(mean, sizeof(mean), "%.*srunning_mean", (int)(dot + 1 - name), name);
        return group_named(r0, mean, &p) >= 0;
}

/*
 * Entry @p e has group @p p's shape and a dtype that converts; @p flat: a checkpoint's entry,
 * whose shape is the group's first extent and the product of the others.
 */
static int same_shape(const struct strata__st_entry *e, const struct strata_param *p, int flat)
{
        int same = e->dtype != STRATA__ST_OTHER;

        if (flat)
                return same && e->shape[0] == p->group.shape[0] &&
                       e->shape[0] * e->shape[1] == p->group.count &&
                       e->ndim == (p->group.ndim > 2 ? 2 : p->group.ndim);
        same = same && e->ndim == p->group.ndim;
        for (int d = 0; same && d < e->ndim; d++)
                same = e->shape[d] == p->group.shape[d];
        return same;
}

/* Entry @p e against the model's groups: matched, differing or unexpected, reported. */
static int match_entry(const struct strata__replica *r0, const struct strata__st_reader *rd,
                       const struct strata__st_entry *e, struct match *m)
{
        char file[160], model[160], why[400];
        struct strata_param p;
        int g = group_named(r0, e->name, &p), same;

        shape_text(file, sizeof(file), e->shape, e->ndim);
        if (g < 0) {
                if (step_counter(r0, e->name))
                        return STRATA_OK;
                m->info->unexpected++;
                snprintf(why, sizeof(why), "file %s %s, model none", file, e->dtype_name);
                left(m, e->name, why);
                return STRATA_OK;
        }
        if (m->state[g] != ABSENT)
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' appears twice", rd->path,
                                    e->name);
        same = same_shape(e, &p, rd->data == 0); /* a checkpoint's table: data at 0 */
        if (same) {
                m->state[g] = MATCHED;
                m->dtype[g] = (unsigned char)e->dtype;
                m->at[g] = rd->data + e->begin;
                m->info->loaded++;
                return STRATA_OK;
        }
        m->state[g] = DIFFERS;
        m->info->mismatched++;
        group_shape(model, sizeof(model), &p);
        snprintf(why, sizeof(why), "file %s %s, model %s%s", file, e->dtype_name, model,
                 e->dtype == STRATA__ST_OTHER ? " (read: F32, F64, BF16, F16)" : "");
        left(m, e->name, why);
        return STRATA_OK;
}

/* Every group the file lacks, reported. */
static int missing_groups(struct strata_runtime *rt, struct match *m)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        struct strata_param p;

        for (int g = 0; g < strata__replica_nparams(r0); g++) {
                char model[160], why[200];

                if (m->state[g] != ABSENT)
                        continue;
                strata__replica_param(r0, g, &p);
                m->info->missing++;
                group_shape(model, sizeof(model), &p);
                snprintf(why, sizeof(why), "file none, model %s", model);
                left(m, p.name, why);
        }
        return STRATA_OK;
}

/* Pass 1: the header against the model; *info filled, nothing live touched. */
static int match_all(struct strata_runtime *rt, struct strata__st_reader *rd,
                     struct strata__st_meta *meta, struct match *m)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        struct strata__st_entry e;
        int rc;

        while ((rc = strata__st_next(rd, &e, meta)) == 1)
                STRATA_TRY(match_entry(r0, rd, &e, m));
        if (rc < 0)
                return rc;
        return missing_groups(rt, m);
}


/*
 * Elements [lo, lo + n) of the tensor at file offset @p at (dtype @p t) converted into the
 * host floats @p dst, a bounded buffer at a time.
 */
static int read_converted(const struct strata_checkpoint_io *io, struct strata_ckpt_handle *h,
                          uint64_t at, enum strata__st_dtype t, size_t lo, size_t n, float *dst)
{
        unsigned char buf[8192];
        size_t es = strata__st_dtype_size(t), per = sizeof(buf) / es;

        for (size_t i = 0; i < n; i += per) {
                size_t k = n - i < per ? n - i : per;

                STRATA_TRY(io->read_at(h, buf, k * es, at + (lo + i) * es));
                strata__st_to_f32(t, buf, dst + i, k);
        }
        return STRATA_OK;
}

/* Group @p g's matched tensor into every piece of it this process holds (fsdp: shards). */
static int fill_group(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                      struct strata_ckpt_handle *h, const struct match *m, int g)
{
        struct strata__ckpt_tensor t, pc;
        size_t at;

        strata__ckpt_values(rt, g, &t);
        for (int k = 0; strata__ckpt_piece(rt, &t, k, &pc, &at); k++) {
                float *dst;

                if (!pc.ptr || !pc.bytes)
                        continue;
                /* device memory is written through its replica's host staging */
                dst = pc.dev < 0 ? NULL : strata__replica_host_image(strata__rep(rt, pc.dev));
                dst = dst ? dst : pc.ptr;
                STRATA_TRY(read_converted(io, h, m->at[g], (enum strata__st_dtype)m->dtype[g],
                                          at / sizeof(float), pc.bytes / sizeof(float), dst));
                if (dst != pc.ptr)
                        rt->dev->to_device(pc.ptr, dst, pc.bytes);
        }
        return STRATA_OK;
}

/*
 * Every replica takes device 0's values and running statistics (fsdp's devices filled their
 * own shards), and every optimizer slot and step count starts at zero.
 */
static void fresh_start(struct strata_runtime *rt)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        const struct strata_kernel_ops *k = rt->dev->kernels;

        for (int d = 0; d < rt->nreplicas; d++) {
                struct strata__replica *r = strata__rep(rt, d);

                for (int g = 0; g < strata__replica_nparams(r); g++) {
                        struct strata_param p, p0;

                        strata__replica_param(r, g, &p);
                        strata__replica_param(r0, g, &p0);
                        if (d > 0 && !(strata__shard_own_params(strata__replica_shard(r)) &&
                                       p.grad))
                                k->copy(p.value, p0.value, p.group.count);
                        for (int s = 0; s < p.opt_slots; s++)
                                if (p.opt_state[s] && p.shard_hi > p.shard_lo)
                                        k->fill(p.opt_state[s], 0.0f, p.shard_hi - p.shard_lo);
                }
                strata__replica_set_steps(r, 0);
        }
}

/* The file's metadata that strata_weights_info reports. */
static void meta_init(struct strata__st_meta *meta)
{
        memset(meta, 0, sizeof(*meta));
        meta->n = 2;
        meta->keys[0] = "strata.model";
        meta->keys[1] = "strata.transform";
}

static int refuse(const struct strata_weights_info *info, const char *path)
{
        return strata__fail(STRATA_EINVAL, "load_weights: '%s' does not fit this model (%d "
                            "missing, %d of another shape or dtype, %d unexpected; nothing "
                            "loaded): %s", path, info->missing, info->mismatched,
                            info->unexpected, info->left);
}

/*
 * A checkpoint's tensor that is training state, not weights (optimizer slots, other devices'
 * running statistics, step counts): passed over.
 */
static int training_state(const char *name)
{
        const char *dot = strrchr(name, '.');

        return !strncmp(name, "replicas.", 9) || !strcmp(name, "optimizer.steps") ||
               (dot && (!strcmp(dot, ".momentum_buffer") || !strcmp(dot, ".exp_avg") ||
                        !strcmp(dot, ".exp_avg_sq")));
}

/* Entry @p e's data (inside the file: checked) against its checksum. */
static int entry_crc(const struct strata_checkpoint_io *io, struct strata_ckpt_handle *h,
                     const struct strata__ckpt_entry *e, const char *path)
{
        unsigned char buf[8192];
        uint32_t crc = 0;

        for (uint64_t o = 0; o < e->bytes; o += sizeof(buf)) {
                size_t k = e->bytes - o < sizeof(buf) ? (size_t)(e->bytes - o) : sizeof(buf);

                STRATA_TRY(io->read_at(h, buf, k, e->offset + o));
                crc = strata__crc32(crc, buf, k);
        }
        if (crc != e->crc)
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' checksum mismatch "
                                    "(corrupt)", path, e->name);
        return STRATA_OK;
}

/*
 * Pass 1 for a Strata checkpoint (of any optimizer, strategy or device count): its header
 * checked, each table entry that is a group's values matched by name, element count and
 * first extent (the table holds 2-D shapes), its checksum verified; training state passed
 * over.
 */
static int match_checkpoint(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                            struct strata_ckpt_handle *h, uint64_t size, const char *path,
                            struct match *m)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        struct strata__ckpt_header hd;
        struct strata__st_entry se;
        struct strata__st_reader rd = { .path = path, .data = 0, .size = size };

        if (size < sizeof(hd))
                return strata__fail(STRATA_EFORMAT, "'%s' is truncated (%llu bytes)", path,
                                    (unsigned long long)size);
        STRATA_TRY(io->read_at(h, &hd, sizeof(hd), 0));
        STRATA_TRY(strata__ckpt_check_header(&hd, path));
        if (strata__ckpt_entry_at(hd.ntensors) > size)
                return strata__fail(STRATA_EFORMAT, "'%s' is truncated in its tensor table",
                                    path);
        for (uint32_t i = 0; i < hd.ntensors; i++) {
                struct strata__ckpt_entry e;

                STRATA_TRY(io->read_at(h, &e, sizeof(e), strata__ckpt_entry_at(i)));
                e.name[sizeof(e.name) - 1] = '\0';
                if (training_state(e.name))
                        continue;
                if (e.offset > size || e.bytes > size - e.offset || e.ndim < 1 || e.ndim > 2)
                        return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' lies outside "
                                            "the file (truncated?)", path, e.name);
                STRATA_TRY(entry_crc(io, h, &e, path));
                memset(&se, 0, sizeof(se));
                snprintf(se.name, sizeof(se.name), "%s", e.name);
                snprintf(se.dtype_name, sizeof(se.dtype_name), "%s",
                         e.dtype == STRATA_F32 ? "F32" : "other");
                se.dtype = e.dtype == STRATA_F32 && e.shape[0] &&
                                   e.shape[1] <= UINT64_MAX / 4 / e.shape[0] &&
                                   e.bytes == e.shape[0] * e.shape[1] * 4
                                   ? STRATA__ST_F32 : STRATA__ST_OTHER;
                se.ndim = (int)e.ndim;
                se.shape[0] = e.shape[0];
                se.shape[1] = e.shape[1];
                se.begin = e.offset;
                STRATA_TRY(match_entry(r0, &rd, &se, m));
        }
        return STRATA_OK;
}

/* Pass 1 on the open file: the match, and whether this load may go on. */
static int check(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                 struct strata_ckpt_handle *h, uint64_t size, const char *path, unsigned flags,
                 struct match *m)
{
        struct strata__st_reader rd;
        struct strata__st_meta meta;
        struct strata_weights_info *info = m->info;
        char magic[8] = { 0 };

        meta_init(&meta);
        if (size >= sizeof(magic))
                STRATA_TRY(io->read_at(h, magic, sizeof(magic), 0));
        if (!memcmp(magic, STRATA__CKPT_MAGIC, sizeof(magic))) {
                STRATA_TRY(match_checkpoint(rt, io, h, size, path, m));
                STRATA_TRY(missing_groups(rt, m));
        } else {
                STRATA_TRY(strata__st_open(&rd, io, h, size, path));
                STRATA_TRY(match_all(rt, &rd, &meta, m));
        }
        snprintf(info->model, sizeof(info->model), "%s", meta.values[0]);
        snprintf(info->transform, sizeof(info->transform), "%s", meta.values[1]);
        if (!(flags & STRATA_WEIGHTS_PARTIAL) &&
            info->missing + info->mismatched + info->unexpected > 0)
                return refuse(info, path);
        if (info->loaded == 0)
                return strata__fail(STRATA_EINVAL, "load_weights: no tensor of '%s' fits this "
                                    "model (nothing loaded): %s", path, info->left);
        return STRATA_OK;
}

int strata_load_weights(struct strata_runtime *rt, const char *path, unsigned flags,
                        struct strata_weights_info *info)
{
        const struct strata_checkpoint_io *io;
        struct strata_weights_info mine;
        struct strata_ckpt_handle *h;
        struct match m;
        uint64_t size = 0;
        int rc, filling;

        STRATA_TRY(strata__ckpt_between_steps(rt, "load_weights", path));
        if (flags & ~(unsigned)STRATA_WEIGHTS_PARTIAL)
                return strata__fail(STRATA_EINVAL, "load_weights: unknown flags 0x%x", flags);
        if (strata__replica_nparams(strata__rep(rt, 0)) > MAX_GROUPS)
                return strata__fail(STRATA_ENOTSUP, "load_weights: more than %d groups",
                                    MAX_GROUPS);
        memset(&m, 0, sizeof(m));
        memset(&mine, 0, sizeof(mine));
        m.info = &mine;
        io = strata__ckpt_io(rt, &h);
        STRATA_TRY(io->open(io->ctx, path, h, &size));
        rc = check(rt, io, h, size, path, flags, &m);
        filling = rc == STRATA_OK;
        for (int g = 0; rc == STRATA_OK && g < strata__replica_nparams(strata__rep(rt, 0)); g++)
                if (m.state[g] == MATCHED)
                        rc = fill_group(rt, io, h, &m, g);
        io->close(h);
        if (info)
                *info = mine;
        if (rc != STRATA_OK && filling) {
                /* A read failed after values were written: the runtime cannot go on. */
                (void)strata__sm_dispatch(&rt->sm, STRATA__EV_EXCEPTION, NULL);
                return rc;
        }
        if (rc != STRATA_OK)
                return rc;
        fresh_start(rt);
        for (int d = 0; d < rt->nreplicas; d++) /* inference: the weights packed anew */
                strata__packed_refresh(strata__rep(rt, d));
        if (rt->dev->sync)
                STRATA_TRY(rt->dev->sync());
        return STRATA_OK;
}
