/*
 * MaxPool1d/2d/3d and AvgPool1d/2d/3d (PyTorch semantics, ceil_mode=False) over a sample's
 * layout, one ops table per PyTorch class; what the spatial modules share is nn/spatial.h's.
 *
 * Output extent floor((in + 2 p - d (k - 1) - 1) / s) + 1; stride 0 is the kernel, dilation 0
 * is 1; padding is at most half the kernel, as PyTorch requires. MaxPool reads padding as
 * -inf and keeps, per output, the first maximum in scan order (a NaN wins, as PyTorch's
 * `val > max || isnan(val)`), its index saved in aux (an int32 in each float slot) for the
 * backward. AvgPool divides by the window with its padding (count_include_pad=True). The CNNs'
 * MaxPool 2 x 2 (stride 2, no padding, even width) runs nn/pool2x2.c's loops.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "arch/simd.h"
#include "base/base.h"
#include "nn/spatial.h"

#define ND STRATA_MAX_SPATIAL

/* Pooling's arguments into @p g (not checked: pool_check does). */
static void pool_geom(const struct strata_layer *l, int nd, struct strata__spatial *g)
{
        const struct strata_module *m = l->desc;

        strata__spatial_start(l, nd, g);
        for (int i = 0; i < nd; i++) {
                int j = strata__spatial_slot(g, i), s = strata__spatial_arg(m->stride, i);
                int d = strata__spatial_arg(m->dilation, i);
                int p = strata__spatial_arg(m->padding, i);

                g->k[j] = strata__spatial_arg(m->kernel, i);
                g->s[j] = s ? s : g->k[j];
                g->d[j] = d ? d : 1;
                g->p[j] = p == STRATA_PADDING_NONE ? 0 : p;
                if (g->k[j] > 0 && g->s[j] > 0 && g->d[j] > 0 && g->p[j] >= 0) {
                        long long num = (long long)g->in[j] + 2LL * g->p[j] -
                                        (long long)g->d[j] * (g->k[j] - 1) - 1;

                        g->out[j] = num < 0 ? 0 : (int)(num / g->s[j] + 1);
                }
        }
        strata__spatial_counts(g);
}

/* Every argument of @p g in range and every output extent at least 1. */
static int pool_check(const struct strata_layer *l, const struct strata__spatial *g, int max)
{
        const char *name = l->desc->ops->name;
        char a[48], b[48], c[48], e[48];
        int dil = 0;

        for (int i = 0; i < g->nd; i++) {
                int j = strata__spatial_slot(g, i);

                if (g->k[j] <= 0 || g->s[j] <= 0 || g->d[j] <= 0 || g->p[j] < 0)
                        return strata__fail(STRATA_EINVAL, "%s (module %d): kernel %d, stride "
                                            "%d, padding %d, dilation %d in dimension %d (kernel "
                                            "> 0, stride and dilation >= 0, padding >= 0 or "
                                            "STRATA_PADDING_NONE)", name, l->index,
                                            strata__spatial_arg(l->desc->kernel, i),
                                            strata__spatial_arg(l->desc->stride, i),
                                            strata__spatial_arg(l->desc->padding, i),
                                            strata__spatial_arg(l->desc->dilation, i), i);
                if ((long long)g->d[j] * (g->k[j] - 1) + 2LL * g->p[j] > INT_MAX / 2 - g->in[j])
                        return strata__fail(STRATA_EOVERFLOW, "%s (module %d): kernel %d, "
                                            "dilation %d, padding %d over %d in dimension %d "
                                            "overflow an int", name, l->index, g->k[j], g->d[j],
                                            g->p[j], g->in[j], i);
                if (!max && g->d[j] != 1)
                        return strata__fail(STRATA_EINVAL, "%s (module %d): dilation %d: "
                                            "PyTorch's AvgPool has none", name, l->index,
                                            g->d[j]);
                if (g->p[j] > g->k[j] / 2)
                        return strata__fail(STRATA_EINVAL, "%s (module %d): padding %s is more "
                                            "than half of kernel %s", name, l->index,
                                            strata__spatial_fmt(a, sizeof(a), g, g->p, 1),
                                            strata__spatial_fmt(b, sizeof(b), g, g->k, 1));
                dil |= g->d[j] != 1;
        }
        for (int i = 0; i < g->nd; i++)
                if (g->out[strata__spatial_slot(g, i)] <= 0) {
                        if (dil)
                                snprintf(e, sizeof(e), " (dilation %s)",
                                         strata__spatial_fmt(c, sizeof(c), g, g->d, 1));
                        else
                                e[0] = '\0';
                        return strata__fail(STRATA_EINVAL, "%s (module %d): kernel %s%s over an "
                                            "input of %s (padding %s) leaves no output", name,
                                            l->index,
                                            strata__spatial_fmt(a, sizeof(a), g, g->k, 1), e,
                                            strata__spatial_fmt(b, sizeof(b), g, g->in, 0),
                                            strata__spatial_fmt(c, sizeof(c), g, g->p, 1));
                }
        return STRATA_OK;
}

