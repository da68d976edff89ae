/*
 * Spectral convolutions, the Fourier layer of Fourier neural operators (the reference FNO's
 * SpectralConv1d and SpectralConv2d; decision 0061): per sample, the real FFT of each input
 * channel over the spatial dimensions (torch.fft.rfft / rfft2), a learned complex product on
 * the lowest frequencies (1-D: the first @c modes; 2-D: the first modes1 and the last modes1
 * rows along H, the first modes2 along W, weights1 and weights2), the other frequencies zero,
 * and the inverse real FFT back to the input's extents (irfft / irfft2, scaled by 1 / N):
 *
 *   Y[o, k] = sum over i of X[i, k] W[i, o, k],   y[o] = irfft(Y[o]).
 *
 * The weights are complex; each is stored as PyTorch's torch.view_as_real() of it, a real
 * tensor [in, out, modes..., 2] of (real, imaginary) pairs, the bytes of a complex64 tensor.
 *
 * The FFTs are FFTW's in single precision (fp32 under every precision: the module declares no
 * bf16_io and calls no strata_gemm()). Plans are made in the module's init, at connect, never
 * during a step (FFTW allocates while it plans): one plan per transform size and direction for
 * the whole process, kept in a table here and shared by every layer and device (FFTW's execute
 * functions may run at once on several threads; its planner may not, so planning holds a
 * lock). A step executes them with the new-array interface on the layer's per-row room in
 * aux (scratch: the spectra of a row) and the rows themselves, one channel at a time; the
 * backward transforms x again rather than keep its spectrum, so it reads x and dy only. FFTW_ESTIMATE | FFTW_UNALIGNED: no timing decides the
 * algorithm, and no SIMD codelet whose choice would depend on the CPU or on a buffer's
 * alignment, so every row of every device runs the same code and the bits repeat.
 *
 * The backward is the adjoint (N points; c_k = 1 on the columns k = 0 and N/2 of the last
 * dimension, whose imaginary parts the inverse transform ignores, else 2): with G = rfft(dy),
 * dW[i, o, k] = conj(X[i, k]) G[o, k] c_k / N and dx[i] = irfft'(sum over o of
 * G[o, k] conj(W[i, o, k]) / N), irfft' the unscaled c2r transform. Sums over channels run
 * in ascending order, gradients over rows in row order: the same bits every run.
 */
#include <fftw3.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/init.h"
#include "nn/spatial.h"

/* Transform sizes and directions the process may plan (each a plan in FFTW's memory). */
#define PLANS_MAX 64

/* Reproducible plans (decision 0061): no measurement, no SIMD, any alignment. */
#define PLAN_FLAGS (FFTW_ESTIMATE | FFTW_UNALIGNED)

enum dir { R2C, C2R };

/* One plan: the transform's rank, extents and direction. */
struct plan_slot {
        int rank;
        int n[2];
        enum dir dir;
        fftwf_plan p;
};

static struct plan_slot plans[PLANS_MAX];
static atomic_int nplans;                   /* slots published (release after the slot) */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

/* A layer's geometry: what the shape accepted. */
struct geom {
        int nd;          /* spatial dimensions: 1 or 2 */
        int cin, cout;   /* channels */
        int n[2];        /* extents (1-D: n[0]) */
        int m[2];        /* modes (1-D: m[0]; 2-D: modes1, modes2) */
        int blocks;      /* weight tensors: 1 (1-D) or 2 (2-D: the low and the high rows) */
        size_t npts;     /* N: points of one channel */
        size_t half;     /* columns of the spectrum's last dimension: n[last] / 2 + 1 */
        size_t spec;     /* complex values of one channel's spectrum */
        size_t modes;    /* modes of one block: m[0], or modes1 * modes2 */
};

