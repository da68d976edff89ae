/*
 * The layering holds: every library file includes only headers of its own layer or of the
 * layers below it (the table in docs/architecture.md, read here), every included header is
 * in the table, and no two object files of the library depend on each other in a cycle
 * (an object depends on another when it references a symbol the other defines, from nm).
 * The checkers are shown to fail on a fixture tree and a synthetic graph.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_LAYERS 16
#define MAX_HEADERS 64
#define MAX_OBJS 128
#define MAX_SYMS 8192

struct layers {
        int n;
        char name[MAX_LAYERS][32];
        char dir[MAX_LAYERS][32];                   /* "base" for `base/` */
        int nh;
        char header[MAX_HEADERS][48];               /* "status.h" (include/strata/) */
        int header_layer[MAX_HEADERS];
};

/* Copy the next backquoted or plain cell item from s into out; returns the rest or NULL. */
static const char *item(const char *s, char *out, size_t n)
{
        size_t k = 0;

        while (*s == ' ' || *s == ',' || *s == '`')
                s++;
        if (!*s || *s == '|')
                return NULL;
        while (*s && *s != ',' && *s != '|' && *s != '`' && *s != ' ' && k + 1 < n)
                out[k++] = *s++;
        out[k] = '\0';
        return s;
}

/* The table between the layer markers of @p root/docs/architecture.md; -1 when malformed. */
static int read_layers(const char *root, struct layers *L)
{
        char path[512], line[1024];
        int in = 0, rows = 0;
        FILE *f;

        memset(L, 0, sizeof(*L));
        snprintf(path, sizeof(path), "%s/docs/architecture.md", root);
        f = fopen(path, "r");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f)) {
                char *cell[4] = { 0 }, dir[48];
                int nc = 0;

                if (strstr(line, "<!-- layers:begin -->")) {
                        in = 1;
                        continue;
                }
                if (strstr(line, "<!-- layers:end -->"))
                        break;
                if (!in || line[0] != '|' || strstr(line, "---") || rows++ == 0)
                        continue; /* the header row and the separator */
                for (char *p = line; *p && nc < 4; p++)
                        if (*p == '|')
                                cell[nc++] = p + 1;
                if (nc < 4 || L->n == MAX_LAYERS || !item(cell[0], L->name[L->n], 32) ||
                    !item(cell[1], dir, sizeof(dir))) {
                        fclose(f);
                        return -1;
                }
                dir[strcspn(dir, "/")] = '\0';
                snprintf(L->dir[L->n], 32, "%.31s", dir);
                for (const char *s = cell[2]; L->nh < MAX_HEADERS &&
                     (s = item(s, L->header[L->nh], 48));)
                        L->header_layer[L->nh++] = L->n;
                L->n++;
        }
        fclose(f);
        return in && L->n > 0 ? 0 : -1;
}

/* Layer of a path relative to the root ("kernel/sm.c", "strata/comm.h" as an include). */
static int layer_of(const struct layers *L, const char *rel, int is_include)
{
        const char *pub = is_include ? "strata/" : "include/strata/";

        if (!strncmp(rel, pub, strlen(pub))) {
                for (int i = 0; i < L->nh; i++)
                        if (!strcmp(rel + strlen(pub), L->header[i]))
                                return L->header_layer[i];
                return -1;
        }
        for (int i = 0; i < L->n; i++) {
                size_t k = strlen(L->dir[i]);

                if (!strncmp(rel, L->dir[i], k) && rel[k] == '/')
                        return i;
        }
        return -1;
}

/* Check one file's quoted includes; returns the number of violations (each reported). */
static int check_file(const struct layers *L, const char *root, const char *rel, int report)
{
        char path[512], line[512], inc[256];
        int mine = layer_of(L, rel, 0), bad = 0, ln = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%.300s/%.200s", root, rel);
        f = fopen(path, "r");
        if (!f)
                return 1;
        while (fgets(line, sizeof(line), f)) {
                int theirs;

                ln++;
                if (sscanf(line, " # include \"%255[^\"]\"", inc) != 1)
                        continue;
                theirs = layer_of(L, inc, 1);
                if (theirs < 0 || mine < 0 || theirs > mine) {
                        bad++;
                        if (report)
                                cr_log_error("%s:%d includes \"%s\": %s", rel, ln, inc,
                                             theirs < 0 ? "not in the layer table"
                                                        : mine < 0 ? "file not in the table"
                                                                   : "a higher layer");
                        if (report && theirs >= 0 && mine >= 0)
                                cr_log_error("  (%s includes %s)", L->name[mine],
                                             L->name[theirs]);
                }
        }
        fclose(f);
        return bad;
}

