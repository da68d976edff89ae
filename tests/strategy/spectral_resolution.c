/*
 * A one-block FNO-1D trained on 32 points (MSE on float targets, ddp on 2 devices), exported
 * to safetensors, loaded strictly into the same model line built for 64 points (the spectral
 * and 1x1 convolution weights do not depend on the extent), and evaluated there: on an input
 * of frequencies below the modes, the 64-point model's output at the even points is the
 * 32-point model's output (within 1e-5), since every module but the spectral one is pointwise
 * and the spectral one keeps those frequencies only. A checkpoint of the run resumes to the
 * same bits.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"

#define ROWS 8
#define LINE(n) "input(2," #n ") conv1d(6,1) spectralconv1d(6,5) conv1d(6,1,from=0) add(from=1) " \
                "gelu conv1d(1,1)"

static float x32[ROWS * 2 * 32], t32[ROWS * 32], x64[ROWS * 2 * 64];
static float y32[ROWS * 32], y64[ROWS * 64];

/* Channel c of row r at point p of n: frequencies 0 to 3 of a period of the domain. */
static float field(int r, int c, int p, int n)
{
        double s = (double)p / n;

        return (float)(0.2 * r - 0.1 * c + cos(2 * M_PI * (s + 0.1 * r)) +
                       0.5 * sin(2 * M_PI * (3 * s + 0.3 * c)) + 0.25 * cos(4 * M_PI * s));
}

static struct strata_runtime *open_model(struct strata_module *mods, struct strata_model *m,
                                         const char *line, int devices)
{
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;

        *m = (struct strata_model){ .loss = &strata_mse };
        cr_assert_eq(strata_model_parse(line, mods, 8, m), STRATA_OK, "%s", strata_last_error());
        c.model = m;
        c.batch = ROWS;
        c.classes = m->in_features / 2;
        c.seed = 5;
        c.optim.lr = 0.01f;
        c.strategy.kind = STRATA_STRATEGY_DDP;
        c.strategy.devices = devices;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

Test(spectral_resolution, trained_at_32_points_evaluated_at_64, .timeout = 120)
{
        struct strata_module mods[8], mods64[8];
        struct strata_model m, m64;
        struct strata_runtime *rt, *fine;
        struct strata_batch b = { .x = x32, .rows = ROWS, .dim = 64, .t = t32, .tdim = 32 };
        struct strata_batch b64 = { .x = x64, .rows = ROWS, .dim = 128 };
        char st[64];

        for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < 2; c++) {
                        for (int p = 0; p < 32; p++)
                                x32[(r * 2 + c) * 32 + p] = field(r, c, p, 32);
                        for (int p = 0; p < 64; p++)
                                x64[(r * 2 + c) * 64 + p] = field(r, c, p, 64);
                }
        for (int i = 0; i < ROWS * 32; i++)
                t32[i] = (float)sin(0.05 * i);
        rt = open_model(mods, &m, LINE(32), 2);
        for (int s = 0; s < 5; s++)
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                             strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, y32, ROWS * 32), STRATA_OK);
        snprintf(st, sizeof(st), "/tmp/strata-fno-%d.safetensors", (int)getpid());
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        fine = open_model(mods64, &m64, LINE(64), 1);
        cr_assert_eq(strata_load_weights(fine, st, STRATA_WEIGHTS_STRICT, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_predict_step(fine, &b64, y64, ROWS * 64), STRATA_OK, "%s",
                     strata_last_error());
        for (int r = 0; r < ROWS; r++)
                for (int p = 0; p < 32; p++)
                        cr_assert(fabsf(y64[r * 64 + 2 * p] - y32[r * 32 + p]) <= 1e-5f,
                                  "row %d point %d: %g at 32 points, %g at 64", r, p,
                                  y32[r * 32 + p], y64[r * 64 + 2 * p]);
        cr_assert_eq(strata_teardown(fine), STRATA_OK);
        unlink(st);
}

/* Four steps, or two, a checkpoint, a fresh runtime resumed from it, two more: the same bits. */
Test(spectral_resolution, a_checkpoint_resumes_bitwise, .timeout = 120)
{
        struct strata_module mods[8];
        struct strata_model m;
        struct strata_batch b = { .x = x32, .rows = ROWS, .dim = 64, .t = t32, .tdim = 32 };
        static float a[4096], c[4096];
        const float *p;
        size_t n, n2;
        char ck[64];
        struct strata_runtime *rt;

        for (int i = 0; i < ROWS * 64; i++)
                x32[i] = (float)cos(0.37 * i);
        for (int i = 0; i < ROWS * 32; i++)
                t32[i] = (float)sin(0.05 * i);
        rt = open_model(mods, &m, LINE(32), 2);
        for (int s = 0; s < 4; s++)
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_leq(n, 4096);
        memcpy(a, p, n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        snprintf(ck, sizeof(ck), "/tmp/strata-fno-%d.ckpt", (int)getpid());
        rt = open_model(mods, &m, LINE(32), 2);
        for (int s = 0; s < 2; s++)
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, ck, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rt = open_model(mods, &m, LINE(32), 2);
        cr_assert_eq(strata_load_checkpoint(rt, ck, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        for (int s = 0; s < 2; s++)
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n2), STRATA_OK);
        cr_assert_eq(n2, n);
        memcpy(c, p, n * sizeof(float));
        cr_assert_eq(memcmp(a, c, n * sizeof(float)), 0, "the resumed run differs");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(ck);
}
