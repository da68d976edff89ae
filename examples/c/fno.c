/*
 * A Fourier neural operator learns a simulation's solution operator on a coarse grid and is
 * evaluated on a finer one (issue 55, decisions 0072 and 0083): resolution independence, the
 * FNO's point. In two dimensions (default) or three (--3d).
 *
 * The simulation: advection-diffusion u_t + c . grad u = nu lap u on the periodic unit square
 * (c = (1, 0.5)) or cube (--3d: c = (1, 0.5, 0.25)), nu = 0.01, from u(0) to u(T), T = 0.15,
 * solved exactly mode by mode (each Fourier mode moves with c and decays as
 * exp(-4 pi^2 nu |k|^2 T)), in f64, stored in f32. A sample's initial field is MODES random
 * Fourier modes (2-D: |kx| <= 4, 0 <= ky <= 4; 3-D: |kx|, |ky| <= 2, 0 <= kz <= 2; amplitudes
 * in [-1, 1], phases in [0, 2 pi)) from a fixed generator (Park-Miller), so every resolution
 * samples the same functions. The pair learned: u(0) -> u(T), fields (1, N, N) or
 * (1, N, N, N), x the last axis.
 *
 * The model (the reference FNO's shape): a kernel-1 convolution lifting to WIDTH channels,
 * three Fourier blocks gelu(spectralconv(h) + conv(WIDTH, 1)(h)) (the last without gelu;
 * spectralconv2d(WIDTH, 8, 8) or spectralconv3d(WIDTH, 4, 4, 4)), a kernel-1 projection MLP
 * to one channel; MSE, Adam (lr 1e-3), batch 16, the samples in order. Trained at N points a
 * side, its weights exported to safetensors and loaded strictly into the same line built for
 * FINE points a side (no weight depends on the grid) in an inference runtime, which evaluates
 * the validation samples at both resolutions: the relative L2 error ||pred - u(T)|| / ||u(T)||,
 * averaged; the untrained error is that runtime's before the weights come in.
 *
 * Alone, DEVICES > 1 trains with ddp. Under `mpirun -np P` (Open MPI's launcher, read by
 * strata_launch_detect(); no MPI call here: Strata initialises MPI) the strategy is mpi with
 * DEVICES devices a process, and every process computes only its rows of each batch, rows
 * [16 p / P, 16 (p + 1) / P) of process p: bitwise ddp on P x DEVICES devices. Process 0
 * evaluates and prints.
 *
 * Usage: fno [--3d] [TRAIN [EPOCHS [N [FINE [DEVICES]]]]] [--dump FILE] [--export FILE]
 * (2-D: 512, 10, 32, 64, 1; 3-D: 256, 10, 16, 32, 1). --export keeps the trained weights
 * (safetensors). --dump (2-D, one process) writes the data for the PyTorch peer
 * (tools/peers/torch_fno.py): int32 train, val, N, FINE, then f32 x, y (train at N), x, y
 * (val at N), x, y (val at FINE). Prints the training time, the errors and one JSON line.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#define VAL 64        /* validation samples */
#define MODES 6       /* Fourier modes of an initial field */
#define BATCH 16
#define WIDTH 16
#define PI 3.14159265358979323846
#define CX 1.0
#define CY 0.5
#define CZ 0.25
#define NU 0.01
#define T_END 0.15

/* What differs between the 2-D and the 3-D operator. */
struct grid {
        int dims;     /* 2 or 3 */
        int kmax;     /* largest |k| of an initial field's modes */
        int modes;    /* the spectral convolutions' modes per dimension */
};

/* This process's part of the job. */
struct share {
        int rank, procs;      /* from the launcher: 0 of 1 alone */
        int lo, hi;           /* its rows of every batch */
};

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

/* Points of a field with @p n points a side. */
static size_t cells(const struct grid *g, int n)
{
        return (size_t)n * (size_t)n * (g->dims == 3 ? (size_t)n : 1u);
}

