/*
 * A batch job in one command (issue 58, item 12): `--ckpt-dir D --resume auto` continues D's
 * run when D has a latest, and starts one when D is missing, empty or holds only the user's
 * own files; SIGTERM without --ckpt-dir says that nothing was saved.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 "

static char out[1 << 14];

Test(resume_auto, starts_then_continues_leaving_the_users_files, .timeout = 120)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "resume-auto");
        snprintf(cmd, sizeof(cmd), "echo mine > %s/notes.txt && " RUN "--epochs 1 --ckpt-dir %s "
                 "--resume auto 2>&1 && ls -A %s | sort | tr '\\n' ' '", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "epoch-1.ckpt latest notes.txt "), "%s", out);
        cr_expect_null(strstr(out, "resumed at"), "a new run: %s", out);
        snprintf(cmd, sizeof(cmd), RUN "--epochs 2 --ckpt-dir %s --resume auto 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "resumed at epoch 2, step 0"), "%s", out);
        /* A directory that does not exist yet: a new run makes it. */
        snprintf(cmd, sizeof(cmd), RUN "--epochs 1 --quiet --ckpt-dir %s/new --resume auto 2>&1 "
                 "&& ls -A %s/new | tr '\\n' ' '", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_str_eq(out, "epoch-1.ckpt latest ");
        cli_rmtree(dir);
}

Test(resume_auto, refused_without_a_ckpt_dir_or_with_overwrite)
{
        cr_assert_eq(cli_sh(RUN "--resume auto 2>&1", out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "--resume auto continues --ckpt-dir's run when it has one"
                                       ": give --ckpt-dir"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--resume auto --overwrite --ckpt-dir /tmp 2>&1", out,
                            sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "not both"), "%s", out);
}

/* Checkpoints without a latest are another run's, damaged: refused as a new run would be. */
Test(resume_auto, checkpoints_without_latest_are_refused)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "resume-auto-nolatest");
        snprintf(cmd, sizeof(cmd), "touch %s/epoch-3.ckpt && " RUN "--ckpt-dir %s --resume auto "
                 "2>&1", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "already holds 1 file (epoch-3.ckpt)"), "%s", out);
        cli_rmtree(dir);
}

Test(resume_auto, sigterm_without_ckpt_dir_says_nothing_was_saved, .timeout = 120)
{
        int rc;

        rc = cli_sh(RUN "--strategy single --epochs 100000 --quiet 2>&1 & p=$!; sleep 1; "
                    "kill -TERM $p; wait $p; echo \"rc=$?\"", out, sizeof(out));
        cr_assert_eq(rc, 0, "%s", out);
        cr_expect_not_null(strstr(out, "nothing saved (no --ckpt-dir)"), "%s", out);
        cr_expect_not_null(strstr(out, "rc=143"), "%s", out);
}
