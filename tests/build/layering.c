/*
 * The library keeps its layering. The layer table is read from docs/architecture.md (between
 * <!-- layers:begin --> and <!-- layers:end -->, bottom layer first), and this is proved:
 * every .c, .h and .cu under the table's directories, and every include/strata/ header,
 * includes (quoted includes; <...> ones are not the library's) only headers that the table
 * places, of its own layer or of a layer below; no object of the library uses a symbol that an
 * object of a higher layer defines; and no objects depend on each other in a cycle (A depends
 * on B when nm shows A referencing a symbol that B defines; objects whose source is gone are
 * not the library's and are skipped). Each violation, upward edge and cycle is its own
 * failure. The checkers are shown to be able to fail: on a fixture tree, on synthetic graphs
 * and on objects compiled here.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LAYERS 16
#define MAX_DIRS 32
#define MAX_HEADERS 64
#define MAX_FINDINGS 256
#define MAX_OBJS 256
#define MAX_SYMS 32768
#define SYM_POOL (1 << 21)

struct layers {
        int n;                                  /* layers, bottom first */
        char name[MAX_LAYERS][32];
        int nd;
        char dir[MAX_DIRS][64];                 /* "drivers/", with its slash */
        int dir_layer[MAX_DIRS];
        int nh;
        char header[MAX_HEADERS][64];           /* "status.h", in include/strata/ */
        int header_layer[MAX_HEADERS];
        char err[256];                          /* why the table was refused */
};

/* What a checker found, one line each in the order found; total counts those not kept too. */
struct findings {
        int n, total;
        char line[MAX_FINDINGS][1024];
};

static void __attribute__((format(printf, 2, 3))) add(struct findings *f, const char *fmt, ...)
{
        va_list ap;

        if (f->n < MAX_FINDINGS) {
                va_start(ap, fmt);
                vsnprintf(f->line[f->n++], sizeof(f->line[0]), fmt, ap);
                va_end(ap);
        }
        f->total++;
}

static void report(const struct findings *f)
{
        for (int i = 0; i < f->n; i++)
                cr_expect_fail("%s", f->line[i]);
        cr_expect_eq(f->total, f->n, "and %d more not listed", f->total - f->n);
}

static int found(const struct findings *f, const char *a, const char *b)
{
        for (int i = 0; i < f->n; i++)
                if (strstr(f->line[i], a) && (!b || strstr(f->line[i], b)))
                        return 1;
        return 0;
}

/* ---- the table ---- */

static char *trim(char *s, const char *junk)
{
        size_t k;

        while (*s && strchr(junk, *s))
                s++;
        for (k = strlen(s); k > 0 && strchr(junk, s[k - 1]); k--)
                s[k - 1] = '\0';
        return s;
}

/* Split "| a | b | c |" into its trimmed cells, in place; -1 when it is not such a row. */
static int cells(char *row, char **cell, int max)
{
        int n = 0;
        char *p;

        row = trim(row, " \t\r\n");
        if (row[0] != '|' || strlen(row) < 2 || row[strlen(row) - 1] != '|')
                return -1;
        row[strlen(row) - 1] = '\0';
        for (p = row + 1; p; n++) {
                char *bar = strchr(p, '|');

                if (n == max)
                        return -1;
                if (bar)
                        *bar++ = '\0';
                cell[n] = trim(p, " \t");
                p = bar;
        }
        return n;
}

/* Next comma-separated item of a cell, blanks and backquotes stripped; NULL after the last. */
static char *next_item(char **s)
{
        char *item = *s, *comma;

        if (!item)
                return NULL;
        comma = strchr(item, ',');
        if (comma)
                *comma++ = '\0';
        *s = comma;
        return trim(item, " \t`");
}

/* A plain relative name ending in suffix: letters, digits, _ - . / only, no "..". */
static int plain(const char *s, const char *suffix)
{
        size_t k = strlen(s), ks = strlen(suffix);

        if (k <= ks || k >= 64 || strcmp(s + k - ks, suffix) || s[0] == '/' || strstr(s, ".."))
                return 0;
        for (; *s; s++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./",
                            *s))
                        return 0;
        return 1;
}

