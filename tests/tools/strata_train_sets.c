/*
 * A validation set and a test set in one run (Lightning's val/test split): --val-fraction F
 * beside a test set holds out the last F of the training samples, the same every run; every
 * epoch evaluates it (val_*), and what --monitor watches is its; the test set is evaluated
 * once, after training, on stdout, in --json and in the TensorBoard log; a fraction that
 * leaves no sample on a side is refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
/* 1024 samples, the last 256 held out: 768 / 64 = 12 batches an epoch */
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 --val-fraction 0.25 "
#define READER "/usr/bin/python3 " STRATA_SOURCE_DIR "/tests/tools/tfevents_read.py "

static char out[1 << 15];

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

Test(train_sets, validation_each_epoch_and_the_test_once, .timeout = 120)
{
        cr_assert_eq(cli_sh(RUN "--epochs 3 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "768 train / 256 val / 10000 test samples, batch 64, 12 "
                                       "steps/epoch"), "%s", out);
        cr_expect_eq(count(out, "val_loss "), 4, "3 epochs and the final line: %s", out);
        cr_expect_eq(count(out, "test (once, after training): test_loss "), 1, "%s", out);
        cr_expect_eq(count(out, "test_loss"), 1, "an epoch evaluated the test set: %s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 2 --json 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_eq(count(out, "\"val_loss\":"), 3, "%s", out);
        cr_expect_eq(count(out, "{\"test\":true,\"test_loss\":"), 1, "%s", out);
        cr_expect_not_null(strstr(out, "\"test_acc\":"), "%s", out);
}

/* The held-out samples are the same each run: two runs print the same bits. */
Test(train_sets, the_split_is_deterministic, .timeout = 120)
{
        static char a[1 << 14], b[1 << 14];

        cr_assert_eq(cli_sh(RUN "--epochs 1 --json 2>/dev/null | grep '\"test\"'", a,
                            sizeof(a)), 0, "%s", a);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --json --strategy single 2>/dev/null | grep "
                            "'\"test\"'", b, sizeof(b)), 0, "%s", b);
        cr_expect_gt(strlen(a), 20);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --json 2>/dev/null | grep '\"test\"'", b,
                            sizeof(b)), 0, "%s", b);
        cr_expect_str_eq(a, b);
}

/* --monitor watches the validation set; val_* is its name, test_* is not watched. */
Test(train_sets, monitor_and_logger_see_the_validation, .timeout = 120)
{
        char dir[64], cmd[512];

        cr_assert_eq(cli_sh(RUN "--epochs 2 --early-stop 5 --monitor val_acc 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        cr_assert_eq(cli_sh(RUN "--epochs 1 --early-stop 5 --monitor test_acc 2>&1", out,
                            sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "--monitor: 'test_acc' is not a metric of this run "
                                       "(train_loss, val_loss"), "%s", out);
        cli_mkdtemp(dir, sizeof(dir), "sets-tb");
        snprintf(cmd, sizeof(cmd), RUN "--epochs 2 --quiet --tensorboard %s && " READER "%s",
                 dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_eq(count(out, "\nval_loss "), 2, "%s", out);
        cr_expect_eq(count(out, "\ntest_loss 24 "), 1, "%s", out);
        cli_rmtree(dir);
}

static void refused(const char *args, const char *needle)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), BIN " --synthetic 1024 --batch 64 --model 784-16-10 "
                 "--epochs 1 %s 2>&1", args);
        cr_expect_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", args, out);
        cr_expect_not_null(strstr(out, needle), "%s: '%s' lacks '%s'", args, out, needle);
}

Test(train_sets, fractions_that_leave_nothing_refused, .timeout = 60)
{
        refused("--val-fraction 0.0001", "--val-fraction 0.0001 of the 1024 training samples "
                "leaves no validation sample");
        refused("--val-fraction 0", "--val-fraction");
        refused("--val-fraction 1", "--val-fraction");
}
