/*
 * A Fourier neural operator learns a simulation's solution operator on a coarse grid and is
 * evaluated on a finer one (issue 55, decision 0072): resolution independence, the FNO's point.
 *
 * The simulation: 2-D advection-diffusion u_t + c . grad u = nu lap u on the periodic unit
 * square (c = (1, 0.5), nu = 0.01), from u(0) to u(T), T = 0.15, solved exactly mode by mode
 * (each Fourier mode moves with c and decays as exp(-4 pi^2 nu |k|^2 T)), in f64, stored in
 * f32. A sample's initial field is MODES random Fourier modes (|kx|, |ky| <= 4, amplitudes in
 * [-1, 1], phases in [0, 2 pi)) from a fixed generator (Park-Miller), so every resolution
 * samples the same functions. The pair learned: u(0) -> u(T), fields (1, N, N).
 *
 * The model (the reference FNO-2D's shape): a kernel-1 conv2d lifting to WIDTH channels, three
 * Fourier blocks gelu(spectralconv2d(WIDTH, 8, 8)(h) + conv2d(WIDTH, 1)(h)) (the last without
 * gelu), a kernel-1 projection MLP to one channel; MSE, Adam (lr 1e-3), batch 16, the samples
 * in order. Trained at N x N, its weights exported to safetensors and loaded strictly into the
 * same line built for FINE x FINE (no weight depends on the grid), then both evaluate the same
 * validation samples: the relative L2 error ||pred - u(T)|| / ||u(T)||, averaged.
 *
 * Usage: fno [TRAIN [EPOCHS [N [FINE [DEVICES]]]]] [--dump FILE]   (512, 10, 32, 64, 1)
 * --dump writes the data for the PyTorch peer (tools/peers/torch_fno.py): int32 train, val, N,
 * FINE, then f32 x, y (train at N), x, y (val at N), x, y (val at FINE). Prints the training
 * time, the errors and one JSON line.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#define VAL 64        /* validation samples */
#define MODES 6       /* Fourier modes of an initial field */
#define KMAX 4
#define BATCH 16
#define WIDTH 16
#define PI 3.14159265358979323846
#define CX 1.0
#define CY 0.5
#define NU 0.01
#define T_END 0.15

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, const char *what)
{
        if (rc != STRATA_OK) {
                fprintf(stderr, "fno: %s: %s\n", what, strata_last_error());
                exit(1);
        }
}

/* Park-Miller's minimal standard generator: a uniform number in (0, 1). */
static double uniform(long long *s)
{
        *s = *s * 48271 % 2147483647;
        return (double)*s / 2147483647.0;
}

/* Sample @p k's initial field and its solution at T on an n x n grid, into @p x and @p y. */
static void simulate(long k, int n, float *x, float *y)
{
        long long s = 1 + (k * 7919 + 17) % 2147483646;
        double a[MODES], ph[MODES], decay[MODES];
        int kx[MODES], ky[MODES];

        for (int m = 0; m < MODES; m++) {
                kx[m] = (int)(uniform(&s) * (2 * KMAX + 1)) - KMAX;
                ky[m] = (int)(uniform(&s) * (KMAX + 1));
                a[m] = 2.0 * uniform(&s) - 1.0;
                ph[m] = 2.0 * PI * uniform(&s);
                decay[m] = exp(-4.0 * PI * PI * NU * (kx[m] * kx[m] + ky[m] * ky[m]) * T_END);
        }
        for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                        double py = (double)i / n, px = (double)j / n, u0 = 0.0, u1 = 0.0;

                        for (int m = 0; m < MODES; m++) {
                                u0 += a[m] * cos(2.0 * PI * (kx[m] * px + ky[m] * py) + ph[m]);
                                u1 += a[m] * decay[m] *
                                      cos(2.0 * PI * (kx[m] * (px - CX * T_END) +
                                                      ky[m] * (py - CY * T_END)) + ph[m]);
                        }
                        x[i * n + j] = (float)u0;
                        y[i * n + j] = (float)u1;
                }
}

