/*
 * strata-train --ckpt-every-steps N counts optimizer steps of the run, any N (Lightning's
 * every_n_train_steps), and an epoch whose batch count is not a multiple of --accumulate
 * steps the optimizer on its last, partial window; a checkpoint taken after such a window
 * resumes bit for bit.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
/* 2048 samples, batch 64: 32 batches an epoch; --accumulate 3: 11 optimizer steps, the last
 * one on a window of 2 batches. */
#define COMMON "--synthetic 2048 --batch 64 --model 784-16-10 --accumulate 3 --json --seed 7 "

static char out[1 << 15];

Test(ckpt_steps, every_n_optimizer_steps_across_partial_windows, .timeout = 120)
{
        char dir[64], cmd[512], a[256], b[256];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-steps");
        /* Optimizer steps 4 and 8 in epoch 1 (batches 12, 24), its end (step 11), then 12,
         * 16, 20 in epoch 2 (batches 3, 15, 27), its end. */
        snprintf(cmd, sizeof(cmd), BIN " " COMMON "--epochs 2 --ckpt-dir %s --ckpt-keep 64 "
                 "--ckpt-every-steps 4 2>&1 && ls %s | sort | tr '\\n' ' '", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, 2, a, sizeof(a));
        cr_assert_not_null(strstr(out, "epoch-1-step-12.ckpt epoch-1-step-24.ckpt epoch-1.ckpt "
                                       "epoch-2-step-15.ckpt epoch-2-step-27.ckpt "
                                       "epoch-2-step-3.ckpt epoch-2.ckpt latest"),
                           "%s", out);
        /* Resumed after the partial window that closed epoch 1 and the one of epoch 2's step 15:
         * epoch 2 as the run that never stopped. */
        snprintf(cmd, sizeof(cmd), BIN " " COMMON "--epochs 2 --resume %s/epoch-2-step-15.ckpt "
                 "2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, 2, b, sizeof(b));
        cr_assert_str_eq(a, b);
        cli_rmtree(dir);
}

/* Any N is accepted, whatever --accumulate; N only needs --ckpt-dir. */
Test(ckpt_steps, any_n_with_any_accumulate)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-any");
        snprintf(cmd, sizeof(cmd), BIN " " COMMON "--epochs 1 --ckpt-dir %s --ckpt-every-steps 7 "
                 "2>&1 && ls %s | tr '\\n' ' '", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "epoch-1-step-21.ckpt"), "step 7 = batch 21: %s", out);
        cli_rmtree(dir);
}
