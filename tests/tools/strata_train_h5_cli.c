/*
 * strata-train --data FILE.h5 --inputs NAME --targets NAME: bad files, datasets and option
 * combinations exit 2 with one message naming the file and the dataset, before any training.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static char dir[64], file[128];

/* dir/d.h5: x (64 x 2 x 3 f32), y (64 x 2 f32), yi (64 int32 labels), bad arrays. */
static void fixture(void)
{
        static float x[64 * 6], y[64 * 2], xn[64 * 6];
        static int32_t yi[64];
        unsigned long long dx[3] = { 64, 2, 3 }, dy[2] = { 64, 2 }, d1[1] = { 64 },
                           d63[2] = { 63, 2 };

        for (int i = 0; i < 64 * 6; i++) {
                x[i] = (float)(i % 13) * 0.1f;
                xn[i] = x[i];
        }
        xn[6 * 40 + 5] = NAN;
        for (int i = 0; i < 64; i++) {
                yi[i] = i % 3;
        }
        cli_mkdtemp(dir, sizeof(dir), "h5cli");
        snprintf(file, sizeof(file), "%s/d.h5", dir);
        h5w_dataset(file, "x", H5W_F32, 3, dx, x);
        h5w_dataset(file, "y", H5W_F32, 2, dy, y);
        h5w_dataset(file, "yi", H5W_I32, 1, d1, yi);
        h5w_dataset(file, "xnan", H5W_F32, 3, dx, xn);
        h5w_dataset(file, "y63", H5W_F32, 2, d63, y);
}

/* strata-train ARGS exits 2, its output holds @p needle and no epoch ran. */
static void exits_2(const char *args, const char *needle)
{
        char cmd[1280], out[8192];

        snprintf(cmd, sizeof(cmd), "--epochs 1 --strategy single %s", args);
        cr_assert_eq(cli_run(BIN, cmd, out, sizeof(out)), 2, "%s -> %s", cmd, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", cmd, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
        cr_assert_null(strstr(out, "HDF5-DIAG"), "HDF5 printed: %s", out);
}

/* The same, with --data dir/d.h5 before @p rest. */
static void file_exits_2(const char *rest, const char *needle)
{
        char a[1024];

        snprintf(a, sizeof(a), "--data %s %s", file, rest);
        exits_2(a, needle);
}

Test(strata_train_h5_cli, bad_files_and_datasets_exit_2)
{
        char a[400], n[200];

        fixture();
        snprintf(n, sizeof(n), "%s: no dataset 'nope'", file);
        file_exits_2("--inputs x --targets nope", n);
        file_exits_2("--inputs x --targets y63", "dataset 'x' has 64 samples, dataset 'y63' 63");
        file_exits_2("--inputs xnan --targets y", "d.h5: dataset 'xnan': sample 40 holds NaN");
        file_exits_2("--inputs yi --targets y", "dataset 'yi': holds integers");
        snprintf(a, sizeof(a), "--data %s/none.h5 --inputs x --targets y", dir);
        exits_2(a, "none.h5: No such file");
        snprintf(n, sizeof(n), "%s/t.txt", dir);
        h5w_bytes(n, "not hdf5\n", 9);
        snprintf(a, sizeof(a), "--data %s --inputs x --targets y", n);
        exits_2(a, "t.txt: not an HDF5 file");
        snprintf(a, sizeof(a), "--inputs x --targets y --test-data %s", n);
        file_exits_2(a, "t.txt: not an HDF5 file");
        h5w_truncate(file, 1000);
        file_exits_2("--inputs x --targets y", "d.h5: a damaged or truncated HDF5 file");
        cli_rmtree(dir);
}

Test(strata_train_h5_cli, model_and_options_exit_2)
{
        char a[400];

        fixture();
        file_exits_2("--inputs x --targets y --loss mse --model 5-2", "input width must be the 6 values");
        file_exits_2("--inputs x --targets y --loss mse --model 6-3",
                     "3 outputs, but the targets have 2 values a sample");
        file_exits_2("--inputs x --targets yi --model 6-2",
                     "2 outputs, but the labels go up to 2: 3 outputs are needed");
        file_exits_2("--inputs x --targets y --val-fraction 0.01", "no evaluation sample");
        snprintf(a, sizeof(a), "--inputs x --targets y --loss mse --val-fraction 0.01 "
                 "--test-data %s", file); /* beside a test file: sets.c's split */
        file_exits_2(a, "--val-fraction 0.01 of the 64 training samples leaves no validation");
        file_exits_2("--inputs x", "give both");
        file_exits_2("", "needs --inputs NAME and --targets NAME");
        file_exits_2("--inputs x --targets y --synthetic 100", "--synthetic and --inputs");
        file_exits_2("--inputs x --targets y", "the data has float targets, which the default "
                     "loss (ce, class labels) does not take: give --loss");
        file_exits_2("--inputs x --targets yi --loss mse", "--loss mse does not fit the data's "
                     "labels");
        exits_2("--test-data f.h5", "--test-data needs an HDF5 --data file");
        cli_rmtree(dir);
}
