/*
 * The built-in modules and losses are nn/'s alone (decision 0054): adding a module is a file of
 * nn/, one entry of nn/registry.c and its tests, and touches no file of another directory.
 * Proved on the library's objects and sources: every ops table include/strata/nn.h declares
 * for a built-in module or loss is defined by an object of nn/, and no other object of the
 * library refers to one (a registry, a list or a test of one built-in outside nn/ would); the
 * lookups by name and the model line are defined by objects of nn/; no source outside nn/
 * writes a module's entry or its model-line arguments (struct strata__module_entry,
 * STRATA__ARG_). Objects whose source is gone are not the library's and are skipped; tests/
 * and tools/ are programs, not the library. The checks are shown to fail on objects and
 * sources made here.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMES 64
#define MAX_OBJS 512
#define MAX_FINDINGS 64

/* The ops tables of the built-ins, by name. */
struct tables {
        int n;
        char name[MAX_NAMES][64];
};

/* The library's objects (relative to the object root) and its top directories. */
struct objects {
        int n;
        char rel[MAX_OBJS][256];
        int ndirs;
        char dir[32][64];
};

struct findings {
        int n;
        char line[MAX_FINDINGS][512];
};

static void __attribute__((format(printf, 2, 3))) add(struct findings *f, const char *fmt, ...)
{
        va_list ap;

        if (f->n == MAX_FINDINGS)
                return;
        va_start(ap, fmt);
        vsnprintf(f->line[f->n++], sizeof(f->line[0]), fmt, ap);
        va_end(ap);
}

static int found(const struct findings *f, const char *a, const char *b)
{
        for (int i = 0; i < f->n; i++)
                if (strstr(f->line[i], a) && strstr(f->line[i], b))
                        return 1;
        return 0;
}

static void report(const struct findings *f)
{
        for (int i = 0; i < f->n; i++)
                cr_expect_fail("%s", f->line[i]);
}

/* Every "extern const struct strata_module_ops NAME;" (and loss_ops) of header @p path. */
static int read_tables(const char *path, struct tables *t)
{
        static const char *const kinds[] = { "extern const struct strata_module_ops ",
                                             "extern const struct strata_loss_ops " };
        char line[512], name[64];
        FILE *f = fopen(path, "r");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                for (int k = 0; k < 2; k++)
                        if (!strncmp(line, kinds[k], strlen(kinds[k])) && t->n < MAX_NAMES &&
                            sscanf(line + strlen(kinds[k]), "%63[a-z0-9_]", name) == 1)
                                snprintf(t->name[t->n++], sizeof(t->name[0]), "%s", name);
        fclose(f);
        return t->n;
}

/* The index of table @p sym in @p t, or -1. */
static int table(const struct tables *t, const char *sym)
{
        for (int i = 0; i < t->n; i++)
                if (!strcmp(t->name[i], sym))
                        return i;
        return -1;
}

/* ---- the library's objects ---- */

static const char *walk_src, *walk_obj;
static struct objects *walk_out;

/* @p rel's top directory is a program's (tests/, tools/), not the library's. */
static int program(const char *rel)
{
        return !strncmp(rel, "tests/", 6) || !strncmp(rel, "tools/", 6);
}

static void note_dir(struct objects *o, const char *rel)
{
        size_t n = strcspn(rel, "/");

        for (int i = 0; i < o->ndirs; i++)
                if (strlen(o->dir[i]) == n && !strncmp(o->dir[i], rel, n))
                        return;
        if (o->ndirs < 32 && n < sizeof(o->dir[0]))
                snprintf(o->dir[o->ndirs++], sizeof(o->dir[0]), "%.*s", (int)n, rel);
}

static int one_object(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        const char *rel = path + strlen(walk_obj) + 1;
        char src[1024];
        size_t n = strlen(path);

        (void)st;
        (void)ftw;
        if (type != FTW_F || n < 3 || strcmp(path + n - 2, ".o") || program(rel) ||
            !strchr(rel, '/') || walk_out->n == MAX_OBJS)
                return 0;
        snprintf(src, sizeof(src), "%s/%.*s.c", walk_src, (int)strlen(rel) - 2, rel);
        if (access(src, F_OK)) {
                snprintf(src, sizeof(src), "%s/%.*s.cu", walk_src, (int)strlen(rel) - 2, rel);
                if (access(src, F_OK))
                        return 0; /* stale: its source is gone */
        }
        snprintf(walk_out->rel[walk_out->n++], sizeof(walk_out->rel[0]), "%s", rel);
        note_dir(walk_out, rel);
        return 0;
}

