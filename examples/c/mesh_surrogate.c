/*
 * A MeshGraphNet-style surrogate of a simulation on a triangulated domain (issue 55, decision
 * 0072), from C; examples/fortran/mesh_surrogate.f90 is the same from Fortran.
 *
 * The mesh: an S x S grid of nodes on the unit square, the interior ones moved by up to a
 * quarter of the spacing (a fixed pattern), each cell cut into two triangles along an
 * alternating diagonal; its edges (the triangles' sides) both ways, E = 2 (2 S (S - 1) +
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
 *
 * Usage: mesh_surrogate [TRAIN [EPOCHS [DEVICES]]] [--dump FILE]   (256, 10, 1)
 * DEVICES > 1: ddp. --dump writes the data for the PyTorch peer (tools/peers/torch_mesh.py):
 * int32 train, val, nodes, edges, the edges' sources and destinations, then f32 x, y (train),
 * x, y (val), each sample (C, nodes).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#define S 16                                    /* nodes per side */
#define NODES (S * S)
#define EDGES (2 * (2 * S * (S - 1) + (S - 1) * (S - 1)))
#define STEPS 20
#define VAL 64
#define BATCH 8
#define L 16
#define PROC 2
#define MAX_MODULES 64

static double px[NODES], py[NODES];
static int32_t src[EDGES], dst[EDGES];
static double weight[EDGES], dt;

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

static double uniform(long long *s)
{
        *s = *s * 48271 % 2147483647;
        return (double)*s / 2147483647.0;
}

/* Undirected edge a - b as edges a -> b and b -> a (edge count so far in @p e). */
static void link2(int a, int b, int *e)
{
        src[*e] = a, dst[(*e)++] = b;
        src[*e] = b, dst[(*e)++] = a;
}

/* The nodes, the triangles' edges, their weights and the stable time step. */
static void build_mesh(void)
{
        double h = 1.0 / (S - 1), most = 0.0, sum[NODES] = { 0 };
        int e = 0;

        for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                        int inner = i > 0 && i < S - 1 && j > 0 && j < S - 1;

                        px[i * S + j] = j * h + inner * 0.25 * h * sin(1.7 * i + 2.3 * j);
                        py[i * S + j] = i * h + inner * 0.25 * h * cos(2.9 * i + 1.1 * j);
                }
        for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                        int n = i * S + j;

                        if (j + 1 < S)
                                link2(n, n + 1, &e);
                        if (i + 1 < S)
                                link2(n, n + S, &e);
                        if (i + 1 < S && j + 1 < S) /* the cell's diagonal, alternating */
                                (i + j) % 2 ? link2(n + 1, n + S, &e) : link2(n, n + S + 1, &e);
                }
        for (int k = 0; k < EDGES; k++) {
                double dx = px[src[k]] - px[dst[k]], dy = py[src[k]] - py[dst[k]];

                weight[k] = 1.0 / (dx * dx + dy * dy);
                sum[dst[k]] += weight[k];
        }
        for (int n = 0; n < NODES; n++)
                most = sum[n] > most ? sum[n] : most;
        dt = 0.2 / most;
}

/* Sample @p k: features (u, x, y) into @p x (3, nodes), u after STEPS steps into @p y. */
static void simulate(long k, float *x, float *y)
{
        long long s = 1 + (k * 7919 + 101) % 2147483646;
        double u[NODES] = { 0 }, du[NODES];

        for (int b = 0; b < 2; b++) {
                double cx = uniform(&s), cy = uniform(&s), w = 0.08 + 0.12 * uniform(&s);
                double a = uniform(&s) < 0.5 ? -1.0 : 1.0;

                for (int n = 0; n < NODES; n++) {
                        double dx = px[n] - cx, dy = py[n] - cy;

                        u[n] += a * exp(-(dx * dx + dy * dy) / (2.0 * w * w));
                }
        }
        for (int n = 0; n < NODES; n++) {
                x[n] = (float)u[n];
                x[NODES + n] = (float)px[n];
                x[2 * NODES + n] = (float)py[n];
        }
        for (int t = 0; t < STEPS; t++) {
                memset(du, 0, sizeof(du));
                for (int e = 0; e < EDGES; e++)
                        du[dst[e]] += weight[e] * (u[src[e]] - u[dst[e]]);
                for (int n = 0; n < NODES; n++)
                        u[n] += dt * du[n];
        }
        for (int n = 0; n < NODES; n++)
                y[n] = (float)u[n];
}

