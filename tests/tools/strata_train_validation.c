/*
 * What strata-train reports about its evaluation (issue 45, items 1-4): every loss reports
 * its validation loss, with the metric that fits it (ce: accuracy; bce: accuracy of the
 * probabilities at 0.5, not MSE of logits; mse: MSE and MAE, no accuracy) in the console, --json
 * and the metrics CSV; strata-plot draws only what the run has; --val-fraction rows are called
 * val, the training samples train_eval; --json carries the learning rate and the whole run's
 * ETA, the console line that ETA too.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define PLOT STRATA_SOURCE_DIR "/tools/strata-plot"
#define N 1024

static char dir[64], file[128], out[1 << 16];

/* dir/v.h5: x (N x 4 in [0, 1)), p (N x 1: 1 when x0 + x1 > 1, else 0), t (N x 2 floats). */
static void fixture(void)
{
        static float x[N * 4], p[N], t[N * 2];
        unsigned long long dx[2] = { N, 4 }, dp[2] = { N, 1 }, dt[2] = { N, 2 };

        for (int i = 0; i < N; i++) {
                for (int j = 0; j < 4; j++)
                        x[i * 4 + j] = (float)((i * 7919 + j * 104729) % 1000) / 1000.0f;
                p[i] = x[i * 4] + x[i * 4 + 1] > 1.0f ? 1.0f : 0.0f;
                t[i * 2] = x[i * 4] - x[i * 4 + 2];
                t[i * 2 + 1] = 0.5f * x[i * 4 + 3];
        }
        cli_mkdtemp(dir, sizeof(dir), "val");
        snprintf(file, sizeof(file), "%s/v.h5", dir);
        h5w_dataset(file, "x", H5W_F32, 2, dx, x);
        h5w_dataset(file, "p", H5W_F32, 2, dp, p);
        h5w_dataset(file, "t", H5W_F32, 2, dt, t);
}

static void cleanup(void)
{
        cli_rmtree(dir);
}

/* Field @p key of the JSON object at @p obj (which must hold it). */
static double field(const char *obj, const char *key)
{
        char k[64];
        const char *p;

        snprintf(k, sizeof(k), "\"%s\":", key);
        cr_assert_not_null(obj, "no object");
        p = strstr(obj, k);
        cr_assert_not_null(p, "no %s in %s", key, obj);
        return atof(p + strlen(k));
}

/* Run strata-train on dir/v.h5 with @p args; it must succeed. */
static void run_h5(const char *args)
{
        char a[1024];

        snprintf(a, sizeof(a), "--data %s --strategy single --batch 32 --optim adamw "
                               "--lr 0.01 %s", file, args);
        cr_assert_eq(cli_run(BIN, a, out, sizeof(out)), 0, "%s\n%s", a, out);
}

/* bce: the validation loss and the accuracy of the probabilities; no MSE of logits. */
Test(validation, bce_reports_its_loss_and_accuracy, .init = fixture, .fini = cleanup,
     .timeout = 120)
{
        const char *final;

        run_h5("--inputs x --targets p --loss bce --model 4-32-1 --val-fraction 0.25 "
               "--epochs 30 --json");
        final = strstr(out, "{\"final\":true");
        cr_assert_null(strstr(out, "mse"), "no MSE on logits: %s", out);
        cr_assert_null(strstr(out, "test_"), "--val-fraction rows are not test: %s", out);
        cr_assert_not_null(strstr(out, "{\"epoch\":1,\"train_loss\":"), "%s", out);
        cr_assert_gt(field(final, "val_acc"), 0.9, "%s", out);
        cr_assert_lt(field(final, "val_loss"), 0.4, "below ln 2 = 0.693: %s", out);
        cr_assert_gt(field(final, "val_loss"), 0.0, "%s", out);
}

/* Under 2 processes each computes its own rows' outputs: the accuracy counts them all. */
Test(validation, bce_accuracy_across_processes, .init = fixture, .fini = cleanup,
     .timeout = 120)
{
        double ddp, spawn;

        run_h5("--inputs x --targets p --loss bce --model 4-32-1 --val-fraction 0.25 "
               "--epochs 3 --json --strategy ddp --devices 2");
        ddp = field(strstr(out, "{\"final\":true"), "val_acc");
        run_h5("--inputs x --targets p --loss bce --model 4-32-1 --val-fraction 0.25 "
               "--epochs 3 --json --strategy spawn --devices 2");
        spawn = field(strstr(out, "{\"final\":true"), "val_acc");
        cr_assert_eq(ddp, spawn, "ddp on 2 devices %g, spawn on 2 processes %g", ddp, spawn);
        cr_assert_gt(ddp, 0.6, "%s", out);
}

