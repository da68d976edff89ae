/*
 * The graph modules (gather, scatter) over a small random mesh: forward against the definition,
 * each node's sum in ascending edge order (bitwise), backward as the adjoint; a conv1d(C,1) -
 * gather - scatter chain against PyTorch in float64 (index_select, index_add_) after three SGD
 * steps (tests/tools/graph_reference.py), 1e-5 relative; bad meshes refused with the edge and
 * value named, the layout against the mesh's counts; the model line's gather(src|dst) and
 * scatter(sum|mean).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/modcall.h"

#define NODES 6
#define EDGES 11
#define CH 3
#define ROWS 2
#define STEPS 3
#define LR 0.05f

/* Node 5 has no incoming edge (mean gives 0), node 2 several, edge 7 repeats edge 1. */
static int32_t src[EDGES] = { 0, 1, 2, 3, 4, 5, 0, 1, 5, 3, 2 };
static int32_t dst[EDGES] = { 1, 2, 0, 2, 3, 4, 2, 2, 0, 1, 3 };
static struct strata_mesh mesh = { NODES, EDGES, src, dst };

static struct modcall conv, gat, sca;
static float x[MODCALL_MAX], h[MODCALL_MAX], e[MODCALL_MAX], y[MODCALL_MAX],
        t[MODCALL_MAX], dy[MODCALL_MAX], de[MODCALL_MAX], dh[MODCALL_MAX];
static double want[MODCALL_MAX];

static struct strata_dims nodes_of(int c)
{
        return (struct strata_dims){ c, 1, { NODES } };
}

static struct strata_dims edges_of(int c)
{
        return (struct strata_dims){ c, 1, { EDGES } };
}

static void graph_layers(int side, int reduce)
{
        modcall_init(&gat, &(struct strata_module){ .ops = &strata_gather, .graph = side,
                                                    .mesh = &mesh }, nodes_of(CH), ROWS);
        modcall_init(&sca, &(struct strata_module){ .ops = &strata_scatter, .graph = reduce,
                                                    .mesh = &mesh }, edges_of(CH), ROWS);
        cr_assert_eq(gat.l.out, CH * EDGES);
        cr_assert_eq(gat.l.out_dims.size[0], EDGES);
        cr_assert_eq(sca.l.out, CH * NODES);
        cr_assert_eq(sca.l.out_dims.channels, CH);
}

/* Forward and backward against the definitions, the sums in ascending edge order (bitwise). */
static void against_definition(int side, int reduce)
{
        const int32_t *idx = side == STRATA_GATHER_DST ? dst : src;
        float ref[MODCALL_MAX], deg[NODES] = { 0 };
        double lhs = 0, rhs = 0;

        graph_layers(side, reduce);
        modcall_wave(x, ROWS * CH * NODES, 0.77, 0.1);
        modcall_wave(dy, ROWS * CH * EDGES, 0.31, 0.4);
        gat.desc.ops->forward(&gat.l, &gat.c, x, e, ROWS);
        for (int r = 0; r < ROWS * CH; r++)
                for (int k = 0; k < EDGES; k++)
                        cr_assert_eq(e[r * EDGES + k], x[r * NODES + idx[k]]);
        gat.desc.ops->backward(&gat.l, &gat.c, x, e, dy, dh, ROWS);
        for (int i = 0; i < ROWS * CH * EDGES; i++)
                lhs += (double)e[i] * dy[i];
        for (int i = 0; i < ROWS * CH * NODES; i++)
                rhs += (double)x[i] * dh[i];
        cr_assert_leq(fabs(lhs - rhs), 1e-5 * (1 + fabs(lhs)), "gather's adjoint: %g %g", lhs,
                      rhs);
        for (int k = 0; k < EDGES; k++)
                deg[dst[k]] += 1.0f;
        modcall_wave(e, ROWS * CH * EDGES, 0.53, 0.9);
        sca.desc.ops->forward(&sca.l, &sca.c, e, y, ROWS);
        memset(ref, 0, sizeof(ref));
        for (int r = 0; r < ROWS * CH; r++) {
                for (int k = 0; k < EDGES; k++) /* ascending edge order */
                        ref[r * NODES + dst[k]] += e[r * EDGES + k];
                for (int n = 0; n < NODES && reduce == STRATA_SCATTER_MEAN; n++)
                        ref[r * NODES + n] = deg[n] > 0 ? ref[r * NODES + n] / deg[n] : 0;
        }
        cr_assert_eq(memcmp(ref, y, sizeof(float) * ROWS * CH * NODES), 0, "scatter's bits");
        cr_assert_eq(y[NODES - 1], 0.0f, "node 5 has no incoming edge");
        modcall_wave(dy, ROWS * CH * NODES, 0.19, 0.6);
        sca.desc.ops->backward(&sca.l, &sca.c, e, y, dy, de, ROWS);
        lhs = rhs = 0;
        for (int i = 0; i < ROWS * CH * NODES; i++)
                lhs += (double)y[i] * dy[i];
        for (int i = 0; i < ROWS * CH * EDGES; i++)
                rhs += (double)e[i] * de[i];
        cr_assert_leq(fabs(lhs - rhs), 1e-5 * (1 + fabs(lhs)), "scatter's adjoint: %g %g", lhs,
                      rhs);
}

