/*
 * strata-plot and the report's small defects (issue 58, item 8): --help answers with the
 * usage; a regression's plot draws no empty accuracy axis (gnuplot says nothing); a
 * non-finite loss reads nan on the epoch line (null is JSON's word); --returns refuses a CSV
 * that is not an episode-returns CSV (or has a malformed row) and writes nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define PLOT STRATA_SOURCE_DIR "/tools/strata-plot"

static char out[1 << 15];

Test(strata_plot_cli, help_gives_the_usage)
{
        cr_assert_eq(cli_sh(PLOT " --help 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect(!strncmp(out, "usage: strata-plot METRICS.csv [OUT.png]\n", 41), "%s", out);
        cr_expect_null(strstr(out, "cannot read"), "%s", out);
        cr_assert_eq(cli_sh(PLOT " --bogus 2>&1", out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "unknown option '--bogus'"), "%s", out);
}

Test(strata_plot_cli, a_regression_draws_no_accuracy_axis, .timeout = 120)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "plot-regress");
        snprintf(cmd, sizeof(cmd), BIN " --synthetic-regression 1024 --loss mse --model 784-8-3 "
                 "--batch 64 --epochs 2 --quiet --metrics-csv %s/m.csv && " PLOT " %s/m.csv "
                 "2>&1 >/dev/null", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_str_empty(out, "gnuplot or strata-plot said: %s", out);
        snprintf(cmd, sizeof(cmd), PLOT " %s/m.csv", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_null(strstr(out, "accuracy"), "%s", out);
        cli_rmtree(dir);
}

Test(strata_plot_cli, a_nonfinite_loss_reads_nan_on_the_epoch_line, .timeout = 60)
{
        cr_assert_eq(cli_sh(BIN " --synthetic 1024 --batch 64 --epochs 1 --allow-nonfinite "
                            "--lr 1e6 2>/dev/null | grep '^epoch'", out, sizeof(out)), 0, "%s",
                     out);
        cr_expect_not_null(strstr(out, "train_loss nan"), "%s", out);
        cr_expect_not_null(strstr(out, "test_loss nan"), "%s", out);
        cr_expect_null(strstr(out, "null"), "%s", out);
}

Test(strata_plot_cli, returns_refuses_what_is_not_episode_returns, .timeout = 60)
{
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "plot-returns");
        snprintf(cmd, sizeof(cmd), "printf 'step,return\\n1,2\\n' > %s/a.csv && " PLOT
                 " --returns %s/a.csv %s/a.png 2>&1", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "not an episode-returns CSV"), "%s", out);
        snprintf(cmd, sizeof(cmd), "printf 'episode,return,mean100\\n1,2,2\\nx,3\\n' > "
                 "%s/b.csv && " PLOT " --returns %s/b.csv %s/b.png 2>&1", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "a row is not"), "%s", out);
        snprintf(cmd, sizeof(cmd), "ls %s", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_null(strstr(out, ".png"), "a refused CSV left a PNG: %s", out);
        cli_rmtree(dir);
}