static void geom_of(const struct strata_layer *l, int nd, struct geom *g)
{
        const int *m = l->desc->modes;

        g->nd = nd;
        g->cin = l->in_dims.channels;
        g->cout = l->desc->out;
        g->n[0] = l->in_dims.size[0];
        g->n[1] = nd > 1 ? l->in_dims.size[1] : 1;
        g->m[0] = m[0];
        g->m[1] = nd > 1 ? strata__spatial_arg(m, 1) : 1;
        g->blocks = nd;
        g->npts = (size_t)g->n[0] * (size_t)g->n[1];
        g->half = (size_t)g->n[nd - 1] / 2 + 1;
        g->spec = nd > 1 ? (size_t)g->n[0] * g->half : g->half;
        g->modes = (size_t)g->m[0] * (size_t)g->m[1];
}

/* Where mode @p j of block @p b lies in a channel's spectrum. */
static size_t mode_at(const struct geom *g, int b, size_t j)
{
        size_t r, k;

        if (g->nd == 1)
                return j;
        r = j / (size_t)g->m[1];
        k = j % (size_t)g->m[1];
        return (b == 0 ? r : (size_t)g->n[0] - (size_t)g->m[0] + r) * g->half + k;
}

/* c_k of mode @p j: 1 where the inverse transform reads only the real part, else 2. */
static float mode_weight(const struct geom *g, size_t j)
{
        size_t k = g->nd == 1 ? j : j % (size_t)g->m[1];
        int last = g->n[g->nd - 1];

        return k == 0 || (last % 2 == 0 && k == (size_t)last / 2) ? 1.0f : 2.0f;
}

/* The published plan of this transform, or NULL. */
static fftwf_plan plan_find(int rank, const int *n, enum dir dir)
{
        int k = atomic_load_explicit(&nplans, memory_order_acquire);

        for (int i = 0; i < k; i++)
                if (plans[i].rank == rank && plans[i].n[0] == n[0] &&
                    (rank == 1 || plans[i].n[1] == n[1]) && plans[i].dir == dir)
                        return plans[i].p;
        return NULL;
}

/* The plan of this transform, made on @p re and @p cx when the process has none yet. */
static fftwf_plan plan_get(int rank, const int *n, enum dir dir, float *re, fftwf_complex *cx)
{
        fftwf_plan p;
        int k;

        pthread_mutex_lock(&plan_lock);
        p = plan_find(rank, n, dir);
        k = atomic_load_explicit(&nplans, memory_order_relaxed);
        if (!p && k < PLANS_MAX) {
                p = dir == R2C ? fftwf_plan_dft_r2c(rank, n, re, cx,
                                                    PLAN_FLAGS | FFTW_PRESERVE_INPUT)
                               : fftwf_plan_dft_c2r(rank, n, cx, re,
                                                    PLAN_FLAGS | FFTW_DESTROY_INPUT);
                if (p) {
                        plans[k] = (struct plan_slot){ rank, { n[0], rank > 1 ? n[1] : 0 },
                                                       dir, p };
                        atomic_store_explicit(&nplans, k + 1, memory_order_release);
                }
        }
        pthread_mutex_unlock(&plan_lock);
        return p;
}

static int spec_shape(const struct strata_layer *l, int in, int nd,
                      struct strata_module_shape *s)
{
        const char *name = l->desc->ops->name;
        unsigned long long w, aux;
        struct geom g;