/* Cell items into the table; 0, or -1 with the reason in L->err. */
static int row_items(struct layers *L, char *cell, int is_dir, int ln)
{
        char *s = cell, *it;

        if (!*cell && is_dir) {
                snprintf(L->err, sizeof(L->err), "line %d: no directory", ln);
                return -1;
        }
        if (!*cell)
                return 0;
        while ((it = next_item(&s))) {
                if (!plain(it, is_dir ? "/" : ".h") || (!is_dir && strchr(it, '/'))) {
                        snprintf(L->err, sizeof(L->err), "line %d: \"%.60s\" is not a %s", ln,
                                 it, is_dir ? "directory ending in /" : "header name (x.h)");
                        return -1;
                }
                for (int i = 0; i < (is_dir ? L->nd : L->nh); i++)
                        if (!strcmp(is_dir ? L->dir[i] : L->header[i], it)) {
                                snprintf(L->err, sizeof(L->err), "line %d: %.60s listed twice",
                                         ln, it);
                                return -1;
                        }
                if (is_dir ? L->nd == MAX_DIRS : L->nh == MAX_HEADERS) {
                        snprintf(L->err, sizeof(L->err), "line %d: too many names", ln);
                        return -1;
                }
                if (is_dir) {
                        snprintf(L->dir[L->nd], sizeof(L->dir[0]), "%s", it);
                        L->dir_layer[L->nd++] = L->n;
                } else {
                        snprintf(L->header[L->nh], sizeof(L->header[0]), "%s", it);
                        L->header_layer[L->nh++] = L->n;
                }
        }
        return 0;
}

/* The table between the markers of root/docs/architecture.md; 0, or -1 with L->err. */
static int read_layers(const char *root, struct layers *L)
{
        char path[512], line[1024];
        int state = 0, rows = 0, ln = 0, rc = -1; /* state: 0 before, 1 inside, 2 after */
        FILE *f;

        memset(L, 0, sizeof(*L));
        snprintf(path, sizeof(path), "%s/docs/architecture.md", root);
        f = fopen(path, "r");
        if (!f) {
                snprintf(L->err, sizeof(L->err), "cannot open %.200s", path);
                return -1;
        }
        while (state < 2 && fgets(line, sizeof(line), f)) {
                char *cell[8];
                int nc;

                ln++;
                if (strstr(line, "<!-- layers:begin -->")) {
                        state = 1;
                        continue;
                }
                if (state == 0)
                        continue;
                if (strstr(line, "<!-- layers:end -->")) {
                        state = 2;
                        break;
                }
                if (!*trim(line, " \t\r\n"))
                        continue;
                nc = cells(line, cell, 8);
                if (nc != 3) {
                        snprintf(L->err, sizeof(L->err),
                                 "line %d: not a row of 3 cells (layer | directories | headers)",
                                 ln);
                        goto out;
                }
                if (rows++ < 2) /* the head row and the |---| row */
                        continue;
                cell[0] = trim(cell[0], "`");
                if (L->n == MAX_LAYERS || !plain(cell[0], "") || strchr(cell[0], '/')) {
                        snprintf(L->err, sizeof(L->err), "line %d: bad layer name \"%.60s\"", ln,
                                 cell[0]);
                        goto out;
                }
                for (int i = 0; i < L->n; i++)
                        if (!strcmp(L->name[i], cell[0])) {
                                snprintf(L->err, sizeof(L->err), "line %d: layer %.60s twice",
                                         ln, cell[0]);
                                goto out;
                        }
                snprintf(L->name[L->n], sizeof(L->name[0]), "%s", cell[0]);
                if (row_items(L, cell[1], 1, ln) || row_items(L, cell[2], 0, ln))
                        goto out;
                L->n++;
        }
        if (state != 2)
                snprintf(L->err, sizeof(L->err), "no <!-- layers:%s --> marker",
                         state ? "end" : "begin");
        else if (L->n == 0)
                snprintf(L->err, sizeof(L->err), "no layer between the markers");
        else
                rc = 0;
out:
        fclose(f);
        return rc;
}

/* ---- includes ---- */

static int header_layer(const struct layers *L, const char *name)
{
        for (int i = 0; i < L->nh; i++)
                if (!strcmp(name, L->header[i]))
                        return L->header_layer[i];
        return -1;
}

/* Layer of a path from the root: a public header by the table, any other by its directory. */
static int layer_of_path(const struct layers *L, const char *rel)
{
        static const char pub[] = "include/strata/";
        int best = -1;
        size_t best_len = 0;

        if (strstr(rel, ".."))
                return -1;
        if (!strncmp(rel, pub, strlen(pub)))
                return header_layer(L, rel + strlen(pub));
        for (int i = 0; i < L->nd; i++) {
                size_t k = strlen(L->dir[i]);

                if (k > best_len && !strncmp(rel, L->dir[i], k)) {
                        best = L->dir_layer[i];
                        best_len = k;
                }
        }
        return best;
}

/* Layer of `#include "inc"` in the file rel: from the root (-I. -Iinclude), else from rel's
 * own directory where such a file exists (the compiler looks there first). */
