/*
 * An unusable --ckpt-dir is found before any training: a regular file, a missing parent, a
 * directory this process cannot create files in (read-only to it) exit 2 with one message
 * naming the directory and the reason; the write probe leaves nothing behind.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 1024 --epochs 1 --batch 64 --model 784-16-10 "

static char out[1 << 14];

/* strata-train with --ckpt-dir @p dir (and a shell @p prefix) exits 2 naming it and @p why. */
static void refused(const char *prefix, const char *dir, const char *why)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), "%s" RUN "--ckpt-dir %s 2>&1", prefix, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", cmd, out);
        cr_assert_not_null(strstr(out, dir), "%s", out);
        cr_assert_not_null(strstr(out, why), "%s", out);
        cr_assert_null(strstr(out, "epoch "), "nothing may train: %s", out);
        cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one message: %s", out);
}

Test(ckpt_dir, unusable_directories_refused_before_training, .timeout = 60)
{
        char dir[64], path[128], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-dir");
        snprintf(path, sizeof(path), "%s/file", dir);
        fclose(fopen(path, "w"));
        refused("", path, "is not a directory");
        snprintf(path, sizeof(path), "%s/no/such", dir);
        refused("", path, "its parent must exist");
        /* Read-only to the user running it (root may write anywhere: run it as nobody). */
        snprintf(path, sizeof(path), "%s/ro", dir);
        snprintf(cmd, sizeof(cmd), "mkdir %s && chmod 555 %s && chmod 755 %s", path, path, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        if (cli_sh("setpriv --reuid=65534 --regid=65534 --clear-groups true 2>&1", out,
                   sizeof(out)) == 0 || getuid() != 0) {
                refused(getuid() ? "" : "setpriv --reuid=65534 --regid=65534 --clear-groups ",
                        path, "no file can be created in it (Permission denied)");
                snprintf(path, sizeof(path), "%s/ro/new", dir);
                refused(getuid() ? "" : "setpriv --reuid=65534 --regid=65534 --clear-groups ",
                        path, "cannot be made (Permission denied)");
        }
        cli_rmtree(dir);
}

/* A usable directory: the probe leaves no file; the checkpoints and latest are all there is. */
Test(ckpt_dir, probe_leaves_nothing, .timeout = 60)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-probe");
        snprintf(cmd, sizeof(cmd), RUN "--quiet --ckpt-dir %s/new 2>&1 && ls -A %s/new | tr "
                                       "'\\n' ' '", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_str_eq(out, "epoch-1.ckpt latest ", "%s", out);
        cli_rmtree(dir);
}