        STRATA_TRY(strata__spatial_check(l, in, nd, nd == 1 ? "1 spatial dimension (C, W)"
                                                            : "2 spatial dimensions (C, H, W)"));
        if (l->desc->out <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): out channels %d <= 0", name,
                                    l->index, l->desc->out);
        geom_of(l, nd, &g);
        if (nd == 1 && (g.m[0] < 1 || (size_t)g.m[0] > g.half))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes %d: %d points have "
                                    "%zu frequencies (modes 1 to %zu)", name, l->index, g.m[0],
                                    g.n[0], g.half, g.half);
        if (nd == 2 && (g.m[0] < 1 || g.m[0] > g.n[0] / 2))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes1 %d: the first and "
                                    "the last modes1 of %d rows may not overlap (modes1 1 to "
                                    "%d)", name, l->index, g.m[0], g.n[0], g.n[0] / 2);
        if (nd == 2 && (g.m[1] < 1 || (size_t)g.m[1] > g.half))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes2 %d: %d columns have "
                                    "%zu frequencies (modes2 1 to %zu)", name, l->index, g.m[1],
                                    g.n[1], g.half, g.half);
        w = (unsigned long long)g.cin * (unsigned long long)g.cout * g.modes * 2;
        aux = ((unsigned long long)g.cin + (unsigned long long)g.cout) * g.spec * 2;
        if ((unsigned long long)g.cout * g.npts > INT_MAX || w > (1ULL << 40) ||
            aux > (1ULL << 40))
                return strata__fail(STRATA_EOVERFLOW, "%s (module %d): %d to %d channels of "
                                    "%zu points with %zu modes are too large", name, l->index,
                                    g.cin, g.cout, g.npts, g.modes);
        *s = (struct strata_module_shape){
                .out = (int)((size_t)g.cout * g.npts),
                .params = (size_t)w * (size_t)g.blocks,
                .aux_per_row = (size_t)aux,
                .ngroups = g.blocks,
                .groups = { { "weights1", STRATA_F32, (size_t)w, STRATA_ROLE_WEIGHT, nd + 3,
                              { (size_t)g.cin, (size_t)g.cout, (size_t)g.m[0] } },
                            { "weights2", STRATA_F32, (size_t)w, STRATA_ROLE_WEIGHT, nd + 3,
                              { (size_t)g.cin, (size_t)g.cout, (size_t)g.m[0] } } },
                .out_dims = { .channels = g.cout, .ndim = nd, .size = { g.n[0] } },
                .host_loops = 1 };
        for (int b = 0; b < g.blocks; b++) {
                s->groups[b].shape[3] = nd > 1 ? (size_t)g.m[1] : 2;
                s->groups[b].shape[2 + nd] = 2;
        }
        if (nd > 1)
                s->out_dims.size[1] = g.n[1];
        return STRATA_OK;
}

/* A room the planner may look at when the layer has no saved values (no rows). */
static float plan_room[4];

/* The layer's plans, on its first row's saved values (arena memory) when it has rows. */
static void spec_init(struct strata_layer *l, int nd)
{
        struct geom g;
        float *re = plan_room, *cx = plan_room + 2;

        geom_of(l, nd, &g);
        if (l->aux && l->naux_per_row) {
                re = l->aux;
                cx = l->aux + (size_t)g.cin * g.spec * 2;
        }
        plan_get(nd, g.n, R2C, re, (fftwf_complex *)cx);
        plan_get(nd, g.n, C2R, re, (fftwf_complex *)cx);
}

/*
 * The reference FNO's weights: scale * torch.rand(..., dtype=cfloat), real and imaginary
 * parts uniform in [0, 1 / (in * out)); then the plans.
 */
static void spec_fill(struct strata_layer *l, int nd, uint64_t seed)
{
        struct geom g;
        size_t w;
        float scale;

        geom_of(l, nd, &g);
        w = (size_t)g.cin * (size_t)g.cout * g.modes * 2;
        scale = 1.0f / ((float)g.cin * (float)g.cout);
        for (int b = 0; b < g.blocks; b++)
                for (size_t i = 0; i < w; i++)
                        l->param[(size_t)b * w + i] =
                                scale * strata__uniform_at(seed, STRATA__INIT_STREAM(l->index, b),
                                                           i);
        spec_init(l, nd);
}

