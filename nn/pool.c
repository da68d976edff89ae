/*
 * MaxPool1d/2d/3d and AvgPool1d/2d/3d (PyTorch semantics, ceil_mode=False) over a sample's
 * layout, one ops table per PyTorch class; what the spatial modules share is nn/spatial.h's.
 *
 * Output extent floor((in + 2 p - d (k - 1) - 1) / s) + 1; stride 0 is the kernel, dilation 0
 * is 1; padding is at most half the kernel, as PyTorch requires. MaxPool reads padding as
 * -inf and keeps, per output, the first maximum in scan order (a NaN wins, as PyTorch's
 * `val > max || isnan(val)`), its index saved in aux (an int32 in each float slot) for the
 * backward. AvgPool divides by the window with its padding (count_include_pad=True).
 */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "arch/bits.h"
#include "arch/simd.h"
#include "arch/spread.h"
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

/*
 * ---- MaxPool 2 x 2, stride 2, no padding, over planes of even width (the CNNs' pool) ----
 *
 * The scan order of a window is x00, x01, x10, x11, and pick(a, b) (b if b > a or b is a
 * NaN, else a: PyTorch's step) is associative: both orders give the first maximum, or the last
 * NaN when there is one. So pick(pick(pick(x00, x01), x10), x11) = pick(pick(x00, x01),
 * pick(x10, x11)): the horizontal picks of a block of whole input rows run as one flat loop
 * (a plane's rows are contiguous when the width is even: no row tails), and each output row
 * then picks between its two input rows. Same values, same argmax, as max_row_dense.
 */
#define PAIRS 1024 /* horizontal picks held on the stack at once (8 KiB) */

/* The 2 x 2 stride-2 pool without padding along the last two dimensions, one in front. */
static int pool_2x2(const struct strata__spatial *g)
{
        return g->k[0] == 1 && g->s[0] == 1 && g->p[0] == 0 && g->k[1] == 2 && g->k[2] == 2 &&
               g->s[1] == 2 && g->s[2] == 2 && g->p[1] == 0 && g->p[2] == 0 &&
               g->d[1] == 1 && g->d[2] == 1 && g->in[2] % 2 == 0 && 2 * g->out[2] <= PAIRS;
}

/* pick() over @p n pairs of row @p r (input index @p base + 2 q): values and indices. */
static inline void pick_pairs(const float *restrict r, int32_t base, int n, float *restrict h,
                              int32_t *restrict hi)
{
        for (int q = 0; q < n; q++) {
                float a = r[2 * q], b = r[2 * q + 1];
                int take = b > a || isnan(b);

                h[q] = take ? b : a;
                hi[q] = base + 2 * q + take;
        }
}

/*
 * Lanes a row of vertical picks runs in: a row runs to the next multiple of them (the CNN's
 * rows of 14 and 7 outputs would leave scalar tails), computing values past its end into the
 * slice's next output rows, which are written after it; near the slice's end, exactly.
 */
#define ROW_LANES 8

