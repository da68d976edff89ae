/*
 * strata-train's output files through the CLI: the trace, the metrics log, checkpoints and the
 * safetensors export. A symlink's target is replaced and the link kept; a device is written
 * in place and a failed write exits non-zero; a link planted at a temporary name is not
 * followed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 1024 --epochs 1 --batch 64 --model 784-16-10 --quiet "

static char dir[64];
static char out[1 << 16];

static void setup(void)
{
        cli_mkdtemp(dir, sizeof(dir), "outputs");
}

static void teardown(void)
{
        cli_rmtree(dir);
}

TestSuite(strata_train_outputs, .init = setup, .fini = teardown);

static const char *at(const char *name)
{
        return cli_path(dir, name);
}

static int train(const char *fmt, const char *a, const char *b)
{
        char args[1024];

        snprintf(args, sizeof(args), fmt, a, b);
        return cli_run(BIN, args, out, sizeof(out));
}

static void put(const char *path, const char *s)
{
        FILE *f = fopen(path, "w");

        cr_assert_not_null(f, "%s", path);
        fputs(s, f);
        fclose(f);
}

/* The first bytes of @p path are @p s. */
static int starts(const char *path, const char *s)
{
        char buf[64] = { 0 };
        FILE *f = fopen(path, "r");
        size_t n;

        if (!f)
                return 0;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        return n >= strlen(s) && memcmp(buf, s, strlen(s)) == 0;
}

static int is_link(const char *path)
{
        struct stat st;

        return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

Test(strata_train_outputs, dev_full_exits_non_zero_and_stays_a_device)
{
        struct stat st;

        if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
                cr_skip("no /dev/full here");
        cr_assert_neq(train(RUN "--trace %s%s", "/dev/full", ""), 0, "%s", out);
        cr_assert_not_null(strstr(out, "/dev/full"), "%s", out);
        cr_assert_neq(train(RUN "--export-safetensors %s%s", "/dev/full", ""), 0, "%s", out);
        cr_assert_not_null(strstr(out, "/dev/full"), "%s", out);
        cr_assert_eq(stat("/dev/full", &st), 0);
        cr_assert(S_ISCHR(st.st_mode), "/dev/full must stay a character device");
}

Test(strata_train_outputs, links_targets_replaced_links_kept)
{
        put(at("trace-target"), "old");
        put(at("csv-target"), "old");
        put(at("st-target"), "old");
        cr_assert_eq(symlink("trace-target", at("link.json")), 0);
        cr_assert_eq(symlink(at("csv-target"), at("m.csv")), 0);
        cr_assert_eq(symlink("st-target", at("w.safetensors")), 0);
        cr_assert_eq(train(RUN "--trace %s --metrics-csv %s", at("link.json"), at("m.csv")), 0,
                     "%s", out);
        cr_assert_eq(train(RUN "--export-safetensors %s%s", at("w.safetensors"), ""), 0, "%s",
                     out);
        cr_assert(is_link(at("link.json")) && is_link(at("m.csv")) &&
                  is_link(at("w.safetensors")), "the links stay links");
        cr_assert(starts(at("trace-target"), "[\n{\"name\":\"process_name\""), "the trace");
        cr_assert(starts(at("csv-target"), "step,epoch,train_loss"), "the metrics log");
        cr_assert(!starts(at("st-target"), "old"), "the export");
}

/*
 * A link planted at the name the trace writer used to write (`<path>.tmp`) is not followed
 * (the --ckpt-dir holding it is taken with --overwrite, which removes only checkpoints).
 */
Test(strata_train_outputs, planted_temporary_link_is_not_followed)
{
        put(at("victim.txt"), "precious");
        cr_assert_eq(symlink(at("victim.txt"), at("out.json.tmp")), 0);
        cr_assert_eq(symlink(at("victim.txt"), at("e.ckpt.tmp")), 0);
        cr_assert_eq(train(RUN "--trace %s --ckpt-dir %s --overwrite", at("out.json"), dir), 0,
                     "%s", out);
        cr_assert(starts(at("victim.txt"), "precious"), "the victim is untouched");
        cr_assert(starts(at("out.json"), "["), "the trace is at its path");
        cr_assert(is_link(at("out.json.tmp")));
}

/* The trace fails mid-run (file size limit, SIGXFSZ ignored): the run exits non-zero. */
Test(strata_train_outputs, trace_write_error_mid_run_exits_non_zero)
{
        char cmd[1024];
        int rc;

        snprintf(cmd, sizeof(cmd), "trap '' XFSZ; ulimit -f 64; exec %s " RUN
                 "--epochs 3 --trace-events 256 --trace %s 2>&1", BIN, at("t.json"));
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_neq(rc, 0, "%s", out);
        cr_assert_not_null(strstr(out, "t.json"), "%s", out);
        cr_assert_eq(access(at("t.json"), F_OK), -1, "no partial trace at the path");
}
