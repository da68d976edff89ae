/*
 * Weights in and out of strata-train around the loop: --init-weights[-partial] loads a
 * safetensors file after the runtime connects (every process of a job, as the library asks),
 * and --export-initial writes the weights the first step will start from. Each is checked
 * before the data is read, so a wrong path fails fast. Every export (--export-initial,
 * --export-safetensors) stores the model line and the input transform in the file's metadata
 * and prints them; a load prints those of its file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/train/train.h"

/** @brief @p path (of option @p opt) names a file to write: not a directory, in one that
 *         exists and is writable. 0, or 2 after the message. */
int weights_writable(const char *opt, const char *path)
{
        char dir[PATH_BUF];
        const char *slash = strrchr(path, '/');
        struct stat st;

        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (slash == path)
                snprintf(dir, sizeof(dir), "/");
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                return bad("--%s %s: is a directory; name the file to write", opt, path);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0)
                return bad("--%s %s: its directory %s %s", opt, path, dir,
                           stat(dir, &st) != 0 ? "does not exist" :
                           !S_ISDIR(st.st_mode) ? "is not a directory" : "is not writable");
        return 0;
}

/**
 * @brief --init-weights and --export-initial, before any data is read: the file to load is
 *        a readable file, not given with --resume (which brings its own weights), and the one
 *        to write can be. 0, or 2 after the message.
 */
int weights_check(const struct opts *o)
{
        const char *opt = o->init_partial ? "init-weights-partial" : "init-weights";
        struct stat st;

        if (o->init_weights && o->resume)
                return bad("--%s and --resume both give the starting weights: give one", opt);
        if (o->evaluate && (o->resume || o->init_weights || o->ckpt_dir || o->export_initial))
                return bad("--evaluate FILE trains nothing: --%s has no use with it",
                           o->resume ? "resume" : o->init_weights ? opt :
                           o->ckpt_dir ? "ckpt-dir" : "export-initial");
        if (o->evaluate && access(o->evaluate, R_OK) != 0)
                return bad("--evaluate %s: %s", o->evaluate, strerror(errno));
        if (o->init_weights && (stat(o->init_weights, &st) != 0 || !S_ISREG(st.st_mode) ||
                                access(o->init_weights, R_OK) != 0))
                return bad("--%s %s: %s", opt, o->init_weights,
                           stat(o->init_weights, &st) != 0 ? strerror(errno) :
                           !S_ISREG(st.st_mode) ? "is not a regular file" : "is not readable");
        return o->export_initial ? weights_writable("export-initial", o->export_initial) : 0;
}

/* What a load found, on stdout: the groups, what was left, the file's model and transform. */
static void report_loaded(const struct run *r, const char *path,
                          const struct strata_weights_info *info)
{
        if (r->o.quiet || r->o.json || !strata_is_global_zero(r->rt))
                return;
        printf("strata-train: weights from %s: %d group%s loaded\n", path,
               info->loaded, info->loaded == 1 ? "" : "s");
        if (info->left[0])
                printf("strata-train: left as initialised (%d missing, %d of another shape, "
                       "%d not in the model): %s\n", info->missing, info->mismatched,
                       info->unexpected, info->left);
        if (info->model[0])
                printf("strata-train: the file's model: %s\n", info->model);
        if (info->transform[0])
                printf("strata-train: the file's input transform: %s\n", info->transform);
}

/**
 * @brief After the runtime connects (and any --resume): --init-weights loads, then
 *        --export-initial writes the weights the first step starts from. 0, 2 after a
 *        refused load, 1 after a failed write (the runtime torn down either way).
 */
int weights_start(struct run *r)
{
        struct strata_weights_info info;
        const struct opts *o = &r->o;

        if (o->init_weights &&
            strata_load_weights(r->rt, o->init_weights,
                                o->init_partial ? STRATA_WEIGHTS_PARTIAL : STRATA_WEIGHTS_STRICT,
                                &info)) {
                bad("--%s: %s", o->init_partial ? "init-weights-partial" : "init-weights",
                    strata_last_error());
                strata_teardown(r->rt);
                return 2;
        }
        if (o->init_weights)
                report_loaded(r, o->init_weights, &info);
        if (o->export_initial && export_weights(r, o->export_initial)) {
                fprintf(stderr, "strata-train: --export-initial: %s\n", strata_last_error());
                strata_teardown(r->rt);
                return 1;
        }
        return 0;
}

/*
 * The model as a line strata_model_parse() reads: --model's line (its input(...) added from
 * the data when it gives none), or the widths' modules written out.
 */