/* Y[o] on the kept modes = scale * sum over i of X[i] W[i, o] (Y zero elsewhere). */
static void mix_forward(const struct geom *g, const float *wt, const float *x, float *y,
                        float scale)
{
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2;

        memset(y, 0, sizeof(float) * 2 * (size_t)g->cout * g->spec);
        for (int b = 0; b < g->blocks; b++)
                for (int o = 0; o < g->cout; o++)
                        for (size_t j = 0; j < g->modes; j++) {
                                size_t s = mode_at(g, b, j);
                                float re = 0.0f, im = 0.0f;

                                for (int i = 0; i < g->cin; i++) {
                                        const float *xv = x + 2 * ((size_t)i * g->spec + s);
                                        const float *wv = wt + (size_t)b * w +
                                                          2 * (((size_t)i * (size_t)g->cout +
                                                                (size_t)o) * g->modes + j);

                                        re += xv[0] * wv[0] - xv[1] * wv[1];
                                        im += xv[0] * wv[1] + xv[1] * wv[0];
                                }
                                y[2 * ((size_t)o * g->spec + s)] = re * scale;
                                y[2 * ((size_t)o * g->spec + s) + 1] = im * scale;
                        }
}

/* The plans of a geometry, or STRATA_ENOMEM (none was made: PLANS_MAX sizes, or FFTW's). */
static int plans_of(const struct geom *g, fftwf_plan *r2c, fftwf_plan *c2r)
{
        *r2c = plan_find(g->nd, g->n, R2C);
        *c2r = plan_find(g->nd, g->n, C2R);
        return *r2c && *c2r ? STRATA_OK : STRATA_ENOMEM;
}

static void spec_forward(struct strata_layer *l, int nd, const float *x, float *y, int rows)
{
        struct geom g;
        fftwf_plan r2c, c2r;
        float scale;

        geom_of(l, nd, &g);
        if ((l->failed = plans_of(&g, &r2c, &c2r)) != STRATA_OK) {
                memset(y, 0, sizeof(float) * (size_t)rows * (size_t)l->out);
                return;
        }
        scale = 1.0f / (float)g.npts;
        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * (size_t)l->in;
                float *yr = y + (size_t)r * (size_t)l->out;
                float *xs = l->aux + (size_t)r * l->naux_per_row;
                float *ys = xs + 2 * (size_t)g.cin * g.spec;

                for (int i = 0; i < g.cin; i++)
                        fftwf_execute_dft_r2c(r2c, (float *)xr + (size_t)i * g.npts,
                                              (fftwf_complex *)(xs + 2 * (size_t)i * g.spec));
                mix_forward(&g, l->param, xs, ys, scale);
                for (int o = 0; o < g.cout; o++)
                        fftwf_execute_dft_c2r(c2r, (fftwf_complex *)(ys + 2 * (size_t)o * g.spec),
                                              yr + (size_t)o * g.npts);
        }
}

/* dW[i, o] += conj(X[i]) G[o] c_k / N on the kept modes, for one row. */
static void mix_wgrad(const struct geom *g, const float *x, const float *gy, float *dw,
                      float scale)
{
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2;

        for (int b = 0; b < g->blocks; b++)
                for (int i = 0; i < g->cin; i++)
                        for (int o = 0; o < g->cout; o++)
                                for (size_t j = 0; j < g->modes; j++) {
                                        size_t s = mode_at(g, b, j);
                                        const float *xv = x + 2 * ((size_t)i * g->spec + s);
                                        const float *gv = gy + 2 * ((size_t)o * g->spec + s);
                                        float *d = dw + (size_t)b * w +
                                                   2 * (((size_t)i * (size_t)g->cout +
                                                         (size_t)o) * g->modes + j);
                                        float c = mode_weight(g, j) * scale;

                                        d[0] += (xv[0] * gv[0] + xv[1] * gv[1]) * c;
                                        d[1] += (xv[0] * gv[1] - xv[1] * gv[0]) * c;
                                }
}