/* The objects under @p obj_root whose source is under @p src_root, programs' left out. */
static int list_objects(const char *src_root, const char *obj_root, struct objects *o)
{
        walk_src = src_root;
        walk_obj = obj_root;
        walk_out = o;
        o->n = o->ndirs = 0;
        return nftw(obj_root, one_object, 16, FTW_PHYS) ? -1 : o->n;
}

static int in_nn(const char *rel)
{
        return !strncmp(rel, "nn/", 3);
}

/*
 * nm over @p o's objects: a built-in's table (@p t) that no object of nn/ defines, one defined
 * or referred to outside nn/, and each of @p own (NULL-ended) defined outside nn/, are
 * findings. Returns the number of symbols read, -1 when nm fails.
 */
static int check_objects(const char *obj_root, const struct objects *o, const struct tables *t,
                         const char *const *own, struct findings *f)
{
        static char cmd[MAX_OBJS * 270 + 256];
        size_t k = (size_t)snprintf(cmd, sizeof(cmd), "cd '%s' && nm -A -P", obj_root);
        char *line = NULL, defined[MAX_NAMES] = { 0 };
        size_t cap = 0;
        int syms = 0, rc;
        FILE *p;

        for (int i = 0; i < o->n && k < sizeof(cmd); i++)
                k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " '%s'", o->rel[i]);
        if (k >= sizeof(cmd) || !(p = popen(cmd, "r")))
                return -1;
        while (getline(&line, &cap, p) > 0) {
                char *colon = strstr(line, ": "), *sym, *type;

                if (!colon)
                        continue;
                *colon = '\0';
                sym = strtok(colon + 2, " \n");
                type = strtok(NULL, " \n");
                if (!sym || !type || type[1])
                        continue;
                syms++;
                if (in_nn(line)) {
                        if (*type != 'U' && table(t, sym) >= 0)
                                defined[table(t, sym)] = 1;
                        continue;
                }
                if (table(t, sym) >= 0)
                        add(f, "%s %s %s: a built-in's table outside nn/", line,
                            *type == 'U' ? "refers to" : "defines", sym);
                for (int i = 0; own[i] && *type != 'U'; i++)
                        if (!strcmp(own[i], sym))
                                add(f, "%s defines %s: nn/'s", line, sym);
        }
        free(line);
        rc = pclose(p);
        for (int i = 0; i < t->n; i++)
                if (!defined[i])
                        add(f, "%s: no object of nn/ defines it", t->name[i]);
        return rc ? -1 : syms;
}

/* ---- the sources ---- */

static const char *const schema_words[] = { "struct strata__module_entry", "STRATA__ARG_", NULL };
static struct findings *grep_out;
static const char *grep_root;
static int grep_files;

static int one_source(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        const char *rel = path + strlen(grep_root) + 1;
        size_t n = strlen(path);
        char line[1024];
        FILE *f;

        (void)st;
        (void)ftw;
        if (type != FTW_F || n < 3 || in_nn(rel) ||
            (strcmp(path + n - 2, ".c") && strcmp(path + n - 2, ".h") &&
             strcmp(path + n - 3, ".cu")))
                return 0;
        if (!(f = fopen(path, "r")))
                return 0;
        grep_files++;
        for (int ln = 1; fgets(line, sizeof(line), f); ln++)
                for (int i = 0; schema_words[i]; i++)
                        if (strstr(line, schema_words[i]))
                                add(grep_out, "%s:%d: %s: a module's entry outside nn/", rel, ln,
                                    schema_words[i]);
        fclose(f);
        return 0;
}

/* The sources of @p o's directories and include/ under @p src_root; the files read. */
static int check_sources(const char *src_root, const struct objects *o, struct findings *f)
{
        char dir[1024];

        grep_out = f;
        grep_root = src_root;
        grep_files = 0;
        for (int i = 0; i <= o->ndirs; i++) { /* nn/'s own files are skipped as they are read */
                snprintf(dir, sizeof(dir), "%s/%s", src_root, i < o->ndirs ? o->dir[i] : "include");
                nftw(dir, one_source, 16, FTW_PHYS);
        }
        return grep_files;
}

/* ---- the library ---- */

static const char *const nn_own[] = { "strata_module_ops_by_name", "strata_loss_ops_by_name",
                                      "strata_model_parse",        "strata_model_output",
                                      "strata_model_targets",      "strata__module_entry",
                                      NULL };

static void library(struct tables *t, struct objects *o, char *obj, size_t n)
{
        cr_assert_geq(read_tables(STRATA_SOURCE_DIR "/include/strata/nn.h", t), 29,
                      "include/strata/nn.h: only %d built-in tables read", t->n);
        cr_assert(table(t, "strata_conv2d") >= 0 && table(t, "strata_mse") >= 0, "nn.h misread");
        snprintf(obj, n, "%s/obj", STRATA_BUILD_DIR);
        cr_assert_gt(list_objects(STRATA_SOURCE_DIR, obj, o), 50, "only %d objects under %s",
                     o->n, obj);
}