static void model_line(const struct run *r, char *buf, size_t n)
{
        const struct strata_model *m = &r->model;
        const struct strata_dims *d = &m->in_dims;
        size_t at = 0;

        if (r->layered && strstr(r->o.model, "input(")) {
                snprintf(buf, n, "%s", r->o.model);
                return;
        }
        if (d->channels) {
                at += (size_t)snprintf(buf, n, "input(%d", d->channels);
                for (int i = 0; i < d->ndim && at < n; i++)
                        at += (size_t)snprintf(buf + at, n - at, ",%d", d->size[i]);
                at += at < n ? (size_t)snprintf(buf + at, n - at, ")") : 0;
        } else {
                at += (size_t)snprintf(buf, n, "input(%d)", m->in_features);
        }
        if (r->layered) {
                if (at < n)
                        snprintf(buf + at, n - at, " %s", r->o.model);
                return;
        }
        for (int i = 0; i < m->nmodules && at < n; i++) {
                const struct strata_module *x = &m->modules[i];

                at += (size_t)snprintf(buf + at, n - at, " %s", x->ops->name);
                if (at < n && x->ops == &strata_linear)
                        at += (size_t)snprintf(buf + at, n - at, "(%d)", x->out);
                else if (at < n && x->ops == &strata_dropout)
                        at += (size_t)snprintf(buf + at, n - at, "(%g)", (double)x->p);
        }
}

/*
 * The input transform the loader applies: byte images standardised (the training set's mean
 * and std of pixels in [0, 1], and the f32 scale and shift that are applied), divided by 255
 * (--raw-pixels), or float arrays used as they are.
 */
static void transform_text(const struct run *r, char *buf, size_t n)
{
        double a = r->loader.scale, b = r->loader.shift;

        if (!r->train.images)
                snprintf(buf, n, "none");
        else if (r->o.raw)
                snprintf(buf, n, "none (x = byte / 255)");
        else
                snprintf(buf, n, "standardize mean=%.6g std=%.6g (x = byte * %.9g %c %.9g = "
                         "(byte / 255 - mean) / std)", -b / a / 255.0, 1.0 / (a * 255.0), a,
                         b < 0.0 ? '-' : '+', b < 0.0 ? -b : b);
}

/**
 * @brief The model's weights into safetensors file @p path (every process of a job calls it;
 *        process 0 writes), with the model line and the input transform in its metadata,
 *        both printed.
 */
int export_weights(struct run *r, const char *path)
{
        static char line[STRATA_WEIGHTS_META], tr[256];
        const struct strata_meta_entry meta[] = {
                { "strata.model", line }, { "strata.transform", tr },
        };

        model_line(r, line, sizeof(line));
        transform_text(r, tr, sizeof(tr));
        if (strata_export_safetensors_meta(r->rt, path, meta, 2))
                return 1;
        if (!r->o.quiet && !r->o.json && strata_is_global_zero(r->rt))
                printf("strata-train: exported %s: model %s; input transform %s\n", path, line,
                       tr);
        return 0;
}

/* @p path starts as a Strata checkpoint does (its magic); 0 for anything else. */
static int is_checkpoint(const char *path)
{
        char magic[8] = { 0 };
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(magic, 1, sizeof(magic), f) : 0;

        if (f)
                fclose(f);
        return n == sizeof(magic) && !memcmp(magic, "STRATACK", sizeof(magic));
}

/* --evaluate's file's weights into the runtime (a checkpoint's whatever its optimizer). */
static int evaluate_load(struct run *r, const char *path)
{
        struct strata_weights_info info;

        if (strata_load_weights(r->rt, path, STRATA_WEIGHTS_STRICT, &info))
                return 1;
        report_loaded(r, path, &info);
        return 0;
}

/**
 * @brief --evaluate FILE: the weights of a checkpoint (of any optimizer, strategy or device
 *        count) or of a safetensors file, the evaluation set evaluated once and its figures
 *        printed (--json: one object); --export-safetensors then writes them. Nothing is
 *        trained. The exit status.
 */
int weights_evaluate(struct run *r)
{
        const char *path = r->o.evaluate;
        int ckpt = is_checkpoint(path), rc = 0;
        struct evaluation ev;
        char buf[1024];

        if (evaluate_load(r, path)) {
                bad("--evaluate: %s", strata_last_error());
                strata_teardown(r->rt);
                return 2;
        }
        if (eval_pass(r, &ev) || (r->o.export_st && export_weights(r, r->o.export_st))) {
                fprintf(stderr, "strata-train: --evaluate: %s\n", strata_last_error());
                rc = 1;
        } else if (r->o.json && strata_is_global_zero(r->rt)) {
                printf("{\"evaluate\":\"%s\",%s}\n", ckpt ? "checkpoint" : "weights",
                       eval_fields(r, &ev, 1, buf, sizeof(buf)));
        } else if (!r->o.quiet && strata_is_global_zero(r->rt)) {
                printf("evaluate %s: %s\n", path, eval_fields(r, &ev, 0, buf, sizeof(buf)));
        }
        if (strata_teardown(r->rt)) {
                fprintf(stderr, "strata-train: %s\n", strata_last_error());
                rc = 1;
        }
        return rc || stdout_failed() ? (rc ? rc : 1) : 0;
}
