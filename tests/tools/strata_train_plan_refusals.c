/*
 * --plan refuses what training refuses (issue 58, item 10): a bad --lr-schedule, a --resume
 * that cannot be read, a checkpoint option without --ckpt-dir, each with training's message
 * and exit status 2. A CUDA job is planned without a GPU (the plan is the driver's numbers),
 * and --quiet --plan writes the plan and nothing else (decision 0057: the plan is what was
 * asked for; --quiet silences progress).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 1024 --model 784-16-10 --batch 64 "

static char out[1 << 15], out2[1 << 15];

/* Training and --plan both refuse @p args, exit 2, with the same message holding @p why. */
static void both_refuse(const char *args, const char *why)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), RUN "--epochs 1 --quiet %s 2>&1 >/dev/null", args);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", cmd, out);
        snprintf(cmd, sizeof(cmd), RUN "--plan %s 2>&1 >/dev/null", args);
        cr_assert_eq(cli_sh(cmd, out2, sizeof(out2)), 2, "%s: %s", cmd, out2);
        cr_expect_not_null(strstr(out, why), "training: %s", out);
        cr_expect_not_null(strstr(out2, why), "--plan: %s", out2);
}

Test(plan_refusals, what_training_refuses, .timeout = 60)
{
        both_refuse("--lr-schedule linear", "--lr-schedule: 'linear' is not constant");
        both_refuse("--ckpt-every-steps 5", "--ckpt-every-steps needs --ckpt-dir");
        both_refuse("--resume auto", "--resume auto continues --ckpt-dir's run");
        both_refuse("--accumulate 100", "--accumulate 100 is longer than an epoch's 16 batches");
        both_refuse("--batch 4096 --drop-last", "--batch 4096 is larger than the 1024 training "
                    "samples and --drop-last drops them all");
}

Test(plan_refusals, an_unreadable_resume, .timeout = 60)
{
        cr_assert_eq(cli_sh(RUN "--plan --resume /nonexistent/x.ckpt 2>&1 >/dev/null", out,
                            sizeof(out)), 2, "%s", out);
        cr_expect_not_null(strstr(out, "--resume: /nonexistent/x.ckpt cannot be read (No such "
                                       "file or directory)"), "%s", out);
}

/* With the CUDA driver built, the plan needs no GPU: device memory and pinned bytes shown. */
Test(plan_refusals, a_cuda_job_is_planned_without_a_gpu, .timeout = 60)
{
        int rc = cli_sh(RUN "--plan --accelerator cuda 2>&1", out, sizeof(out));

#ifdef STRATA_HAVE_CUDA
        cr_assert_eq(rc, 0, "%s", out);
        cr_expect_not_null(strstr(out, "in device memory"), "%s", out);
        cr_expect_not_null(strstr(out, "memory plan of single, 1 device(s)"), "%s", out);
#else
        cr_assert_eq(rc, 2, "%s", out);
        cr_expect_not_null(strstr(out, "device driver cuda"), "%s", out);
#endif
}

/* --quiet --plan: the plan's lines on stdout, nothing else, nothing on stderr. */
Test(plan_refusals, quiet_plan_writes_the_plan_alone, .timeout = 60)
{
        char *line, *save = NULL;
        int lines = 0;

        cr_assert_eq(cli_sh(RUN "--quiet --plan 2>/dev/null", out, sizeof(out)), 0, "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++)
                cr_expect(lines ? !strncmp(line, "  ", 2)
                                : !strncmp(line, "strata-train: memory plan of ", 29),
                          "not a line of the plan: %s", line);
        cr_expect_geq(lines, 4);
        cr_assert_eq(cli_sh(RUN "--quiet --plan 2>&1 >/dev/null", out, sizeof(out)), 0);
        cr_expect_str_empty(out, "stderr: %s", out);
        cr_assert_eq(cli_sh(RUN "--quiet --plan --json 2>/dev/null | wc -l", out, sizeof(out)), 0);
        cr_expect_str_eq(out, "1\n", "--json --plan: one line, not %s", out);
}