static int source_name(const char *n)
{
        size_t k = strlen(n);

        return (k > 2 && (!strcmp(n + k - 2, ".c") || !strcmp(n + k - 2, ".h"))) ||
               (k > 3 && !strcmp(n + k - 3, ".cu"));
}

/* Check every source file below root/rel (recursively); returns the violations. */
static int check_tree(const struct layers *L, const char *root, const char *rel, int report,
                      int *files)
{
        char path[512], sub[512];
        struct dirent *e;
        int bad = 0;
        DIR *d;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        d = opendir(path);
        if (!d)
                return 0;
        while ((e = readdir(d))) {
                struct stat st;

                if (e->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name);
                snprintf(path, sizeof(path), "%.300s/%.200s", root, sub);
                if (stat(path, &st))
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        bad += check_tree(L, root, sub, report, files);
                } else if (source_name(e->d_name)) {
                        bad += check_file(L, root, sub, report);
                        ++*files;
                }
        }
        closedir(d);
        return bad;
}

static int check_all(const struct layers *L, const char *root, int report, int *files)
{
        int bad = 0;

        *files = 0;
        for (int i = 0; i < L->n; i++)
                bad += check_tree(L, root, L->dir[i], report, files);
        return bad + check_tree(L, root, "include/strata", report, files);
}

/* ---- cycles between objects ---- */

struct graph {
        int n;
        char name[MAX_OBJS][96];
        unsigned char edge[MAX_OBJS][MAX_OBJS];
};

/* Depth-first search; on a back edge, writes the cycle into buf and returns 1. */
static int dfs(const struct graph *g, int v, int *color, int *parent, char *buf, size_t n)
{
        color[v] = 1;
        for (int w = 0; w < g->n; w++) {
                if (!g->edge[v][w] || w == v)
                        continue;
                if (color[w] == 1) {
                        size_t k = (size_t)snprintf(buf, n, "%s", g->name[w]);

                        for (int u = v, c = 0; c < g->n && k < n; u = parent[u], c++) {
                                char tmp[1024];

                                snprintf(tmp, sizeof(tmp), "%s <- %s", buf, g->name[u]);
                                k = (size_t)snprintf(buf, n, "%s", tmp);
                                if (u == w)
                                        break;
                        }
                        return 1;
                }
                if (color[w] == 0) {
                        parent[w] = v;
                        if (dfs(g, w, color, parent, buf, n))
                                return 1;
                }
        }
        color[v] = 2;
        return 0;
}

static int find_cycle(const struct graph *g, char *buf, size_t n)
{
        int color[MAX_OBJS] = { 0 }, parent[MAX_OBJS];

        for (int v = 0; v < g->n; v++)
                if (!color[v] && dfs(g, v, color, parent, buf, n))
                        return 1;
        return 0;
}

struct symtab {
        int n;
        char name[MAX_SYMS][64];
        int obj[MAX_SYMS];
};

static void list_objects(const char *dir, struct graph *g)
{
        char path[512];
        struct dirent *e;
        DIR *d = opendir(dir);

        if (!d)
                return;
        while ((e = readdir(d)) && g->n < MAX_OBJS) {
                size_t k = strlen(e->d_name);

                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                if (k > 2 && !strcmp(e->d_name + k - 2, ".o"))
                        snprintf(g->name[g->n++], 96, "%.95s", path);
                else if (!strchr(e->d_name, '.'))
                        list_objects(path, g);
        }
        closedir(d);
}

/* Run nm on every object: first the definitions, then the references become edges. */
static void build_graph(struct graph *g, struct symtab *t)
{
        for (int pass = 0; pass < 2; pass++)
                for (int o = 0; o < g->n; o++) {
                        char cmd[256], line[512], type, sym[256];
                        FILE *p;

                        snprintf(cmd, sizeof(cmd), "nm %s", g->name[o]);
                        p = popen(cmd, "r");
                        cr_assert_not_null(p);
                        while (fgets(line, sizeof(line), p)) {
                                char addr[32];
                                /* "<addr> T name" when defined, "<blanks> U name" when not */
                                int defined = line[0] != ' ';

                                if (defined ? sscanf(line, "%31s %c %255s", addr, &type, sym) != 3
                                            : sscanf(line, " %c %255s", &type, sym) != 2)
                                        continue;
                                if (pass == 0 && defined && strchr("TDBR", type) &&
                                    t->n < MAX_SYMS) {
                                        snprintf(t->name[t->n], 64, "%.63s", sym);
                                        t->obj[t->n++] = o;
                                }
                                if (pass == 1 && !defined && type == 'U')
                                        for (int s = 0; s < t->n; s++)
                                                if (t->obj[s] != o && !strcmp(t->name[s], sym))
                                                        g->edge[o][t->obj[s]] = 1;
                        }
                        pclose(p);
                }
}

