/*
 * The configuration fingerprint (strategy/process/fingerprint.h): made from a runtime,
 * compared field by field through one table of the fields' names, so a difference is
 * reported with its name and both values, and a new field is one member and one line.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "strata/version.h"
#include "strategy/process/fingerprint.h"
#include "strategy/multi.h"

#define F(field, name) { name, offsetof(struct strata__fingerprint, field),                     \
                         sizeof(((struct strata__fingerprint *)0)->field) }

static const struct field {
        const char *name;
        size_t off, size;
} fields[] = {
        F(version, "library version"),
        F(strategy, "strategy"),
        F(devices, "devices per process"),
        F(widths, "model widths"),
        F(modules, "modules"),
        F(loss, "loss"),
        F(parameters, "parameters"),
        F(batch, "batch"),
        F(precision, "precision"),
        F(bucket, "bucket bytes"),
        F(grad_type, "gradient all-reduce type"),
        F(mpi_allreduce, "MPI_Allreduce for gradients"),
        F(sync_bn, "SyncBatchNorm"),
        F(optimizer, "optimizer"),
        F(accumulate, "accumulate"),
        F(schedule, "collective schedule"),
        F(invariant, "invariant mode"),
        F(sync, "synchronisation variant"),
};
#undef F

/*
 * A text field being written: what does not fit is replaced by a hash of the whole text at
 * the field's end, so two long texts that differ past the cut still differ.
 */
struct text {
        char *s;
        size_t size, len;
        uint32_t hash; /* FNV-1a of every character appended */
        int cut;
};

static void add(struct text *t, const char *p)
{
        for (; *p; p++) {
                t->hash = (t->hash ^ (unsigned char)*p) * 16777619u;
                if (!t->cut && t->len + 10 < t->size)
                        t->s[t->len++] = *p;
                else
                        t->cut = 1;
        }
        t->s[t->len] = '\0';
        if (t->cut)
                snprintf(t->s + t->len, 10, "#%08x", (unsigned)t->hash);
}

/* @p word after @p sep (none before the first word). */
static void append(struct text *t, const char *sep, const char *word)
{
        if (t->len)
                add(t, sep);
        add(t, word);
}

static void widths_and_modules(const struct strata_model *m, char *widths, size_t wn,
                               char *modules, size_t mn)
{
        struct text w = { widths, wn, 0, 2166136261u, 0 };
        struct text k = { modules, mn, 0, 2166136261u, 0 };
        char num[16];

        snprintf(num, sizeof(num), "%d", m->in_features);
        append(&w, "-", num);
        for (int i = 0; i < m->nmodules; i++) {
                const struct strata_module *mod = &m->modules[i];

                append(&k, " ", mod->ops && mod->ops->name ? mod->ops->name : "?");
                if (mod->branch) { /* where its input comes from */
                        snprintf(num, sizeof(num), "<%d", mod->from);
                        add(&k, num);
                }
                if (mod->out <= 0)
                        continue; /* keeps its input's width */
                snprintf(num, sizeof(num), "%d", mod->out);
                append(&w, "-", num);
        }
}

/* Several outputs: each one's loss, module and weight, in the list's order. */
static void outputs(const struct strata_model *m, char *out, size_t n)
{
        struct text t = { out, n, 0, 2166136261u, 0 };
        char one[64];

        for (int k = 0; k < m->noutputs; k++) {
                const struct strata_model_output *o = &m->outputs[k];
                const struct strata_loss_ops *loss = o->loss ? o->loss : m->loss;

                snprintf(one, sizeof(one), "%s@%d*%.9g", loss && loss->name ? loss->name : "?",
                         o->module, (double)(o->weight == 0.0f ? 1.0f : o->weight));
                append(&t, " ", one);
        }
}

static void add_bucket(void *arg, size_t lo, size_t hi, int close)
{
        char num[48];

        (void)close;
        snprintf(num, sizeof(num), "%zu-%zu", lo, hi);
        append(arg, " ", num);
}

/* fsdp's unit of gathering and reducing: each layer with parameters, in forward order. */
static void add_layers(const struct strata__replica *r, struct text *t)
{
        const struct strata__replica_view *v = strata__replica_view(r);

        for (int i = 0; i < v->nlayers; i++)
                if (v->layers[i].nparam)
                        add_bucket(t, v->poff[i], v->poff[i] + v->layers[i].nparam, i);
}

/*
 * The collective schedule: the devices of the job, the shards (count and length), then ddp's
 * buckets in the order they are reduced, or under fsdp the layers gathered before they compute
 * and reduced after their backward. Processes that agree on it issue the same collectives
 * with the same counts in the same order.
 */
static void schedule(const struct strata_runtime *rt, char *out, size_t n)
{
        const struct strata__replica *r = strata__rep(rt, 0);
        const struct strata__shard *sh = strata__replica_shard(r);
        struct text t = { out, n, 0, 2166136261u, 0 };
        char head[64];

        snprintf(head, sizeof(head), "world %d, %d shards of %zu, %s", rt->world,
                 strata__shard_count(sh), strata__shard_len(sh),
                 (strata__caps(rt->strategy) & STRATA__CAP_SHARD_PARAMS) ? "layers" : "buckets");
        append(&t, "", head);
        if ((strata__caps(rt->strategy) & STRATA__CAP_SHARD_PARAMS))
                add_layers(r, &t);
        else
                strata__ddp_bucket_walk(r, strata__ddp_bucket_cap(&rt->cfg), add_bucket, &t);
}

/*
 * The models beside model 0 (decision 0069): each one's widths, modules and optimizer, or its
 * source and tau, summed up as their count and a hash of that text at the end of
 * @p modules (its last characters where it is full).
 */
