/*
 * strata-train --predict FILE --predictions OUT.h5: a model trained on an HDF5 file predicts
 * its test file into HDF5, whose /predictions are bitwise what strata_predict_step() gives for
 * the same weights and rows (batch by batch, on a training runtime) and whose /classes are
 * their argmax, with the weights' path as an attribute (h5py reads it, where installed); a
 * checkpoint's weights predict the same; every bad path and combination is refused with exit
 * 2 and a message, and a file already at OUT.h5 is left as it was when predict fails.
 */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"
#include "strata/strata.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define N 384
#define M 200 /* test rows: one full batch of 128 and a partial one */
#define DIM 8
#define CLASSES 3

static char dir[64], train_h5[128], test_h5[128];
static float xt[M * DIM];
static char out[1 << 14];

/* Inputs from a fixed sequence, labels from the inputs (learnable). */
static void fixture(void)
{
        static float x[N * DIM];
        static int32_t y[N], yt[M];
        unsigned long long dx[2] = { N, DIM }, dy[1] = { N }, dxt[2] = { M, DIM }, dyt[1] = { M };
        uint32_t s = 777;

        for (int i = 0; i < N * DIM; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)(s >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
        }
        for (int i = 0; i < M * DIM; i++)
                xt[i] = x[(i * 7) % (N * DIM)] * 0.5f;
        for (int i = 0; i < N; i++)
                y[i] = (x[i * DIM] > 0.0f) + (x[i * DIM + 1] > 0.5f);
        for (int i = 0; i < M; i++)
                yt[i] = (xt[i * DIM] > 0.0f) + (xt[i * DIM + 1] > 0.5f);
        cli_mkdtemp(dir, sizeof(dir), "predict");
        snprintf(train_h5, sizeof(train_h5), "%s/train.h5", dir);
        snprintf(test_h5, sizeof(test_h5), "%s/test.h5", dir);
        h5w_dataset(train_h5, "x", H5W_F32, 2, dx, x);
        h5w_dataset(train_h5, "y", H5W_I32, 1, dy, y);
        h5w_dataset(test_h5, "x", H5W_F32, 2, dxt, xt);
        h5w_dataset(test_h5, "y", H5W_I32, 1, dyt, yt);
}

/* strata-train --data train.h5 ... @p extra; its exit status, its output in out. */
static int run(const char *extra)
{
        static char args[2048];

        snprintf(args, sizeof(args), "--data %s --inputs x --targets y --test-data %s "
                 "--model 8-16-3 --seed 3 %s", train_h5, test_h5, extra);
        return cli_run(BIN, args, out, sizeof(out));
}

/* Dataset @p name of HDF5 file @p path into @p buf (@p n values of @p type); its rank's dims. */
static void read_h5(const char *path, const char *name, hid_t type, void *buf, hsize_t *dims)
{
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d, s;

        cr_assert_geq(f, 0, "%s opens", path);
        d = H5Dopen2(f, name, H5P_DEFAULT);
        cr_assert_geq(d, 0, "%s: dataset %s", path, name);
        s = H5Dget_space(d);
        cr_assert_geq(H5Sget_simple_extent_dims(s, dims, NULL), 0);
        cr_assert_geq(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), 0);
        H5Sclose(s);
        H5Dclose(d);
        H5Fclose(f);
}