/* ---- the tests ---- */

Test(layering, no_file_includes_a_higher_layer)
{
        struct layers L;
        int files;

        cr_assert_eq(read_layers(STRATA_SOURCE_DIR, &L), 0,
                     "docs/architecture.md has no readable layer table between the markers");
        cr_assert_geq(L.n, 7, "only %d layers read", L.n);
        cr_assert_eq(check_all(&L, STRATA_SOURCE_DIR, 1, &files), 0,
                     "include violations (listed above)");
        cr_assert_gt(files, 50, "only %d files checked", files);
}

Test(layering, no_cycle_between_objects)
{
        static struct graph g;
        static struct symtab t;
        static const char *const dirs[] = { "base", "arch", "alloc", "kernel", "drivers", "nn",
                                            "strategy" };
        char cycle[1024];
        int edges = 0;

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                char dir[512];

                snprintf(dir, sizeof(dir), "%s/obj/%s", STRATA_BUILD_DIR, dirs[i]);
                list_objects(dir, &g);
        }
        cr_assert_gt(g.n, 20, "only %d objects under %s/obj", g.n, STRATA_BUILD_DIR);
        build_graph(&g, &t);
        cr_assert_gt(t.n, 100, "nm gave only %d symbols", t.n);
        for (int v = 0; v < g.n; v++)
                for (int w = 0; w < g.n; w++)
                        edges += g.edge[v][w];
        cr_assert_gt(edges, 40, "only %d dependencies between objects: nm misread?", edges);
        cr_assert_not(find_cycle(&g, cycle, sizeof(cycle)), "cycle: %s", cycle);
}

static void put(const char *root, const char *rel, const char *text)
{
        char path[512], dir[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        snprintf(dir, sizeof(dir), "%s", path);
        for (char *s = dir + strlen(root) + 1; (s = strchr(s, '/')); s++) {
                *s = '\0';
                mkdir(dir, 0700);
                *s = '/';
        }
        f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

/* The include checker on a fixture: a downward include passes, an upward one is caught. */
Test(layering, checker_catches_an_upward_include)
{
        char root[] = "/tmp/strata-layers-XXXXXX";
        struct layers L;
        int files;

        cr_assert_not_null(mkdtemp(root));
        put(root, "docs/architecture.md", "# x\n<!-- layers:begin -->\n| layer | dirs | h |\n"
                                          "| --- | --- | --- |\n| low | `alloc/` | `arena.h` |\n"
                                          "| high | `kernel/` | `sm.h`, `workers.h` |\n"
                                          "<!-- layers:end -->\n");
        cr_assert_eq(read_layers(root, &L), 0);
        cr_assert_eq(L.n, 2);
        cr_assert_eq(L.nh, 3);
        put(root, "kernel/k.c", "#include \"alloc/y.h\"\n#include \"strata/arena.h\"\n");
        put(root, "alloc/y.h", "#include \"strata/arena.h\"\n");
        cr_assert_eq(check_all(&L, root, 0, &files), 0);
        cr_assert_eq(files, 2);
        put(root, "alloc/a.c", "#include <stdio.h>\n#  include \"kernel/x.h\"\n");
        cr_assert_eq(check_all(&L, root, 0, &files), 1, "upward include not caught");
        put(root, "alloc/a.c", "#include \"strata/workers.h\"\n#include \"nn/z.h\"\n");
        cr_assert_eq(check_all(&L, root, 0, &files), 2, "public header or unknown dir missed");
        put(root, "docs/architecture.md", "# x\n| no | markers |\n");
        cr_assert_eq(read_layers(root, &L), -1, "a file without the table was accepted");
}

/* The cycle finder on synthetic graphs. */
Test(layering, checker_catches_a_cycle)
{
        static struct graph g;
        char cycle[1024];

        g.n = 4;
        snprintf(g.name[0], 96, "a.o");
        snprintf(g.name[1], 96, "b.o");
        snprintf(g.name[2], 96, "c.o");
        snprintf(g.name[3], 96, "d.o");
        g.edge[0][1] = g.edge[1][2] = g.edge[0][3] = g.edge[3][2] = 1;
        cr_assert_not(find_cycle(&g, cycle, sizeof(cycle)), "false cycle: %s", cycle);
        g.edge[2][0] = 1;
        cr_assert(find_cycle(&g, cycle, sizeof(cycle)));
        cr_assert(strstr(cycle, "a.o") && strstr(cycle, "c.o"), "cycle reported as %s", cycle);
}