static void other_models(const struct strata_runtime *rt, char *modules, size_t mn)
{
        char all[512], w[96], m[240], one[96];
        struct text t = { all, sizeof(all), 0, 2166136261u, 0 };
        size_t len = strlen(modules), n;

        if (strata__models_n(rt) == 1)
                return;
        for (int i = 1; i < strata__models_n(rt); i++) {
                const struct strata_model *mod;
                const struct strata_optim *o;
                int source;
                float tau;

                strata__models_info(rt, i, &mod, &o, &source, &tau);
                widths_and_modules(mod, w, sizeof(w), m, sizeof(m));
                if (source >= 0)
                        snprintf(one, sizeof(one), "|target of %d tau %.9g", source, (double)tau);
                else
                        snprintf(one, sizeof(one), "|%s lr %.9g", o->kind == STRATA_OPTIM_ADAMW
                                 ? "adamw" : "sgd", (double)o->lr);
                add(&t, w);
                add(&t, m);
                add(&t, one);
        }
        snprintf(one, sizeof(one), " + %d models #%08x", strata__models_n(rt) - 1,
                 (unsigned)t.hash);
        n = strlen(one);
        snprintf(modules + (len + n < mn ? len : mn - 1 - n), n + 1, "%s", one);
}

#define PUT(fp, field, ...) snprintf((fp)->field, sizeof((fp)->field), __VA_ARGS__)

void strata__fingerprint_make(const struct strata_runtime *rt, void *out)
{
        const struct strata_config *c = &rt->cfg;
        struct strata__fingerprint *fp = out;

        memset(out, 0, STRATA__FINGERPRINT_BYTES);
        PUT(fp, version, "%s", STRATA_VERSION_STRING);
        PUT(fp, strategy, "%s", rt->strategy->name);
        PUT(fp, devices, "%d", rt->nreplicas);
        widths_and_modules(c->model, fp->widths, sizeof(fp->widths), fp->modules,
                           sizeof(fp->modules));
        other_models(rt, fp->modules, sizeof(fp->modules));
        PUT(fp, loss, "%s", strata__loss_of(c->model)->name);
        outputs(c->model, fp->loss, sizeof(fp->loss));
        PUT(fp, parameters, "%zu", strata__repv(rt, 0)->nparam);
        PUT(fp, batch, "%d", c->batch);
        PUT(fp, precision, "%s", strata_precision_name(c->precision.kind));
        PUT(fp, bucket, "%zu", strata__ddp_bucket_cap(c));
        PUT(fp, grad_type, "%s", c->strategy.grad_allreduce == STRATA_BF16 ? "bf16" : "32");
        PUT(fp, mpi_allreduce, "%s", c->process.mpi_allreduce ? "on" : "off");
        PUT(fp, sync_bn, "%s", c->strategy.sync_bn ? "on" : "off");
        PUT(fp, optimizer, "%s", c->optim.kind == STRATA_OPTIM_ADAMW ? "adamw" : "sgd");
        PUT(fp, accumulate, "%d%s", c->train.accumulate > 1 ? c->train.accumulate : 1,
            strata__accumulate_each(c) ? " each" : ""); /* reduced every micro-batch */
        schedule(rt, fp->schedule, sizeof(fp->schedule));
        if (strata__invariant_chunks(c))
                PUT(fp, invariant, "%d chunks", strata__invariant_chunks(c));
        else
                PUT(fp, invariant, "%s", "off");
        PUT(fp, sync, "%s", strata__multi(rt)->sync->name);
        for (int i = 0; i < STRATA__FINGERPRINT_SETTINGS; i++)
                strata__config_shared(c, i, &fp->settings[i]);
}

#undef PUT

/*
 * Every setting process @p p has other than process 0's, as "optim.lr 0.1, process 0 0.05;
 * seed 2, process 0 1" into @p out: its length (0 when all match).
 */
static int settings_differ(const struct strata__fingerprint *a,
                           const struct strata__fingerprint *zero, char *out, size_t n)
{
        size_t len = 0;

        out[0] = '\0';
        for (int i = 0; i < STRATA__FINGERPRINT_SETTINGS; i++) {
                char mine[32], theirs[32];
                const char *name;
                uint64_t bits;

                if (a->settings[i] == zero->settings[i] || len + 1 >= n)
                        continue;
                name = strata__config_shared(NULL, i, &bits);
                strata__config_shared_text(i, a->settings[i], mine, sizeof(mine));
                strata__config_shared_text(i, zero->settings[i], theirs, sizeof(theirs));
                len += (size_t)snprintf(out + len, n - len, "%s%s %s, process 0 %s",
                                        len ? "; " : "", name ? name : "?", mine, theirs);
                len = len < n ? len : n - 1;
        }
        return (int)len;
}

int strata__fingerprint_check(const void *all, int n)
{
        const char *zero = all;
        char why[320];

        for (int p = 1; p < n; p++) {
                const char *fp = zero + (size_t)p * STRATA__FINGERPRINT_BYTES;

                for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                        const struct field *f = &fields[i];

                        if (!strncmp(fp + f->off, zero + f->off, f->size))
                                continue;
                        return strata__fail(STRATA_EINVAL, "the processes are configured "
                                            "differently: process %d has %s %.*s, process 0 "
                                            "%.*s (every process must run the same model, "
                                            "strategy and options)", p, f->name,
                                            (int)f->size, fp + f->off, (int)f->size,
                                            zero + f->off);
                }
                if (settings_differ((const void *)fp, (const void *)zero, why, sizeof(why)))
                        return strata__fail(STRATA_EINVAL, "the processes are configured "
                                            "differently: process %d has %s (every process "
                                            "must run the same model, strategy and options)",
                                            p, why);
        }
        return STRATA_OK;
}
