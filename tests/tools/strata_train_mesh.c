/*
 * strata-train --mesh FILE.h5 (decision 0072): --help names it; a gather - edge MLP -
 * scatter(sum) - node MLP line over a ring's edge_index trains on HDF5 node fields under ddp on
 * 2 devices to the same final line twice (the tool exits 1 on a heap call during steps); a
 * negative index, a mesh of more nodes than the data has, an edge_index not [2, edges] or not
 * integers, a missing dataset or file, a graph line without --mesh and a --mesh without a graph
 * line are refused (exit 2) with the value named, before anything trains.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define NODES 6
#define EDGES 12
#define SAMPLES 64
#define LINE "--model 'input(2,6) gather(src) gather(dst,from=input) concat(from=0) conv1d(8,1) " \
             "relu scatter(sum) conv1d(8,1) relu conv1d(1,1)' "

static char out[1 << 15], data[96], mesh[96], cmd[1024];

/* Node fields (2 channels) and a target (a neighbour average) in data, a ring in mesh. */
static void files(const int32_t *edge_index, unsigned long long rows, unsigned long long cols,
                  enum h5w_type type)
{
        static float x[SAMPLES][2][NODES], y[SAMPLES][1][NODES];
        unsigned long long xd[3] = { SAMPLES, 2, NODES }, yd[3] = { SAMPLES, 1, NODES };
        unsigned long long md[2] = { rows, cols };
        double f[2 * EDGES];
        int64_t w[2 * EDGES];

        snprintf(data, sizeof(data), "/tmp/strata-mesh-data-%d.h5", (int)getpid());
        snprintf(mesh, sizeof(mesh), "/tmp/strata-mesh-%d.h5", (int)getpid());
        remove(data);
        remove(mesh);
        for (int s = 0; s < SAMPLES; s++)
                for (int n = 0; n < NODES; n++) {
                        x[s][0][n] = (float)sin(0.7 * s + 1.3 * n);
                        x[s][1][n] = (float)cos(0.3 * s * n);
                }
        for (int s = 0; s < SAMPLES; s++)
                for (int n = 0; n < NODES; n++)
                        y[s][0][n] = 0.5f * (x[s][0][(n + 1) % NODES] +
                                             x[s][0][(n + NODES - 1) % NODES]);
        h5w_dataset(data, "x", H5W_F32, 3, xd, x);
        h5w_dataset(data, "y", H5W_F32, 3, yd, y);
        for (unsigned long long i = 0; i < rows * cols; i++) {
                f[i] = edge_index[i];
                w[i] = edge_index[i];
        }
        h5w_dataset(mesh, "edge_index", type, 2, md, type == H5W_F64 ? (void *)f
                                                     : type == H5W_I64 ? (void *)w
                                                                       : (const void *)edge_index);
}

/* Edges n -> n+1 (0..5), then n -> n-1 (6..11): rows of sources and destinations. */
static void ring(int32_t *ei)
{
        for (int n = 0; n < NODES; n++) {
                ei[n] = n;
                ei[EDGES + n] = (n + 1) % NODES;
                ei[NODES + n] = n;
                ei[EDGES + NODES + n] = (n + NODES - 1) % NODES;
        }
}

static int run(const char *extra)
{
        snprintf(cmd, sizeof(cmd), "--data %s --inputs x --targets y --loss mse --batch 16 "
                 "--epochs 2 --lr 0.01 --strategy ddp --devices 2 --json %s %s", data, LINE,
                 extra);
        return cli_run(BIN, cmd, out, sizeof(out));
}

static void refused(const char *extra, const char *what)
{
        cr_assert_eq(run(extra), 2, "%s", out);
        cr_assert_not_null(strstr(out, what), "wanted '%s' in: %s", what, out);
        cr_assert_null(strstr(out, "epoch "), "%s", out);
}

Test(mesh_cli, help_names_the_option)
{
        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "--mesh FILE.h5"), "%s", out);
        cr_assert_not_null(strstr(out, "edge_index"), "%s", out);
}

Test(mesh_cli, a_graph_line_trains_and_repeats, .timeout = 120)
{
        static char first[1 << 15];
        char a[4096], b[4096], opt[128];
        int32_t ei[2 * EDGES];

        ring(ei);
        files(ei, 2, EDGES, H5W_I32);
        snprintf(opt, sizeof(opt), "--mesh %s", mesh);
        cr_assert_eq(run(opt), 0, "%s", out);
        memcpy(first, out, sizeof(out));
        cr_assert_eq(run(opt), 0, "%s", out);
        cli_epoch_line(first, 2, a, sizeof(a));
        cli_epoch_line(out, 2, b, sizeof(b));
        cr_assert_str_eq(a, b);
        /* an int64 file reads the same */
        files(ei, 2, EDGES, H5W_I64);
        cr_assert_eq(run(opt), 0, "%s", out);
        cli_epoch_line(out, 2, b, sizeof(b));
        cr_assert_str_eq(a, b);
        remove(data);
        remove(mesh);
}

Test(mesh_cli, bad_meshes_are_refused, .timeout = 120)
{
        char opt[128];
        int32_t ei[2 * EDGES];

        ring(ei);
        ei[2] = -1;
        files(ei, 2, EDGES, H5W_I32);
        snprintf(opt, sizeof(opt), "--mesh %s", mesh);
        refused(opt, "gather (module 0): mesh edge 2 has source node -1 (nodes are 0..5)");
        ring(ei);
        ei[EDGES + 3] = 6; /* a seventh node: the data has six */
        files(ei, 2, EDGES, H5W_I32);
        refused(opt, "with the mesh's 7 nodes");
        ring(ei);
        files(ei, 3, 8, H5W_I32);
        refused(opt, "dataset 'edge_index' is not integers [2, edges]");
        files(ei, 2, EDGES, H5W_F64);
        refused(opt, "dataset 'edge_index' is not integers [2, edges]");
        files(ei, 2, EDGES, H5W_I32);
        refused("", "its gather and scatter modules need a mesh: --mesh FILE.h5");
        refused("--mesh /nonexistent/mesh.h5", "--mesh /nonexistent/mesh.h5: not a readable");
        snprintf(opt, sizeof(opt), "--mesh %s", data);
        refused(opt, "no dataset 'edge_index'");
        snprintf(cmd, sizeof(cmd), "--data %s --inputs x --targets y --loss mse --model "
                 "'input(2,6) conv1d(1,1)' --mesh %s --epochs 1", data, mesh);
        cr_assert_eq(cli_run(BIN, cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "has no gather or scatter module"), "%s", out);
        remove(data);
        remove(mesh);
}
