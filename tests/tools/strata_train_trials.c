/*
 * strata-train's quick trials and TensorBoard log (issue 58): --fast-dev-run [N] trains and
 * evaluates N batches in one epoch and writes no file, saying so; --limit-train-batches and
 * --limit-val-batches take a count or a fraction (Lightning's int and float); --tensorboard
 * DIR writes event files that a reader written from the format (tfevents_read.py: TFRecord
 * framing and CRCs, the Event protocol buffer) reads back as the values the run printed; bad
 * values are refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
/* 1024 / 64: 16 batches an epoch; 10000 test samples: 157 evaluation batches */
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 "
#define READER "/usr/bin/python3 " STRATA_SOURCE_DIR "/tests/tools/tfevents_read.py "

static char out[1 << 16];

Test(train_trials, fast_dev_run_trains_n_batches_and_writes_nothing, .timeout = 120)
{
        char dir[64], cmd[768];

        cli_mkdtemp(dir, sizeof(dir), "fast-dev-run");
        snprintf(cmd, sizeof(cmd), RUN "--epochs 5 --fast-dev-run 2 --ckpt-dir %s/ck "
                 "--save-top-k 2 --ckpt-every-steps 1 --overwrite --max-steps 1 "
                 "--metrics-csv %s/m.csv --tensorboard %s/tb --export-safetensors %s/w.st "
                 "--trace %s/t.json 2>&1; echo files:; ls -A %s", dir, dir, dir, dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "--fast-dev-run: 2 training batches and 2 evaluation "
                                       "batches in 1 epoch; no checkpoint, metrics, TensorBoard, "
                                       "export or trace file is written"), "%s", out);
        cr_expect_not_null(strstr(out, "2 steps/epoch"), "%s", out);
        cr_expect_not_null(strstr(out, "epoch   1 "), "%s", out);
        cr_expect_null(strstr(out, "epoch   2 "), "one epoch: %s", out);
        /* 2 evaluation batches of 64: an accuracy in 128ths */
        cr_expect_not_null(strstr(out, "final: "), "%s", out);
        cr_expect_str_eq(strstr(out, "files:\n"), "files:\n", "a file written: %s", out);
        cli_rmtree(dir);
        /* the default, one batch, and the count as --fast-dev-run=N */
        cr_assert_eq(cli_sh(RUN "--fast-dev-run --json 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "1 training batch and 1 evaluation batch"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--fast-dev-run=3 --json 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "3 training batches"), "%s", out);
}

/* The accuracy of an evaluation of @p batches of 64 rows is a multiple of 1 / (64 batches). */
static void expect_eval_rows(const char *json, int batches)
{
        const char *p = strstr(json, "\"test_acc\":");
        double acc, right;

        cr_assert_not_null(p, "%s", json);
        acc = atof(p + 11);
        right = acc * 64.0 * batches; /* printed with 4 decimals */
        cr_expect(fabs(right - floor(right + 0.5)) <= 64.0 * batches * 5e-5 + 1e-9,
                  "acc %g is not of %d rows", acc, 64 * batches);
}

Test(train_trials, limit_batches_count_and_fraction, .timeout = 120)
{
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-train-batches 5 --limit-val-batches 3 2>&1",
                            out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "5 steps/epoch"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --json --limit-val-batches 3 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        expect_eval_rows(out, 3);
        /* a fraction rounds down: 16 * 0.25 = 4 batches; 157 * 0.1 = 15 evaluation batches */
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-train-batches 0.25 --limit-val-batches 0.1 "
                            "2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "4 steps/epoch"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --json --limit-val-batches 0.02 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        expect_eval_rows(out, 3); /* 157 * 0.02 = 3.14 */
        /* 1.0 is every batch, 1 is one batch; a count past the epoch is the epoch */
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-train-batches 1.0 2>&1", out, sizeof(out)),
                     0, "%s", out);
        cr_expect_not_null(strstr(out, "16 steps/epoch"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-train-batches 1 2>&1", out, sizeof(out)), 0,
                     "%s", out);
        cr_expect_not_null(strstr(out, "1 steps/epoch"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-train-batches 99 2>&1", out, sizeof(out)),
                     0, "%s", out);
        cr_expect_not_null(strstr(out, "16 steps/epoch"), "%s", out);
        /* 0 evaluation batches: no evaluation */
        cr_assert_eq(cli_sh(RUN "--epochs 1 --limit-val-batches 0 2>&1", out, sizeof(out)), 0,
                     "%s", out);
        cr_expect_not_null(strstr(out, "test_loss nan"), "%s", out);
}

/* The value of TAG at STEP in the reader's lines, or NaN. */
static double tb_value(const char *lines, const char *tag, long step)
{
        char key[96];
        const char *p;

        snprintf(key, sizeof(key), "\n%s %ld ", tag, step);
        p = strstr(lines, key);
        return p ? atof(p + strlen(key)) : NAN;
}

/* The JSON number @p field of the @p e-th epoch line. */
static double json_field(const char *json, int e, const char *field)
{
        char key[48];
        const char *p;

        snprintf(key, sizeof(key), "{\"epoch\":%d,", e);
        p = strstr(json, key);
        cr_assert_not_null(p, "%s", json);
        snprintf(key, sizeof(key), "\"%s\":", field);
        p = strstr(p, key);
        cr_assert_not_null(p, "%s", json);
        return atof(p + strlen(key));
}

static void expect_close(double got, double want, const char *what)
{
        cr_expect(fabs(got - want) <= 1e-5 * fabs(want) + 1e-6, "%s: %g in the event file, %g "
                  "printed", what, got, want);
}

Test(train_trials, tensorboard_events_hold_what_the_run_printed, .timeout = 120)
{
        static char json[1 << 14], tb[1 << 14];
        char dir[64], cmd[512];

        cli_mkdtemp(dir, sizeof(dir), "tensorboard");
        snprintf(cmd, sizeof(cmd), RUN "--epochs 2 --json --log-every 4 --lr 0.1 "
                 "--lr-schedule step:20:0.5 --val-every-n-steps 8 --tensorboard %s/tb 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, json, sizeof(json)), 0, "%s", json);
        snprintf(cmd, sizeof(cmd), "echo; " READER "%s/tb", dir);
        cr_assert_eq(cli_sh(cmd, tb, sizeof(tb)), 0, "%s", tb);
        cr_expect_not_null(strstr(tb, "\nfile_version brain.Event:2\n"), "%s", tb);
        for (int e = 1; e <= 2; e++) {
                long step = 16L * e;

                expect_close(tb_value(tb, "train_loss_epoch", step),
                             json_field(json, e, "train_loss"), "train_loss");
                expect_close(tb_value(tb, "test_loss", step), json_field(json, e, "test_loss"),
                             "test_loss");
                expect_close(tb_value(tb, "test_acc", step), json_field(json, e, "test_acc"),
                             "test_acc");
                expect_close(tb_value(tb, "lr", step), json_field(json, e, "lr"), "lr");
        }
        /* --val-every-n-steps's evaluations inside epochs: steps 8 and 24 */
        expect_close(tb_value(tb, "test_loss", 8),
                     atof(strstr(strstr(json, "\"step\":8,"), "\"test_loss\":") + 12),
                     "test_loss at step 8");
        cr_expect(isfinite(tb_value(tb, "test_loss", 24)), "%s", tb);
        for (long s = 4; s <= 32; s += 4)
                cr_expect(isfinite(tb_value(tb, "train_loss_step", s)), "step %ld: %s", s, tb);
        /* a second run writes a file of its own beside the first */
        snprintf(cmd, sizeof(cmd), RUN "--epochs 1 --quiet --tensorboard %s/tb && ls %s/tb | "
                 "grep -c tfevents", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_str_eq(out, "2\n");
        /* a file cut short keeps its earlier records whole: the reader names the cut */
        snprintf(cmd, sizeof(cmd), "f=$(ls %s/tb/*tfevents* | head -1); truncate -s -3 $f; "
                 READER "%s/tb", dir, dir);
        cr_expect_eq(cli_sh(cmd, out, sizeof(out)), 1, "%s", out);
        cr_expect_not_null(strstr(out, "file_version brain.Event:2"), "%s", out);
        cr_expect_not_null(strstr(out, "fault: "), "%s", out);
        cli_rmtree(dir);
}

static void refused(const char *args, const char *needle)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), RUN "--epochs 1 %s 2>&1", args);
        cr_expect_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", args, out);
        cr_expect_not_null(strstr(out, needle), "%s: '%s' lacks '%s'", args, out, needle);
}

Test(train_trials, bad_values_refused, .timeout = 120)
{
        refused("--limit-train-batches 0", "--limit-train-batches");
        refused("--limit-train-batches 0.01", "--limit-train-batches 0.01 of an epoch's 16 "
                "batches leaves none");
        refused("--limit-train-batches 1.5", "--limit-train-batches");
        refused("--limit-val-batches -1", "--limit-val-batches");
        refused("--fast-dev-run 0", "--fast-dev-run");
        refused("--fast-dev-run --limit-train-batches 2", "--fast-dev-run sets the batches");
        refused("--fast-dev-run --plan", "not with --plan");
        refused("--tensorboard /proc/nonexistent/tb", "--tensorboard /proc/nonexistent/tb: "
                "cannot be made");
        refused("--tensorboard /etc/passwd", "not a directory");
}