/* Sample @p k's initial field and its solution at T with n points a side, into @p x, @p y. */
static void simulate(const struct grid *g, long k, int n, float *x, float *y)
{
        long long s = 1 + (k * 7919 + 17) % 2147483646;
        double a[MODES], ph[MODES], decay[MODES];
        int kx[MODES], ky[MODES], kz[MODES], nz = g->dims == 3 ? n : 1, span = 2 * g->kmax + 1;

        for (int m = 0; m < MODES; m++) {
                kx[m] = (int)(uniform(&s) * span) - g->kmax;
                ky[m] = g->dims == 3 ? (int)(uniform(&s) * span) - g->kmax
                                     : (int)(uniform(&s) * (g->kmax + 1));
                kz[m] = g->dims == 3 ? (int)(uniform(&s) * (g->kmax + 1)) : 0;
                a[m] = 2.0 * uniform(&s) - 1.0;
                ph[m] = 2.0 * PI * uniform(&s);
                decay[m] = exp(-4.0 * PI * PI * NU *
                               (kx[m] * kx[m] + ky[m] * ky[m] + kz[m] * kz[m]) * T_END);
        }
        for (int l = 0; l < nz; l++)
                for (int i = 0; i < n; i++)
                        for (int j = 0; j < n; j++) {
                                double pz = (double)l / n, py = (double)i / n, px = (double)j / n;
                                double u0 = 0.0, u1 = 0.0;

                                for (int m = 0; m < MODES; m++) {
                                        double p0 = kx[m] * px + ky[m] * py;
                                        double p1 = kx[m] * (px - CX * T_END) +
                                                    ky[m] * (py - CY * T_END);

                                        if (g->dims == 3) {
                                                p0 += kz[m] * pz;
                                                p1 += kz[m] * (pz - CZ * T_END);
                                        }
                                        u0 += a[m] * cos(2.0 * PI * p0 + ph[m]);
                                        u1 += a[m] * decay[m] * cos(2.0 * PI * p1 + ph[m]);
                                }
                                x[((size_t)l * n + i) * n + j] = (float)u0;
                                y[((size_t)l * n + i) * n + j] = (float)u1;
                        }
}

/*
 * Samples @p first .. first + count - 1 with n points a side into fresh arrays; only the rows
 * [lo, hi) of each batch of BATCH are computed, the others stay 0 (another process's).
 */
static void dataset(const struct grid *g, long first, int count, int n, int lo, int hi,
                    float **x, float **y)
{
        size_t c = cells(g, n);

        *x = calloc(c * (size_t)count, sizeof(float));
        *y = calloc(c * (size_t)count, sizeof(float));
        if (!*x || !*y) {
                fprintf(stderr, "fno: out of memory\n");
                exit(1);
        }
        for (int k = 0; k < count; k++)
                if (k % BATCH >= lo && k % BATCH < hi)
                        simulate(g, first + k, n, *x + c * (size_t)k, *y + c * (size_t)k);
}

/* The model line with n points a side. */
static void model_line(const struct grid *g, char *s, size_t cap, int n)
{
        const char *conv = g->dims == 3 ? "conv3d" : "conv2d";
        char in[64], sp[64];

        if (g->dims == 3) {
                snprintf(in, sizeof(in), "input(1,%d,%d,%d)", n, n, n);
                snprintf(sp, sizeof(sp), "spectralconv3d(%d,%d,%d,%d)", WIDTH, g->modes,
                         g->modes, g->modes);
        } else {
                snprintf(in, sizeof(in), "input(1,%d,%d)", n, n);
                snprintf(sp, sizeof(sp), "spectralconv2d(%d,%d,%d)", WIDTH, g->modes, g->modes);
        }
        snprintf(s, cap,
                 "%s %s(%d,1) "
                 "%s %s(%d,1,from=0) add(from=1) gelu "
                 "%s %s(%d,1,from=4) add(from=5) gelu "
                 "%s %s(%d,1,from=8) add(from=9) "
                 "%s(%d,1) gelu %s(1,1)", in, conv, WIDTH, sp, conv, WIDTH, sp, conv, WIDTH,
                 sp, conv, WIDTH, conv, 2 * WIDTH, conv);
}

/*
 * A runtime of the line with n points a side: for training under @p kind on @p devices
 * devices a process, or (@p infer) an inference runtime of one device.
 */
static struct strata_runtime *open_model(const struct grid *g, int n,
                                         enum strata_strategy_kind kind, int devices, int infer,
                                         struct strata_module *mods, struct strata_model *m)
{
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;
        char line[512];