static int pool_shape(const struct strata_layer *l, int in, struct strata_module_shape *s,
                      int nd, int max)
{
        static const char *const want[ND + 1] = { "", "(C, L)", "(C, H, W)", "(C, D, H, W)" };
        struct strata__spatial g;
        int out = 0;

        STRATA_TRY(strata__spatial_check(l, in, nd, want[nd]));
        pool_geom(l, nd, &g);
        STRATA_TRY(pool_check(l, &g, max));
        STRATA_TRY(strata__spatial_width(l, &g, &out));
        *s = (struct strata_module_shape){ .out = out, .out_dims = strata__spatial_dims(&g),
                                           .aux_per_row = max ? (size_t)out : 0,
                                           .host_loops = 1, .row_wise = 1 };
        return STRATA_OK;
}

/*
 * The window of output @p o in slot @p j: the inputs [lo, hi) every d inside the sample, and
 * AvgPool's divisor there (the window with its padding, PyTorch's min(start + k, in + p)).
 */
struct win {
        int lo, hi, size;
};

static struct win win_at(const struct strata__spatial *g, int j, int o)
{
        int a = o * g->s[j] - g->p[j], b = a + (g->k[j] - 1) * g->d[j] + 1;
        struct win w = { a, b < g->in[j] ? b : g->in[j], 0 };

        w.size = (a + g->k[j] < g->in[j] + g->p[j] ? a + g->k[j] : g->in[j] + g->p[j]) - a;
        while (w.lo < 0)
                w.lo += g->d[j];
        return w;
}

/*
 * A row of outputs (the last dimension) is computed a window row at a time: for each input
 * row (a, b) the windows of the row's outputs meet, in scan order, and each kernel tap kc of
 * the last dimension, the outputs [e0, e1) of the block [lo, hi) whose tap lands inside the
 * sample (at e s + kc d - p). Each output still meets its inputs in scan order.
 */
static void tap_range(const struct strata__spatial *g, int kc, int lo, int hi, int *e0, int *e1)
{
        int off = kc * g->d[2] - g->p[2], last = g->in[2] - 1 - off;
        int a = off >= 0 ? 0 : (-off + g->s[2] - 1) / g->s[2];
        int b = last < 0 ? 0 : last / g->s[2] + 1;

        *e0 = a > lo ? a : lo;
        *e1 = b < hi ? b : hi;
}

/* The full-row tap ranges of the first kernel taps, computed once a call (no division a row). */
#define TAP_CACHE 16

struct tap_cache {
        int e0[TAP_CACHE], e1[TAP_CACHE];
};

static void tap_cache_fill(const struct strata__spatial *g, struct tap_cache *t)
{
        for (int kc = 0; kc < TAP_CACHE && kc < g->k[2]; kc++)
                tap_range(g, kc, 0, g->out[2], &t->e0[kc], &t->e1[kc]);
}

/* tap_range() through the cache. */
static void tap_rows(const struct strata__spatial *g, const struct tap_cache *t, int kc, int lo,
                     int hi, int *e0, int *e1)
{
        if (kc >= TAP_CACHE) {
                tap_range(g, kc, lo, hi, e0, e1);
                return;
        }
        *e0 = t->e0[kc] > lo ? t->e0[kc] : lo;
        *e1 = t->e1[kc] < hi ? t->e1[kc] : hi;
}