/* mse: the validation loss is the MSE (the same loss), with the MAE; no accuracy. */
Test(validation, regression_reports_loss_mse_and_mae, .init = fixture, .fini = cleanup,
     .timeout = 120)
{
        const char *final;
        double loss, mse, mae;

        run_h5("--inputs x --targets t --loss mse --model 4-16-2 --val-fraction 0.25 "
               "--epochs 3 --json");
        final = strstr(out, "{\"final\":true");
        loss = field(final, "val_loss");
        mse = field(final, "val_mse");
        mae = field(final, "val_mae");
        cr_assert(fabs(loss - mse) <= 1e-5 * mse, "mse's loss %g, its MSE %g", loss, mse);
        cr_assert(mae > 0.0 && mae < 1.0, "%s", out);
        cr_assert_null(strstr(out, "_acc"), "no accuracy for a regression: %s", out);
        run_h5("--inputs x --targets t --loss l1 --model 4-16-2 --epochs 1");
        cr_assert_not_null(strstr(out, "train_eval_loss "), "the training samples: %s", out);
        cr_assert_not_null(strstr(out, "train_eval_mae "), "%s", out);
        cr_assert_not_null(strstr(out, "1024 train / 1024 train_eval samples"), "%s", out);
}

/* ce: loss and accuracy; --json has the learning rate and the run's ETA. */
Test(validation, ce_reports_loss_accuracy_lr_and_eta, .timeout = 60)
{
        const char *e1, *final;

        cr_assert_eq(cli_run(BIN, "--synthetic 2048 --model 784-16-10 --batch 64 --epochs 2 "
                                  "--strategy ddp --devices 2 --lr-schedule cosine --json", out,
                             sizeof(out)), 0, "%s", out);
        e1 = strstr(out, "{\"epoch\":1,");
        final = strstr(out, "{\"final\":true");
        cr_assert_gt(field(e1, "test_loss"), 0.0, "%s", out);
        cr_assert(field(e1, "test_acc") > 0.0 && field(e1, "test_acc") <= 1.0, "%s", out);
        cr_assert_float_eq(field(e1, "lr"), 0.025, 2e-3, "cosine, half way: %s", out);
        cr_assert_geq(field(e1, "eta_s"), 0.0, "%s", out);
        cr_assert_lt(field(final, "lr"), 1e-4, "cosine's last step: %s", out);
        cr_assert_null(strstr(out, "mse"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 2048 --model 784-16-10 --batch 64 --epochs 1 "
                                  "--strategy single", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "test_loss "), "%s", out);
        cr_assert_not_null(strstr(out, "  ETA "), "the run's ETA on the epoch line: %s", out);
}

/* The CSV has the columns that fit; strata-plot draws them and nothing else. */
Test(validation, csv_and_plot_have_what_the_run_has, .init = fixture, .fini = cleanup,
     .timeout = 120)
{
        char a[512], line[256];
        FILE *f;

        snprintf(a, sizeof(a), "--inputs x --targets t --loss mse --model 4-16-2 "
                               "--val-fraction 0.25 --epochs 2 --quiet --metrics-csv %s/r.csv "
                               "--log-every 4", dir);
        run_h5(a);
        f = fopen(cli_path(dir, "r.csv"), "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof(line), f));
        fclose(f);
        cr_assert_str_eq(line, "step,epoch,train_loss,lr,samples_per_s,val_loss,val_mse,"
                               "val_mae\n");
        cr_assert_eq(cli_run(PLOT, cli_path(dir, "r.csv"), out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "(train loss, val loss, val MSE and MAE)"), "%s", out);
        cr_assert_null(strstr(out, "accuracy"), "%s", out);
        cr_assert_null(strstr(out, "empty y range"), "%s", out);
        snprintf(a, sizeof(a), "--inputs x --targets p --loss bce --model 4-8-1 "
                               "--val-fraction 0.25 --epochs 1 --quiet --metrics-csv %s/b.csv",
                 dir);
        run_h5(a);
        f = fopen(cli_path(dir, "b.csv"), "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof(line), f));
        fclose(f);
        cr_assert_str_eq(line, "step,epoch,train_loss,lr,samples_per_s,val_loss,val_acc\n");
        cr_assert_eq(cli_run(PLOT, cli_path(dir, "b.csv"), out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "(train loss, val loss, val accuracy)"), "%s", out);
}