/* Z[i] on the kept modes = scale * sum over o of G[o] conj(W[i, o]) (Z zero elsewhere). */
static void mix_input_grad(const struct geom *g, const float *wt, const float *gy, float *z,
                           float scale)
{
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2;

        memset(z, 0, sizeof(float) * 2 * (size_t)g->cin * g->spec);
        for (int b = 0; b < g->blocks; b++)
                for (int i = 0; i < g->cin; i++)
                        for (size_t j = 0; j < g->modes; j++) {
                                size_t s = mode_at(g, b, j);
                                float re = 0.0f, im = 0.0f;

                                for (int o = 0; o < g->cout; o++) {
                                        const float *gv = gy + 2 * ((size_t)o * g->spec + s);
                                        const float *wv = wt + (size_t)b * w +
                                                          2 * (((size_t)i * (size_t)g->cout +
                                                                (size_t)o) * g->modes + j);

                                        re += gv[0] * wv[0] + gv[1] * wv[1];
                                        im += gv[1] * wv[0] - gv[0] * wv[1];
                                }
                                z[2 * ((size_t)i * g->spec + s)] = re * scale;
                                z[2 * ((size_t)i * g->spec + s) + 1] = im * scale;
                        }
}

static void spec_backward(struct strata_layer *l, int nd, const float *x, const float *dy,
                          float *dx, int rows)
{
        struct geom g;
        fftwf_plan r2c, c2r;
        float scale;

        geom_of(l, nd, &g);
        if (l->grad_fresh)
                memset(l->grad, 0, sizeof(float) * l->nparam);
        if ((l->failed = plans_of(&g, &r2c, &c2r)) != STRATA_OK) {
                if (dx)
                        memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)l->in);
                return;
        }
        scale = 1.0f / (float)g.npts;
        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * (size_t)l->in;
                const float *dyr = dy + (size_t)r * (size_t)l->out;
                float *xs = l->aux + (size_t)r * l->naux_per_row;
                float *gs = xs + 2 * (size_t)g.cin * g.spec;

                /* X again from x (the same bits as forward's): backward reads no saved value */
                for (int i = 0; i < g.cin; i++)
                        fftwf_execute_dft_r2c(r2c, (float *)xr + (size_t)i * g.npts,
                                              (fftwf_complex *)(xs + 2 * (size_t)i * g.spec));
                for (int o = 0; o < g.cout; o++)
                        fftwf_execute_dft_r2c(r2c, (float *)dyr + (size_t)o * g.npts,
                                              (fftwf_complex *)(gs + 2 * (size_t)o * g.spec));
                mix_wgrad(&g, xs, gs, l->grad, scale);
                if (!dx)
                        continue;
                /* X is spent: its room takes the input gradient's spectrum */
                mix_input_grad(&g, l->param, gs, xs, scale);
                for (int i = 0; i < g.cin; i++)
                        fftwf_execute_dft_c2r(c2r, (fftwf_complex *)(xs + 2 * (size_t)i * g.spec),
                                              dx + (size_t)r * (size_t)l->in +
                                                      (size_t)i * g.npts);
        }
}

static int sc1_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        return spec_shape(l, in, 1, s);
}

static int sc2_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        return spec_shape(l, in, 2, s);
}

static void sc1_init(struct strata_layer *l, uint64_t seed)
{
        spec_fill(l, 1, seed);
}

static void sc2_init(struct strata_layer *l, uint64_t seed)
{
        spec_fill(l, 2, seed);
}

static void sc1_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        (void)c;
        spec_forward(l, 1, x, y, rows);
}

static void sc2_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        (void)c;
        spec_forward(l, 2, x, y, rows);
}

static void sc1_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         const float *y, const float *dy, float *dx, int rows)
{
        (void)c, (void)y;
        spec_backward(l, 1, x, dy, dx, rows);
}

static void sc2_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                         const float *y, const float *dy, float *dx, int rows)
{
        (void)c, (void)y;
        spec_backward(l, 2, x, dy, dx, rows);
}

const struct strata_module_ops strata_spectralconv1d = {
        .name = "spectralconv1d",
        .shape = sc1_shape,
        .init = sc1_init,
        .forward = sc1_forward,
        .backward = sc1_backward,
};

const struct strata_module_ops strata_spectralconv2d = {
        .name = "spectralconv2d",
        .shape = sc2_shape,
        .init = sc2_init,
        .forward = sc2_forward,
        .backward = sc2_backward,
};