/* Input offset of output @p e's tap @p kc in the last dimension. */
static int tap_at(const struct strata__spatial *g, int e, int kc)
{
        return e * g->s[2] + kc * g->d[2] - g->p[2];
}

/*
 * The taps @p kc of a row of @p n outputs @p s apart in input row @p r (whose first input has
 * index @p base): the first sets each output's value and index, the others take a larger
 * value or a NaN. Inlined with s = 2, the common pool, so that it vectorises without gathers.
 */
static inline void max_taps(const float *restrict r, int32_t base, int s, int kc, int n,
                            int first, float *restrict y, int32_t *restrict arg)
{
        if (first) {
                for (int e = 0; e < n; e++) {
                        y[e] = r[e * s + kc];
                        arg[e] = base + e * s + kc;
                }
                return;
        }
        for (int e = 0; e < n; e++) {
                float v = r[e * s + kc];
                int take = v > y[e] || isnan(v);

                y[e] = take ? v : y[e];
                arg[e] = take ? base + e * s + kc : arg[e];
        }
}

/*
 * MaxPool of an output row without padding or dilation along the last dimension, where every
 * tap is inside: PyTorch's start from -inf at the first input gives that input's value and
 * index, so the first tap sets them and the others compare, in scan order.
 */
static void max_row_dense(const struct strata__spatial *g, const struct win *w, const float *x,
                          float *y, int32_t *arg)
{
        int s = g->s[2], n = g->out[2], first = 1;

        if (!(w[0].lo < w[0].hi && w[1].lo < w[1].hi)) { /* a window wholly in the padding */
                for (int e = 0; e < n; e++) {
                        y[e] = -INFINITY;
                        arg[e] = -1;
                }
                return;
        }
        for (int a = w[0].lo; a < w[0].hi; a += g->d[0])
                for (int b = w[1].lo; b < w[1].hi; b += g->d[1]) {
                        int32_t base = (a * g->in[1] + b) * g->in[2];

                        for (int kc = 0; kc < g->k[2]; kc++, first = 0) {
                                if (s == 2)
                                        max_taps(x + base, base, 2, kc, n, first, y, arg);
                                else
                                        max_taps(x + base, base, s, kc, n, first, y, arg);
                        }
                }
}

/*
 * MaxPool of output row @p w (windows w[0], w[1]) of channel plane @p x: each output's largest
 * input and its index; PyTorch starts from -inf at the window's first input inside, and
 * takes a larger value or a NaN.
 */
static void max_row(const struct strata__spatial *g, const struct tap_cache *t, const struct win *w,
                    const float *restrict x, float *restrict y, int32_t *restrict arg)
{
        int32_t first = (w[0].lo * g->in[1] + w[1].lo) * g->in[2];
        int any = w[0].lo < w[0].hi && w[1].lo < w[1].hi, e0, e1;

        for (int e = 0; e < g->out[2]; e++) {
                int lo = tap_at(g, e, 0);

                if (lo < 0) /* the padded edge: its first tap inside, if any */
                        lo = win_at(g, 2, e).lo < win_at(g, 2, e).hi ? win_at(g, 2, e).lo : -1;
                y[e] = -INFINITY;
                arg[e] = any && lo >= 0 && lo < g->in[2] ? first + lo : -1;
        }
        for (int a = w[0].lo; a < w[0].hi; a += g->d[0])
                for (int b = w[1].lo; b < w[1].hi; b += g->d[1]) {
                        int32_t base = (a * g->in[1] + b) * g->in[2];

                        for (int kc = 0; kc < g->k[2]; kc++) {
                                tap_rows(g, t, kc, 0, g->out[2], &e0, &e1);
                                for (int e = e0; e < e1; e++) { /* no branch to miss */
                                        int32_t i = base + tap_at(g, e, kc);
                                        int take = x[i] > y[e] || isnan(x[i]);

                                        y[e] = take ? x[i] : y[e];
                                        arg[e] = take ? i : arg[e];
                                }
                        }
                }
}

/* Outputs of a row AvgPool sums at once, in double on the stack. */
#define POOL_BLOCK 64

/* AvgPool's divisor of output @p e of a row whose windows are @p w. */
static float avg_size(const struct strata__spatial *g, const struct win *w, int e)
{
        return (float)w[0].size * (float)w[1].size * (float)win_at(g, 2, e).size;
}

