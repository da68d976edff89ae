/*
 * In-situ training from C: a simulation learns a surrogate of itself while it runs, the
 * workload of TorchFort's simulation example (and of ../shared/anchors/torch_insitu.py, its
 * PyTorch peer, line for line).
 *
 * The simulation advances u(x, y, t) = sin(pi (x - ax t)) sin(pi (y - ay t)) on a periodic
 * 32x32 grid over [-1, 1)^2 (ax = 1, ay = 0.789, dt = 0.01), in f64, storing f32 fields. Each
 * training step takes BATCH consecutive states (input u, target du/dx + du/dy) straight from
 * the simulation's arrays; the model is one Linear over the flattened field (1024-1024, no
 * activation, TorchFort's config_mlp_native.yaml) or, with --fcn, TorchFort's default fully
 * convolutional model: one Conv2d(1, 1, 3, padding=1, padding_mode="circular") over the
 * 1 x 32 x 32 field (generate_fcn_model.py); MSE, Adam (lr 1e-3) with cosine annealing over the
 * run. Afterwards 100
 * single-sample inferences at later times give the validation MSE: the trained parameters are
 * checkpointed and loaded into an inference runtime of one device (batch 1), which first
 * predicts with its initial parameters (the untrained MSE, for comparison).
 *
 * Under `mpirun -np P` every process computes its share of each batch's states (rows
 * BATCH * p / P up to BATCH * (p + 1) / P of the global batch, those its devices train on) and
 * Strata's `mpi` strategy joins the processes on the application's own communicator (a
 * duplicate of MPI_COMM_WORLD). Alone, DEVICES > 1 trains with ddp on that many threads:
 * bitwise the run of as many processes of one device each.
 *
 * Usage: insitu [STEPS [BATCH [DEVICES]]] [--fcn] [--export FILE.safetensors] [--ckpt FILE]
 * Prints simulation time, training time, steps/s and validation MSE, then one JSON line.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#define N 32                /* grid points per side */
#define CELLS (N * N)       /* the field, flattened: the model's width */
#define AX 1.0
#define AY 0.789
#define DT 0.01
#define PI 3.14159265358979323846
#define WARMUP 10           /* training steps not timed, as the peer */
#define VALIDATION 100      /* single-sample inferences */

