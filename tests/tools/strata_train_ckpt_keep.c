/*
 * --ckpt-keep K counts every checkpoint in --ckpt-dir, whichever run wrote it (issue 58, item
 * 1): a batch job requeued with --resume keeps K files, not K per run; the order is training's
 * (epoch-E-step-B before epoch-E), and files that are not strata-train's are left alone.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 --quiet --ckpt-keep 2 "

static char out[1 << 14];

/* A run (@p more options) that must succeed; then what the directory holds, sorted. */
static const char *run_then_ls(const char *dir, const char *more)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), RUN "--ckpt-dir %s %s 2>&1 && ls -A %s | sort | tr '\\n' ' '",
                 dir, more, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s: %s", cmd, out);
        return out;
}

Test(ckpt_keep, resumed_runs_prune_their_predecessors, .timeout = 120)
{
        char dir[64], resume[128];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-keep");
        cr_expect_str_eq(run_then_ls(dir, "--epochs 1"), "epoch-1.ckpt latest ");
        snprintf(resume, sizeof(resume), "--epochs 2 --resume %s", dir);
        cr_expect_str_eq(run_then_ls(dir, resume), "epoch-1.ckpt epoch-2.ckpt latest ");
        snprintf(resume, sizeof(resume), "--epochs 3 --resume %s", dir);
        cr_expect_str_eq(run_then_ls(dir, resume), "epoch-2.ckpt epoch-3.ckpt latest ");
        snprintf(resume, sizeof(resume), "--epochs 4 --resume %s", dir);
        cr_expect_str_eq(run_then_ls(dir, resume), "epoch-3.ckpt epoch-4.ckpt latest ");
        cli_rmtree(dir);
}

/* Checkpoints inside epochs count in training's order; other files stay. */
Test(ckpt_keep, step_checkpoints_in_training_order, .timeout = 120)
{
        char dir[64], cmd[256];

        cli_mkdtemp(dir, sizeof(dir), "ckpt-keep-steps");
        /* 16 steps an epoch, a save every 5 optimizer steps (the 15th; the 30th is step 14 of
         * epoch 2) and at each epoch's end. */
        cr_expect_str_eq(run_then_ls(dir, "--epochs 1 --ckpt-every-steps 5"),
                         "epoch-1-step-15.ckpt epoch-1.ckpt latest ");
        snprintf(cmd, sizeof(cmd), "touch %s/notes.txt", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0);
        snprintf(cmd, sizeof(cmd), "--epochs 2 --ckpt-every-steps 5 --resume %s", dir);
        cr_expect_str_eq(run_then_ls(dir, cmd), "epoch-2-step-14.ckpt epoch-2.ckpt latest "
                                                "notes.txt ");
        cli_rmtree(dir);
}