static int layer_of_include(const struct layers *L, const char *root, const char *rel,
                            const char *inc)
{
        char near[512], path[1024];
        const char *slash = strrchr(rel, '/');
        int l;

        if (!strncmp(inc, "strata/", 7))
                return strstr(inc, "..") ? -1 : header_layer(L, inc + 7);
        l = layer_of_path(L, inc);
        if (l >= 0 || !slash)
                return l;
        snprintf(near, sizeof(near), "%.*s/%.250s", (int)(slash - rel), rel, inc);
        snprintf(path, sizeof(path), "%.500s/%.500s", root, near);
        return access(path, F_OK) ? -1 : layer_of_path(L, near);
}

/* Check the quoted includes of root/rel. */
static void check_file(const struct layers *L, const char *root, const char *rel,
                       struct findings *out)
{
        char path[1024], line[1024], inc[256];
        int mine = layer_of_path(L, rel), ln = 0, at_start = 1;
        FILE *f;

        if (mine < 0) {
                add(out, "%s: the file is in no layer of the table", rel);
                return;
        }
        snprintf(path, sizeof(path), "%.500s/%.500s", root, rel);
        f = fopen(path, "r");
        if (!f) {
                add(out, "%s: cannot be read", rel);
                return;
        }
        while (fgets(line, sizeof(line), f)) {
                int start = at_start, theirs;

                at_start = strchr(line, '\n') != NULL;
                ln += start;
                if (!start || sscanf(line, " # include \"%255[^\"]\"", inc) != 1)
                        continue;
                theirs = layer_of_include(L, root, rel, inc);
                if (theirs < 0)
                        add(out, "%s:%d: includes \"%s\", which is not in the layer table "
                                 "(the file is in layer %s)", rel, ln, inc, L->name[mine]);
                else if (theirs > mine)
                        add(out, "%s:%d: includes \"%s\" of layer %s, above the file's layer %s",
                            rel, ln, inc, L->name[theirs], L->name[mine]);
        }
        fclose(f);
}

static int is_table_dir(const struct layers *L, const char *rel)
{
        for (int i = 0; i < L->nd; i++)
                if (!strncmp(L->dir[i], rel, strlen(rel)) && L->dir[i][strlen(rel)] == '/' &&
                    L->dir[i][strlen(rel) + 1] == '\0')
                        return 1;
        return 0;
}

static int source_name(const char *n)
{
        size_t k = strlen(n);

        return (k > 2 && (!strcmp(n + k - 2, ".c") || !strcmp(n + k - 2, ".h"))) ||
               (k > 3 && !strcmp(n + k - 3, ".cu"));
}

/* Every source below root/dir (dir without its slash), in name order; returns the count.
 * A subdirectory that is a row of its own is walked by that row. */
static int walk(const struct layers *L, const char *root, const char *dir, struct findings *out)
{
        char path[1024], sub[512];
        struct dirent **e;
        int n, files = 0;

        snprintf(path, sizeof(path), "%.500s/%.500s", root, dir);
        n = scandir(path, &e, NULL, alphasort);
        for (int i = 0; i < n; i++) {
                struct stat st;

                snprintf(sub, sizeof(sub), "%.250s/%.250s", dir, e[i]->d_name);
                snprintf(path, sizeof(path), "%.500s/%.500s", root, sub);
                if (e[i]->d_name[0] != '.' && !stat(path, &st)) {
                        if (S_ISDIR(st.st_mode) && !is_table_dir(L, sub))
                                files += walk(L, root, sub, out);
                        else if (S_ISREG(st.st_mode) && source_name(e[i]->d_name)) {
                                check_file(L, root, sub, out);
                                files++;
                        }
                }
                free(e[i]);
        }
        if (n >= 0)
                free(e);
        return files;
}

/* Check every file of the table's directories and include/strata/; returns the file count. */
static int check_includes(const struct layers *L, const char *root, struct findings *out)
{
        int files = 0;

        for (int i = 0; i < L->nd; i++) {
                char dir[64];

                snprintf(dir, sizeof(dir), "%.*s", (int)strlen(L->dir[i]) - 1, L->dir[i]);
                files += walk(L, root, dir, out);
        }
        return files + walk(L, root, "include/strata", out);
}

/* ---- cycles between objects ---- */

struct graph {
        int n;
        char name[MAX_OBJS][128];               /* "strategy/runtime.o", from obj/ */
        unsigned char edge[MAX_OBJS][MAX_OBJS];
        int why[MAX_OBJS][MAX_OBJS];            /* a symbol of the edge: pool offset + 1 */
        int pool_used;
        char pool[SYM_POOL];
};