/* Samples @p first .. first + count - 1 at n x n into fresh arrays. */
static void dataset(long first, int count, int n, float **x, float **y)
{
        size_t cells = (size_t)n * (size_t)n;

        *x = malloc(sizeof(float) * cells * (size_t)count);
        *y = malloc(sizeof(float) * cells * (size_t)count);
        if (!*x || !*y) {
                fprintf(stderr, "fno: out of memory\n");
                exit(1);
        }
        for (int k = 0; k < count; k++)
                simulate(first + k, n, *x + cells * (size_t)k, *y + cells * (size_t)k);
}

/* The model line at n x n points. */
static void model_line(char *s, size_t cap, int n)
{
        snprintf(s, cap,
                 "input(1,%d,%d) conv2d(%d,1) "
                 "spectralconv2d(%d,8,8) conv2d(%d,1,from=0) add(from=1) gelu "
                 "spectralconv2d(%d,8,8) conv2d(%d,1,from=4) add(from=5) gelu "
                 "spectralconv2d(%d,8,8) conv2d(%d,1,from=8) add(from=9) "
                 "conv2d(%d,1) gelu conv2d(1,1)", n, n, WIDTH, WIDTH, WIDTH, WIDTH, WIDTH,
                 WIDTH, WIDTH, 2 * WIDTH);
}

static struct strata_runtime *open_model(int n, int batch, int devices,
                                         struct strata_module *mods, struct strata_model *m)
{
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;
        char line[512];

        model_line(line, sizeof(line), n);
        *m = (struct strata_model){ .loss = &strata_mse };
        check(strata_model_parse(line, mods, 32, m), "model line");
        cfg.model = m;
        cfg.batch = batch;
        cfg.classes = n * n;
        cfg.seed = 1;
        cfg.optim.kind = STRATA_OPTIM_ADAMW; /* weight decay 0: Adam */
        cfg.optim.lr = 1e-3f;
        cfg.strategy.kind = devices > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE;
        cfg.strategy.devices = devices;
        check(strata_init(&rt, &cfg), "init");
        check(strata_connect(rt), "connect");
        return rt;
}

/* The mean relative L2 error of @p rt's predictions over @p count samples of n x n. */
static double rel_l2(struct strata_runtime *rt, const float *x, const float *y, int count, int n)
{
        int cells = n * n;
        float *out = malloc(sizeof(float) * (size_t)cells * BATCH);
        double sum = 0.0;

        if (!out)
                exit(1);
        for (int k = 0; k < count; k += BATCH) {
                struct strata_batch b = { .x = x + (size_t)k * cells, .rows = BATCH, .dim = cells };

                check(strata_predict_step(rt, &b, out, BATCH * cells), "predict");
                for (int r = 0; r < BATCH; r++) {
                        const float *t = y + (size_t)(k + r) * cells, *p = out + (size_t)r * cells;
                        double e = 0.0, nt = 0.0;

                        for (int i = 0; i < cells; i++) {
                                e += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);
                                nt += (double)t[i] * t[i];
                        }
                        sum += sqrt(e / nt);
                }
        }
        free(out);
        return sum / count;
}

static void dump(const char *path, int train, int n, int fine, float *const arr[6])
{
        int head[4] = { train, VAL, n, fine };
        size_t counts[6] = { (size_t)train * n * n, (size_t)train * n * n, (size_t)VAL * n * n,
                             (size_t)VAL * n * n, (size_t)VAL * fine * fine,
                             (size_t)VAL * fine * fine };
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(head, sizeof(head), 1, f) == 1;

        for (int i = 0; ok && i < 6; i++)
                ok = fwrite(arr[i], sizeof(float), counts[i], f) == counts[i];
        if (!f || fclose(f) || !ok) {
                fprintf(stderr, "fno: writing %s failed\n", path);
                exit(1);
        }
}

