/*
 * The graph family: message passing over an unstructured mesh given once by the application
 * (struct strata_mesh), the building blocks of a MeshGraphNet. Decision 0065.
 *
 * Node features are a sample laid out (C, nodes), edge features (C, edges): one spatial extent,
 * so the existing modules apply as they are: concat(from=) joins features, a kernel-1 conv1d is
 * a Linear on each node or edge (nn.Linear over the features), add is the residual, and
 * `tokens layernorm(dims=1) tokens` is nn.LayerNorm(C) over each node's or edge's features.
 *
 *   gather(src):  y[c, e] = x[c, src[e]]           (C, nodes) -> (C, edges)
 *   gather(dst):  y[c, e] = x[c, dst[e]]
 *   scatter(sum): y[c, n] = sum of x[c, e] over the edges e with dst[e] = n
 *   scatter(mean): that sum / their count, 0 for a node without incoming edges
 *
 * Every sum over a node's edges (scatter's forward, gather's backward) runs over the edges in
 * ascending order, one edge after the other, in f32: a node's sum is ((0 + x[e1]) + x[e2]) + ...
 * with e1 < e2 < ..., which is what sorting the edges by destination once and reducing each
 * node's run in order would give, and what PyTorch's index_add_ does on one CPU thread. On the
 * host the single pass needs no sorted copy: the order depends on the mesh only, so runs repeat
 * bitwise and samples (rows) are independent, hence the same bits on any device count in
 * invariant mode. Nothing is allocated; scatter(mean) keeps the nodes' in-degrees in the first
 * row's aux (recounted by forward and by backward, so neither relies on the other).
 *
 * The mesh is checked in shape, when the model is planned: counts, the two arrays, every index
 * in [0, nodes), and the input's layout against the counts; a refusal names the edge and value.
 */
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "arch/simd.h"

/* The mesh's arrays and counts, checked: STRATA_EINVAL naming what is wrong. */
static int mesh_check(const struct strata_layer *l, const char *name)
{
        const struct strata_mesh *g = l->desc->mesh;

        if (!g)
                return strata__fail(STRATA_EINVAL, "%s (module %d): no mesh (set its "
                                    "strata_module mesh)", name, l->index);
        if (g->nodes <= 0 || g->edges <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): mesh of %d nodes and %d "
                                    "edges (both must be positive)", name, l->index, g->nodes,
                                    g->edges);
        if (!g->src || !g->dst)
                return strata__fail(STRATA_EINVAL, "%s (module %d): the mesh's %s array is "
                                    "NULL", name, l->index, g->src ? "dst" : "src");
        for (int e = 0; e < g->edges; e++) {
                int32_t s = g->src[e], d = g->dst[e];

                if (s < 0 || s >= g->nodes || d < 0 || d >= g->nodes)
                        return strata__fail(STRATA_EINVAL, "%s (module %d): mesh edge %d has "
                                            "%s node %d (nodes are 0..%d)", name, l->index, e,
                                            s < 0 || s >= g->nodes ? "source" : "destination",
                                            s < 0 || s >= g->nodes ? (int)s : (int)d,
                                            g->nodes - 1);
        }
        return STRATA_OK;
}

/*
 * The shape of gather (C, nodes) -> (C, edges) or scatter (C, edges) -> (C, nodes), the mesh
 * checked first; @p mean: scatter(mean), which keeps the in-degrees in aux.
 */
static int graph_shape(const struct strata_layer *l, int in, struct strata_module_shape *s,
                       const char *name, int mean)
{
        const struct strata_dims *d = &l->in_dims;
        const struct strata_mesh *g = l->desc->mesh;
        int gather = l->desc->ops == &strata_gather, from, to;

        STRATA_TRY(mesh_check(l, name));
        if (l->desc->graph < 0 || l->desc->graph > 1)
                return strata__fail(STRATA_EINVAL, "%s (module %d): graph %d (%s)", name,
                                    l->index, l->desc->graph,
                                    gather ? "0 src or 1 dst" : "0 sum or 1 mean");
        from = gather ? g->nodes : g->edges;
        to = gather ? g->edges : g->nodes;
        if (d->ndim != 1 || d->channels <= 0 || d->size[0] != from ||
            (long long)d->channels * from != in)
                return strata__fail(STRATA_EINVAL, "%s (module %d): input of %d features laid "
                                    "out as %d channels over %d dimensions (extent %d); it "
                                    "reads (C, %s) with the mesh's %d %s", name, l->index, in,
                                    d->channels, d->ndim, d->ndim ? d->size[0] : 0,
                                    gather ? "nodes" : "edges", from,
                                    gather ? "nodes" : "edges");
        if ((long long)d->channels * to > 0x7fffffff)
                return strata__fail(STRATA_EINVAL, "%s (module %d): output of %d x %d "
                                    "features is too large", name, l->index, d->channels, to);
        *s = (struct strata_module_shape){ .out = d->channels * to, .host_loops = 1,
                                           .aux_per_row = mean ? (size_t)g->nodes : 0,
                                           .out_dims = { d->channels, 1, { to } } };
        return STRATA_OK;
}

/* ---- gather: node features to edges */

static int gather_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        return graph_shape(l, in, s, "gather", 0);
}

static const int32_t *gather_index(const struct strata_layer *l)
{
        const struct strata_mesh *g = l->desc->mesh;

        return l->desc->graph == STRATA_GATHER_DST ? g->dst : g->src;
}