Test(nn_registries, only_nn_objects_name_the_builtins)
{
        static struct tables t;
        static struct objects o;
        static struct findings f;
        char obj[1024];
        int nn = 0;

        library(&t, &o, obj, sizeof(obj));
        for (int i = 0; i < o.n; i++)
                nn += in_nn(o.rel[i]);
        cr_assert_gt(nn, 10, "only %d objects of nn/", nn);
        cr_assert_gt(check_objects(obj, &o, &t, nn_own, &f), 1000, "nm read too few symbols");
        report(&f);
}

Test(nn_registries, no_module_entry_outside_nn)
{
        static struct tables t;
        static struct objects o;
        static struct findings f;
        char obj[1024];

        library(&t, &o, obj, sizeof(obj));
        cr_assert_gt(check_sources(STRATA_SOURCE_DIR, &o, &f), 100, "too few sources read");
        report(&f);
}

/* ---- the checks can fail ---- */

static void put(const char *root, const char *rel, const char *text)
{
        char path[1024];
        FILE *fp;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
                *s = '\0';
                mkdir(path, 0700);
                *s = '/';
        }
        fp = fopen(path, "w");
        cr_assert_not_null(fp, "%s", path);
        fputs(text, fp);
        fclose(fp);
}

/*
 * A registry in strategy/ (a list of two built-ins), a lookup by name defined in strategy/, a
 * model-line entry written in kernel/, a table nn/ does not define, and the same registry in
 * nn/, in a stale object and in a program's: only the first four are found, each named.
 */
Test(nn_registries, the_checks_fail_outside_nn)
{
        char root[] = "/tmp/strata-nn-registries-XXXXXX", obj[64], cmd[1024];
        static const char *const own[] = { "strata_module_ops_by_name", NULL };
        static struct tables t = { 3, { "strata_relu", "strata_linear", "strata_mse" } };
        static struct objects o;
        static struct findings f, g;
        const char *list = "extern const int strata_relu, strata_linear;\n"
                           "const int *const reg[] = { &strata_relu, &strata_linear };\n"
                           "const void *strata_module_ops_by_name(void);\n"
                           "const void *strata_module_ops_by_name(void) { return reg; }\n";
        const char *tables = "const int strata_relu = 1, strata_linear = 2;\n";

        cr_assert_not_null(mkdtemp(root));
        put(root, "strategy/reg.c", list);
        put(root, "nn/reg.c", list);
        put(root, "nn/modules.c", tables);
        put(root, "kernel/line.c", "/* { &strata_relu, 1, { STRATA__ARG_OUT } } */\n");
        put(root, "nn/line.c", "/* { &strata_relu, 1, { STRATA__ARG_OUT } } */\n");
        put(root, "strategy/gone.c", list);
        put(root, "obj/tools/.keep", "");
        snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p obj/strategy obj/nn obj/kernel && "
                 "cc -c strategy/reg.c -o obj/strategy/reg.o && cc -c nn/reg.c -o obj/nn/reg.o && "
                 "cc -c nn/modules.c -o obj/nn/modules.o && "
                 "cc -c kernel/line.c -o obj/kernel/line.o && "
                 "cc -c strategy/gone.c -o obj/strategy/gone.o && "
                 "cp obj/strategy/reg.o obj/tools/reg.o", root);
        cr_assert_eq(system(cmd), 0, "cc failed");
        snprintf(cmd, sizeof(cmd), "%s/strategy/gone.c", root);
        remove(cmd);
        snprintf(obj, sizeof(obj), "%s/obj", root);
        cr_assert_eq(list_objects(root, obj, &o), 4, "stale and program objects counted");
        cr_assert_gt(check_objects(obj, &o, &t, own, &f), 5, "nm misread");
        cr_expect_eq(f.n, 4, "%d findings", f.n);
        cr_expect(found(&f, "strata_mse: no object of nn/ defines it", ""));
        cr_expect(found(&f, "strategy/reg.o refers to strata_relu", "outside nn/"));
        cr_expect(found(&f, "strategy/reg.o refers to strata_linear", "outside nn/"));
        cr_expect(found(&f, "strategy/reg.o defines strata_module_ops_by_name", "nn/'s"));
        cr_expect_eq(check_sources(root, &o, &g), 2, "strategy/reg.c and kernel/line.c");
        cr_expect_eq(g.n, 1, "%d findings", g.n);
        cr_expect(found(&g, "kernel/line.c:1: STRATA__ARG_", "outside nn/"));
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
}