/* AvgPool of output row @p w: the sums of its windows' inputs over their sizes. */
static void avg_row(const struct strata__spatial *g, const struct tap_cache *t, const struct win *w,
                    const float *x, float *y)
{
        double acc[POOL_BLOCK];
        int e0, e1;

        for (int lo = 0; lo < g->out[2]; lo += POOL_BLOCK) {
                int hi = lo + POOL_BLOCK < g->out[2] ? lo + POOL_BLOCK : g->out[2];

                memset(acc, 0, sizeof(acc));
                for (int a = w[0].lo; a < w[0].hi; a++)
                        for (int b = w[1].lo; b < w[1].hi; b++) {
                                const float *xr = x + ((size_t)a * g->in[1] + b) * g->in[2];

                                for (int kc = 0; kc < g->k[2]; kc++) {
                                        tap_rows(g, t, kc, lo, hi, &e0, &e1);
                                        for (int e = e0; e < e1; e++)
                                                acc[e - lo] += xr[tap_at(g, e, kc)];
                                }
                        }
                for (int e = lo; e < hi; e++)
                        y[e] = (float)(acc[e - lo] / avg_size(g, w, e));
        }
}

/* AvgPool's backward of output row @p w: each output's gradient over its size onto its window. */
static void avg_row_back(const struct strata__spatial *g, const struct tap_cache *t,
                         const struct win *w, const float *dy, float *dx)
{
        float share[POOL_BLOCK];
        int e0, e1;

        for (int lo = 0; lo < g->out[2]; lo += POOL_BLOCK) {
                int hi = lo + POOL_BLOCK < g->out[2] ? lo + POOL_BLOCK : g->out[2];

                for (int e = lo; e < hi; e++)
                        share[e - lo] = dy[e] / avg_size(g, w, e);
                for (int a = w[0].lo; a < w[0].hi; a++)
                        for (int b = w[1].lo; b < w[1].hi; b++) {
                                float *dr = dx + ((size_t)a * g->in[1] + b) * g->in[2];

                                for (int kc = 0; kc < g->k[2]; kc++) {
                                        tap_rows(g, t, kc, lo, hi, &e0, &e1);
                                        for (int e = e0; e < e1; e++)
                                                dr[tap_at(g, e, kc)] += share[e - lo];
                                }
                        }
        }
}

enum pool_op { POOL_MAX, POOL_AVG, POOL_AVG_BACK };

/*
 * Every output row of @p rows x channels planes: MaxPool's values and argmaxes (@p y, @p arg
 * from @p x), AvgPool's values, or AvgPool's gradient (@p dy onto @p dx, zeroed first).
 */
STRATA_SIMD static void pool_planes(const struct strata__spatial *g, enum pool_op op, int rows,
                                    const float *x, float *y, int32_t *arg, const float *dy,
                                    float *dx)
{
        struct win w[2];
        struct tap_cache t;
        int dense = !g->p[2] && g->d[2] == 1; /* every tap of the last dimension inside */

        tap_cache_fill(g, &t);
        if (op == POOL_AVG_BACK)
                memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)g->c * g->in_sp);
        for (size_t pl = 0; pl < (size_t)rows * (size_t)g->c; pl++)
                for (int a = 0; a < g->out[0]; a++) {
                        w[0] = win_at(g, 0, a);
                        for (int b = 0; b < g->out[1]; b++) {
                                size_t n = pl * g->out_sp +
                                           ((size_t)a * g->out[1] + b) * g->out[2];

                                w[1] = win_at(g, 1, b);
                                if (op == POOL_MAX && dense)
                                        max_row_dense(g, w, x + pl * g->in_sp, y + n, arg + n);
                                else if (op == POOL_MAX)
                                        max_row(g, &t, w, x + pl * g->in_sp, y + n, arg + n);
                                else if (op == POOL_AVG)
                                        avg_row(g, &t, w, x + pl * g->in_sp, y + n);
                                else
                                        avg_row_back(g, &t, w, dy + n, dx + pl * g->in_sp);
                        }
                }
}

