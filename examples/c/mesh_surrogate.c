/*
 * A MeshGraphNet-style surrogate of a simulation on a triangulated domain (issue 55, decisions
 * 0072 and 0083), from C; examples/fortran/mesh_surrogate.f90 is the same from Fortran.
 *
 * The mesh and simulation (examples/c/mesh_sim.h): an S x S grid of nodes on the unit
 * square, the interior ones moved by up to a quarter of the spacing (a fixed pattern), each
 * cell cut into two triangles along an alternating diagonal; its edges (the triangles' sides) both ways, E = 2 (2 S (S - 1) +
 * (S - 1)^2). The simulation: diffusion on that mesh, u_i += dt sum over the neighbours j of
 * w_ij (u_j - u_i), w_ij = 1 / |x_i - x_j|^2 (insulated boundary), dt = 0.2 / the largest
 * sum of a node's weights, STEPS explicit steps in f64. A sample starts from two Gaussian
 * blobs of random place, width and sign (Park-Miller, a fixed seed per sample); the pair
 * learned: node features (u, x, y) -> u after STEPS steps.
 *
 * The model, one line (latent width L = 16): node encoder conv1d(L,1) relu conv1d(L,1); edge
 * encoder on gather(src) and gather(dst) of the raw features, concatenated; PROC processor
 * steps, each: e' = e + LN(MLP([h_dst, h_src, e])), h' = h + LN(MLP([sum of e' into the node,
 * h])) (gather, concat, a kernel-1 conv1d MLP, tokens layernorm(dims=1) tokens, add;
 * scatter(sum)); a decoder MLP to one channel. MSE, Adam (lr 1e-3), batch 8, the samples in
 * order. Prints the training time and the validation relative L2 error, then a JSON line.
 * The trained weights are exported (safetensors) and loaded into an inference runtime, which
 * gives the validation error, and before them the untrained error.
 *
 * Alone, DEVICES > 1 trains with ddp. Under `mpirun -np P` (read by strata_launch_detect(); no
 * MPI call here) the strategy is mpi with DEVICES devices a process, and every process
 * simulates only its rows of each batch, rows [8 p / P, 8 (p + 1) / P) of process p: bitwise
 * ddp on P x DEVICES devices. Process 0 evaluates and prints (decision 0083).
 *
 * Usage: mesh_surrogate [TRAIN [EPOCHS [DEVICES]]] [--dump FILE] [--export FILE]
 * (256, 10, 1). --export keeps the trained weights. --dump (process 0) writes the data for the
 * PyTorch peer (tools/peers/torch_mesh.py): int32 train, val, nodes, edges, the edges' sources
 * and destinations, then f32 x, y (train), x, y (val), each sample (C, nodes).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "mesh_sim.h"

#define VAL 64
#define BATCH 8
#define MAX_MODULES 64

static void check(int rc, const char *what)
{
        if (rc != STRATA_OK) {
                fprintf(stderr, "mesh_surrogate: %s: %s\n", what, strata_last_error());
                exit(1);
        }
}

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double rel_l2(struct strata_runtime *rt, const float *x, const float *y, int count)
{
        static float out[BATCH * NODES];
        double sum = 0.0;

        for (int k = 0; k < count; k += BATCH) {
                struct strata_batch b = { .x = x + (size_t)k * 3 * NODES, .rows = BATCH,
                                          .dim = 3 * NODES };

                check(strata_predict_step(rt, &b, out, BATCH * NODES), "predict");
                for (int r = 0; r < BATCH; r++) {
                        const float *t = y + (size_t)(k + r) * NODES;
                        double d = 0.0, nt = 0.0;

                        for (int i = 0; i < NODES; i++) {
                                d += ((double)out[r * NODES + i] - t[i]) *
                                     ((double)out[r * NODES + i] - t[i]);
                                nt += (double)t[i] * t[i];
                        }
                        sum += sqrt(d / nt);
                }
        }
        return sum / count;
}

static void dump(const char *path, int train, float *const arr[4])
{
        int head[4] = { train, VAL, NODES, EDGES };
        size_t counts[4] = { (size_t)train * 3 * NODES, (size_t)train * NODES,
                             (size_t)VAL * 3 * NODES, (size_t)VAL * NODES };
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(head, sizeof(head), 1, f) == 1 &&
                 fwrite(src, sizeof(src), 1, f) == 1 && fwrite(dst, sizeof(dst), 1, f) == 1;

        for (int i = 0; ok && i < 4; i++)
                ok = fwrite(arr[i], sizeof(float), counts[i], f) == counts[i];
        if (!f || fclose(f) || !ok) {
                fprintf(stderr, "mesh_surrogate: writing %s failed\n", path);
                exit(1);
        }
}

/*
 * A runtime of the line on @p mesh: for training under @p kind on @p devices devices a
 * process, or (@p infer) an inference runtime of one device.
 */
static struct strata_runtime *open_model(const struct strata_mesh *mesh,
                                         enum strata_strategy_kind kind, int devices, int infer,
                                         struct strata_model *m)
{
        static struct strata_module mods[2][MAX_MODULES];
        static char line[4096];
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_module *mm = mods[infer];
        struct strata_runtime *rt;