/* y[e] = x[idx[e]] over @p ne edges: a copy, so any order gives the same values. */
STRATA_SIMD static void gather_row(const float *restrict x, const int32_t *restrict idx,
                                   float *restrict y, int ne)
{
        for (int e = 0; e < ne; e++)
                y[e] = x[idx[e]];
}

/*
 * y_k[idx[e]] += x_k[e] for @p nr (1 to 4) rows k at once, rows @p ls apart in x and @p ld
 * in y: every row's sums run over the edges in ascending order, one edge after the other,
 * as row by row; the rows only interleave (independent chains for the CPU to overlap).
 */
static void scatter_rows(const float *x, size_t ls, const int32_t *restrict idx, int ne,
                         float *y, size_t ld, int nr)
{
        if (nr < 4) {
                for (int k = 0; k < nr; k++)
                        for (int e = 0; e < ne; e++)
                                y[k * ld + idx[e]] += x[k * ls + e];
                return;
        }
        /* four rows: their starts all inside the arrays */
        const float *x0 = x, *x1 = x + ls, *x2 = x + 2 * ls, *x3 = x + 3 * ls;
        float *y0 = y, *y1 = y + ld, *y2 = y + 2 * ld, *y3 = y + 3 * ld;

        for (int e = 0; e < ne; e++) {
                int32_t d = idx[e];

                y0[d] += x0[e];
                y1[d] += x1[e];
                y2[d] += x2[e];
                y3[d] += x3[e];
        }
}

/* scatter_rows() over @p count rows, four at a time. */
static void scatter_all(const float *x, size_t ls, const int32_t *idx, int ne, float *y,
                        size_t ld, long long count)
{
        for (long long rc = 0; rc < count; rc += 4)
                scatter_rows(x + rc * ls, ls, idx, ne, y + rc * ld, ld,
                             count - rc < 4 ? (int)(count - rc) : 4);
}

static void gather_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                           const float *x, float *y, int rows)
{
        const int32_t *idx = gather_index(l);
        int n = l->desc->mesh->nodes, ne = l->desc->mesh->edges;
        int ch = l->in_dims.channels;

        (void)c;
        for (long long rc = 0; rc < (long long)rows * ch; rc++)
                gather_row(x + rc * n, idx, y + rc * ne, ne);
}

/* dx[c, idx[e]] += dy[c, e] over the edges in ascending order: a scatter-sum. */
static void gather_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, const float *y, const float *dy, float *dx, int rows)
{
        const int32_t *idx = gather_index(l);
        int n = l->desc->mesh->nodes, ne = l->desc->mesh->edges;
        int ch = l->in_dims.channels;

        (void)c;
        (void)x;
        (void)y;
        if (!dx)
                return;
        memset(dx, 0, sizeof(float) * (size_t)rows * ch * n);
        scatter_all(dy, (size_t)ne, idx, ne, dx, (size_t)n, (long long)rows * ch);
}

const struct strata_module_ops strata_gather = {
        .name = "gather",
        .shape = gather_shape,
        .forward = gather_forward,
        .backward = gather_backward,
};

/* ---- scatter: edge features to their destination nodes */

static int scatter_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        return graph_shape(l, in, s, "scatter", l->desc->graph == STRATA_SCATTER_MEAN);
}

/* Mean: each node's in-degree into the first row's aux, or NULL for a sum. */
static const float *scatter_degrees(struct strata_layer *l)
{
        const struct strata_mesh *g = l->desc->mesh;

        if (l->desc->graph != STRATA_SCATTER_MEAN)
                return NULL;
        memset(l->aux, 0, sizeof(float) * (size_t)g->nodes);
        for (int e = 0; e < g->edges; e++)
                l->aux[g->dst[e]] += 1.0f;
        return l->aux;
}

static void scatter_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, float *y, int rows)
{
        const int32_t *dst = l->desc->mesh->dst;
        int n = l->desc->mesh->nodes, ne = l->desc->mesh->edges;
        int ch = l->in_dims.channels;
        const float *deg = scatter_degrees(l);

        (void)c;
        memset(y, 0, sizeof(float) * (size_t)rows * ch * n);
        scatter_all(x, (size_t)ne, dst, ne, y, (size_t)n, (long long)rows * ch);
        for (long long rc = 0; deg && rc < (long long)rows * ch; rc++) {
                float *yr = y + rc * n;

                for (int v = 0; v < n; v++)
                        yr[v] = deg[v] > 0 ? yr[v] / deg[v] : 0.0f;
        }
}

/* dx[c, e] = dy[c, dst[e]] (over the destination's in-degree for a mean). */
static void scatter_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                             const float *x, const float *y, const float *dy, float *dx,
                             int rows)
{
        const int32_t *dst = l->desc->mesh->dst;
        int n = l->desc->mesh->nodes, ne = l->desc->mesh->edges;
        int ch = l->in_dims.channels;
        const float *deg;

        (void)c;
        (void)x;
        (void)y;
        if (!dx)
                return;
        deg = scatter_degrees(l);
        for (long long rc = 0; rc < (long long)rows * ch; rc++) {
                if (!deg) {
                        gather_row(dy + rc * n, dst, dx + rc * ne, ne);
                        continue;
                }
                for (int e = 0; e < ne; e++)
                        dx[rc * ne + e] = dy[rc * n + dst[e]] / deg[dst[e]];
        }
}

const struct strata_module_ops strata_scatter = {
        .name = "scatter",
        .shape = scatter_shape,
        .forward = scatter_forward,
        .backward = scatter_backward,
};
