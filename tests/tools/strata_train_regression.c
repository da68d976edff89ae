/*
 * strata-train on float targets: --synthetic-regression with --loss mse, l1 or huber learns
 * (the test MSE falls below the untrained model's), reports MSE/MAE, and ddp on 2 devices and
 * spawn on 2 processes agree bitwise; a loss that does not fit the data exits 2 with one
 * message.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define ARGS "--synthetic-regression 4000 --model 16-64-4 --batch 64 --optim adamw --lr 1e-3 " \
             "--json --seed 3 "

/* The final line's test_mse of a run of @p args (which must succeed). */
static double final_mse(const char *args, char *out, size_t n)
{
        const char *f;
        double mse = -1.0;

        cr_assert_eq(cli_run(BIN, args, out, n), 0, "%s\n%s", args, out);
        f = strstr(out, "{\"final\":true");
        cr_assert(f, "%s", out);
        f = strstr(f, "\"test_mse\":");
        cr_assert(f && strstr(f, "\"test_mae\":"), "%s", out);
        cr_assert_eq(sscanf(f, "\"test_mse\":%lf", &mse), 1);
        return mse;
}

Test(strata_train_regression, learns_and_repeats_across_strategies, .timeout = 300)
{
        static char out[8192];
        double before, after, ddp, spawn;

        before = final_mse(ARGS "--epochs 1 --lr 1e-9 --strategy single --loss mse", out,
                           sizeof(out));
        after = final_mse(ARGS "--epochs 4 --strategy single --loss mse", out, sizeof(out));
        cr_assert_lt(after, 0.5 * before, "test MSE %g after training, %g before", after,
                     before);
        ddp = final_mse(ARGS "--epochs 4 --strategy ddp --devices 2 --loss mse", out,
                        sizeof(out));
        spawn = final_mse(ARGS "--epochs 4 --strategy spawn --devices 2 --loss mse", out,
                          sizeof(out));
        cr_assert_eq(ddp, spawn, "ddp on 2 devices %g, spawn on 2 processes %g", ddp, spawn);
        cr_assert_lt(ddp, 0.5 * before);
        final_mse(ARGS "--epochs 1 --loss l1", out, sizeof(out));
        final_mse(ARGS "--epochs 1 --loss huber --huber-beta 0.25 --precision bf16-mixed", out,
                  sizeof(out));
}

Test(strata_train_regression, a_loss_that_does_not_fit_exits_2)
{
        char out[4096];

        cr_assert_eq(cli_run(BIN, "--synthetic-regression 100 --model 16-4 --epochs 1", out,
                             sizeof(out)), 2);
        cr_assert(strstr(out, "the default loss (ce, class labels) does not take"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 100 --model 784-10 --loss mse --epochs 1", out,
                             sizeof(out)), 2);
        cr_assert(strstr(out, "labels"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--loss hinge", out, sizeof(out)), 2);
        cr_assert(strstr(out, "ce, mse, l1, huber or bce"), "%s", out);
        /* BCE needs targets in [0, 1]: the synthetic map's are not, refused at load */
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 200 --model 16-4 --epochs 1 --loss bce",
                             out, sizeof(out)), 2);
        cr_assert(strstr(out, "--synthetic-regression's targets: sample 0 holds"), "%s", out);
        cr_assert(strstr(out, "--loss bce takes targets in [0, 1]"), "%s", out);
}

/*
 * Outputs as wide as the inputs (a field to a field, the in-situ shape): the tool's data
 * mapping holds the float-target staging batch too (it once ran out of room for it).
 */
Test(strata_train_regression, wide_outputs_fit_the_data_mapping, .timeout = 120)
{
        char out[1 << 14];

        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --model 256-256 --activation none "
                                  "--loss mse --batch 64 --epochs 1 --quiet --json",
                             out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"test_mse\":"), "%s", out);
}
