/*
 * Bad input found before training, once, with the culprit named (issue 45, items 8, 9, 10, 12
 * and 14): BCE targets outside [0, 1] at load (file, dataset, sample; exit 2); an export into
 * a missing directory; an HDF5 --data that is a FIFO (refused at once, not waited on) or lacks
 * the dataset (the file's datasets listed); a --ckpt-dir holding another run's files without
 * --resume or --overwrite; a finished run resumed prints its stored result; --resume DIR/latest;
 * the wording of counts.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 1024 --model 784-16-10 --batch 64 --strategy ddp --devices 2 "

static char dir[64], out[1 << 15];

static void make_dir(void)
{
        cli_mkdtemp(dir, sizeof(dir), "early");
}

static void remove_dir(void)
{
        cli_rmtree(dir);
}

/* strata-train @p args exits 2 with @p needle, having trained nothing. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(early, bce_targets_outside_0_1_at_load, .init = make_dir, .fini = remove_dir)
{
        static float x[64 * 3], p[64];
        unsigned long long dx[2] = { 64, 3 }, dp[2] = { 64, 1 };
        char args[512];

        for (int i = 0; i < 64; i++)
                p[i] = i == 41 ? 1.5f : (float)(i % 2);
        h5w_dataset(cli_path(dir, "b.h5"), "x", H5W_F32, 2, dx, x);
        h5w_dataset(cli_path(dir, "b.h5"), "p", H5W_F32, 2, dp, p);
        snprintf(args, sizeof(args), "--data %s/b.h5 --inputs x --targets p --loss bce "
                                     "--strategy single --epochs 1", dir);
        refused(args, "b.h5: dataset 'p': sample 41 holds 1.5 (value 0 of the sample): --loss "
                      "bce takes targets in [0, 1]");
}

Test(early, export_into_a_missing_directory, .init = make_dir, .fini = remove_dir)
{
        char args[512];

        snprintf(args, sizeof(args), RUN "--epochs 1 --export-safetensors %s/no/w.safetensors",
                 dir);
        refused(args, "its directory");
        cr_assert_not_null(strstr(out, "/no does not exist"), "%s", out);
        snprintf(args, sizeof(args), RUN "--epochs 1 --export-safetensors %s", dir);
        refused(args, "is a directory");
}

Test(early, hdf5_fifo_refused_and_datasets_listed, .init = make_dir, .fini = remove_dir,
     .timeout = 60)
{
        static float x[8 * 2];
        unsigned long long d[2] = { 8, 2 };
        char args[512], cmd[512];

        snprintf(cmd, sizeof(cmd), "mkfifo %s/f.h5", dir);
        cr_assert_eq(system(cmd), 0);
        snprintf(cmd, sizeof(cmd), "timeout 20 " BIN " --data %s/f.h5 --inputs x --targets y "
                                   "2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "a FIFO is not waited on: %s", out);
        cr_assert_not_null(strstr(out, "f.h5: not a regular file (a FIFO)"), "%s", out);
        h5w_dataset(cli_path(dir, "g.h5"), "fields/u", H5W_F32, 2, d, x);
        h5w_dataset(cli_path(dir, "g.h5"), "fields/du", H5W_F32, 2, d, x);
        snprintf(args, sizeof(args), "--data %s/g.h5 --inputs fields/u --targets du --loss mse",
                 dir);
        refused(args, "no dataset 'du'; its datasets are 'fields/du', 'fields/u'");
}

/* A second run into the same --ckpt-dir; --overwrite; a finished run; --resume DIR/latest. */
Test(early, ckpt_dir_reuse_overwrite_finished_and_latest, .init = make_dir, .fini = remove_dir,
     .timeout = 120)
{
        char args[512], result[256];
        const char *f, *e;
        struct stat st;

        snprintf(args, sizeof(args), RUN "--epochs 3 --json --ckpt-dir %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        f = strstr(out, "{\"final\":true");
        e = f ? strstr(f, ",\"time_s\"") : NULL;
        cr_assert(f && e, "%s", out);
        f = strstr(f, "\"train_loss\":");
        snprintf(result, sizeof(result), "%.*s", (int)(e - f), f);
        snprintf(args, sizeof(args), RUN "--epochs 1 --ckpt-dir %s", dir);
        refused(args, "already holds 4 files (");
        cr_assert_not_null(strstr(out, "--resume "), "%s", out);
        cr_assert_not_null(strstr(out, "--overwrite"), "%s", out);
        cr_assert_eq(stat(cli_path(dir, "epoch-3.ckpt"), &st), 0, "refused, yet changed");
        /* A finished run resumed: its stored result, not zeros (through DIR/latest). */
        snprintf(args, sizeof(args), RUN "--epochs 3 --json --resume %s/latest", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "already holds 3 epochs (--epochs 3)"), "%s", out);
        cr_assert_not_null(strstr(out, result), "%s: %s", result, out);
        snprintf(args, sizeof(args), RUN "--epochs 3 --resume %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "final (from the checkpoint, 3 epochs): train_loss"),
                           "%s", out);
        cr_assert_null(strstr(out, "samples/s"), "nothing trained: %s", out);
        /* --overwrite starts afresh: no stale epoch-2, epoch-3 beside the new run's. */
        snprintf(args, sizeof(args), RUN "--epochs 1 --quiet --ckpt-dir %s --overwrite", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(stat(cli_path(dir, "epoch-1.ckpt"), &st), 0);
        cr_assert_neq(stat(cli_path(dir, "epoch-2.ckpt"), &st), 0, "a stale checkpoint stayed");
        cr_assert_neq(stat(cli_path(dir, "epoch-3.ckpt"), &st), 0, "a stale checkpoint stayed");
        snprintf(args, sizeof(args), RUN "--epochs 2 --json --resume %s/latest", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "truncated"), "%s", out);
        cr_assert_not_null(strstr(out, "{\"epoch\":2,"), "resumed at epoch 2: %s", out);
        cr_assert_null(strstr(out, "{\"epoch\":1,"), "%s", out);
}
