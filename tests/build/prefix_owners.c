/*
 * Every internal name says its owner: the word after strata__ (up to the next underscore: the
 * "net" of strata__net_step) is defined by the objects of one source directory only, so a
 * reader of a call site knows which directory holds it (issue 53). The archive's global
 * symbols are read with nm; each member is matched with its object under obj/ by name, and
 * where two objects share a name (drivers/registry.o, strategy/registry.o) by the symbol it
 * defines. Every prefix defined in two directories is a failure naming both. The checker is
 * shown to be able to fail on a synthetic table.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__GNUC__) && !defined(__clang__)
/* Messages and paths are cut at their buffers on purpose (the sanitizer builds' -O1 sees it). */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define MAX_DEFS 4096
#define MAX_FINDINGS 64

/* One global definition: the symbol and the directory of the object defining it. */
struct def {
        char sym[128];
        char dir[128];  /* "drivers/net", relative to the source root */
};

struct findings {
        int n;
        char line[MAX_FINDINGS][512];
};

/* Length of @p sym's prefix word after "strata__" (0: not an internal name). */
static size_t word_len(const char *sym)
{
        const char *w = sym + 8, *u;

        if (strncmp(sym, "strata__", 8) || !*w)
                return 0;
        u = strchr(w, '_');
        return u ? (size_t)(u - w) : strlen(w);
}

static int same_word(const char *a, const char *b)
{
        size_t k = word_len(a);

        return k && k == word_len(b) && !strncmp(a + 8, b + 8, k);
}

/* Every prefix word defined in two directories: one finding each, naming both with a symbol. */
static void check_owners(const struct def *d, int n, struct findings *f)
{
        f->n = 0;
        for (int i = 0; i < n; i++) {
                int first = 1;

                for (int j = 0; j < i && first; j++)
                        first = !same_word(d[i].sym, d[j].sym);
                if (!first || !word_len(d[i].sym))
                        continue;
                for (int j = i + 1; j < n; j++) {
                        if (!same_word(d[i].sym, d[j].sym) || !strcmp(d[i].dir, d[j].dir))
                                continue;
                        if (f->n < MAX_FINDINGS)
                                snprintf(f->line[f->n++], sizeof(f->line[0]),
                                         "strata__%.*s_ is defined in %s/ (%s) and in %s/ (%s)",
                                         (int)word_len(d[i].sym), d[i].sym + 8, d[i].dir,
                                         d[i].sym, d[j].dir, d[j].sym);
                        break;
                }
        }
}

/* ---- the library's objects ---- */

struct objects {
        int n;
        char path[512][128];    /* "drivers/net/step.o", relative to obj/ */
};

/* Objects below obj/@p dir whose source (.c or .cu) is there; tests and tools are not the
 * library's, and an object whose source is gone is stale. */
static void list_objects(const char *obj_root, const char *dir, struct objects *o)
{
        char path[1024], sub[256];
        struct dirent *e;
        DIR *d;

        snprintf(path, sizeof(path), "%.500s/%.200s", obj_root, dir);
        d = opendir(path);
        if (!d)
                return;
        while ((e = readdir(d))) {
                size_t k = strlen(e->d_name);
                struct stat st;

                snprintf(sub, sizeof(sub), "%s%.120s%.120s", dir, *dir ? "/" : "", e->d_name);
                snprintf(path, sizeof(path), "%.500s/%.250s", obj_root, sub);
                if (e->d_name[0] == '.' || stat(path, &st))
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        if (strcmp(sub, "tests") && strcmp(sub, "tools"))
                                list_objects(obj_root, sub, o);
                        continue;
                }
                if (k < 3 || strcmp(e->d_name + k - 2, ".o") || o->n == 512 ||
                    strlen(sub) >= sizeof(o->path[0]))
                        continue;
                snprintf(path, sizeof(path), "%s/%.*s.c", STRATA_SOURCE_DIR,
                         (int)strlen(sub) - 2, sub);
                if (access(path, F_OK)) {
                        strcat(path, "u");
                        if (access(path, F_OK))
                                continue;
                }
                snprintf(o->path[o->n++], sizeof(o->path[0]), "%s", sub);
        }
        closedir(d);
}

/* Global definitions of strata__ names in the objects: "obj sym" lines into @p d. */
static int object_defs(const char *obj_root, const struct objects *o, struct def *d, int max)
{
        static char cmd[65536];
        char line[1024], obj[128], sym[128];
        size_t k;
        int n = 0;
        FILE *p;

        k = (size_t)snprintf(cmd, sizeof(cmd), "cd '%s' && nm -A -P -g --defined-only", obj_root);
        for (int i = 0; i < o->n && k < sizeof(cmd) - 200; i++)
                k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " '%s'", o->path[i]);
        snprintf(cmd + k, sizeof(cmd) - k, " 2>/dev/null");
        p = popen(cmd, "r");
        if (!p)
                return -1;
        while (fgets(line, sizeof(line), p))
                if (sscanf(line, "%127[^:]: %127s", obj, sym) == 2 && word_len(sym) && n < max) {
                        snprintf(d[n].sym, sizeof(d[n].sym), "%.127s", sym);
                        snprintf(d[n].dir, sizeof(d[n].dir), "%.127s", obj); /* the object */
                        n++;
                }
        return pclose(p) == 0 ? n : -1;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');

        return s ? s + 1 : path;
}