static void maxpool_forward(struct strata_layer *l, const float *x, float *y, int rows, int nd)
{
        struct strata__spatial g;

        pool_geom(l, nd, &g);
        if (strata__max2x2_fits(&g))
                strata__max2x2_forward(&g, rows, x, y, (int32_t *)(void *)l->aux);
        else
                pool_planes(&g, POOL_MAX, rows, x, y, (int32_t *)(void *)l->aux, NULL, NULL);
}

/* The gradient goes to each output's saved argmax, added in output order. */
static void maxpool_backward(struct strata_layer *l, const float *dy, float *dx, int rows,
                             int nd)
{
        struct strata__spatial g;
        const int32_t *arg = (const int32_t *)(const void *)l->aux;

        if (!dx)
                return;
        pool_geom(l, nd, &g);
        if (strata__max2x2_fits(&g)) {
                strata__max2x2_backward(&g, arg, NULL, dy, dx, rows);
                return;
        }
        memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)l->in);
        for (size_t pl = 0; pl < (size_t)rows * (size_t)g.c; pl++) {
                const int32_t *ap = arg + pl * g.out_sp;
                const float *dp = dy + pl * g.out_sp;
                float *xp = dx + pl * g.in_sp;

                for (size_t n = 0; n < g.out_sp; n++)
                        if (ap[n] >= 0)
                                xp[ap[n]] += dp[n];
        }
}

int strata__maxpool_relu_backward(const struct strata_layer *l, const float *y,
                                  const float *dy, float *dx, int rows)
{
        struct strata__spatial g;
        int nd = l->desc->ops == &strata_maxpool2d ? 2 : l->desc->ops == &strata_maxpool3d ? 3 : 0;

        if (!nd || !dx)
                return 0;
        pool_geom(l, nd, &g);
        if (!strata__max2x2_fits(&g))
                return 0;
        strata__max2x2_backward(&g, (const int32_t *)(const void *)l->aux, y, dy, dx, rows);
        return 1;
}

static void avgpool_forward(struct strata_layer *l, const float *x, float *y, int rows, int nd)
{
        struct strata__spatial g;

        pool_geom(l, nd, &g);
        pool_planes(&g, POOL_AVG, rows, x, y, NULL, NULL, NULL);
}

/* Each output's gradient over its window's size, added to the window's inputs. */
static void avgpool_backward(struct strata_layer *l, const float *dy, float *dx, int rows,
                             int nd)
{
        struct strata__spatial g;

        if (!dx)
                return;
        pool_geom(l, nd, &g);
        pool_planes(&g, POOL_AVG_BACK, rows, NULL, NULL, NULL, dy, dx);
}

/* The tables: one per PyTorch class, each naming its dimensions and kind. */
#define POOL(sym, nd, max, fwd, bwd)                                                           \
        static int sym##_shape(const struct strata_layer *l, int in,                          \
                               struct strata_module_shape *s)                                  \
        {                                                                                      \
                return pool_shape(l, in, s, nd, max);                                          \
        }                                                                                      \
        static void sym##_forward(struct strata_layer *l, const struct strata_step_ctx *c,    \
                                  const float *x, float *y, int rows)                          \
        {                                                                                      \
                (void)c;                                                                       \
                fwd(l, x, y, rows, nd);                                                        \
        }                                                                                      \
        static void sym##_backward(struct strata_layer *l, const struct strata_step_ctx *c,   \
                                   const float *x, const float *y, const float *dy, float *dx, \
                                   int rows)                                                   \
        {                                                                                      \
                (void)c;                                                                       \
                (void)x;                                                                       \
                (void)y;                                                                       \
                bwd(l, dy, dx, rows, nd);                                                      \
        }                                                                                      \
        const struct strata_module_ops strata_##sym = {                                        \
                .name = #sym,                                                                  \
                .shape = sym##_shape,                                                          \
                .forward = sym##_forward,                                                      \
                .backward = sym##_backward,                                                    \
        };

POOL(maxpool1d, 1, 1, maxpool_forward, maxpool_backward)
POOL(maxpool2d, 2, 1, maxpool_forward, maxpool_backward)
POOL(maxpool3d, 3, 1, maxpool_forward, maxpool_backward)
POOL(avgpool1d, 1, 0, avgpool_forward, avgpool_backward)
POOL(avgpool2d, 2, 0, avgpool_forward, avgpool_backward)
POOL(avgpool3d, 3, 0, avgpool_forward, avgpool_backward)