/* A processor step on node latents @p h and edge latents @p e (module indices); *next. */
static int processor(char *s, size_t cap, int h, int e, int *at)
{
        int k = *at;

        /* k: gather(src) k+1: gather(dst) k+2: concat k+3: concat; MLP k+4..6; LN k+7..9 */
        snprintf(s, cap, " gather(src,from=%d) gather(dst,from=%d) concat(from=%d) "
                 "concat(from=%d) conv1d(%d,1) relu conv1d(%d,1) tokens layernorm(dims=1) "
                 "tokens add(from=%d) scatter(sum) concat(from=%d) conv1d(%d,1) relu "
                 "conv1d(%d,1) tokens layernorm(dims=1) tokens add(from=%d)", h, h, k, e, L, L,
                 e, h, L, L, h);
        *at = k + 20;
        return k + 10; /* e' (h' is k + 19) */
}

/* The model line: encoders, PROC processor steps, the decoder. */
static void model_line(char *s, size_t cap)
{
        int at = 9, h = 2, e = 8, n;

        n = snprintf(s, cap, "input(3,%d) conv1d(%d,1) relu conv1d(%d,1) gather(src,from=input) "
                     "gather(dst,from=input) concat(from=3) conv1d(%d,1) relu conv1d(%d,1)",
                     NODES, L, L, L, L);
        for (int p = 0; p < PROC; p++) {
                e = processor(s + n, cap - (size_t)n, h, e, &at);
                n += (int)strlen(s + n);
                h = at - 1;
        }
        snprintf(s + n, cap - (size_t)n, " conv1d(%d,1) relu conv1d(1,1)", L);
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

int main(int argc, char **argv)
{
        static struct strata_module mods[MAX_MODULES];
        static struct strata_mesh mesh = { NODES, EDGES, src, dst };
        static char line[4096];
        int pos[3] = { 256, 10, 1 }, np = 0, rows[2];
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_model m = { .loss = &strata_mse };
        struct strata_metrics mt = { 0 };
        struct strata_runtime *rt;
        const char *dump_path = NULL;
        double t0, train_s, e0, e1;
        float *arr[4];

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--dump") && i + 1 < argc)
                        dump_path = argv[++i];
                else if (np < 3)
                        pos[np++] = atoi(argv[i]);
        }
        if (pos[0] < BATCH || pos[0] % BATCH || pos[1] < 1 || pos[2] < 1 || pos[2] > BATCH) {
                fprintf(stderr, "usage: mesh_surrogate [TRAIN (a multiple of %d) [EPOCHS "
                                "[DEVICES (1 to %d)]]] [--dump FILE]\n", BATCH, BATCH);
                return 2;
        }
        build_mesh();
        rows[0] = pos[0];
        rows[1] = VAL;
        for (int set = 0; set < 2; set++) {
                arr[2 * set] = malloc(sizeof(float) * (size_t)rows[set] * 3 * NODES);
                arr[2 * set + 1] = malloc(sizeof(float) * (size_t)rows[set] * NODES);
                if (!arr[2 * set] || !arr[2 * set + 1])
                        return 1;
                for (int k = 0; k < rows[set]; k++)
                        simulate(set * 1000000L + k, arr[2 * set] + (size_t)k * 3 * NODES,
                                 arr[2 * set + 1] + (size_t)k * NODES);
        }
        if (dump_path)
                dump(dump_path, pos[0], arr);
        model_line(line, sizeof(line));
        check(strata_model_parse(line, mods, MAX_MODULES, &m), "model line");
        for (int i = 0; i < m.nmodules; i++)
                if (mods[i].ops == &strata_gather || mods[i].ops == &strata_scatter)
                        mods[i].mesh = &mesh;
        cfg.model = &m;
        cfg.batch = BATCH;
        cfg.classes = NODES;
        cfg.seed = 1;
        cfg.optim.kind = STRATA_OPTIM_ADAMW; /* weight decay 0: Adam */
        cfg.optim.lr = 1e-3f;
        cfg.strategy.kind = pos[2] > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE;
        cfg.strategy.devices = pos[2];
        check(strata_init(&rt, &cfg), "init");
        check(strata_connect(rt), "connect");
        e0 = rel_l2(rt, arr[2], arr[3], VAL);
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
        e1 = rel_l2(rt, arr[2], arr[3], VAL);
        check(strata_teardown(rt), "teardown");
        printf("mesh surrogate (C): %d nodes, %d edges, %d modules; %d samples, %d epochs, "
               "batch %d, %d device(s)\n", NODES, EDGES, m.nmodules, pos[0], pos[1], BATCH,
               pos[2]);
        printf("training %.3f s; last loss %.6g; validation relative L2 %.4f (untrained "
               "%.4f)\n", train_s, mt.loss, e1, e0);
        printf("{\"impl\": \"strata\", \"example\": \"mesh\", \"lang\": \"c\", \"devices\": %d, "
               "\"train\": %d, \"epochs\": %d, \"train_s\": %.4f, \"loss\": %.9g, "
               "\"val_rel_l2\": %.6g, \"val_rel_l2_untrained\": %.6g}\n", pos[2], pos[0],
               pos[1], train_s, mt.loss, e1, e0);
        for (int i = 0; i < 4; i++)
                free(arr[i]);
        return 0;
}