        model_line(g, line, sizeof(line), n);
        *m = (struct strata_model){ .loss = &strata_mse };
        check(strata_model_parse(line, mods, 32, m), "model line");
        cfg.model = m;
        cfg.batch = BATCH;
        cfg.classes = (int)cells(g, n);
        cfg.seed = 1;
        cfg.inference_only = infer;
        cfg.optim.kind = STRATA_OPTIM_ADAMW; /* weight decay 0: Adam */
        cfg.optim.lr = 1e-3f;
        cfg.strategy.kind = kind;
        cfg.strategy.devices = devices;
        check(strata_init(&rt, &cfg), "init");
        check(strata_connect(rt), "connect");
        return rt;
}

/* The mean relative L2 error of @p rt's predictions over VAL samples with n points a side. */
static double rel_l2(const struct grid *g, struct strata_runtime *rt, const float *x,
                     const float *y, int n)
{
        size_t c = cells(g, n);
        float *out = malloc(sizeof(float) * c * BATCH);
        double sum = 0.0;

        if (!out)
                exit(1);
        for (int k = 0; k < VAL; k += BATCH) {
                struct strata_batch b = { .x = x + (size_t)k * c, .rows = BATCH, .dim = (int)c };

                check(strata_predict_step(rt, &b, out, BATCH * c), "predict");
                for (int r = 0; r < BATCH; r++) {
                        const float *t = y + (size_t)(k + r) * c, *p = out + (size_t)r * c;
                        double e = 0.0, nt = 0.0;

                        for (size_t i = 0; i < c; i++) {
                                e += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);
                                nt += (double)t[i] * t[i];
                        }
                        sum += sqrt(e / nt);
                }
        }
        free(out);
        return sum / VAL;
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

/*
 * The validation errors (process 0): an inference runtime at N gives the untrained error,
 * then loads the trained weights; another at FINE loads them too.
 */
static void evaluate(const struct grid *g, const int pos[5], const char *weights,
                     float *const arr[6], double e[3])
{
        static struct strata_module mods[32];
        struct strata_model m;
        struct strata_runtime *rt;

        for (int k = 0; k < 2; k++) {
                int n = pos[2 + k];

                rt = open_model(g, n, STRATA_STRATEGY_SINGLE, 1, 1, mods, &m);
                if (k == 0)
                        e[2] = rel_l2(g, rt, arr[2], arr[3], n);
                check(strata_load_weights(rt, weights, STRATA_WEIGHTS_STRICT, NULL), "load");
                e[k] = rel_l2(g, rt, arr[2 + 2 * k], arr[3 + 2 * k], n);
                check(strata_teardown(rt), "teardown");
        }
}

static void report(const struct grid *g, const int pos[5], const struct share *sh,
                   double train_s, double loss, const double e[3])
{
        uint64_t bits;

        memcpy(&bits, &loss, sizeof(bits));
        printf("fno (C): %d-D, %d samples of %d points a side, %d epochs, batch %d, %d "
               "process(es) x %d device(s)\n", g->dims, pos[0], pos[2], pos[1], BATCH,
               sh->procs, pos[4]);
        printf("training %.3f s; last loss %.6g; validation relative L2 %.4f at %d, %.4f at %d "
               "points a side (untrained %.4f)\n", train_s, loss, e[0], pos[2], e[1], pos[3],
               e[2]);
        printf("{\"impl\": \"strata\", \"example\": \"fno\", \"dims\": %d, \"procs\": %d, "
               "\"devices\": %d, \"train\": %d, \"epochs\": %d, \"n\": %d, \"fine\": %d, "
               "\"train_s\": %.4f, \"loss\": %.9g, \"loss_bits\": \"%016" PRIx64 "\", "
               "\"val_rel_l2\": %.6g, \"val_rel_l2_fine\": %.6g, \"val_rel_l2_untrained\": "
               "%.6g}\n", g->dims, sh->procs, pos[4], pos[0], pos[1], pos[2], pos[3], train_s,
               loss, bits, e[0], e[1], e[2]);
}