Test(graph, forward_is_the_definition_and_backward_its_adjoint)
{
        against_definition(STRATA_GATHER_SRC, STRATA_SCATTER_SUM);
        against_definition(STRATA_GATHER_DST, STRATA_SCATTER_MEAN);
}

static void write_file(const char *dir, const char *name, const void *v, size_t bytes)
{
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        cr_assert_not_null(f = fopen(path, "wb"), "%s", path);
        cr_assert_eq(fwrite(v, 1, bytes, f), bytes);
        fclose(f);
}

/* The chain's @p steps SGD steps of sum((y - t)^2) / 2 on conv's parameters. */
static void chain_sgd(int steps)
{
        int n = ROWS * CH * NODES;

        for (int s = 0; s < steps; s++) {
                conv.desc.ops->forward(&conv.l, &conv.c, x, h, ROWS);
                gat.desc.ops->forward(&gat.l, &gat.c, h, e, ROWS);
                sca.desc.ops->forward(&sca.l, &sca.c, e, y, ROWS);
                for (int i = 0; i < n; i++)
                        dy[i] = y[i] - t[i];
                sca.desc.ops->backward(&sca.l, &sca.c, e, y, dy, de, ROWS);
                gat.desc.ops->backward(&gat.l, &gat.c, h, e, de, dh, ROWS);
                conv.l.grad_fresh = 1;
                conv.desc.ops->backward(&conv.l, &conv.c, x, h, dh, NULL, ROWS);
                for (size_t i = 0; i < conv.s.params; i++)
                        conv.param[i] -= LR * conv.grad[i];
        }
}

static void against_pytorch(int side, int reduce)
{
        char dir[] = "/tmp/strata-graph-XXXXXX", cmd[1024], line[256];
        int n = ROWS * CH * NODES, done = 0;
        FILE *py, *f;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        modcall_init(&conv, &(struct strata_module){ .ops = &strata_conv1d, .out = CH,
                                                     .kernel = { 1 } }, nodes_of(CH), ROWS);
        graph_layers(side, reduce);
        for (size_t i = 0; i < conv.s.params; i++)
                conv.param[i] += 0.1f * (float)sin(0.37 * (double)i + 0.2);
        modcall_wave(x, n, 0.71, 0.3);
        modcall_wave(t, n, 0.23, 1.1);
        cr_assert_not_null(mkdtemp(dir));
        write_file(dir, "w0.f32", conv.param, sizeof(float) * conv.s.params);
        write_file(dir, "x.f32", x, sizeof(float) * (size_t)n);
        write_file(dir, "t.f32", t, sizeof(float) * (size_t)n);
        write_file(dir, "src.i32", src, sizeof(src));
        write_file(dir, "dst.i32", dst, sizeof(dst));
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/graph_reference.py %s %s "
                 "%d %d %d %d %d %.9g %s 2>&1", STRATA_SOURCE_DIR,
                 side == STRATA_GATHER_DST ? "dst" : "src",
                 reduce == STRATA_SCATTER_MEAN ? "mean" : "sum", CH, NODES, EDGES, ROWS, STEPS,
                 (double)LR, dir);
        cr_assert_not_null(py = popen(cmd, "r"));
        while (fgets(line, sizeof(line), py)) {
                cr_log_info("%s", line);
                done |= !strncmp(line, "done", 4);
        }
        cr_assert_eq(pclose(py), 0, "the reference failed (see the log)");
        cr_assert(done);
        cr_assert_eq(conv.s.params, CH * CH + CH);
        snprintf(cmd, sizeof(cmd), "%s/w.f64", dir);
        cr_assert_not_null(f = fopen(cmd, "rb"));
        cr_assert_eq(fread(want, sizeof(double), conv.s.params, f), conv.s.params);
        fclose(f);
        cr_assert_geq(modcall_rel_diff(conv.param, want, (int)conv.s.params), 1e-3,
                      "the steps moved the weights");
        chain_sgd(STEPS);
        cr_log_info("gather %d scatter %d: %.3g relative\n", side, reduce,
                    modcall_rel_diff(conv.param, want, (int)conv.s.params));
        cr_assert_leq(modcall_rel_diff(conv.param, want, (int)conv.s.params), 1e-5,
                      "gather %d scatter %d: %g", side, reduce,
                      modcall_rel_diff(conv.param, want, (int)conv.s.params));
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}

