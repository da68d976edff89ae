/*
 * --synthetic's shape (issue 58, item 5; decision 0057): the samples are shaped by --model, its
 * input width and its output's classes, as --help says; a module line without input(...) takes
 * Fashion-MNIST's 1x28x28, the images --synthetic stands in for, so the README's CNN line runs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static char out[1 << 15];

Test(synthetic_shape, a_module_line_takes_the_images_layout, .timeout = 120)
{
        cr_assert_eq(cli_run(BIN, "--synthetic 512 --batch 64 --epochs 1 --json --model "
                             "'conv2d(4,3,padding=1) relu maxpool2d(2) flatten linear(10)'", out,
                             sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "\"test_acc\":"), "%s", out);
        /* The plan of the same line: 4 filters of 3x3 on one channel, then 4*14*14 -> 10. */
        cr_assert_eq(cli_run(BIN, "--synthetic 512 --batch 64 --plan --json --model "
                             "'conv2d(4,3,padding=1) relu maxpool2d(2) flatten linear(10)'", out,
                             sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "\"params\":7890,"), "%s", out);
}

Test(synthetic_shape, widths_give_the_features_and_classes, .timeout = 60)
{
        cr_assert_eq(cli_run(BIN, "--synthetic 512 --batch 64 --epochs 1 --model 100-16-5", out,
                             sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "model 100-16-5"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 512 --model 100-16-300", out, sizeof(out)), 2,
                     "%s", out);
        cr_expect_not_null(strstr(out, "must be in 2..256"), "%s", out);
}

Test(synthetic_shape, help_says_so)
{
        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0);
        cr_expect_not_null(strstr(out, "shaped by --model"), "%s", out);
        cr_expect_null(strstr(out, "of the same shape"), "%s", out);
}
