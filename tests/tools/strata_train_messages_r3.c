/*
 * Messages a new user met (issue 58, item 7): a long value in a model line is shown clipped,
 * so the reason after it is never cut off; a newline in a module's arguments does not split
 * the message; a bad cosine floor names lr_min (not t_max); float targets without --loss do
 * not blame a --loss ce the user never gave.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static char out[1 << 15];

/* Exit 2 with one line holding @p want. */
static void one_line(const char *cmd, const char *want)
{
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", cmd, out);
        cr_expect_not_null(strstr(out, want), "%s", out);
        cr_expect_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
}

Test(messages_r3, a_long_value_leaves_the_reason_whole)
{
        char cmd[2048], v[701];

        memset(v, 'x', 700);
        v[700] = '\0';
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 256 --model 'linear(out=%s)' 2>&1", v);
        one_line(cmd, "...' is not a positive count");
        cr_expect_lt(strlen(out), 200, "%s", out);
}

Test(messages_r3, a_newline_in_the_arguments_keeps_one_line)
{
        one_line(BIN " --synthetic 256 --model 'linear(10,\nbias=1)' 2>&1",
                 "no argument '\\nbias'");
}

Test(messages_r3, a_bad_cosine_floor_names_lr_min)
{
        one_line(BIN " --synthetic 1024 --batch 64 --lr-schedule cosine:5 2>&1",
                 "cosine schedule: lr_min 5 not in [0, lr 0.05]");
        cr_expect_null(strstr(out, "t_max"), "%s", out);
        one_line(BIN " --synthetic 1024 --batch 64 --lr-schedule step:10:2 2>&1",
                 "step schedule: gamma 2 not in (0, 1]");
        cr_expect_null(strstr(out, "step_size"), "%s", out);
}

Test(messages_r3, float_targets_without_loss_ask_for_one)
{
        one_line(BIN " --synthetic-regression 256 --model 784-8-3 2>&1",
                 "the data has float targets, which the default loss (ce, class labels) does "
                 "not take: give --loss mse, l1, huber or bce");
        cr_expect_null(strstr(out, "--loss ce"), "%s", out);
}