Test(graph, matches_pytorch_index_select_index_add)
{
        against_pytorch(STRATA_GATHER_SRC, STRATA_SCATTER_SUM);
        against_pytorch(STRATA_GATHER_DST, STRATA_SCATTER_SUM);
        against_pytorch(STRATA_GATHER_SRC, STRATA_SCATTER_MEAN);
        against_pytorch(STRATA_GATHER_DST, STRATA_SCATTER_MEAN);
}

/* Module @p ops over layout @p in with mesh @p g refused, the message holding @p what. */
static void refused(const struct strata_module_ops *ops, const struct strata_mesh *g,
                    struct strata_dims in, int graph, const char *what)
{
        struct strata_module d = { .ops = ops, .mesh = g, .graph = graph };

        cr_assert_eq(modcall_shape(&gat, &d, in), STRATA_EINVAL, "accepted (%s)", what);
        cr_assert(strstr(strata_last_error(), what), "message '%s' lacks '%s'",
                  strata_last_error(), what);
}

Test(graph, bad_meshes_and_layouts_are_refused_by_value)
{
        int32_t bad[EDGES];
        struct strata_mesh g = mesh;

        refused(&strata_gather, NULL, nodes_of(CH), 0, "no mesh");
        g.nodes = 0;
        refused(&strata_gather, &g, nodes_of(CH), 0, "mesh of 0 nodes");
        g = mesh;
        g.edges = -2;
        refused(&strata_scatter, &g, edges_of(CH), 0, "and -2 edges");
        g = mesh;
        g.dst = NULL;
        refused(&strata_scatter, &g, edges_of(CH), 0, "dst array is NULL");
        memcpy(bad, src, sizeof(bad));
        bad[4] = -1;
        g = mesh;
        g.src = bad;
        refused(&strata_gather, &g, nodes_of(CH), 0, "edge 4 has source node -1");
        bad[4] = 4;
        bad[9] = NODES;
        refused(&strata_gather, &g, nodes_of(CH), 0, "edge 9 has source node 6 (nodes are "
                "0..5)");
        g = mesh;
        g.dst = bad;
        refused(&strata_scatter, &g, edges_of(CH), 0, "edge 9 has destination node 6");
        /* a mesh that does not match the data: the counts against the layout */
        refused(&strata_gather, &mesh, edges_of(CH), 0, "(extent 11); it reads (C, nodes) "
                "with the mesh's 6 nodes");
        refused(&strata_scatter, &mesh, nodes_of(CH), 0, "(extent 6); it reads (C, edges) "
                "with the mesh's 11 edges");
        refused(&strata_gather, &mesh, (struct strata_dims){ CH * NODES, 0, { 0 } }, 0,
                "over 0 dimensions");
        refused(&strata_gather, &mesh, nodes_of(CH), 2, "graph 2 (0 src or 1 dst)");
        refused(&strata_scatter, &mesh, edges_of(CH), -1, "graph -1 (0 sum or 1 mean)");
}

