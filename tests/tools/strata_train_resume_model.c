/*
 * strata-train --resume into another model (issue 45): a module added (--dropout) or an
 * activation swapped is refused naming the difference, exit 2; another --loss resumes with a
 * warning naming both losses.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic-regression 512 --model 16-32-4 --quiet --devices 1 "

static char out[1 << 14];

Test(strata_train_resume_model, differences_named, .timeout = 120)
{
        char dir[256], cmd[1024];
        int rc;

        cli_mkdtemp(dir, sizeof(dir), "resume-model");
        snprintf(cmd, sizeof(cmd), RUN "--loss mse --activation tanh --epochs 1 "
                 "--ckpt-dir %s/c 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        snprintf(cmd, sizeof(cmd), RUN "--loss mse --activation gelu --epochs 2 --resume %s/c "
                 "--ckpt-dir %s/c 2>&1", dir, dir);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 2, "%s", out);
        cr_assert_not_null(strstr(out, "module 1 is tanh in the checkpoint, gelu in this model"),
                           "%s", out);
        snprintf(cmd, sizeof(cmd), RUN "--loss mse --activation tanh --dropout 0.3 --epochs 2 "
                 "--resume %s/c --ckpt-dir %s/c 2>&1", dir, dir);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 2, "%s", out);
        cr_assert_not_null(strstr(out, "a dropout at module 2 (after module 1, tanh) in this "
                                       "model, none in the checkpoint"), "%s", out);
        snprintf(cmd, sizeof(cmd), RUN "--loss huber --activation tanh --epochs 2 --resume %s/c "
                 "--ckpt-dir %s/c 2>&1", dir, dir);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s", out);
        cr_assert_not_null(strstr(out, "was trained with the mse loss; this run goes on with "
                                       "huber"), "%s", out);
        cli_rmtree(dir);
}