/* The library's predictions of the test rows with weights @p st, batch 128 as the tool's. */
static void library_predict(const char *st, float *want)
{
        static struct strata_module mods[3];
        static struct strata_model model;
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;

        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        mods[1] = (struct strata_module){ .ops = &strata_relu };
        mods[2] = (struct strata_module){ .ops = &strata_linear, .out = CLASSES };
        model = (struct strata_model){ .in_features = DIM, .nmodules = 3, .modules = mods };
        c.model = &model;
        c.batch = 128;
        c.classes = CLASSES;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_STRICT, NULL), STRATA_OK, "%s",
                     strata_last_error());
        for (int i = 0; i < M; i += 128) {
                int rows = M - i < 128 ? M - i : 128;
                struct strata_batch b = { .x = xt + (size_t)i * DIM, .rows = rows, .dim = DIM };

                cr_assert_eq(strata_predict_step(rt, &b, want + (size_t)i * CLASSES,
                                                 (size_t)rows * CLASSES), STRATA_OK, "%s",
                             strata_last_error());
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(strata_train_predict, predictions_are_predict_steps, .timeout = 300)
{
        static float got[M * CLASSES], want[M * CLASSES], again[M * CLASSES];
        static int32_t cls[M];
        char args[512], ckpt[256], name[128], acc[32];
        const char *p;
        hsize_t d[2];
        FILE *f;

        fixture();
        snprintf(args, sizeof(args), "--epochs 2 --strategy single --optim adamw --lr 1e-2 "
                 "--export-safetensors %s/w.st --ckpt-dir %s/c --quiet", dir, dir);
        cr_assert_eq(run(args), 0, "%s", out);
        snprintf(args, sizeof(args), "--predict %s/w.st --predictions %s/p.h5", dir, dir);
        cr_assert_eq(run(args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "200 test rows x 3 outputs"), "%s", out);
        /* --evaluate on one device runs inference only too, and reports what ddp's does */
        snprintf(args, sizeof(args), "--strategy single --evaluate %s/w.st --verbose", dir);
        cr_assert_eq(run(args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "inference only: no gradients"), "%s", out);
        cr_assert_not_null(p = strstr(out, "test_acc "), "%s", out);
        snprintf(acc, sizeof(acc), "%.15s", p);
        snprintf(args, sizeof(args), "--strategy ddp --devices 2 --evaluate %s/w.st --verbose",
                 dir);
        cr_assert_eq(run(args), 0, "%s", out);
        cr_assert_null(strstr(out, "inference only"), "%s", out);
        cr_assert_not_null(strstr(out, acc), "%s not in %s", acc, out);
        cr_assert_eq(run("--optim adamw --plan --predict x --predictions y"), 0, "%s", out);
        cr_assert_not_null(strstr(out, "inference only (--predict)"), "%s", out);
        cr_assert_not_null(strstr(out, "(optimizer state 0,"), "%s", out);
        read_h5(cli_path(dir, "p.h5"), "predictions", H5T_NATIVE_FLOAT, got, d);
        cr_assert(d[0] == M && d[1] == CLASSES, "predictions [%llu, %llu]",
                  (unsigned long long)d[0], (unsigned long long)d[1]);
        library_predict(cli_path(dir, "w.st"), want);
        cr_assert_eq(memcmp(got, want, sizeof(got)), 0, "the file holds predict_step's values");
        read_h5(cli_path(dir, "p.h5"), "classes", H5T_NATIVE_INT32, cls, d);
        cr_assert_eq(d[0], M);
        for (int i = 0; i < M; i++) {
                int best = 0;

                for (int j = 1; j < CLASSES; j++)
                        best = want[i * CLASSES + j] > want[i * CLASSES + best] ? j : best;
                cr_assert_eq(cls[i], best, "row %d's class", i);
        }
        /* the checkpoint (AdamW's) under SGD: its weights, the same predictions */
        f = fopen(cli_path(dir, "c/latest"), "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(name, sizeof(name), f));
        fclose(f);
        name[strcspn(name, "\n")] = '\0';
        snprintf(ckpt, sizeof(ckpt), "%s/c/%s", dir, name);
        snprintf(args, sizeof(args), "--optim sgd --predict %s --predictions %s/q.h5 --json",
                 ckpt, dir);
        cr_assert_eq(run(args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"predict\":"), "%s", out);
        read_h5(cli_path(dir, "q.h5"), "predictions", H5T_NATIVE_FLOAT, again, d);
        cr_assert_eq(memcmp(again, want, sizeof(again)), 0);
        if (system("python3 -c 'import h5py' 2>/dev/null") == 0) {
                char cmd[512];

                snprintf(cmd, sizeof(cmd), "python3 -c \"import h5py; f = h5py.File('%s/p.h5', "
                         "'r'); print(f['predictions'].shape, f['predictions'].dtype, "
                         "f['classes'].shape, f.attrs['weights'])\"", dir);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
                cr_assert_not_null(strstr(out, "(200, 3) float32 (200,)"), "%s", out);
                cr_assert_not_null(strstr(out, "w.st"), "%s", out);
        }
        cli_rmtree(dir);
}

/* @p extra is refused with exit 2 and @p needle in the message. */
static void refused(const char *extra, const char *needle)
{
        cr_assert_eq(run(extra), 2, "%s: %s", extra, out);
        cr_assert_not_null(strstr(out, needle), "%s: wanted '%s' in: %s", extra, needle, out);
}

Test(strata_train_predict, bad_paths_and_options_refused, .timeout = 300)
{
        static char args[1024], old[64];
        FILE *f;
        size_t n;

        fixture();
        snprintf(args, sizeof(args), "--epochs 1 --strategy single --export-safetensors "
                 "%s/w.st --quiet", dir);
        cr_assert_eq(run(args), 0, "%s", out);
        snprintf(args, sizeof(args), "--predictions %s/p.h5", dir);
        refused(args, "give the weights to predict with");
        snprintf(args, sizeof(args), "--predict %s/w.st", dir);
        refused(args, "--predictions OUT.h5");
        snprintf(args, sizeof(args), "--predict %s/none.st --predictions %s/p.h5", dir, dir);
        refused(args, "No such file");
        snprintf(args, sizeof(args), "--predict %s --predictions %s/p.h5", dir, dir);
        refused(args, "is not a regular file");
        snprintf(args, sizeof(args), "--predict %s/w.st --predictions %s/no/p.h5", dir, dir);
        refused(args, "does not exist");
        snprintf(args, sizeof(args), "--predict %s/w.st --predictions %s", dir, dir);
        refused(args, "is a directory");
        snprintf(args, sizeof(args), "--predict %s/w.st --predictions %s/p.h5 --strategy ddp "
                 "--devices 2", dir, dir);
        refused(args, "inference-only runtime on one device");
        snprintf(args, sizeof(args), "--predict %s/w.st --predictions %s/p.h5 --resume %s/w.st",
                 dir, dir, dir);
        refused(args, "--resume has no use with it");
        /* weights of another model: refused, and the file already at the path kept */
        f = fopen(cli_path(dir, "p.h5"), "w");
        cr_assert_not_null(f);
        fputs("an older file", f);
        fclose(f);
        snprintf(args, sizeof(args), "--model 8-32-3 --predict %s/w.st --predictions %s/p.h5",
                 dir, dir);
        cr_assert_eq(run(args), 2, "%s", out);
        cr_assert_not_null(strstr(out, "does not fit this model"), "%s", out);
        f = fopen(cli_path(dir, "p.h5"), "r");
        cr_assert_not_null(f);
        n = fread(old, 1, sizeof(old) - 1, f);
        fclose(f);
        old[n] = '\0';
        cr_assert_str_eq(old, "an older file", "the path keeps what it had");
        cli_rmtree(dir);
}
