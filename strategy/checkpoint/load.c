/*
 * load_checkpoint: a checkpoint of save.c's format back into live state, in two passes. The
 * first reads and checks everything and writes nothing live: the header (this format, intact),
 * the model and optimizer against this runtime's (when they differ, a message names the first
 * difference: BatchNorm, a parameter group's name and shape, the optimizer's state), every
 * table entry against this runtime's tensor and every tensor's checksum. The second restores
 * the tensors: each process its own pieces (a sharded optimizer slot's parts to their owners,
 * whatever the saving run's devices), then spreads device 0's replicated state over the
 * replicas. A checkpoint of another device count or strategy continues from device 0's state
 * and reports that the run is no longer bitwise.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "nn/checkpoint.h"
#include "strategy/checkpoint/checkpoint.h"

/* Table entry @p i of the file into @p e. */
static int read_entry(const struct strata_checkpoint_io *io, struct strata_ckpt_handle *h,
                      uint64_t i, struct strata__ckpt_entry *e)
{
        return io->read_at(h, e, sizeof(*e), strata__ckpt_entry_at(i));
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
        struct strata__ckpt_tensor t;
        int kf = k, kr = k;

        memset(f, 0, sizeof(*f));
        memset(r, 0, sizeof(*r));
        if (size < strata__ckpt_entry_at(hd->ntensors))
                return -1;
        for (uint32_t i = 0; i < hd->ntensors; i++) {
                if (read_entry(io, h, i, &e))
                        return -1;
                e.name[sizeof(e.name) - 1] = '\0';
                side_add(f, e.name, e.ndim, e.shape, &kf);
        }
        for (int i = 0; strata__ckpt_tensor_at(rt, (int)hd->world, i, &t) == 0; i++)
                side_add(r, t.name, t.ndim, t.shape, &kr);
        return 0;
}

static const char *const optim_said[3] = {
        "sgd without momentum (no state)", "sgd with momentum (momentum_buffer)",
        "adamw (exp_avg, exp_avg_sq)",
};

/*
 * What differs, as a status and a message naming each: the model's first difference (@p model
 * when same_modules() named one, else BatchNorm or the first parameter group) and the
 * optimizer's, both when both differ (issue 58, item 7).
 */
static int name_difference(struct strata_runtime *rt, const struct strata_checkpoint_io *io,
                           struct strata_ckpt_handle *h, const struct strata__ckpt_header *hd,
                           uint64_t size, const char *path, const char *model)
{
        char mtext[512] = "", otext[160] = "";
        struct side f, r;

        if (sides(rt, io, h, hd, size, 0, &f, &r))
                return strata__fail(STRATA_EFORMAT, "'%s' is truncated in its tensor table",
                                    path);
        if (f.slots != r.slots)
                snprintf(otext, sizeof(otext), "another optimizer's state: %s in the checkpoint, "
                         "%s in this run", optim_said[f.slots], optim_said[r.slots]);
        if (model && model[0])
                snprintf(mtext, sizeof(mtext), "%s", model);
        else if (!f.bn[0] != !r.bn[0])
                snprintf(mtext, sizeof(mtext), "another model: BatchNorm is %s in the checkpoint, "
                         "%s in this model", f.bn[0] ? f.bn : "absent",
                         r.bn[0] ? r.bn : "absent");
        for (int k = 0; !mtext[0] && hd->fingerprint != strata__ckpt_fingerprint(rt) &&
                        (f.group[0] || r.group[0]); k++) {
                sides(rt, io, h, hd, size, k, &f, &r);
                if (strcmp(f.group, r.group) != 0)
                        snprintf(mtext, sizeof(mtext), "another model: parameter group %d is %s "
                                 "in the checkpoint, %s in this model (module index and width "
                                 "in its name and shape)", k, f.group[0] ? f.group : "absent",
                                 r.group[0] ? r.group : "absent");
        }
        if (!mtext[0] && !otext[0])
                snprintf(mtext, sizeof(mtext), "another model (widths, modules or parameter "
                         "groups differ)");
        return strata__fail(STRATA_EINVAL, "'%s' holds %s%s%s", path, mtext[0] ? mtext : otext,
                            mtext[0] && otext[0] ? "; and " : "", mtext[0] ? otext : "");
}

