/*
 * Options a run accepts and ignores are each named once on stderr with the reason (issue 58,
 * item 9); options that act say nothing; --betas sets AdamW's moment decays.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 256 --batch 64 --epochs 1 --quiet "

static char out[1 << 15];

/* How many times @p needle occurs in @p hay. */
static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/* `RUN args` succeeds and warns exactly once that @p option is ignored. */
static void warns(const char *args, const char *option)
{
        char cmd[512], what[96];

        snprintf(cmd, sizeof(cmd), RUN "%s 2>&1", args);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s: %s", cmd, out);
        snprintf(what, sizeof(what), "strata-train: warning: %s is ignored: ", option);
        cr_expect_eq(count(out, what), 1, "%s: %s", cmd, out);
}

Test(ignored, each_ignored_option_is_named_once, .timeout = 120)
{
        warns("--optim adamw --momentum 0.5", "--momentum");
        warns("--betas 0.8,0.99", "--betas");
        warns("--tf32", "--tf32");
        warns("--huber-beta 2", "--huber-beta");
        warns("--huber-beta 2 --loss mse --synthetic-regression 256 --model 784-8-3",
              "--huber-beta");
        warns("--sync-bn", "--sync-bn");
        warns("--model 'linear(10)' --bn", "--bn");
        warns("--model 'linear(10)' --dropout 0.2", "--dropout");
        warns("--model 'linear(10)' --activation tanh", "--activation");
        /* spawn: one warning for the job, not one per process */
        warns("--strategy spawn --devices 2 --tf32", "--tf32");
}

Test(ignored, options_that_act_say_nothing, .timeout = 120)
{
        cr_assert_eq(cli_sh(RUN "--momentum 0.5 --bn --sync-bn --dropout 0.1 --activation tanh "
                            "--optim sgd 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_null(strstr(out, "warning"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--optim adamw --betas 0.8,0.99 --loss huber --huber-beta 2 "
                            "--model 784-8-10 --synthetic-regression 256 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        cr_expect_null(strstr(out, "warning"), "%s", out);
        cr_assert_eq(cli_sh(RUN "--model 'linear(16) batchnorm1d relu linear(10)' --sync-bn "
                            "2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_null(strstr(out, "warning"), "%s", out);
}

/* --betas reaches AdamW: other decays, another loss; bad values refused. */
Test(ignored, betas_set_adamw, .timeout = 120)
{
        char a[64] = "", b[64] = "";
        const char *p;

        cr_assert_eq(cli_sh(BIN " --synthetic 256 --batch 64 --epochs 1 --optim adamw --json "
                            "2>&1 | grep -o '\"train_loss\":[^,]*' | head -1", a, sizeof(a)), 0);
        cr_assert_eq(cli_sh(BIN " --synthetic 256 --batch 64 --epochs 1 --optim adamw --json "
                            "--betas 0.5,0.9 2>&1 | grep -o '\"train_loss\":[^,]*' | head -1", b,
                            sizeof(b)), 0);
        cr_assert_neq(a[0], '\0');
        cr_expect_str_neq(a, b, "--betas changed nothing: %s", a);
        cr_assert_eq(cli_sh(RUN "--betas 0.9 2>&1", out, sizeof(out)), 2, "%s", out);
        p = strstr(out, "--betas: '0.9' is not two numbers in (0, 1)");
        cr_expect_not_null(p, "%s", out);
}