/*
 * The archive's global strata__ definitions, each with the directory of its object: the
 * object under obj/ of the member's name that defines the symbol. An archive symbol no such
 * object defines (a stale build) is a finding.
 */
static int archive_defs(struct def *out, int max, struct findings *lost)
{
        static struct objects objs;
        static struct def od[MAX_DEFS];
        char cmd[1024], obj_root[512], line[1024], member[128], sym[128];
        int nod, n = 0;
        FILE *p;

        snprintf(obj_root, sizeof(obj_root), "%s/obj", STRATA_BUILD_DIR);
        list_objects(obj_root, "", &objs);
        cr_assert_gt(objs.n, 40, "only %d library objects under %s", objs.n, obj_root);
        nod = object_defs(obj_root, &objs, od, MAX_DEFS);
        cr_assert_gt(nod, 100, "nm on the objects gave %d strata__ definitions", nod);
        snprintf(cmd, sizeof(cmd), "nm -A -P -g --defined-only '%s/libstrata.a'",
                 STRATA_BUILD_DIR);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        lost->n = 0;
        while (fgets(line, sizeof(line), p)) {
                const char *lb = strchr(line, '[');
                int found = 0;

                if (!lb || sscanf(lb, "[%127[^]]]: %127s", member, sym) != 2 || !word_len(sym))
                        continue;
                for (int i = 0; i < nod && !found; i++) {
                        if (strcmp(od[i].sym, sym) || strcmp(base_name(od[i].dir), member))
                                continue;
                        if (n < max) {
                                snprintf(out[n].sym, sizeof(out[n].sym), "%.127s", sym);
                                snprintf(out[n].dir, sizeof(out[n].dir), "%.*s",
                                         (int)(base_name(od[i].dir) - od[i].dir) - 1,
                                         od[i].dir);
                                n++;
                        }
                        found = 1;
                }
                if (!found && lost->n < MAX_FINDINGS)
                        snprintf(lost->line[lost->n++], sizeof(lost->line[0]),
                                 "libstrata.a(%s) defines %s, which no object %s under obj/ "
                                 "defines: a stale build?", member, sym, member);
        }
        cr_assert_eq(pclose(p), 0, "nm on libstrata.a failed");
        return n;
}

Test(prefix_owners, each_strata__prefix_has_one_directory)
{
        static struct def defs[MAX_DEFS];
        static struct findings lost, out;
        int n = archive_defs(defs, MAX_DEFS, &lost);

        cr_assert_gt(n, 150, "only %d strata__ definitions in libstrata.a", n);
        for (int i = 0; i < lost.n; i++)
                cr_expect_fail("%s", lost.line[i]);
        check_owners(defs, n, &out);
        for (int i = 0; i < out.n; i++)
                cr_expect_fail("%s", out.line[i]);
}

/* The attribution is right where names repeat: both registry.o's are found, each its own. */
Test(prefix_owners, members_of_one_name_keep_their_directories)
{
        static struct def defs[MAX_DEFS];
        static struct findings lost;
        int n = archive_defs(defs, MAX_DEFS, &lost), drivers = 0, strategy = 0;

        for (int i = 0; i < n; i++) {
                drivers += !strcmp(defs[i].sym, "strata__transport_pick") &&
                           !strcmp(defs[i].dir, "drivers");
                strategy += !strcmp(defs[i].sym, "strata__strategy_get") &&
                            !strcmp(defs[i].dir, "strategy");
        }
        cr_expect_eq(drivers, 1, "strata__transport_pick not found in drivers/registry.o");
        cr_expect_eq(strategy, 1, "strata__strategy_get not found in strategy/registry.o");
}

Test(prefix_owners, the_checker_can_fail)
{
        static const struct def d[] = {
                { "strata__procs_join", "strategy/process" },
                { "strata__procs", "strategy/process" },
                { "strata__shm_transport", "drivers/shm" },
                { "strata__procs_net", "drivers/shm" },
                { "strata__procsx_a", "drivers" },      /* another word */
                { "strata__world", "strategy/runtime" },
                { "strata__world_op", "drivers" },
                { "strata_public", "base" },            /* not internal */
                { "strata_public_too", "nn" },
        };
        static struct findings f;

        check_owners(d, (int)(sizeof(d) / sizeof(d[0])), &f);
        cr_assert_eq(f.n, 2, "found %d: %s | %s", f.n, f.n > 0 ? f.line[0] : "",
                     f.n > 1 ? f.line[1] : "");
        cr_expect_str_eq(f.line[0], "strata__procs_ is defined in strategy/process/ "
                                    "(strata__procs_join) and in drivers/shm/ (strata__procs_net)");
        cr_expect(strstr(f.line[1], "strata__world_ is defined in strategy/runtime/"), "%s",
                  f.line[1]);
        check_owners(d, 3, &f); /* the first three: one owner each */
        cr_expect_eq(f.n, 0, "%s", f.n ? f.line[0] : "");
}