/* Module @p i's kind in the file's list @p list into @p out; 0 past the names it holds. */
static int file_module(const char *list, int i, char *out, size_t n)
{
        const char *p = list;
        size_t len;

        for (; i > 0 && p; i--)
                if ((p = strchr(p, ' ')))
                        p++;
        if (!p || !*p)
                return 0;
        len = strcspn(p, " ");
        snprintf(out, n, "%.*s", (int)len, p);
        return 1;
}

static const char *module_kind(const struct strata_model *m, int i)
{
        return m->modules[i].ops->name ? m->modules[i].ops->name : "?";
}

/*
 * The file's modules from @p fi on are this model's from @p ri on (a name the file could not
 * hold matches anything).
 */
static int same_tail(const struct strata__ckpt_header *hd, int fi, const struct strata_model *m,
                     int ri)
{
        char f[STRATA__CKPT_MODULES];

        if ((int)hd->nmodules - fi != m->nmodules - ri)
                return 0;
        for (; ri < m->nmodules; fi++, ri++)
                if (file_module(hd->modules, fi, f, sizeof(f)) &&
                    strcmp(f, module_kind(m, ri)) != 0)
                        return 0;
        return 1;
}

/*
 * Module @p i and the ones after it differ: one more in either, or another kind, named into
 * @p out ("another model: ..."), 1; 0 for more than one change (name_difference() then names
 * the first parameter group that differs).
 */
static int modules_differ(const struct strata__ckpt_header *hd, const struct strata_model *m,
                          int i, char *out, size_t n)
{
        char f[STRATA__CKPT_MODULES], after[STRATA__CKPT_MODULES + 16] = "the input";

        if (i > 0)
                snprintf(after, sizeof(after), "module %d, %s", i - 1, module_kind(m, i - 1));
        if (i < m->nmodules && same_tail(hd, i, m, i + 1))
                return snprintf(out, n, "another model: a %s at module %d (after %s) in this "
                                "model, none in the checkpoint", module_kind(m, i), i,
                                after) > 0;
        if (file_module(hd->modules, i, f, sizeof(f)) && same_tail(hd, i + 1, m, i))
                return snprintf(out, n, "another model: a %s at module %d (after %s) in the "
                                "checkpoint, none in this model", f, i, after) > 0;
        if (i < m->nmodules && file_module(hd->modules, i, f, sizeof(f)))
                return snprintf(out, n, "another model: module %d is %s in the checkpoint, %s "
                                "in this model", i, f, module_kind(m, i)) > 0;
        return 0; /* several: the parameter groups name the first difference */
}

/*
 * The file's modules, by kind, are this model's (an activation, a Dropout, a BatchNorm more or
 * less, or another, is named into @p out, or left empty for several changes: STRATA_EINVAL).
 * A file from before they were recorded (nmodules 0) passes.
 */
static int same_modules(const struct strata_runtime *rt, struct strata__ckpt_header *hd,
                        char *out, size_t n)
{
        const struct strata_model *m = rt->cfg.model;
        char f[STRATA__CKPT_MODULES];
        int i;

        hd->modules[sizeof(hd->modules) - 1] = '\0';
        hd->loss[sizeof(hd->loss) - 1] = '\0';
        if (hd->nmodules == 0)
                return STRATA_OK;
        for (i = 0; i < (int)hd->nmodules && i < m->nmodules; i++)
                if (file_module(hd->modules, i, f, sizeof(f)) &&
                    strcmp(f, module_kind(m, i)) != 0)
                        break;
        if (i == (int)hd->nmodules && i == m->nmodules)
                return STRATA_OK;
        modules_differ(hd, m, i, out, n);
        return STRATA_EINVAL;
}

int strata__ckpt_check_header(const struct strata__ckpt_header *hd, const char *path)
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
        if (hd->crc != strata__crc32_header(hd))
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
                      struct strata_ckpt_handle *h, struct strata__ckpt_header *hd,
                      uint64_t size, const char *path)
{
        char model[512] = "";

        if (same_modules(rt, hd, model, sizeof(model)) == STRATA_OK &&
            hd->fingerprint == strata__ckpt_fingerprint(rt) &&
            hd->ntensors == (uint32_t)strata__ckpt_count(rt, (int)hd->world))
                return STRATA_OK;
        return name_difference(rt, io, h, hd, size, path, model);
}

