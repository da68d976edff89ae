/*
 * metrics.csv's two kinds of row (issue 58, item 11; decision 0057): a step row every
 * --log-every batches, its train_loss the mean since the previous row and its evaluation
 * columns empty; an epoch row, its train_loss the epoch's mean and its evaluation columns
 * filled. With windows that tile the epoch, the epoch row's train_loss is the mean of its step
 * rows'; --help says which is which.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static char out[1 << 15];

Test(csv_rows, step_and_epoch_rows_are_told_apart, .timeout = 120)
{
        char dir[64], cmd[512], line[512];
        double sum[3] = { 0 }, epoch_loss[3] = { 0 };
        int steps[3] = { 0 }, epochs = 0;
        FILE *f;

        cli_mkdtemp(dir, sizeof(dir), "csv-rows");
        /* 1024 / 64 = 16 batches an epoch: 4 step rows of 4 batches each, then the epoch's. */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 1024 --batch 64 --epochs 2 --log-every 4 "
                 "--quiet --metrics-csv %s/m.csv 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        snprintf(cmd, sizeof(cmd), "%s/m.csv", dir);
        f = fopen(cmd, "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof(line), f));
        cr_assert_str_eq(line, "step,epoch,train_loss,lr,samples_per_s,test_loss,test_acc\n");
        while (fgets(line, sizeof(line), f)) {
                long step;
                int ep, n = 0;
                double loss;
                char eval[64] = "";

                cr_assert_geq(sscanf(line, "%ld,%d,%lf,%*[^,],%*[^,],%n", &step, &ep, &loss, &n),
                              3, "%s", line);
                cr_assert(ep >= 1 && ep <= 2, "%s", line);
                sscanf(line + n, "%63[^\n]", eval);
                if (eval[0] == '\0' || eval[0] == ',') { /* a step row: evaluation empty */
                        cr_expect(!strcmp(eval, ",") || !eval[0], "%s", line);
                        sum[ep] += loss;
                        steps[ep]++;
                } else { /* an epoch row: both evaluation columns */
                        cr_expect_not_null(strchr(eval, ','), "%s", line);
                        cr_expect_eq(step, 16L * ep, "%s", line);
                        epoch_loss[ep] = loss;
                        epochs++;
                }
        }
        fclose(f);
        cr_expect_eq(epochs, 2);
        for (int ep = 1; ep <= 2; ep++) {
                cr_expect_eq(steps[ep], 4, "epoch %d: %d step rows", ep, steps[ep]);
                cr_expect(fabs(sum[ep] / 4.0 - epoch_loss[ep]) < 2e-6,
                          "epoch %d: its row's train_loss %.6f is not its step rows' mean %.6f",
                          ep, epoch_loss[ep], sum[ep] / 4.0);
        }
        cli_rmtree(dir);
}

Test(csv_rows, help_says_which_is_which)
{
        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0);
        cr_expect_not_null(strstr(out, "Two kinds of row"), "%s", out);
        cr_expect_not_null(strstr(out, "the epoch's mean"), "%s", out);
}
