/*
 * make bench-all's machinery (tools/bench-all.sh, tools/bench-lib.sh, tools/bench_summary.py;
 * issue 59, decision 0073), in its quick mode on a copy of docs/benchmarks.md: under a forced
 * load average above 1.5 the bench's row is refused (none in the results, the reason in the
 * .refused file) and the summary keeps its previous text, marked not re-measured; under a low
 * one, with little other work, the row is written, with its medians, spread and pairs, into
 * the results and the summary's figures table; fewer than 5 pairs, or other work of more
 * than half a core beside the bench, is refused as well; the rest of the document is
 * unchanged every time. A capability's text is rewritten once each of its figures has been
 * measured (the collectives' one all_reduce figure, where MPI is here: bench-coll), and kept,
 * marked, while one has not (data parallelism: ddp and dp, bench-train's, never measured).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define FIGURE "| invariant mode / normal ddp, 784-256-128-10, 2 devices, batch 128, samples/s | "
#define DDP_ROW "| DataParallel, DDP, replication callbacks"
#define COLL_ROW                                                                                   \
        "| pinned workers, topology (hwloc), shared-memory collectives | done, see below | "
#define COLL_FIG "all_reduce 4 KiB, 2 devices, busbw against Open MPI's (2 ranks), GB/s: "

static char dir[256];
static char out[1 << 16];
static int mpi; /* bench-coll runs too (MPI is here) */

/*
 * bench-all on invariant mode only, quick sizes, REPS @p reps, the load average forced to
 * @p load and the other work's cores to @p others; its exit status.
 */
static int bench_all(const char *load, const char *others, int reps)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd),
                 "cd %s && env -u BENCH_MAX_LOAD -u BENCH_MAX_OTHERS -u BENCH_MIN_PAIRS "
                 "-u BENCH_RESULTS BUILD=%s BENCH_ONLY='invariant%s' BENCH_QUICK=1 "
                 "BENCH_LOADAVG=%s BENCH_OTHERS=%s REPS=%d BENCH_OUT=%s BENCH_DOC=%s/doc.md "
                 "tools/bench-all.sh 2>&1",
                 STRATA_SOURCE_DIR, STRATA_BUILD_DIR, mpi ? " coll" : "", load, others, reps,
                 dir, dir);
        return cli_sh(cmd, out, sizeof(out));
}

/* What file @p name in the test's directory holds (at most sizeof(buf) - 1 bytes). */
static const char *file(const char *name, char *buf, size_t n)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), "cat %s", cli_path(dir, name));
        cli_sh(cmd, buf, n);
        return buf;
}

/* The document outside its summary section is the source's, byte for byte. */
static void rest_unchanged(void)
{
        char cmd[1024];
        static char diff[4096];
        const char *cut = "sed '/^## Summary by capability/,/^## Data-parallel training/d'";

        snprintf(cmd, sizeof(cmd), "%s %s/docs/benchmarks.md | cmp - <(%s %s/doc.md) && echo same",
                 cut, STRATA_SOURCE_DIR, cut, dir);
        snprintf(diff, sizeof(diff), "bash -c \"%s\"", cmd);
        cli_sh(diff, out, sizeof(out));
        cr_assert_not_null(strstr(out, "same"), "the rest of the document changed: %s", out);
}

/* The line of @p text that starts with @p start, copied into @p line. */
static void line_of(const char *text, const char *start, char *line, size_t n)
{
        const char *p = strstr(text, start), *q;

        cr_assert_not_null(p, "no line starting '%s' in:\n%s", start, text);
        q = strchr(p, '\n');
        snprintf(line, n, "%.*s", (int)(q ? q - p : (long)strlen(p)), p);
}

/*
 * The first 40 bytes of the source's third cell in the summary row starting @p start: the text
 * a bench that measured nothing must keep (the summary is itself an earlier run's output);
 * whether the source's figures table already holds FIGURE.
 */
static void kept_text(const char *start, char *text, size_t n, int *had_figure)
{
        static char src[1 << 18];
        char row[2048];
        const char *cell;
        FILE *f = fopen(STRATA_SOURCE_DIR "/docs/benchmarks.md", "r");
        size_t got;

        cr_assert_not_null(f);
        got = fread(src, 1, sizeof(src) - 1, f);
        src[got] = '\0';
        fclose(f);
        *had_figure = strstr(src, FIGURE) != NULL;
        line_of(src, start, row, sizeof(row));
        cell = strstr(row + 2, " | ");
        cr_assert_not_null(cell, "%s", row);
        cell = strstr(cell + 3, " | ");
        cr_assert_not_null(cell, "%s", row);
        snprintf(text, n, "%.40s", cell + 3);
}

/*
 * How a row whose figures this run did not measure is marked: each figure " *(not
 * re-measured)*" where the document already holds a figures table (an earlier bench-all's),
 * else the whole row, with the reason @p why.
 */
static void assert_marked(const char *row, const char *why)
{
        char mark[256];

        if (strstr(row, ": ") && strstr(row, "× *(not re-measured)*"))
                return; /* each figure of the earlier run, marked */
        snprintf(mark, sizeof(mark), "*(not re-measured by `make bench-all`: %s)*", why);
        cr_assert_not_null(strstr(row, mark), "no '%s' in: %s", mark, row);
}

