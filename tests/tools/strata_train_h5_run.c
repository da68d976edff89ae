/*
 * strata-train learns from an HDF5 file the test writes: a regression whose targets are a
 * fixed linear map of the inputs (f32, and f64 with a held-out fraction), and a classification
 * from integer labels; the training loss falls, nothing allocates during training.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define N 512
#define DIM 8
#define OUT 2

static char dir[64], file[128];

/* x in [-1, 1) from a fixed sequence; t = x W (W fixed); labels: the larger of t's two. */
static void fixture(void)
{
        static float x[N * DIM], t[N * OUT];
        static double xd[N * DIM];
        static int32_t y[N];
        unsigned long long dx[3] = { N, 2, DIM / 2 }, dt[2] = { N, OUT }, dy[1] = { N };
        uint32_t s = 12345;

        for (int i = 0; i < N * DIM; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)(s >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
                xd[i] = x[i];
        }
        for (int i = 0; i < N; i++) {
                for (int j = 0; j < OUT; j++) {
                        t[i * OUT + j] = 0.0f;
                        for (int k = 0; k < DIM; k++) {
                                t[i * OUT + j] += x[i * DIM + k] * (float)((k + 2 * j) % 5 - 2) *
                                                  0.5f;
                        }
                }
                y[i] = t[i * OUT] > t[i * OUT + 1];
        }
        cli_mkdtemp(dir, sizeof(dir), "h5run");
        snprintf(file, sizeof(file), "%s/sim.h5", dir);
        h5w_dataset(file, "fields/u", H5W_F32, 3, dx, x);
        h5w_dataset(file, "fields/u64", H5W_F64, 3, dx, xd);
        h5w_dataset(file, "fields/du", H5W_F32, 2, dt, t);
        h5w_dataset(file, "labels", H5W_I32, 1, dy, y);
}

/* A JSON number after "key": in @p from. */
static double field(const char *from, const char *key)
{
        char k[64];
        const char *p;

        snprintf(k, sizeof(k), "\"%s\":", key);
        p = strstr(from, k);
        cr_assert_not_null(p, "no %s in %s", key, from);
        return atof(p + strlen(k));
}

/* Train with @p rest; the first and last epochs' training loss. 0 heap allocations. */
static void train(const char *rest, double *first, double *last, char *out, size_t n)
{
        char args[512];
        const char *fin;

        snprintf(args, sizeof(args), "--data %s --epochs 4 --batch 32 --json %s", file, rest);
        cr_assert_eq(cli_run(BIN, args, out, n), 0, "%s -> %s", args, out);
        cr_assert_null(strstr(out, "HDF5-DIAG"), "%s", out);
        *first = field(strstr(out, "{\"epoch\":1,"), "train_loss");
        fin = strstr(out, "\"final\":true");
        cr_assert_not_null(fin, "%s", out);
        *last = field(fin, "train_loss");
        if (!STRATA_SAN[0]) {
                cr_assert_eq(field(fin, "heap_allocs"), 0.0, "%s", out);
        }
}

Test(strata_train_h5_run, regression_loss_falls, .timeout = 240)
{
        static char out[1 << 14];
        double a, b;

        fixture();
        train("--inputs fields/u --targets fields/du --loss mse --model 8-2 --lr 0.05 "
              "--strategy single", &a, &b, out, sizeof(out));
        cr_assert_lt(b, a * 0.1, "MSE %g -> %g: %s", a, b, out);
        /* f64 inputs, the last quarter held out, two devices: the same fall. */
        train("--inputs fields/u64 --targets fields/du --loss mse --val-fraction 0.25 "
              "--model 8-16-2 --lr 0.05 --strategy ddp --devices 2", &a, &b, out, sizeof(out));
        cr_assert_lt(field(strstr(out, "\"final\":true"), "val_mse"), a, "%s", out);
        cr_assert_lt(b, a * 0.5, "MSE %g -> %g: %s", a, b, out);
        cli_rmtree(dir);
}

/* --test-data and --val-fraction: validation each epoch, the test file once at the end. */
Test(strata_train_h5_run, validation_and_test_in_one_run, .timeout = 240)
{
        static char out[1 << 14];
        char args[256];
        double a, b;

        fixture();
        snprintf(args, sizeof(args), "--inputs fields/u --targets labels --test-data %s "
                 "--val-fraction 0.25 --strategy single --lr 0.05", file);
        train(args, &a, &b, out, sizeof(out));
        cr_expect(strstr(out, "{\"epoch\":4,") && strstr(out, "\"val_acc\":"), "%s", out);
        cr_assert_gt(field(strstr(out, "{\"test\":true"), "test_acc"), 0.8, "%s", out);
        cli_rmtree(dir);
}

Test(strata_train_h5_run, classification_from_integer_labels, .timeout = 240)
{
        static char out[1 << 14];
        char args[256];
        double a, b;

        fixture();
        snprintf(args, sizeof(args), "--inputs fields/u --targets labels --test-data %s "
                 "--strategy single --lr 0.05", file);
        train(args, &a, &b, out, sizeof(out));
        cr_assert_lt(b, a, "cross-entropy %g -> %g: %s", a, b, out);
        cr_assert_gt(field(strstr(out, "\"final\":true"), "test_acc"), 0.85, "%s", out);
        cli_rmtree(dir);
}
