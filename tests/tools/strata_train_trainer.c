/*
 * Lightning's Trainer features in strata-train (issue 58): --max-steps and --max-time end the
 * run where they say, evaluated and checkpointed there (a resume continues from it);
 * --val-every-n-steps evaluates inside epochs; --early-stop P ends the run once --monitor has
 * not improved for P epochs; --save-top-k K keeps the K best epoch checkpoints; bad
 * combinations are refused before training.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
/* 1024 / 64: 16 batches an epoch */
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 "

static char out[1 << 15];

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

Test(trainer, max_steps_ends_inside_an_epoch_and_resumes_there, .timeout = 120)
{
        char dir[64], cmd[512], a[256] = "", b[256] = "";

        cli_mkdtemp(dir, sizeof(dir), "trainer-steps");
        snprintf(cmd, sizeof(cmd), RUN "--epochs 5 --max-steps 40 --ckpt-dir %s 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "--max-steps reached at epoch 3, batch 8: the run ends "
                                       "there (checkpoint saved)"), "%s", out);
        cr_expect_eq(count(out, "\nepoch "), 3, "%s", out);
        cr_expect_not_null(strstr(out, "final: "), "%s", out);
        snprintf(cmd, sizeof(cmd), "cat %s/latest", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0);
        cr_expect_str_eq(out, "epoch-3-step-8.ckpt\n");
        /* Resumed to the end: the same epoch 4 as an uninterrupted run's. */
        snprintf(cmd, sizeof(cmd), RUN "--epochs 4 --json --resume %s 2>/dev/null | grep "
                 "'\"epoch\":4'", dir);
        cr_assert_eq(cli_sh(cmd, a, sizeof(a)), 0, "%s", a);
        cr_assert_eq(cli_sh(RUN "--epochs 4 --json 2>/dev/null | grep '\"epoch\":4'", b,
                            sizeof(b)), 0, "%s", b);
        cr_expect_eq(strncmp(a, b, strstr(a, "samples_per_s") - a), 0, "%s\n%s", a, b);
        /* At an epoch's end: the run stops after that epoch. */
        cr_assert_eq(cli_sh(RUN "--epochs 5 --max-steps 32 2>&1", out, sizeof(out)), 0);
        cr_expect_eq(count(out, "\nepoch "), 2, "%s", out);
        cli_rmtree(dir);
}

Test(trainer, max_time_ends_the_run, .timeout = 120)
{
        double t0 = cli_now_s();

        cr_assert_eq(cli_sh(BIN " --synthetic 60000 --batch 64 --model 784-64-10 --epochs 1000 "
                            "--max-time 1 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "--max-time reached at epoch"), "%s", out);
        cr_expect_lt(cli_now_s() - t0, 60.0);
        cr_expect_not_null(strstr(out, "final: "), "%s", out);
}

Test(trainer, val_every_n_steps_evaluates_inside_epochs, .timeout = 120)
{
        cr_assert_eq(cli_sh(RUN "--epochs 2 --val-every-n-steps 5 2>&1", out, sizeof(out)), 0,
                     "%s", out);
        /* batches 5, 10, 15 of each epoch (16 is the epoch's own) */
        cr_expect_eq(count(out, "  epoch 1, batch "), 3, "%s", out);
        cr_expect_eq(count(out, "  epoch 2, batch "), 3, "%s", out);
        cr_expect_not_null(strstr(out, "  epoch 2, batch 15: test_loss "), "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --json --val-every-n-steps 8 2>&1", out,
                            sizeof(out)), 0);
        cr_expect_not_null(strstr(out, "{\"eval\":true,\"epoch\":1,\"step\":8,\"test_loss\":"),
                           "%s", out);
}

Test(trainer, early_stop_on_a_metric_that_stops_improving, .timeout = 120)
{
        char *p;

        cr_assert_eq(cli_sh(RUN "--epochs 60 --early-stop 2 --monitor test_acc 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        p = strstr(out, "early stop after epoch ");
        cr_assert_not_null(p, "%s", out);
        cr_expect_lt(count(out, "\nepoch "), 60, "%s", out);
        cr_expect_not_null(strstr(p, "test_acc has not improved for 2 epochs"), "%s", out);
}

Test(trainer, save_top_k_keeps_the_best, .timeout = 120)
{
        char dir[64], cmd[512];
        double v[2];
        char names[2][64];

        cli_mkdtemp(dir, sizeof(dir), "trainer-topk");
        snprintf(cmd, sizeof(cmd), RUN "--epochs 6 --quiet --ckpt-dir %s --save-top-k 2 "
                 "--monitor train_loss 2>&1 && ls %s | grep -c 'epoch-.*ckpt' && cat %s/topk",
                 dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(sscanf(out, "2\n%lf %63s\n%lf %63s", &v[0], names[0], &v[1], names[1]), 4,
                     "%s", out);
        cr_expect_leq(v[0], v[1], "best first: %s", out);
        /* Training loss falls here: the last two epochs are the best. */
        cr_expect_str_eq(names[0], "epoch-6.ckpt", "%s", out);
        cr_expect_str_eq(names[1], "epoch-5.ckpt", "%s", out);
        cli_rmtree(dir);
}

Test(trainer, bad_combinations_are_refused)
{
        cr_assert_eq(cli_sh(RUN "--save-top-k 2 2>&1", out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "--save-top-k keeps the best checkpoints of --ckpt-dir"),
                           "%s", out);
        cr_assert_eq(cli_sh(RUN "--early-stop 2 --monitor val_acc 2>&1", out, sizeof(out)), 2);
        cr_expect_not_null(strstr(out, "--monitor: 'val_acc' is not a metric of this run"),
                           "%s", out);
        cr_assert_eq(cli_sh(RUN "--early-stop 2 --monitor test_mse 2>&1", out, sizeof(out)), 2);
        cr_assert_eq(cli_sh(RUN "--monitor test_acc 2>&1", out, sizeof(out)), 2);
        cr_expect_not_null(strstr(out, "give one"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--max-steps 0 2>&1", out, sizeof(out)), 2);
        cr_assert_eq(cli_sh(RUN "--plan --save-top-k 2 2>&1", out, sizeof(out)), 2, "%s", out);
}