Test(bench_all_quick, loaded_refused_quiet_written, .timeout = 240)
{
        static char doc[1 << 18], res[4096], ref[4096];
        char row[2048], cmd[512], kept[64];
        int had_figure;

        if (STRATA_SAN[0] != '\0')
                cr_skip("checked in the plain build, not under " STRATA_SAN);
        mpi = cli_have_mpi() && access(STRATA_BUILD_DIR "/bin/strata-bench-mpi", X_OK) == 0;
        kept_text(DDP_ROW, kept, sizeof(kept), &had_figure);
        cli_mkdtemp(dir, sizeof(dir), "bench-all");
        snprintf(cmd, sizeof(cmd), "cp %s/docs/benchmarks.md %s", STRATA_SOURCE_DIR,
                 cli_path(dir, "doc.md"));
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0);

        /* Loaded: the row is refused and said so; the summary keeps its text, marked. */
        cr_assert_eq(bench_all("3.0", "0", 5), 0, "%s", out);
        cr_assert_not_null(strstr(out, "load average before: 3.0"), "%s", out);
        cr_assert_not_null(strstr(out, "kernels "), "%s", out);
        cr_assert_not_null(strstr(out, "(family "), "%s", out);
        cr_assert_not_null(strstr(out, "row not written"), "%s", out);
        cr_assert_null(strstr(file("bench-all.md", res, sizeof(res)), "|"), "%s", res);
        cr_assert_not_null(strstr(file("bench-all.refused", ref, sizeof(ref)),
                                  "load average 3.0 before: above 1.5"), "%s", ref);
        line_of(file("doc.md", doc, sizeof(doc)), DDP_ROW, row, sizeof(row));
        cr_assert_not_null(strstr(row, kept), "previous text (%s) lost: %s", kept, row);
        assert_marked(row, "load average 3.0 before: above 1.5");
        if (had_figure) { /* an earlier run's figure stays, marked */
                line_of(doc, FIGURE, row, sizeof(row));
                cr_assert_not_null(strstr(row, "*(not re-measured: load average 3.0 before"),
                                   "%s", row);
        } else {
                cr_assert_null(strstr(doc, FIGURE), "a refused row reached the summary");
        }
        rest_unchanged();

        /* Quiet: the row is written with medians, spread and pairs, and shown in the summary. */
        cr_assert_eq(bench_all("0.2", "0.1", 5), 0, "%s", out);
        line_of(file("bench-all.md", res, sizeof(res)), FIGURE, row, sizeof(row));
        cr_assert(strstr(row, "..") && strstr(row, " | 5 | 0.2 → 0.2; 0.1 | bench-invariant, "),
                  "%s", row);
        cr_assert_eq(strlen(file("bench-all.refused", ref, sizeof(ref))), 0, "%s", ref);
        line_of(file("doc.md", doc, sizeof(doc)), FIGURE, row, sizeof(row));
        cr_assert_not_null(strstr(row, " | 5 | 0.2 → 0.2; 0.1 | "), "%s", row);
        line_of(doc, DDP_ROW, row, sizeof(row));
        cr_assert_not_null(strstr(row, kept), "previous text (%s) lost: %s", kept, row);
        assert_marked(row, "never measured: ddp on 2 devices, dp on 2 devices");
        if (mpi) {
                line_of(doc, COLL_ROW, row, sizeof(row));
                const char *fig = strstr(row, COLL_FIG);
                size_t len;

                cr_assert_not_null(fig, "%s", row);
                len = strcspn(fig, ";|"); /* this figure, up to the next one or the cell's end */
                cr_assert(memmem(fig, len, "×", strlen("×")), "%s", row);
                cr_assert_null(memmem(fig, len, "not re-measured", 15), "%s", row);
                cr_assert_null(strstr(row, "10–47×"), "the previous text stayed: %s", row);
        }
        rest_unchanged();

        /* Quiet but 3 pairs: refused; the figure keeps the quiet run's row, marked. */
        cr_assert_eq(bench_all("0.2", "0.1", 3), 0, "%s", out);
        cr_assert_not_null(strstr(file("bench-all.refused", ref, sizeof(ref)),
                                  "3 pairs: fewer than 5"), "%s", ref);
        line_of(file("doc.md", doc, sizeof(doc)), FIGURE, row, sizeof(row));
        cr_assert_not_null(strstr(row, "*(not re-measured: 3 pairs: fewer than 5)* "
                                       "bench-invariant, "), "%s", row);
        cr_assert_not_null(strstr(row, " | 5 | 0.2 → 0.2; 0.1 | "), "%s", row);
        if (mpi) {
                line_of(doc, COLL_ROW, row, sizeof(row));
                cr_assert(strstr(row, COLL_FIG) && strstr(row, "× *(not re-measured)* |"), "%s",
                          row);
        }
        rest_unchanged();

        /* A low load average before, but other work beside the bench: refused, said why. */
        cr_assert_eq(bench_all("0.2", "1.2", 5), 0, "%s", out);
        cr_assert_not_null(strstr(out, "other work during the bench: 1.2 cores"), "%s", out);
        cr_assert_not_null(strstr(file("bench-all.refused", ref, sizeof(ref)),
                                  "other work used 1.2 cores during the bench: above 0.5"), "%s",
                           ref);
        cr_assert_null(strstr(file("bench-all.md", res, sizeof(res)), "|"), "%s", res);
        line_of(file("doc.md", doc, sizeof(doc)), FIGURE, row, sizeof(row));
        cr_assert_not_null(strstr(row, "*(not re-measured: other work used 1.2 cores"), "%s",
                           row);
        rest_unchanged();
        cli_rmtree(dir);
}
