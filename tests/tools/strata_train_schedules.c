/*
 * strata-train's MultiStepLR, OneCycleLR and ReduceLROnPlateau (--lr-schedule multistep,
 * onecycle, plateau): the rate each epoch reports is the schedule's; plateau lowers the rate
 * on the monitored metric, alike in every process of a job, and a resumed run continues its
 * state (the same rate and the same bits as the run that never stopped); bad specifications
 * are refused naming what is wrong.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " SAN_QUIET
/* 1024 / 64: 16 batches an epoch */
#define RUN BIN " --synthetic 1024 --batch 64 --model 784-16-10 "
/* a rate so small that the loss stays on a plateau: every epoch after the first reduces */
#define FLAT RUN "--lr 1e-7 --lr-schedule plateau:0:0.5 "

static char out[1 << 15];

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

Test(train_schedules, multistep_and_onecycle_rates, .timeout = 120)
{
        /* an epoch's rate is its last step's: steps 16, 32, 48 (k 15, 31, 47) */
        cr_assert_eq(cli_sh(RUN "--epochs 3 --json --lr 0.1 --lr-schedule multistep:16,32:0.5 "
                            "2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect(strstr(out, "\"epoch\":1,") && strstr(out, "\"lr\":0.1,"), "%s", out);
        cr_expect_not_null(strstr(out, "\"lr\":0.05,"), "%s", out);
        cr_expect_not_null(strstr(out, "\"lr\":0.025,"), "%s", out);
        /* onecycle over 48 steps, peak 0.1 at k = 0.3 * 48 - 1: the last step at the floor
         * 0.1 / 25 / 1e4 */
        cr_assert_eq(cli_sh(RUN "--epochs 3 --json --lr 0.1 --lr-schedule onecycle 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "\"lr\":4e-07,"), "%s", out);
}

Test(train_schedules, plateau_lowers_the_rate, .timeout = 120)
{
        cr_assert_eq(cli_sh(FLAT "--epochs 3 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "epoch 2: the evaluation loss has not improved for 1 "
                                       "evaluation: learning rate 1e-07 -> 5e-08"), "%s", out);
        cr_expect_not_null(strstr(out, "learning rate 5e-08 -> 2.5e-08"), "%s", out);
        /* on an accuracy (a larger value better), named by --monitor */
        cr_assert_eq(cli_sh(FLAT "--epochs 3 --monitor test_acc 2>&1", out, sizeof(out)), 0,
                     "%s", out);
        cr_expect_not_null(strstr(out, "test_acc has not improved"), "%s", out);
}

/* Every process of a job decides alike: two processes, the same reductions, exit 0. */
Test(train_schedules, plateau_agrees_across_processes, .timeout = 180)
{
        cr_assert_eq(cli_sh(FLAT "--epochs 3 --strategy spawn --devices 2 --json 2>&1", out,
                            sizeof(out)), 0, "%s", out);
        cr_expect_eq(count(out, "has not improved"), 2, "one voice, two reductions: %s", out);
        cr_expect(strstr(out, "{\"epoch\":3,") && strstr(out, "\"lr\":5e-08,"), "%s",
                  out); /* an epoch's line: the rate it used */
}

/* Two processes given other plateau settings (or milestones) are refused, not diverged. */
Test(train_schedules, other_schedule_settings_refused_across_processes, .timeout = 120)
{
        const char *a = " --strategy mpi --devices 1 --synthetic 2000 --quiet --timeout 20 "
                        "--epochs 1 --lr-schedule ";
        char cmd[1024];

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (Open MPI's abort path, see processes.c)");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) != 0 ||
            cli_sh("command -v mpirun", out, sizeof(out)) != 0)
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        snprintf(cmd, sizeof(cmd),
                 MPIRUN "-np 1 %s%splateau:2 : " SAN_QUIET "-np 1 %s%splateau:3 2>&1", BIN, a,
                 BIN, a);
        cr_assert_neq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "--lr-schedule plateau's patience is 2 in some and 3 in "
                                       "others"), "%s", out);
        snprintf(cmd, sizeof(cmd),
                 MPIRUN "-np 1 %s%smultistep:5,9:0.5 : " SAN_QUIET "-np 1 %s%s"
                 "multistep:5,8:0.5 2>&1", BIN, a, BIN, a);
        cr_assert_neq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "milestones (their sum)"), "%s", out);
}

Test(train_schedules, plateau_resumes_bitwise, .timeout = 180)
{
        char dir[64], cmd[512], a[512] = "", b[512] = "";

        cli_mkdtemp(dir, sizeof(dir), "plateau-resume");
        snprintf(cmd, sizeof(cmd), FLAT "--epochs 2 --ckpt-dir %s 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        /* epochs 3 and 4 after the resume: the rate goes on from 5e-08 */
        snprintf(cmd, sizeof(cmd), FLAT "--epochs 4 --json --resume %s 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_expect_not_null(strstr(out, "learning rate 5e-08 -> 2.5e-08"), "%s", out);
        /* the same again, the fourth epoch's line against the run that never stopped */
        snprintf(cmd, sizeof(cmd), FLAT "--epochs 2 --ckpt-dir %s --overwrite >/dev/null "
                 "2>&1 && " FLAT "--epochs 4 --json --resume %s 2>/dev/null | grep "
                 "'\"epoch\":4'", dir, dir);
        cr_assert_eq(cli_sh(cmd, a, sizeof(a)), 0, "%s", a);
        cr_assert_eq(cli_sh(FLAT "--epochs 4 --json 2>/dev/null | grep '\"epoch\":4'", b,
                            sizeof(b)), 0, "%s", b);
        cr_assert_not_null(strstr(a, "samples_per_s"), "%s", a);
        cr_expect_eq(strncmp(a, b, strstr(a, "samples_per_s") - a), 0, "%s\n%s", a, b);
        cr_expect_not_null(strstr(a, "\"lr\":2.5e-08"), "%s", a); /* what epoch 4 used */
        cli_rmtree(dir);
}

static void refused(const char *args, const char *needle)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), RUN "--epochs 1 %s 2>&1", args);
        cr_expect_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s: %s", args, out);
        cr_expect_not_null(strstr(out, needle), "%s: '%s' lacks '%s'", args, out, needle);
}

Test(train_schedules, bad_specifications_refused, .timeout = 120)
{
        refused("--lr-schedule multistep:5,3:0.5", "milestone 1 (3) is not after milestone 0");
        refused("--lr-schedule multistep:5,x:0.5", "is not multistep:M1,M2,...:GAMMA");
        refused("--lr-schedule multistep:0:0.5", "is not multistep:M1,M2,...:GAMMA");
        refused("--lr-schedule multistep:5:2", "gamma 2 not in (0, 1]");
        refused("--lr-schedule onecycle:1.5", "pct_start 1.5");
        refused("--lr-schedule plateau:x", "is not constant, step:N:GAMMA");
        refused("--lr-schedule plateau:2:1.5", "factor 1.5 not in (0, 1)");
        refused("--lr-schedule plateau:2:0.5:1", "min_lr 1 not in [0, lr 0.05]");
        refused("--lr-schedule plateau --monitor val_acc", "--monitor: 'val_acc' is not");
        refused("--monitor test_acc", "--lr-schedule plateau watch: give one");
}