/* A MeshGraphNet-style line: both ends gathered, joined, an edge MLP, a mean to the nodes. */
Test(graph, model_line_names_the_side_and_the_reduction)
{
        static const char *const bad[][2] = {
                { "input(3,6) gather(up)", "side 'up' is not one of its words" },
                { "input(3,6) scatter(max)", "reduce 'max' is not one of its words" },
                { "input(3,6) gather(src,dst)", "too many arguments" },
        };
        struct strata_module mods[8];
        struct strata_model m = { .loss = &strata_mse }, before;
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(3,6) gather(dst) gather(src,from=input) "
                                        "concat(from=0) conv1d(4,1) scatter(mean) "
                                        "gather(side=dst) scatter(reduce=sum)", mods, 8, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.nmodules, 7);
        cr_assert_eq(mods[0].ops, &strata_gather);
        cr_assert_eq(mods[0].graph, STRATA_GATHER_DST);
        cr_assert_eq(mods[1].graph, STRATA_GATHER_SRC);
        cr_assert_eq(mods[1].branch, 1);
        cr_assert_eq(mods[4].ops, &strata_scatter);
        cr_assert_eq(mods[4].graph, STRATA_SCATTER_MEAN);
        cr_assert_eq(mods[5].graph, STRATA_GATHER_DST);
        cr_assert_eq(mods[6].graph, STRATA_SCATTER_SUM);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL, "no mesh set yet");
        cr_assert(strstr(strata_last_error(), "gather (module 0): no mesh"), "%s",
                  strata_last_error());
        for (int i = 0; i < m.nmodules; i++) /* the mesh is set in C */
                mods[i].mesh = &mesh;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 4);
        cr_assert_eq(out.ndim, 1);
        cr_assert_eq(out.size[0], NODES);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                before = m = (struct strata_model){ .loss = &strata_mse };
                cr_assert_eq(strata_model_parse(bad[i][0], mods, 8, &m), STRATA_EINVAL,
                             "'%s' accepted", bad[i][0]);
                cr_assert(strstr(strata_last_error(), bad[i][1]), "'%s': '%s'", bad[i][0],
                          strata_last_error());
                cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0);
        }
}

/* The guide's MeshGraphNet processor step (docs/guide.md), on this mesh: nodes' and edges'
 * latents in, the nodes' updated latents out, every module's layout as MeshGraphNet's. */
#define MGN_LINE                                                                               \
        "input(16,%d) input(16,%d) "                                                           \
        "gather(src) gather(dst,from=input0) concat(from=0) concat(from=input1) "              \
        "conv1d(16,1) relu conv1d(16,1) tokens layernorm(dims=1) tokens add(from=input1) "     \
        "scatter(sum) concat(from=input0) "                                                    \
        "conv1d(16,1) relu conv1d(16,1) tokens layernorm(dims=1) tokens add(from=input0)"

Test(graph, the_guides_processor_step_is_a_line)
{
        struct strata_module mods[24];
        struct strata_model m = { .loss = &strata_mse };
        struct strata_dims out;
        char line[1024];

        snprintf(line, sizeof(line), MGN_LINE, NODES, EDGES);
        cr_assert_eq(strata_model_parse(line, mods, 24, &m), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(m.nmodules, 20);
        cr_assert_eq(m.ninputs, 2);
        for (int i = 0; i < m.nmodules; i++)
                mods[i].mesh = &mesh;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 16);
        cr_assert_eq(out.ndim, 1);
        cr_assert_eq(out.size[0], NODES);
        snprintf(line, sizeof(line), MGN_LINE, EDGES, EDGES);
        m = (struct strata_model){ .loss = &strata_mse };
        cr_assert_eq(strata_model_parse(line, mods, 24, &m), STRATA_OK);
        for (int i = 0; i < m.nmodules; i++)
                mods[i].mesh = &mesh;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL, "nodes' latents of 11");
        cr_assert(strstr(strata_last_error(), "gather (module 0): input of 176 features"),
                  "%s", strata_last_error());
}