static int by_name(const void *a, const void *b)
{
        return strcmp(a, b);
}

/* Objects below obj_root/dir whose source (same path, .c or .cu) is in src_root. */
static void list_objects(const char *src_root, const char *obj_root, const char *dir,
                         struct graph *g)
{
        char path[1024], sub[512];
        struct dirent *e;
        DIR *d;

        snprintf(path, sizeof(path), "%.500s/%.500s", obj_root, dir);
        d = opendir(path);
        if (!d)
                return;
        while ((e = readdir(d))) {
                size_t k = strlen(e->d_name);
                struct stat st;

                snprintf(sub, sizeof(sub), "%.250s/%.250s", dir, e->d_name);
                snprintf(path, sizeof(path), "%.500s/%.500s", obj_root, sub);
                if (e->d_name[0] == '.' || stat(path, &st))
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        list_objects(src_root, obj_root, sub, g);
                        continue;
                }
                if (k < 3 || strcmp(e->d_name + k - 2, ".o") || g->n == MAX_OBJS)
                        continue;
                snprintf(path, sizeof(path), "%.500s/%.*s.c", src_root, (int)strlen(sub) - 2,
                         sub);
                if (access(path, F_OK)) {
                        strcat(path, "u");
                        if (access(path, F_OK))
                                continue; /* stale: its source was removed or moved */
                }
                for (int i = 0; i < g->n; i++)
                        if (!strcmp(g->name[i], sub))
                                goto next;
                if (strlen(sub) < sizeof(g->name[0]))
                        snprintf(g->name[g->n++], sizeof(g->name[0]), "%.127s", sub);
next:;
        }
        closedir(d);
}

static void list_all_objects(const char *src_root, const char *obj_root, const char *const *dirs,
                             int ndirs, struct graph *g)
{
        for (int i = 0; i < ndirs; i++)
                list_objects(src_root, obj_root, dirs[i], g);
        qsort(g->name, (size_t)g->n, sizeof(g->name[0]), by_name);
}

struct sym {
        int name;                               /* pool offset */
        int obj;
};

static const struct graph *sort_graph;

static int by_sym(const void *a, const void *b)
{
        return strcmp(sort_graph->pool + ((const struct sym *)a)->name,
                      sort_graph->pool + ((const struct sym *)b)->name);
}

/* One nm over all objects: definitions (T D B R, and G S V W u i) and references (U) give the
 * edges. A symbol defined in several objects (a plugin's own copy of a library function)
 * resolves, with a layer table @p L, to its definitions of the lowest layer only, as the
 * library's link would. Returns the number of defined symbols, -1 when nm fails. */
static int build_graph(const struct layers *L, const char *obj_root, struct graph *g)
{
        static struct sym def[MAX_SYMS], ref[MAX_SYMS];
        static char cmd[MAX_OBJS * 140 + 1024];
        int nd = 0, nr = 0, cur = 0, rc;
        size_t k, cap = 0;
        char *line = NULL;
        FILE *p;

        k = (size_t)snprintf(cmd, sizeof(cmd), "cd '%s' && nm -A -P", obj_root);
        for (int i = 0; i < g->n && k < sizeof(cmd); i++)
                k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " '%s'", g->name[i]);
        if (k >= sizeof(cmd))
                return -1;
        p = popen(cmd, "r");
        if (!p)
                return -1;
        while (getline(&line, &cap, p) > 0) {
                char *colon = strstr(line, ": "), *sym, *type;
                struct sym *s;
                size_t len;

                if (!colon)
                        continue;
                *colon = '\0';
                sym = strtok(colon + 2, " \n");
                type = strtok(NULL, " \n");
                if (!sym || !type || type[1])
                        continue;
                if (strcmp(g->name[cur], line))
                        for (cur = 0; cur < g->n && strcmp(g->name[cur], line); cur++)
                                ;
                if (cur == g->n) {
                        cur = 0;
                        continue;
                }
                if (*type == 'U')
                        s = nr < MAX_SYMS ? &ref[nr++] : NULL;
                else if (strchr("TDBRGSVWui", *type))
                        s = nd < MAX_SYMS ? &def[nd++] : NULL;
                else
                        continue;
                len = strlen(sym) + 1;
                if (!s || (size_t)g->pool_used + len > sizeof(g->pool))
                        continue;
                memcpy(g->pool + g->pool_used, sym, len);
                s->name = g->pool_used;
                s->obj = cur;
                g->pool_used += (int)len;
        }
        free(line);
        rc = pclose(p);
        sort_graph = g;
        qsort(def, (size_t)nd, sizeof(def[0]), by_sym);
        for (int r = 0; r < nr; r++) {
                struct sym *d = bsearch(&ref[r], def, (size_t)nd, sizeof(def[0]), by_sym);

                int low = INT_MAX;

                while (d && d > def && !by_sym(d - 1, &ref[r]))
                        d--;
                for (struct sym *e = d; L && e && e < def + nd && !by_sym(e, &ref[r]); e++)
                        if (layer_of_path(L, g->name[e->obj]) < low)
                                low = layer_of_path(L, g->name[e->obj]);
                for (; d && d < def + nd && !by_sym(d, &ref[r]); d++)
                        if (d->obj != ref[r].obj &&
                            (!L || layer_of_path(L, g->name[d->obj]) == low)) {
                                g->edge[ref[r].obj][d->obj] = 1;
                                if (!g->why[ref[r].obj][d->obj])
                                        g->why[ref[r].obj][d->obj] = ref[r].name + 1;
                        }
        }
        return rc ? -1 : nd;
}

