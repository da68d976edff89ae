/*
 * strata-train's guards on what training produces: a non-finite gradient stops the run
 * naming the epoch, batch and step, with exit 1 and no checkpoint written after it; a loss
 * that grows by orders of magnitude while finite is warned about once; and any batch size
 * runs on any device count (a last test batch of fewer rows than devices is evaluated).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define DIVERGE "--synthetic 2048 --batch 64 --model 784-32-10 --lr 1e6 "

static char out[1 << 16];

static int count(const char *s, const char *needle)
{
        int n = 0;

        for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
                n++;
        return n;
}

Test(strata_train_guards, nonfinite_gradient_names_the_step_and_saves_nothing, .timeout = 120)
{
        char dir[256], args[512], ls[4096];

        cli_mkdtemp(dir, sizeof(dir), "nonfinite");
        snprintf(args, sizeof(args), DIVERGE "--momentum 0.99 --epochs 2 --ckpt-dir %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 1, "%s", out);
        cr_assert_not_null(strstr(out, "strata-train: epoch 1, batch "), "%s", out);
        cr_assert_not_null(strstr(out, ": a gradient is NaN or infinite"), "%s", out);
        cr_assert_not_null(strstr(out, "parameters and optimizer state are unchanged"), "%s",
                           out);
        cr_assert_null(strstr(out, "epoch   1"), "the epoch must not end: %s", out);
        snprintf(args, sizeof(args), "ls -A %s", dir);
        cr_assert_eq(cli_sh(args, ls, sizeof(ls)), 0);
        cr_assert_str_empty(ls, "a checkpoint was written: %s", ls);
        cli_rmtree(dir);
}

Test(strata_train_guards, growing_loss_warns_once, .timeout = 120)
{
        const char *warning = "warning: the training loss has grown from ";

        cr_assert_eq(cli_run(BIN, DIVERGE "--optim adamw --epochs 2", out, sizeof(out)), 0,
                     "finite, so it runs to its end: %s", out);
        cr_assert_eq(count(out, warning), 1, "one warning: %s", out);
        cr_assert_not_null(strstr(out, "(the run's first step) to "), "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 2048 --batch 64 --model 784-32-10 --epochs 2",
                             out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(count(out, warning), 0, "a run that learns is not warned: %s", out);
}

/*
 * 10000 test rows in batches of 99 leave a last batch of 1 row for 3 devices: on a small model
 * everywhere, and as the command (Fashion-MNIST, the default model) in the plain
 * build, whose epoch a sanitizer makes too slow for the suite.
 */
Test(strata_train_guards, any_batch_on_any_device_count, .timeout = 300)
{
        cr_assert_eq(cli_run(BIN, "--synthetic 990 --model 784-32-10 --strategy dp --devices 3 "
                                  "--batch 99 --epochs 1", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "test_acc"), "%s", out);
        if (!STRATA_SAN[0]) {
                cr_assert_eq(cli_run(BIN, "--strategy dp --devices 3 --batch 99 --epochs 1", out,
                                     sizeof(out)), 0, "%s", out);
                cr_assert_not_null(strstr(out, "test_acc"), "%s", out);
        }
        /* More devices than cores, 96 rows split unevenly (20 devices; 7 under a sanitizer,
         * whose 20 threads on 2 cores outlast the limit). */
        cr_assert_eq(cli_run(BIN, STRATA_SAN[0] ? "--synthetic 2048 --model 784-16-10 --batch 96 "
                                                  "--strategy ddp --devices 7 --epochs 1"
                                                : "--synthetic 2048 --model 784-16-10 --batch 96 "
                                                  "--strategy ddp --devices 20 --epochs 1",
                             out, sizeof(out)), 0, "%s", out);
}