        model_line(line, sizeof(line));
        *m = (struct strata_model){ .loss = &strata_mse };
        check(strata_model_parse(line, mm, MAX_MODULES, m), "model line");
        for (int i = 0; i < m->nmodules; i++)
                if (mm[i].ops == &strata_gather || mm[i].ops == &strata_scatter)
                        mm[i].mesh = mesh;
        cfg.model = m;
        cfg.batch = BATCH;
        cfg.classes = NODES;
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

/* Samples of set @p set (0: training, 1: validation), only rows [lo, hi) of each batch. */
static void samples(int set, int count, int lo, int hi, float **x, float **y)
{
        *x = calloc((size_t)count * 3 * NODES, sizeof(float));
        *y = calloc((size_t)count * NODES, sizeof(float));
        if (!*x || !*y) {
                fprintf(stderr, "mesh_surrogate: out of memory\n");
                exit(1);
        }
        for (int k = 0; k < count; k++)
                if (k % BATCH >= lo && k % BATCH < hi)
                        simulate(set * 1000000L + k, *x + (size_t)k * 3 * NODES,
                                 *y + (size_t)k * NODES);
}

int main(int argc, char **argv)
{
        static struct strata_mesh mesh = { NODES, EDGES, src, dst };
        int pos[3] = { 256, 10, 1 }, np = 0, lo, hi;
        struct strata_model m;
        struct strata_metrics mt = { 0 };
        struct strata_launch job;
        struct strata_runtime *rt;
        const char *dump_path = NULL, *export_path = NULL;
        double t0, train_s, e0, e1;
        float *arr[4] = { NULL };
        char st[64];
        uint64_t bits;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--dump") && i + 1 < argc)
                        dump_path = argv[++i];
                else if (!strcmp(argv[i], "--export") && i + 1 < argc)
                        export_path = argv[++i];
                else if (np < 3)
                        pos[np++] = atoi(argv[i]);
        }
        if (pos[0] < BATCH || pos[0] % BATCH || pos[1] < 1 || pos[2] < 1 || pos[2] > BATCH) {
                fprintf(stderr, "usage: mesh_surrogate [TRAIN (a multiple of %d) [EPOCHS "
                                "[DEVICES (1 to %d)]]] [--dump FILE] [--export FILE]\n", BATCH,
                        BATCH);
                return 2;
        }
        check(strata_launch_detect(&job), "launcher");
        lo = BATCH * job.rank / job.size;
        hi = BATCH * (job.rank + 1) / job.size;
        if (dump_path && job.rank == 0)
                lo = 0, hi = BATCH; /* the peer needs every row */
        build_mesh();
        samples(0, pos[0], lo, hi, &arr[0], &arr[1]);
        if (job.rank == 0)
                samples(1, VAL, 0, BATCH, &arr[2], &arr[3]);
        if (dump_path && job.rank == 0)
                dump(dump_path, pos[0], arr);
        rt = open_model(&mesh, job.size > 1 ? STRATA_STRATEGY_MPI :
                               pos[2] > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE,
                        pos[2], 0, &m);
        t0 = now_s();
        for (int ep = 0; ep < pos[1]; ep++)
                for (int k = 0; k < pos[0]; k += BATCH) {
                        struct strata_batch b = { .x = arr[0] + (size_t)k * 3 * NODES,
                                                  .rows = BATCH, .dim = 3 * NODES,
                                                  .t = arr[1] + (size_t)k * NODES,
                                                  .tdim = NODES };

                        check(strata_train_step(rt, &b, &mt), "train step");
                }
        train_s = now_s() - t0;
        snprintf(st, sizeof(st), "/tmp/strata-mesh-%d.safetensors", (int)getpid());
        if (job.rank == 0)
                check(strata_export_safetensors(rt, export_path ? export_path : st), "export");
        check(strata_teardown(rt), "teardown");
        if (job.rank == 0) {
                rt = open_model(&mesh, STRATA_STRATEGY_SINGLE, 1, 1, &m);
                e0 = rel_l2(rt, arr[2], arr[3], VAL);
                check(strata_load_weights(rt, export_path ? export_path : st,
                                          STRATA_WEIGHTS_STRICT, NULL), "load");
                e1 = rel_l2(rt, arr[2], arr[3], VAL);
                check(strata_teardown(rt), "teardown");
                if (!export_path)
                        remove(st);
                memcpy(&bits, &mt.loss, sizeof(bits));
                printf("mesh surrogate (C): %d nodes, %d edges, %d modules; %d samples, %d "
                       "epochs, batch %d, %d process(es) x %d device(s)\n", NODES, EDGES,
                       m.nmodules, pos[0], pos[1], BATCH, job.size, pos[2]);
                printf("training %.3f s; last loss %.6g; validation relative L2 %.4f "
                       "(untrained %.4f)\n", train_s, mt.loss, e1, e0);
                printf("{\"impl\": \"strata\", \"example\": \"mesh\", \"lang\": \"c\", "
                       "\"procs\": %d, \"devices\": %d, \"train\": %d, \"epochs\": %d, "
                       "\"train_s\": %.4f, \"loss\": %.9g, \"loss_bits\": \"%016" PRIx64 "\", "
                       "\"val_rel_l2\": %.6g, \"val_rel_l2_untrained\": %.6g}\n", job.size,
                       pos[2], pos[0], pos[1], train_s, mt.loss, bits, e1, e0);
        }
        for (int i = 0; i < 4; i++)
                free(arr[i]);
        return 0;
}