struct tarjan {
        int index[MAX_OBJS], low[MAX_OBJS], on[MAX_OBJS], stack[MAX_OBJS], comp[MAX_OBJS];
        int next, top, ncomp;
};

static void strong(const struct graph *g, struct tarjan *t, int v)
{
        t->index[v] = t->low[v] = ++t->next;
        t->stack[t->top++] = v;
        t->on[v] = 1;
        for (int w = 0; w < g->n; w++) {
                if (!g->edge[v][w] || w == v)
                        continue;
                if (!t->index[w]) {
                        strong(g, t, w);
                        if (t->low[w] < t->low[v])
                                t->low[v] = t->low[w];
                } else if (t->on[w] && t->index[w] < t->low[v]) {
                        t->low[v] = t->index[w];
                }
        }
        if (t->low[v] == t->index[v]) {
                int w;

                do {
                        w = t->stack[--t->top];
                        t->on[w] = 0;
                        t->comp[w] = t->ncomp;
                } while (w != v);
                t->ncomp++;
        }
}

/* One finding per knot of objects (strongly connected, two or more): its shortest cycle
 * through its first object, with a symbol per edge, and the knot's other objects. */
static int find_cycles(const struct graph *g, struct findings *out)
{
        static struct tarjan t;
        int knots = 0;

        memset(&t, 0, sizeof(t));
        for (int v = 0; v < g->n; v++)
                if (!t.index[v])
                        strong(g, &t, v);
        for (int c = 0; c < t.ncomp; c++) {
                int prev[MAX_OBJS], queue[MAX_OBJS], path[MAX_OBJS + 1], on_path[MAX_OBJS] = { 0 };
                int start = -1, size = 0, head = 0, tail = 0, last = -1, len = 0;
                char msg[4096];
                size_t k;

                for (int v = 0; v < g->n; v++)
                        if (t.comp[v] == c) {
                                if (start < 0)
                                        start = v;
                                size++;
                        }
                if (size < 2)
                        continue;
                for (int v = 0; v < g->n; v++)
                        prev[v] = -1;
                queue[tail++] = start;
                while (head < tail && last < 0) {
                        int v = queue[head++];

                        for (int w = 0; w < g->n && last < 0; w++) {
                                if (!g->edge[v][w] || w == v || t.comp[w] != c)
                                        continue;
                                if (w == start)
                                        last = v;
                                else if (prev[w] < 0) {
                                        prev[w] = v;
                                        queue[tail++] = w;
                                }
                        }
                }
                for (int v = last; v != start; v = prev[v])
                        path[len++] = v;
                path[len++] = start;
                for (int i = 0; i < len / 2; i++) { /* it was collected backwards */
                        int s = path[i];

                        path[i] = path[len - 1 - i];
                        path[len - 1 - i] = s;
                }
                path[len] = start;
                k = (size_t)snprintf(msg, sizeof(msg), "cycle: %s", g->name[start]);
                for (int i = 0; i < len && k < sizeof(msg); i++) {
                        on_path[path[i]] = 1;
                        k += (size_t)snprintf(msg + k, sizeof(msg) - k, " -> %s",
                                              g->name[path[i + 1]]);
                }
                for (int i = 0, n = 0; i < len && k < sizeof(msg); i++) {
                        int why = g->why[path[i]][path[i + 1]];

                        if (why)
                                k += (size_t)snprintf(msg + k, sizeof(msg) - k, "%s%.100s",
                                                      n++ ? ", " : " (through ",
                                                      g->pool + why - 1);
                        if (n && i == len - 1 && k < sizeof(msg))
                                k += (size_t)snprintf(msg + k, sizeof(msg) - k, ")");
                }
                for (int v = 0, first = 1; v < g->n && k < sizeof(msg); v++)
                        if (t.comp[v] == c && !on_path[v]) {
                                k += (size_t)snprintf(msg + k, sizeof(msg) - k, "%s%s",
                                                      first ? "; tangled with it too: " : ", ",
                                                      g->name[v]);
                                first = 0;
                        }
                add(out, "%s", msg);
                knots++;
        }
        return knots;
}

