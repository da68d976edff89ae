/*
 * Upsample and Flatten (PyTorch semantics) over a sample's layout, one ops table each; what the
 * spatial modules share is nn/spatial.h's.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/spatial.h"

#define ND STRATA_MAX_SPATIAL

/*
 * ---- Upsample: integer scale factors, nearest or (bi/tri)linear with align_corners=False ----
 *
 * PyTorch's source index of output o in a dimension scaled by s: nearest
 * min(floor(o * (float)(1 / s)), in - 1), in float as PyTorch computes it (o / s but where
 * the rounded 1 / s falls short); linear max(0, (o + 0.5) / s - 0.5) = i + t between
 * inputs i and min(i + 1, in - 1), weights 1 - t and t (area_pixel_compute_source_index),
 * evaluated in double. The backward is the adjoint: each output's gradient times the weights
 * added to the inputs it read.
 */

/* The inputs one output reads in one dimension and their weights. */
struct taps {
        int n;
        int i[2];
        double w[2];
};

static int up_mode(const struct strata_layer *l)
{
        return l->desc->mode;
}

static void up_geom(const struct strata_layer *l, struct strata__spatial *g)
{
        strata__spatial_start(l, l->in_dims.ndim, g);
        for (int i = 0; i < g->nd; i++) {
                int j = strata__spatial_slot(g, i), s = strata__spatial_arg(l->desc->scale, i);

                g->up[j] = s ? s : 2;
                g->inv[j] = 1.0 / g->up[j];
                g->out[j] = g->up[j] > 0 && g->up[j] <= INT_MAX / g->in[j] ? g->in[j] * g->up[j]
                                                                           : 0;
        }
        strata__spatial_counts(g);
}

static int up_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        struct strata__spatial g;
        char a[48], b[48];
        int out = 0;

        STRATA_TRY(strata__spatial_check(l, in, 0, "1 to 3 spatial dimensions"));
        if ((unsigned)up_mode(l) >= STRATA_UPSAMPLE_COUNT)
                return strata__fail(STRATA_EINVAL, "upsample (module %d): mode %d is neither "
                                    "nearest (%d) nor linear (%d)", l->index, up_mode(l),
                                    STRATA_UPSAMPLE_NEAREST, STRATA_UPSAMPLE_LINEAR);
        up_geom(l, &g);
        for (int i = 0; i < g.nd; i++)
                if (g.up[strata__spatial_slot(&g, i)] <= 0 ||
                    g.out[strata__spatial_slot(&g, i)] <= 0)
                        return strata__fail(STRATA_EINVAL, "upsample (module %d): scale %s over "
                                            "an input of %s (integer scale factors >= 1 whose "
                                            "output fits an int)", l->index,
                                            strata__spatial_fmt(a, sizeof(a), &g, g.up, 1),
                                            strata__spatial_fmt(b, sizeof(b), &g, g.in, 0));
        STRATA_TRY(strata__spatial_width(l, &g, &out));
        *s = (struct strata_module_shape){ .out = out, .out_dims = strata__spatial_dims(&g),
                                           .host_loops = 1 };
        return STRATA_OK;
}

/* Output @p o's inputs in slot @p j (one tap where the sample has no dimension). */
static void taps_at(const struct strata__spatial *g, int j, int o, int linear, struct taps *t)
{
        double src;

        if (!linear || j < ND - g->nd) { /* PyTorch's nearest_idx, in float as it is */
                int i = (int)floorf((float)o * (float)g->inv[j]);

                *t = (struct taps){ 1, { i < g->in[j] - 1 ? i : g->in[j] - 1, 0 }, { 1.0, 0.0 } };
                return;
        }
        src = g->inv[j] * (o + 0.5) - 0.5;
        src = src < 0.0 ? 0.0 : src;
        t->n = 2;
        t->i[0] = (int)src;
        t->i[1] = t->i[0] + (t->i[0] < g->in[j] - 1);
        t->w[1] = src - t->i[0];
        t->w[0] = 1.0 - t->w[1];
}

/* Outputs along the last dimension whose taps are computed once for all rows of a plane. */
#define UP_BLOCK 64