struct run {
        int steps, batch, devices;
        int rank, procs;
        int fcn;            /* --fcn: the convolutional model */
        const char *export_path, *ckpt_path;
        MPI_Comm comm;      /* the application's communicator */
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
                fprintf(stderr, "insitu: %s: %s\n", what, strata_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
}

/* The state u and the target du/dx + du/dy at time t, computed in f64 and stored in f32. */
static void field(double t, float *u, float *du)
{
        for (int iy = 0; iy < N; iy++) {
                double y = (double)iy * (2.0 / N) - 1.0, py = PI * (y - AY * t);

                for (int ix = 0; ix < N; ix++) {
                        double x = (double)ix * (2.0 / N) - 1.0, px = PI * (x - AX * t);

                        u[iy * N + ix] = (float)(sin(px) * sin(py));
                        du[iy * N + ix] = (float)(PI * cos(px) * sin(py) +
                                                  PI * sin(px) * cos(py));
                }
        }
}

/* The model, its loss and optimizer: the same for the training and the inference runtime. */
static void configure(struct strata_config *cfg, const struct strata_model *model,
                      const struct run *r)
{
        strata_config_init(cfg);
        cfg->model = model;
        cfg->classes = CELLS;
        cfg->optim.kind = STRATA_OPTIM_ADAMW; /* with weight_decay 0: Adam */
        cfg->optim.lr = 1e-3f;
        cfg->optim.schedule = STRATA_LR_COSINE;
        cfg->optim.t_max = (uint64_t)r->steps;
}

/* Train on the simulation as it runs; the training runtime is returned for what follows. */
static struct strata_runtime *train(const struct strata_model *model, const struct run *r,
                                    double *sim_s, double *train_s, double *loss)
{
        int p = r->rank, lo = r->batch * p / r->procs, hi = r->batch * (p + 1) / r->procs;
        float *x = calloc((size_t)r->batch * CELLS, sizeof(float));
        float *t = calloc((size_t)r->batch * CELLS, sizeof(float));
        struct strata_batch b = { .x = x, .rows = r->batch, .dim = CELLS, .t = t,
                                  .tdim = CELLS };
        struct strata_config cfg;
        struct strata_metrics m = { 0 };
        struct strata_runtime *rt;

        if (!x || !t) {
                fprintf(stderr, "insitu: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        configure(&cfg, model, r);
        cfg.batch = r->batch;
        cfg.strategy.devices = r->devices;
        cfg.strategy.kind = r->procs > 1 ? STRATA_STRATEGY_MPI :
                            r->devices > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE;
        cfg.process.mpi_comm = &r->comm;
        check(strata_init(&rt, &cfg), "init");
        check(strata_connect(rt), "connect");
        *sim_s = *train_s = 0.0;
        for (int s = 0; s < r->steps; s++) {
                double t0 = now_s(), t1;

                /* This process's rows of the global batch: its share of the simulation. */
                for (int i = lo; i < hi; i++)
                        field((double)(s * r->batch + i + 1) * DT, x + (size_t)i * CELLS,
                              t + (size_t)i * CELLS);
                t1 = now_s();
                check(strata_train_step(rt, &b, &m), "train step");
                *sim_s += t1 - t0;
                if (s >= WARMUP)
                        *train_s += now_s() - t1;
        }
        *loss = m.loss;
        free(x);
        free(t);
        return rt;
}

/* Mean squared error of the model's outputs against the targets, over the validation states. */
static double validate(struct strata_runtime *rt, const struct run *r, double *infer_s)
{
        static float u[CELLS], du[CELLS], out[CELLS];
        struct strata_batch b = { .x = u, .rows = 1, .dim = CELLS };
        double sum = 0.0;

        *infer_s = 0.0;
        for (int k = 0; k < VALIDATION; k++) {
                double err = 0.0, t0;

                field((double)(r->steps * r->batch + 10 * k + 1) * DT, u, du);
                t0 = now_s();
                check(strata_predict_step(rt, &b, out, CELLS), "predict");
                *infer_s += now_s() - t0;
                for (int i = 0; i < CELLS; i++)
                        err += ((double)out[i] - du[i]) * ((double)out[i] - du[i]);
                sum += err / CELLS;
        }
        return sum / VALIDATION;
}

/* An inference runtime (one device, batch 1): untrained MSE, then the checkpoint's. */
static double infer(const struct strata_model *model, const struct run *r, double *untrained,
                    double *infer_s)
{
        struct strata_config cfg;
        struct strata_runtime *rt;
        double mse;

        configure(&cfg, model, r);
        cfg.batch = 1;
        check(strata_init(&rt, &cfg), "inference init");
        check(strata_connect(rt), "inference connect");
        *untrained = validate(rt, r, infer_s);
        check(strata_load_checkpoint(rt, r->ckpt_path, NULL, 0, NULL, NULL), "load");
        mse = validate(rt, r, infer_s);
        check(strata_teardown(rt), "inference teardown");
        return mse;
}

static void args(int argc, char **argv, struct run *r)
{
        int pos = 0;

        *r = (struct run){ .steps = 2000, .batch = 16, .devices = 1, .ckpt_path = "insitu.ckpt" };
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--export") && i + 1 < argc)
                        r->export_path = argv[++i];
                else if (!strcmp(argv[i], "--ckpt") && i + 1 < argc)
                        r->ckpt_path = argv[++i];
                else if (!strcmp(argv[i], "--fcn"))
                        r->fcn = 1;
                else if (pos == 0)
                        r->steps = atoi(argv[i]), pos++;
                else if (pos == 1)
                        r->batch = atoi(argv[i]), pos++;
                else
                        r->devices = atoi(argv[i]);
        }
        if (r->steps <= WARMUP || r->batch < 1 || r->devices < 1) {
                fprintf(stderr, "usage: insitu [STEPS > %d [BATCH [DEVICES]]] "
                                "[--fcn] [--export FILE] [--ckpt FILE]\n", WARMUP);
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
}

static void report(const struct run *r, double sim_s, double train_s, double loss,
                   double mse, double untrained, double infer_s)
{
        double sps = (r->steps - WARMUP) / train_s;
        uint64_t bits;

        memcpy(&bits, &loss, sizeof(bits));
        printf("in-situ (C): %s, %d process(es) x %d device(s), batch %d, %d steps\n",
               r->fcn ? "fcn" : "mlp", r->procs, r->devices, r->batch, r->steps);
        printf("simulation %.3f s, training %.3f s (%.1f steps/s, %.0f samples/s)\n", sim_s,
               train_s, sps, sps * r->batch);
        printf("last training loss %.6g, validation MSE %.6g (untrained %.6g), batch-1 "
               "inference %.1f us\n", loss, mse, untrained, infer_s / VALIDATION * 1e6);
        printf("{\"impl\": \"strata\", \"lang\": \"c\", \"model\": \"%s\", \"nprocs\": %d, "
               "\"devices\": %d, \"batch\": %d, \"steps\": %d, \"steps_per_s\": %.3f, "
               "\"samples_per_s\": %.1f, \"sim_s\": %.4f, \"train_s\": %.4f, "
               "\"train_loss\": %.9g, \"loss_bits\": \"%016" PRIx64 "\", \"val_mse\": %.9g, "
               "\"val_mse_untrained\": %.9g, \"infer_us\": %.2f}\n", r->fcn ? "fcn" : "mlp",
               r->procs, r->devices, r->batch, r->steps, sps, sps * r->batch, sim_s, train_s,
               loss, bits, mse, untrained,
               infer_s / VALIDATION * 1e6);
}

int main(int argc, char **argv)
{
        static const struct strata_module mlp[] = { { .ops = &strata_linear, .out = CELLS } };
        static const struct strata_module fcn[] = { { .ops = &strata_conv2d, .out = 1,
                                                      .kernel = { 3 }, .padding = { 1 },
                                                      .padding_mode = STRATA_PAD_CIRCULAR } };
        struct strata_model model = { .in_features = CELLS, .nmodules = 1, .modules = mlp,
                                      .loss = &strata_mse };
        double sim_s, train_s, loss, mse = 0.0, untrained = 0.0, infer_s = 0.0;
        struct strata_runtime *rt;
        struct run r;
        int provided;

        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        args(argc, argv, &r);
        if (r.fcn) { /* the field as one channel of N x N: (C, H, W) */
                model.modules = fcn;
                model.in_dims = (struct strata_dims){ .channels = 1, .ndim = 2, .size = { N, N } };
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &r.comm);
        MPI_Comm_rank(r.comm, &r.rank);
        MPI_Comm_size(r.comm, &r.procs);
        rt = train(&model, &r, &sim_s, &train_s, &loss);
        check(strata_save_checkpoint(rt, r.ckpt_path, NULL, 0), "save");
        if (r.export_path)
                check(strata_export_safetensors(rt, r.export_path), "export");
        check(strata_teardown(rt), "teardown");
        if (r.rank == 0) {
                mse = infer(&model, &r, &untrained, &infer_s);
                remove(r.ckpt_path);
                report(&r, sim_s, train_s, loss, mse, untrained, infer_s);
        }
        MPI_Comm_free(&r.comm);
        MPI_Finalize();
        return 0;
}