/* Output rows of one (H, W) slice @p x (its first index @p base in the channel) into @p y. */
STRATA_SIMD static void max_2x2_slice(const struct strata__spatial *g, const float *restrict x,
                                      int32_t base, float *restrict y, int32_t *restrict arg)
{
        int ow = g->out[2], per = PAIRS / (2 * ow);
        int wide = (ow + ROW_LANES - 1) / ROW_LANES * ROW_LANES;
        float h[PAIRS + ROW_LANES];
        int32_t hi[PAIRS + ROW_LANES];

        for (int a0 = 0; a0 < g->out[1]; a0 += per) {
                int nr = g->out[1] - a0 < per ? g->out[1] - a0 : per;
                int32_t off = 2 * a0 * g->in[2];

                pick_pairs(x + off, base + off, 2 * nr * ow, h, hi);
                for (int e = 2 * nr * ow; e < 2 * nr * ow + ROW_LANES; e++) { /* read past */
                        h[e] = 0.0f;
                        hi[e] = 0;
                }
                for (int a = 0; a < nr; a++) {
                        const float *u = h + 2 * a * ow, *v = u + ow;
                        const int32_t *ui = hi + 2 * a * ow, *vi = ui + ow;
                        float *yr = y + (size_t)(a0 + a) * ow;
                        int32_t *ar = arg + (size_t)(a0 + a) * ow;
                        int n = (a0 + a) * ow + wide <= g->out[1] * ow ? wide : ow;

                        for (int e = 0; e < n; e++) { /* all read, masks not ?: (0113) */
                                float top = u[e], bot = v[e];
                                int32_t it = ui[e], ib = vi[e];
                                uint32_t m = -(uint32_t)(bot > top || isnan(bot));

                                yr[e] = m ? bot : top;
                                ar[e] = (int32_t)(((uint32_t)it & ~m) | ((uint32_t)ib & m));
                        }
                }
        }
}

/* Every plane of @p rows x channels through max_2x2_slice, a slice of the depth at a time. */
static void max_2x2_planes(const struct strata__spatial *g, int rows, const float *x, float *y,
                                       int32_t *arg)
{
        size_t in_sl = (size_t)g->in[1] * g->in[2], out_sl = (size_t)g->out[1] * g->out[2];

        for (size_t pl = 0; pl < (size_t)rows * (size_t)g->c; pl++)
                for (int dz = 0; dz < g->out[0]; dz++)
                        max_2x2_slice(g, x + pl * g->in_sp + dz * in_sl,
                                      (int32_t)(dz * in_sl),
                                      y + pl * g->out_sp + dz * out_sl,
                                      arg + pl * g->out_sp + dz * out_sl);
}

/*
 * One output row, one output at a time: the value's bits kept or cleared by a mask (and by
 * gate[e] > 0 where @p gate is not NULL).
 */
STRATA_SIMD static void max_2x2_back_row(int ow, int w, const float *restrict d,
                                         const float *restrict gate,
                                         const int32_t *restrict ar, int32_t i0,
                                         float *restrict r0, float *restrict r1)
{
        for (int e = 0; e < ow; e++) {
                int32_t t = ar[e] - (i0 + 2 * e);
                uint32_t b = strata__bits_f(0.0f + d[e]), q[4];

                if (gate)
                        b &= -(uint32_t)(gate[e] > 0.0f);

                q[0] = b & -(uint32_t)(t == 0);
                q[1] = b & -(uint32_t)(t == 1);
                q[2] = b & -(uint32_t)(t == w);
                q[3] = b & -(uint32_t)(t == w + 1);
                memcpy(r0 + 2 * e, q, sizeof(float) * 2);
                memcpy(r1 + 2 * e, q + 2, sizeof(float) * 2);
        }
}

/* The line 1 KiB past @p p into the caches (an address past a buffer's end: no fault). */
static inline void ahead(const void *p)
{
        __builtin_prefetch((const void *)((uintptr_t)p + 1024));
}

/* The rows' AVX-512 form where the CPU has it (decided once; tests can refuse it), else C's. */
#if defined(__x86_64__) && !defined(STRATA_SANITIZED) /* sanitized: the C loop, checked */
#define BACK_ROW512 1
static atomic_int back_row512 = -1; /* device threads may race to the first call */
#endif

/* 1 where the rows take their AVX-512 form, decided at the first call. */
static int rows512(void)
{
#ifdef BACK_ROW512
        int wide = atomic_load_explicit(&back_row512, memory_order_relaxed);

        if (wide < 0) {
                __builtin_cpu_init();
                wide = __builtin_cpu_supports("avx512f") ? 1 : 0;
                atomic_store_explicit(&back_row512, wide, memory_order_relaxed);
        }
        return wide;
#else
        return 0;
#endif
}