/* One finding per object that references a symbol defined by an object of a higher layer
 * (an upward edge, whether or not it closes a cycle). Returns how many. */
static int find_upward(const struct layers *L, const struct graph *g, struct findings *out)
{
        int n = 0;

        for (int v = 0; v < g->n; v++) {
                int lv = layer_of_path(L, g->name[v]);

                for (int w = 0; w < g->n; w++) {
                        int lw = layer_of_path(L, g->name[w]), why = g->why[v][w];

                        if (!g->edge[v][w] || lv < 0 || lw <= lv)
                                continue;
                        add(out, "upward: %s (%s) uses %s (%s)%s%.100s", g->name[v],
                            L->name[lv], g->name[w], L->name[lw], why ? " through " : "",
                            why ? g->pool + why - 1 : "");
                        n++;
                }
        }
        return n;
}

/* ---- the library ---- */

Test(layering, no_file_includes_a_higher_layer)
{
        static struct layers L;
        static struct findings out;
        int files;

        cr_assert_eq(read_layers(STRATA_SOURCE_DIR, &L), 0, "docs/architecture.md: %s", L.err);
        files = check_includes(&L, STRATA_SOURCE_DIR, &out);
        report(&out);
        cr_expect_gt(files, 50, "only %d files checked", files);
}

/* The library's objects (those of the table's directories) and their dependencies. */
static void library_graph(struct layers *L, struct graph *g)
{
        static char dir[MAX_DIRS][64];
        const char *dirs[MAX_DIRS];
        char obj[512];
        int syms, edges = 0;

        cr_assert_eq(read_layers(STRATA_SOURCE_DIR, L), 0, "docs/architecture.md: %s", L->err);
        for (int i = 0; i < L->nd; i++) { /* without the slash */
                snprintf(dir[i], sizeof(dir[i]), "%.*s", (int)strlen(L->dir[i]) - 1, L->dir[i]);
                dirs[i] = dir[i];
        }
        snprintf(obj, sizeof(obj), "%s/obj", STRATA_BUILD_DIR);
        list_all_objects(STRATA_SOURCE_DIR, obj, dirs, L->nd, g);
        cr_assert_gt(g->n, 20, "only %d objects under %s", g->n, obj);
        syms = build_graph(L, obj, g);
        cr_assert_gt(syms, 100, "nm gave %d defined symbols", syms);
        for (int v = 0; v < g->n; v++)
                for (int w = 0; w < g->n; w++)
                        edges += g->edge[v][w];
        cr_assert_gt(edges, 40, "only %d dependencies between objects: nm misread?", edges);
}

Test(layering, no_cycle_between_objects)
{
        static struct layers L;
        static struct graph g;
        static struct findings out;

        library_graph(&L, &g);
        find_cycles(&g, &out);
        report(&out);
}

Test(layering, no_object_uses_a_higher_layer)
{
        static struct layers L;
        static struct graph g;
        static struct findings out;

        library_graph(&L, &g);
        find_upward(&L, &g, &out);
        report(&out);
}

/* ---- the checkers can fail ---- */

static void put(const char *root, const char *rel, const char *text)
{
        char path[1024];
        FILE *f;

        snprintf(path, sizeof(path), "%.500s/%.500s", root, rel);
        for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
                *s = '\0';
                mkdir(path, 0700);
                *s = '/';
        }
        f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(text, f);
        fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        return remove(path);
}