/* Positional arguments and options; exits 2 on a bad one. */
static void args(int argc, char **argv, struct grid *g, int pos[5], const char **dump_path,
                 const char **export_path)
{
        int np = 0, given[5];

        *g = (struct grid){ .dims = 2, .kmax = 4, .modes = 8 };
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--dump") && i + 1 < argc)
                        *dump_path = argv[++i];
                else if (!strcmp(argv[i], "--export") && i + 1 < argc)
                        *export_path = argv[++i];
                else if (!strcmp(argv[i], "--3d"))
                        *g = (struct grid){ .dims = 3, .kmax = 2, .modes = 4 };
                else if (np < 5)
                        given[np++] = atoi(argv[i]);
        }
        pos[0] = g->dims == 3 ? 256 : 512;
        pos[1] = 10;
        pos[2] = g->dims == 3 ? 16 : 32;
        pos[3] = 2 * pos[2];
        pos[4] = 1;
        for (int i = 0; i < np; i++)
                pos[i] = given[i];
        if (pos[0] < BATCH || pos[0] % BATCH || pos[1] < 1 || pos[2] < 2 * g->modes ||
            pos[3] < pos[2] || pos[4] < 1 || (*dump_path && g->dims == 3)) {
                fprintf(stderr, "usage: fno [--3d] [TRAIN (a multiple of %d) [EPOCHS [N (2-D: "
                                ">= 16, 3-D: >= 8) [FINE (>= N) [DEVICES]]]]] [--dump FILE "
                                "(2-D)] [--export FILE]\n", BATCH);
                exit(2);
        }
}

int main(int argc, char **argv)
{
        int pos[5];
        const char *dump_path = NULL, *export_path = NULL;
        char st[64];
        static struct strata_module mods[32];
        struct strata_launch job;
        struct strata_model m;
        struct strata_runtime *rt;
        struct strata_metrics mt = { 0 };
        struct share sh;
        struct grid g;
        float *arr[6] = { NULL };
        double t0, train_s, e[3];

        args(argc, argv, &g, pos, &dump_path, &export_path);
        check(strata_launch_detect(&job), "launcher");
        sh = (struct share){ .rank = job.rank, .procs = job.size,
                             .lo = BATCH * job.rank / job.size,
                             .hi = BATCH * (job.rank + 1) / job.size };
        if (dump_path && sh.rank == 0)
                sh.lo = 0, sh.hi = BATCH; /* the peer needs every row */
        dataset(&g, 0, pos[0], pos[2], sh.lo, sh.hi, &arr[0], &arr[1]);
        if (sh.rank == 0) {
                dataset(&g, 1000000, VAL, pos[2], 0, BATCH, &arr[2], &arr[3]);
                dataset(&g, 1000000, VAL, pos[3], 0, BATCH, &arr[4], &arr[5]);
        }
        if (dump_path && sh.rank == 0)
                dump(dump_path, pos[0], pos[2], pos[3], arr);
        rt = open_model(&g, pos[2], sh.procs > 1 ? STRATA_STRATEGY_MPI :
                                    pos[4] > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE,
                        pos[4], 0, mods, &m);
        t0 = now_s();
        for (int ep = 0; ep < pos[1]; ep++)
                for (int k = 0; k < pos[0]; k += BATCH) {
                        size_t at = (size_t)k * cells(&g, pos[2]);
                        struct strata_batch b = { .x = arr[0] + at, .rows = BATCH,
                                                  .dim = (int)cells(&g, pos[2]),
                                                  .t = arr[1] + at,
                                                  .tdim = (int)cells(&g, pos[2]) };

                        check(strata_train_step(rt, &b, &mt), "train step");
                }
        train_s = now_s() - t0;
        snprintf(st, sizeof(st), "/tmp/strata-fno-%d.safetensors", (int)getpid());
        if (sh.rank == 0)
                check(strata_export_safetensors(rt, export_path ? export_path : st), "export");
        check(strata_teardown(rt), "teardown");
        if (sh.rank == 0) {
                evaluate(&g, pos, export_path ? export_path : st, arr, e);
                if (!export_path)
                        remove(st);
                report(&g, pos, &sh, train_s, mt.loss, e);
        }
        for (int i = 0; i < 6; i++)
                free(arr[i]);
        return 0;
}