#ifdef STRATA_TESTING
void strata__maxpool_force_c(int on)
{
#ifdef BACK_ROW512
        atomic_store_explicit(&back_row512, on ? 0 : -1, memory_order_relaxed);
#else
        (void)on;
#endif
}
#endif

/*
 * The backward of one (H, W) slice: the windows do not overlap, so each input takes at most
 * one output's gradient, 0 + dy as the zeroed scatter adds it (a -0 gradient lands as +0),
 * and every other input 0: written in one pass, no memset, no scatter. A last odd row no
 * window reads is zeroed. Which of a window's four inputs takes the gradient is selected by
 * masks (arch/spread.h): a branch on it mispredicted about every other output, ~30 cycles
 * each, 15% of the CNN's step (decision 0109). Inside a convolution's loop over samples its
 * gradient, argmaxes and (@p gate, see max_2x2_back()) outputs come from memory, a batch
 * apart: each row asks for its streams' lines 1 KiB ahead (4% of the CNN's step). @p wide:
 * rows512().
 */
static void max_2x2_back_slice(const struct strata__spatial *g, const float *dy,
                               const float *gate, const int32_t *arg, int32_t base, float *dx,
                               int wide)
{
        int ow = g->out[2], w = g->in[2];

        (void)wide; /* sanitized builds: the C rows alone */

        for (int a = 0; a < g->out[1]; a++) {
                const float *d = dy + (size_t)a * ow, *gr = gate ? gate + (size_t)a * ow : NULL;
                const int32_t *ar = arg + (size_t)a * ow;
                float *r0 = dx + (size_t)2 * a * w, *r1 = r0 + w;
                int32_t i0 = base + 2 * a * w;

                ahead(d); /* three streams from memory */
                ahead(ar);
                if (gr)
                        ahead(gr);
#ifdef BACK_ROW512
                if (wide) {
                        strata__spread2x2_row512(ow, w, d, gr, ar, i0, r0, r1);
                        continue;
                }
#endif
                max_2x2_back_row(ow, w, d, gr, ar, i0, r0, r1);
        }
        if (g->in[1] > 2 * g->out[1])
                memset(dx + (size_t)2 * g->out[1] * w, 0, (size_t)w * sizeof(float));
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
        if (pool_2x2(&g))
                max_2x2_planes(&g, rows, x, y, (int32_t *)(void *)l->aux);
        else
                pool_planes(&g, POOL_MAX, rows, x, y, (int32_t *)(void *)l->aux, NULL, NULL);
}

/*
 * The 2 x 2 pool's gradient of @p rows rows onto its saved argmaxes (@p arg); with @p gate
 * (the pool's output y), only where y > 0: the ReLU before the pool folded in, whose
 * dx = relu_y > 0 ? dpool : 0 reads at each argmax relu_y = y, the value the pool took, and
 * elsewhere gives +0 either way (strata__maxpool_relu_backward()).
 */
static void max_2x2_back(const struct strata__spatial *g, const int32_t *arg,
                         const float *gate, const float *dy, float *dx, int rows)
{
        size_t in_sl = (size_t)g->in[1] * g->in[2], out_sl = (size_t)g->out[1] * g->out[2];
        int wide = rows512();

        for (size_t pl = 0; pl < (size_t)rows * (size_t)g->c; pl++)
                for (int dz = 0; dz < g->out[0]; dz++) {
                        size_t o = pl * g->out_sp + dz * out_sl;

                        max_2x2_back_slice(g, dy + o, gate ? gate + o : NULL, arg + o,
                                           (int32_t)(dz * in_sl), dx + pl * g->in_sp + dz * in_sl,
                                           wide);
                }
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
        if (pool_2x2(&g)) {
                max_2x2_back(&g, arg, NULL, dy, dx, rows);
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
        if (!pool_2x2(&g))
                return 0;
        max_2x2_back(&g, (const int32_t *)(const void *)l->aux, y, dy, dx, rows);
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