static void rm_tree(const char *root)
{
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define TABLE_HEAD "# x\n\n<!-- layers:begin -->\n| layer | directories | public headers |\n" \
                   "| --- | --- | --- |\n"

/* The include checker on a fixture tree: downward includes pass, every other kind is caught. */
Test(layering, include_checker_fails_on_a_fixture)
{
        char root[] = "/tmp/strata-layering-XXXXXX";
        static struct layers L;
        static struct findings out;

        cr_assert_not_null(mkdtemp(root));
        put(root, "docs/architecture.md", TABLE_HEAD
            "| low | `alloc/` | `arena.h` |\n"
            "| high | `kernel/`, `drivers/` | `sm.h`, `workers.h` |\n<!-- layers:end -->\n");
        cr_assert_eq(read_layers(root, &L), 0, "%s", L.err);
        cr_assert_eq(L.n, 2);
        cr_assert_eq(L.nd, 3);
        cr_assert_eq(L.nh, 3);
        put(root, "kernel/k.c", "#include <stdio.h>\n#include \"alloc/y.h\"\n"
                                "#include \"strata/arena.h\"\n#include \"drivers/sub/d.h\"\n");
        put(root, "drivers/sub/d.h", "#include \"kernel/k.h\"\n");
        put(root, "alloc/y.h", "#include \"strata/arena.h\"\n#include \"z.h\"\n");
        put(root, "alloc/z.h", "");
        put(root, "include/strata/sm.h", "#include \"strata/arena.h\"\n");
        cr_assert_eq(check_includes(&L, root, &out), 5);
        cr_assert_eq(out.total, 0, "false finding: %s", out.line[0]);

        put(root, "alloc/a.c", "#include \"alloc/z.h\"\n#  include \"kernel/x.h\"\n"
                               "#include \"strata/workers.h\"\n#include \"nn/z.h\"\n"
                               "#include \"../kernel/x.h\"\n");
        put(root, "include/strata/arena.h", "#include \"strata/sm.h\"\n");
        put(root, "include/strata/new.h", "");
        cr_assert_eq(check_includes(&L, root, &out), 8);
        cr_expect(found(&out, "alloc/a.c:2: includes \"kernel/x.h\" of layer high", "layer low"),
                  "upward include into a directory not caught");
        cr_expect(found(&out, "alloc/a.c:3: includes \"strata/workers.h\"", NULL),
                  "upward include of a public header not caught");
        cr_expect(found(&out, "alloc/a.c:4: includes \"nn/z.h\"", "not in the layer table"),
                  "include of an unknown directory not caught");
        cr_expect(found(&out, "alloc/a.c:5:", "not in the layer table"), "../ not refused");
        cr_expect(found(&out, "include/strata/arena.h:1: includes \"strata/sm.h\"", NULL),
                  "public header including a higher one not caught");
        cr_expect(found(&out, "include/strata/new.h: the file is in no layer", NULL),
                  "public header missing from the table not caught");
        cr_expect_eq(out.total, 6, "%d findings", out.total);

        put(root, "docs/architecture.md", "# x\n| low | `alloc/` | |\n");
        cr_expect_eq(read_layers(root, &L), -1, "a file without markers was read");
        cr_expect(strstr(L.err, "begin"), "%s", L.err);
        put(root, "docs/architecture.md", TABLE_HEAD "| low | `alloc/` | |\n");
        cr_expect_eq(read_layers(root, &L), -1, "a table without its end marker was read");
        put(root, "docs/architecture.md", TABLE_HEAD "| low | `alloc/` |\n<!-- layers:end -->\n");
        cr_expect_eq(read_layers(root, &L), -1, "a row of 2 cells was read");
        cr_expect(strstr(L.err, "line 6"), "%s", L.err);
        put(root, "docs/architecture.md", TABLE_HEAD "| low | `alloc` | |\n<!-- layers:end -->\n");
        cr_expect_eq(read_layers(root, &L), -1, "a directory without / was read");
        put(root, "docs/architecture.md", TABLE_HEAD "| a | `alloc/` | `x.h` |\n"
                                          "| b | `kernel/` | `x.h` |\n<!-- layers:end -->\n");
        cr_expect_eq(read_layers(root, &L), -1, "a header in two layers was read");
        rm_tree(root);
}

static void graph_of(struct graph *g, int n, const int (*edges)[2], int ne)
{
        memset(g, 0, sizeof(*g));
        g->n = n;
        for (int i = 0; i < n; i++)
                snprintf(g->name[i], sizeof(g->name[0]), "%c.o", 'a' + i);
        for (int i = 0; i < ne; i++)
                g->edge[edges[i][0]][edges[i][1]] = 1;
}

/* The cycle finder on synthetic graphs. */
Test(layering, cycle_finder_fails_on_synthetic_graphs)
{
        static const int chain[][2] = { { 0, 1 }, { 1, 2 }, { 0, 3 }, { 3, 2 }, { 4, 4 } };
        static const int ring[][2] = { { 0, 1 }, { 1, 2 }, { 2, 0 } };
        static const int two[][2] = { { 0, 1 }, { 1, 0 }, { 1, 2 }, { 2, 3 }, { 3, 2 } };
        static const int knot[][2] = { { 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 0 }, { 1, 0 } };
        static struct graph g;
        static struct findings out;

        graph_of(&g, 5, chain, 5);
        cr_expect_eq(find_cycles(&g, &out), 0, "false cycle: %s", out.line[0]);
        graph_of(&g, 3, ring, 3);
        cr_expect_eq(find_cycles(&g, &out), 1);
        cr_expect_str_eq(out.line[0], "cycle: a.o -> b.o -> c.o -> a.o");
        memset(&out, 0, sizeof(out));
        graph_of(&g, 4, two, 5);
        cr_expect_eq(find_cycles(&g, &out), 2);
        cr_expect(found(&out, "cycle: a.o -> b.o -> a.o", NULL) &&
                  found(&out, "cycle: c.o -> d.o -> c.o", NULL), "two cycles: %s | %s",
                  out.line[0], out.line[1]);
        memset(&out, 0, sizeof(out));
        graph_of(&g, 4, knot, 5);
        cr_expect_eq(find_cycles(&g, &out), 1);
        cr_expect_str_eq(out.line[0], "cycle: a.o -> b.o -> a.o; tangled with it too: c.o, d.o");
}

/* The upward-edge finder on a synthetic two-layer graph: only the edge from the lower layer
 * to the higher one is found, whether or not it closes a cycle; objects outside the table are
 * not judged. */
Test(layering, upward_finder_fails_on_synthetic_graphs)
{
        static const int edges[][2] = { { 1, 0 }, { 0, 2 }, { 3, 1 }, { 1, 3 } };
        static struct layers L;
        static struct graph g;
        static struct findings out;

        L.n = 2;
        snprintf(L.name[0], sizeof(L.name[0]), "low");
        snprintf(L.name[1], sizeof(L.name[1]), "high");
        L.nd = 2;
        snprintf(L.dir[0], sizeof(L.dir[0]), "lo/");
        snprintf(L.dir[1], sizeof(L.dir[1]), "hi/");
        L.dir_layer[0] = 0;
        L.dir_layer[1] = 1;
        graph_of(&g, 4, edges, 4);
        snprintf(g.name[0], sizeof(g.name[0]), "lo/a.o");
        snprintf(g.name[1], sizeof(g.name[1]), "hi/b.o");
        snprintf(g.name[2], sizeof(g.name[2]), "tools/c.o");
        snprintf(g.name[3], sizeof(g.name[3]), "hi/d.o");
        cr_expect_eq(find_upward(&L, &g, &out), 0, "false edge: %s", out.line[0]);
        g.edge[0][3] = 1;
        cr_expect_eq(find_upward(&L, &g, &out), 1);
        cr_expect_str_eq(out.line[0], "upward: lo/a.o (low) uses hi/d.o (high)");
}

/* The cycle finder on objects compiled here, read by nm as the library's are. A stale object
 * (its source removed) that would close a second cycle is not counted. */
Test(layering, cycle_finder_fails_on_compiled_objects)
{
        char root[] = "/tmp/strata-layering-XXXXXX", obj[64], cmd[512];
        static const char *const dirs[] = { "x" };
        static struct graph g;
        static struct findings out;

        cr_assert_not_null(mkdtemp(root));
        put(root, "x/a.c", "int fb(void); int fc(void); int fz(void);\n"
                           "int fa(void); int fa(void) { return fb() + fc() + fz(); }\n");
        put(root, "x/sub/b.c", "int fa(void); int fb(void);\n"
                               "int fb(void) { return fa() + 1; }\n");
        put(root, "x/c.c", "int fc(void); int fc(void) { return 2; }\n"
                           "int fd(void); int fd(void) { return 3; }\n");
        put(root, "x/gone.c", "int fa(void); int fz(void); int fz(void) { return fa(); }\n");
        put(root, "obj/x/sub/.keep", "");
        snprintf(cmd, sizeof(cmd), "cd %s && cc -c x/a.c x/c.c x/gone.c && mv a.o c.o gone.o obj/x"
                                   " && cc -c x/sub/b.c -o obj/x/sub/b.o", root);
        cr_assert_eq(system(cmd), 0, "cc failed");
        snprintf(cmd, sizeof(cmd), "%s/x/gone.c", root);
        remove(cmd);
        snprintf(obj, sizeof(obj), "%s/obj", root);
        list_all_objects(root, obj, dirs, 1, &g);
        cr_assert_eq(g.n, 3, "%d objects", g.n);
        cr_assert_str_eq(g.name[0], "x/a.o");
        cr_assert_eq(build_graph(NULL, obj, &g), 4, "nm misread");
        cr_expect(g.edge[0][1] && !g.edge[1][0], "a.o -> c.o expected");
        cr_expect_eq(find_cycles(&g, &out), 1);
        cr_expect_str_eq(out.line[0], "cycle: x/a.o -> x/sub/b.o -> x/a.o (through fb, fa)");
        rm_tree(root);
}
