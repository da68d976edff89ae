/*
 * The mesh and the simulation of the mesh examples (examples/c/mesh_surrogate.c, which
 * trains from C; examples/c/mesh_h5.c, which writes them for strata-train --mesh): an S x S
 * grid of nodes on the unit square, the interior ones moved by up to a quarter of the spacing
 * (a fixed pattern), each cell cut into two triangles along an alternating diagonal, its
 * edges both ways; diffusion on it, u_i += dt sum over the neighbours j of w_ij (u_j - u_i),
 * w_ij = 1 / |x_i - x_j|^2, dt = 0.2 / the largest sum of a node's weights, STEPS explicit
 * steps in f64 from two Gaussian blobs of random place, width and sign (Park-Miller, a fixed
 * seed per sample). examples/fortran/mesh_surrogate.f90 computes the same. And the model
 * both train, one line: node and edge encoders, PROC MeshGraphNet processor steps, a decoder.
 */
#ifndef STRATA_EXAMPLES_MESH_SIM_H
#define STRATA_EXAMPLES_MESH_SIM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define S 16                                    /* nodes per side */
#define NODES (S * S)
#define EDGES (2 * (2 * S * (S - 1) + (S - 1) * (S - 1)))
#define STEPS 20
#define L 16                                    /* the model's latent width */
#define PROC 2                                  /* its processor steps */


static double px[NODES], py[NODES];
static int32_t src[EDGES], dst[EDGES];
static double weight[EDGES], dt;

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

#endif