/* Entry @p i matches this runtime's tensor @p t and lies inside the file. */
static int check_entry(const struct strata__ckpt_entry *e, const struct strata__ckpt_tensor *t,
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
        STRATA_TRY(strata__ckpt_check_header(hd, path));
        STRATA_TRY(same_model(rt, io, h, hd, size, path));
        n = (int)hd->ntensors;
        after = strata__ckpt_entry_at((uint64_t)n);
        for (int i = 0; i < n; i++) {
                struct strata__ckpt_entry e;
                struct strata__ckpt_tensor t;
                uint32_t crc = 0;

                STRATA_TRY(read_entry(io, h, (uint64_t)i, &e));
                strata__ckpt_tensor_at(rt, (int)hd->world, i, &t);
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
                         struct strata_ckpt_handle *h, const struct strata__ckpt_tensor *t,
                         uint64_t off)
{
        void *dst;

        if (!t->ptr || !t->bytes)
                return STRATA_OK;
        /* device memory is read into its replica's host staging, then copied */
        dst = t->dev < 0 ? NULL : strata__replica_host_image(strata__rep(rt, t->dev));
        dst = dst ? dst : t->ptr;
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
        struct strata__ckpt_tensor t, pc;
        int n = strata__ckpt_count(rt, world);
        size_t at;

        for (int i = 0; i < n; i++) {
                STRATA_TRY(read_entry(io, h, (uint64_t)i, &e));
                strata__ckpt_tensor_at(rt, world, i, &t);
                for (int k = 0; strata__ckpt_piece(rt, &t, k, &pc, &at); k++)
                        STRATA_TRY(restore_piece(rt, io, h, &pc, e.offset + at));
                if (t.per_device)
                        STRATA_TRY(io->read_at(h, steps0, sizeof(*steps0), e.offset));
        }
        return STRATA_OK;
}

/*
 * Device 0's parameters and optimizer state are every replica's: ddp and dp keep them equal
 * between steps (zero1 and zero2: the parameters; each device holds its shard of the state).
 * Resharded (another device count or strategy), every device takes device 0's step count, and
 * devices the saving run lacked take device 0's running statistics.
 */
static void spread(struct strata_runtime *rt, int world, int resharded, uint64_t steps0)
{
        const struct strata__replica_view *v0 = strata__repv(rt, 0);
        int first = strata__ckpt_across(rt) ? rt->rank0 : 0; /* the global rank of replica 0 */

        for (int d = 0; d < rt->nreplicas; d++) {
                struct strata__replica *r = strata__rep(rt, d);
                const struct strata__replica_view *v = strata__replica_view(r);
                struct strata__shard *sh = strata__replica_shard(r);

                strata__replica_set_steps(r, resharded ? steps0 : rt->ckpt_steps[d]);
                strata__replica_skip(r); /* the next backward overwrites the gradients */
                for (int i = 0; i < v->nlayers; i++)
                        if (first + d >= world && v->layers[i].nstate)
                                rt->dev->kernels->copy(v->layers[i].state,
                                                       v0->layers[i].state,
                                                       v->layers[i].nstate);
                /* fsdp: each device restored its shard */
                if (d == 0 || strata__shard_own_params(sh))
                        continue;
                rt->dev->kernels->copy(v->params, v0->params, v0->nparam);
                if (strata__shard_count(sh) == 1) /* sharded: each restored its own */
                        rt->dev->kernels->copy(v->opt_state, v0->opt_state, v0->nopt);
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
        return hd->chunks == (uint32_t)strata__invariant_chunks(&rt->cfg) &&
               (!resharded || hd->chunks);
}

int strata_load_checkpoint(struct strata_runtime *rt, const char *path, void *app,
                           size_t app_cap, size_t *app_bytes, struct strata_ckpt_info *info)
{
        const struct strata_checkpoint_io *io;
        struct strata__ckpt_header hd;
        struct strata_ckpt_handle *h;
        uint64_t size = 0, steps0 = 0;
        int rc, resharded;

        STRATA_TRY(strata__ckpt_between_steps(rt, "load_checkpoint", path));
        STRATA_TRY(strata__training_only(rt, "load_checkpoint"));
        if (app_cap && !app)
                return strata__fail(STRATA_EINVAL, "load_checkpoint: application buffer NULL");
        io = strata__ckpt_io(rt, &h);
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
        resharded = hd.world != (uint32_t)strata__ckpt_world(rt) ||
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
        if (info) {
                *info = (struct strata_ckpt_info){ .step = hd.step, .world = (int)hd.world,
                                                   .strategy = (int)hd.strategy,
                                                   .bitwise = bitwise(rt, &hd, resharded) };
                memcpy(info->loss, hd.loss, sizeof(info->loss));
        }
        return STRATA_OK;
}