int main(int argc, char **argv)
{
        int pos[5] = { 512, 10, 32, 64, 1 }, np = 0;
        const char *dump_path = NULL;
        char st[64];
        static struct strata_module mods[32], fmods[32];
        struct strata_model m, fm;
        struct strata_runtime *rt, *fine_rt;
        float *arr[6];
        double t0, train_s, e_n, e_fine, e0;
        struct strata_metrics mt = { 0 };

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--dump") && i + 1 < argc)
                        dump_path = argv[++i];
                else if (np < 5)
                        pos[np++] = atoi(argv[i]);
        }
        if (pos[0] < BATCH || pos[0] % BATCH || pos[1] < 1 || pos[2] < 16 || pos[3] < pos[2] ||
            pos[4] < 1) {
                fprintf(stderr, "usage: fno [TRAIN (a multiple of %d) [EPOCHS [N (>= 16) "
                                "[FINE (>= N) [DEVICES]]]]] [--dump FILE]\n", BATCH);
                return 2;
        }
        snprintf(st, sizeof(st), "/tmp/strata-fno-%d.safetensors", (int)getpid());
        dataset(0, pos[0], pos[2], &arr[0], &arr[1]);
        dataset(1000000, VAL, pos[2], &arr[2], &arr[3]);
        dataset(1000000, VAL, pos[3], &arr[4], &arr[5]);
        if (dump_path)
                dump(dump_path, pos[0], pos[2], pos[3], arr);
        rt = open_model(pos[2], BATCH, pos[4], mods, &m);
        e0 = rel_l2(rt, arr[2], arr[3], VAL, pos[2]);
        t0 = now_s();
        for (int e = 0; e < pos[1]; e++)
                for (int k = 0; k < pos[0]; k += BATCH) {
                        size_t at = (size_t)k * pos[2] * pos[2];
                        struct strata_batch b = { .x = arr[0] + at, .rows = BATCH,
                                                  .dim = pos[2] * pos[2], .t = arr[1] + at,
                                                  .tdim = pos[2] * pos[2] };

                        check(strata_train_step(rt, &b, &mt), "train step");
                }
        train_s = now_s() - t0;
        e_n = rel_l2(rt, arr[2], arr[3], VAL, pos[2]);
        check(strata_export_safetensors(rt, st), "export");
        check(strata_teardown(rt), "teardown");
        fine_rt = open_model(pos[3], BATCH, 1, fmods, &fm);
        check(strata_load_weights(fine_rt, st, STRATA_WEIGHTS_STRICT, NULL), "load at FINE");
        e_fine = rel_l2(fine_rt, arr[4], arr[5], VAL, pos[3]);
        check(strata_teardown(fine_rt), "teardown");
        remove(st);
        printf("fno (C): %d samples of %d x %d, %d epochs, batch %d, %d device(s)\n", pos[0],
               pos[2], pos[2], pos[1], BATCH, pos[4]);
        printf("training %.3f s; last loss %.6g; validation relative L2 %.4f at %d x %d, %.4f "
               "at %d x %d (untrained %.4f)\n", train_s, mt.loss, e_n, pos[2], pos[2], e_fine,
               pos[3], pos[3], e0);
        printf("{\"impl\": \"strata\", \"example\": \"fno\", \"devices\": %d, \"train\": %d, "
               "\"epochs\": %d, \"n\": %d, \"fine\": %d, \"train_s\": %.4f, \"loss\": %.9g, "
               "\"val_rel_l2\": %.6g, \"val_rel_l2_fine\": %.6g, \"val_rel_l2_untrained\": "
               "%.6g}\n", pos[4], pos[0], pos[1], pos[2], pos[3], train_s, mt.loss, e_n, e_fine,
               e0);
        for (int i = 0; i < 6; i++)
                free(arr[i]);
        return 0;
}