/*
 * Every output of one channel plane with the inputs it reads, a block of the last dimension at
 * a time: the weighted sum of @p x into @p y, or (@p y NULL) @p dy times the weights added
 * onto @p dx (in block order, then output order: fixed).
 */
static void up_plane(const struct strata__spatial *g, int linear, const float *x, float *y,
                     const float *dy, float *dx)
{
        struct taps t[2], last[UP_BLOCK];

        for (int e0 = 0; e0 < g->out[2]; e0 += UP_BLOCK) {
                int ne = g->out[2] - e0 < UP_BLOCK ? g->out[2] - e0 : UP_BLOCK;

                for (int e = 0; e < ne; e++)
                        taps_at(g, 2, e0 + e, linear, &last[e]);
                for (int a = 0; a < g->out[0]; a++) {
                        taps_at(g, 0, a, linear, &t[0]);
                        for (int b = 0; b < g->out[1]; b++) {
                                size_t n = ((size_t)a * g->out[1] + b) * g->out[2] + e0;

                                taps_at(g, 1, b, linear, &t[1]);
                                for (int e = 0; e < ne; e++, n++) {
                                        const struct taps *z = &last[e];
                                        double acc = 0.0;

                                        if (!linear) { /* one input, weight 1 */
                                                size_t i = ((size_t)t[0].i[0] * g->in[1] +
                                                            t[1].i[0]) * g->in[2] + z->i[0];

                                                if (y)
                                                        y[n] = x[i];
                                                else
                                                        dx[i] += dy[n];
                                                continue;
                                        }
                                        for (int u = 0; u < t[0].n; u++)
                                                for (int v = 0; v < t[1].n; v++) {
                                                        size_t row = ((size_t)t[0].i[u] *
                                                                      g->in[1] + t[1].i[v]) *
                                                                     g->in[2];
                                                        double w = t[0].w[u] * t[1].w[v];

                                                        for (int k = 0; k < z->n; k++) {
                                                                if (y)
                                                                        acc += w * z->w[k] *
                                                                               x[row + z->i[k]];
                                                                else
                                                                        dx[row + z->i[k]] +=
                                                                                (float)(w *
                                                                                z->w[k] * dy[n]);
                                                        }
                                                }
                                        if (y)
                                                y[n] = (float)acc;
                                }
                        }
                }
        }
}

static void up_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                       float *y, int rows)
{
        struct strata__spatial g;

        (void)c;
        up_geom(l, &g);
        for (size_t pl = 0; pl < (size_t)rows * (size_t)g.c; pl++)
                up_plane(&g, up_mode(l) == STRATA_UPSAMPLE_LINEAR, x + pl * g.in_sp,
                         y + pl * g.out_sp, NULL, NULL);
}

static void up_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        const float *y, const float *dy, float *dx, int rows)
{
        struct strata__spatial g;

        (void)c;
        (void)x;
        (void)y;
        if (!dx)
                return;
        up_geom(l, &g);
        memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)l->in);
        for (size_t pl = 0; pl < (size_t)rows * (size_t)g.c; pl++)
                up_plane(&g, up_mode(l) == STRATA_UPSAMPLE_LINEAR, NULL, NULL,
                         dy + pl * g.out_sp, dx + pl * g.in_sp);
}

const struct strata_module_ops strata_upsample = {
        .name = "upsample",
        .shape = up_shape,
        .forward = up_forward,
        .backward = up_backward,
};

/*
 * ---- Flatten: any layout to a flat vector of the same values ----
 *
 * The values are in (C, D, H, W) order already, so y is x; the replica gives every module a
 * buffer of its own, so it is a copy (through the kernels), and so is the gradient.
 */

static int flatten_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .out_dims = { .channels = in } };
        return STRATA_OK;
}

static void flatten_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, float *y, int rows)
{
        c->k->copy(y, x, (size_t)rows * (size_t)l->in);
}

static void flatten_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                             const float *x, const float *y, const float *dy, float *dx,
                             int rows)
{
        (void)x;
        (void)y;
        if (dx)
                c->k->copy(dx, dy, (size_t)rows * (size_t)l->in);
}

const struct strata_module_ops strata_flatten = {
        .name = "flatten",
        .shape = flatten_shape,
        .forward = flatten_forward,
        .backward = flatten_backward,
};
