/*
 * Spectral convolutions, the Fourier layer of Fourier neural operators (the reference FNO's
 * SpectralConv1d and SpectralConv2d; decision 0061): per sample, the real FFT of each input
 * channel over the spatial dimensions (torch.fft.rfft / rfft2), a learned complex product on
 * the lowest frequencies (1-D: the first @c modes; 2-D: the first modes1 and the last modes1
 * rows along H, the first modes2 columns along W, weights1 and weights2), the other
 * frequencies zero, and the inverse real FFT back to the input's extents (irfft / irfft2,
 * scaled by 1 / N):
 *
 *   Y[o, k] = sum over i of X[i, k] W[i, o, k],   y[o] = irfft(Y[o]).
 *
 * The weights are complex; each is stored as PyTorch's torch.view_as_real() of it, a real
 * tensor [in, out, modes..., 2] of (real, imaginary) pairs, the bytes of a complex64 tensor.
 *
 * The transforms are FFTW's one-dimensional complex DFTs in single precision (fp32 under every
 * precision: the module declares no bf16_io and calls no strata_gemm()), composed here: a row's
 * DFT along W of the real values, then, in 2-D, the DFT along H of the kept columns only; the
 * inverse the other way round, its last DFT's real part the output (the c2r transform's
 * semantics: the imaginary parts of the first and an even extent's last column ignored). FFTW's
 * own real and multi-dimensional plans are not used: at many extents (18 x 18, 28 x 28, every
 * odd extent above 16) they allocate buffers each time they run, where a one-dimensional
 * complex plan of an extent whose prime factors are at most 31 never does (decision 0061: every
 * such extent up to 65536 measured); the shape refuses other extents.
 *
 * Plans are made in the module's init, at connect, never during a step (FFTW allocates while
 * it plans): one per extent and direction for the whole process, in a table here shared by
 * every layer and device (FFTW's execute functions may run at once on several threads; its
 * planner may not, so planning holds a lock), made on the layer's arena room. A step executes
 * them with the new-array interface on each row's room in aux (its spectra and two lines of
 * work). FFTW_ESTIMATE | FFTW_UNALIGNED: no timing decides the algorithm, and no SIMD codelet
 * whose choice would depend on the CPU or on a buffer's alignment, so every row of every
 * device runs the same code and the bits repeat.
 *
 * The backward is the adjoint (N points; c_k = 1 on the columns k = 0 and W/2 whose imaginary
 * parts the inverse ignores, else 2): with G = rfft(dy), dW[i, o, k] = conj(X[i, k]) G[o, k]
 * c_k / N and dx[i] = c2r(sum over o of G[o, k] conj(W[i, o, k]) / N), c2r the unscaled
 * inverse. It transforms x again rather than keep its spectrum, so it reads x and dy only. Sums
 * over channels run in ascending order, gradients over rows in row order: the same bits every
 * run.
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

/* Extents and directions the process may plan (each a plan in FFTW's memory). */
#define PLANS_MAX 256

/* The extents planned: at most this, prime factors at most SMOOTH (decision 0061). */
#define EXTENT_MAX 65536
#define SMOOTH 31

/* Reproducible plans (decision 0061): no measurement, no SIMD, any alignment. */
#define PLAN_FLAGS (FFTW_ESTIMATE | FFTW_UNALIGNED)

/* One plan: a one-dimensional complex DFT of n points, forward (-1) or backward (+1). */
struct plan_slot {
        int n;
        int sign;
        fftwf_plan p;
};

static struct plan_slot plans[PLANS_MAX];
static atomic_int nplans;                   /* slots published (release after the slot) */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A layer's geometry, what the shape accepted; a 1-D sample is one row (h 1, modes1 1, one
 * block), so one walk serves both.
 */
struct geom {
        int nd;          /* spatial dimensions: 1 or 2 */
        int cin, cout;   /* channels */
        int h, w;        /* extents (1-D: h 1) */
        int m1, m2;      /* rows and columns kept per block (1-D: 1 and modes) */
        int blocks;      /* weight tensors: 1 (1-D) or 2 (2-D: the low and the high rows) */
        size_t npts;     /* N: points of one channel */
        size_t modes;    /* modes of one block: m1 * m2 */
        size_t kept;     /* modes of a channel: blocks * modes */
        size_t line;     /* complex values of a line of work: max(h, w) */
};

/* The four plans a geometry executes. */
struct plans {
        fftwf_plan fw, bw; /* along W */
        fftwf_plan fh, bh; /* along H (2-D) */
};

static void geom_of(const struct strata_layer *l, int nd, struct geom *g)
{
        const int *m = l->desc->modes;

        g->nd = nd;
        g->cin = l->in_dims.channels;
        g->cout = l->desc->out;
        g->h = nd > 1 ? l->in_dims.size[0] : 1;
        g->w = l->in_dims.size[nd - 1];
        g->m1 = nd > 1 ? m[0] : 1;
        g->m2 = nd > 1 ? strata__spatial_arg(m, 1) : m[0];
        g->blocks = nd;
        g->npts = (size_t)g->h * (size_t)g->w;
        g->modes = (size_t)g->m1 * (size_t)g->m2;
        g->kept = (size_t)g->blocks * g->modes;
        g->line = (size_t)(g->h > g->w ? g->h : g->w);
}

/* Floats of one row's room: the spectra of x and of y (or dy), two lines, the rows' columns. */
static size_t row_room(const struct geom *g)
{
        return 2 * (((size_t)g->cin + (size_t)g->cout) * g->kept + 2 * g->line +
                    (size_t)g->h * (size_t)g->m2);
}

/* c_k of mode @p j: 1 where the inverse reads only the real part (column 0, W/2), else 2. */
static float mode_weight(const struct geom *g, size_t j)
{
        size_t k = j % (size_t)g->m2;

        return k == 0 || (g->w % 2 == 0 && k == (size_t)g->w / 2) ? 1.0f : 2.0f;
}

/* The published plan of this transform, or NULL. */
static fftwf_plan plan_find(int n, int sign)
{
        int k = atomic_load_explicit(&nplans, memory_order_acquire);

        for (int i = 0; i < k; i++)
                if (plans[i].n == n && plans[i].sign == sign)
                        return plans[i].p;
        return NULL;
}

/* The plan of this transform, made on @p in and @p out when the process has none yet. */
static void plan_get(int n, int sign, float *in, float *out)
{
        fftwf_plan p;
        int k;

        pthread_mutex_lock(&plan_lock);
        p = plan_find(n, sign);
        k = atomic_load_explicit(&nplans, memory_order_relaxed);
        if (!p && k < PLANS_MAX) {
                p = fftwf_plan_dft_1d(n, (fftwf_complex *)in, (fftwf_complex *)out, sign,
                                      PLAN_FLAGS);
                if (p) {
                        plans[k] = (struct plan_slot){ n, sign, p };
                        atomic_store_explicit(&nplans, k + 1, memory_order_release);
                }
        }
        pthread_mutex_unlock(&plan_lock);
}

/* The plans of a geometry, or STRATA_ENOMEM (none was made: PLANS_MAX plans, or FFTW's). */
static int plans_of(const struct geom *g, struct plans *p)
{
        p->fw = plan_find(g->w, FFTW_FORWARD);
        p->bw = plan_find(g->w, FFTW_BACKWARD);
        p->fh = g->nd > 1 ? plan_find(g->h, FFTW_FORWARD) : p->fw;
        p->bh = g->nd > 1 ? plan_find(g->h, FFTW_BACKWARD) : p->bw;
        return p->fw && p->bw && p->fh && p->bh ? STRATA_OK : STRATA_ENOMEM;
}

/* The largest prime factor of @p n (n >= 1; 1 for 1). */
static int largest_prime(int n)
{
        int big = 1;

        for (int q = 2; n > 1 && q <= n; q++)
                while (n % q == 0) {
                        n /= q;
                        big = q;
                }
        return big;
}

/* Extent @p n (@p what) is one FFTW runs without allocating, else STRATA_EINVAL. */
static int check_extent(const struct strata_layer *l, const char *what, int n)
{
        int p = n > 0 && n <= EXTENT_MAX ? largest_prime(n) : 0;

        if (p > 0 && p <= SMOOTH)
                return STRATA_OK;
        return strata__fail(STRATA_EINVAL, "%s (module %d): %s %d: extents up to %d whose "
                            "prime factors are at most %d (FFTW plans others with transforms "
                            "that allocate as they run)%s", l->desc->ops->name, l->index, what,
                            n, EXTENT_MAX, SMOOTH, p > SMOOTH ? "; it has a larger one" : "");
}

static int spec_shape(const struct strata_layer *l, int in, int nd,
                      struct strata_module_shape *s)
{
        const char *name = l->desc->ops->name;
        unsigned long long w;
        size_t half;
        struct geom g;

        STRATA_TRY(strata__spatial_check(l, in, nd, nd == 1 ? "1 spatial dimension (C, W)"
                                                            : "2 spatial dimensions (C, H, W)"));
        if (l->desc->out <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): out channels %d <= 0", name,
                                    l->index, l->desc->out);
        geom_of(l, nd, &g);
        half = (size_t)g.w / 2 + 1;
        if (nd == 1 && (g.m2 < 1 || (size_t)g.m2 > half))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes %d: %d points have "
                                    "%zu frequencies (modes 1 to %zu)", name, l->index, g.m2,
                                    g.w, half, half);
        if (nd == 2 && (g.m1 < 1 || g.m1 > g.h / 2))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes1 %d: the first and "
                                    "the last modes1 of %d rows may not overlap (modes1 1 to "
                                    "%d)", name, l->index, g.m1, g.h, g.h / 2);
        if (nd == 2 && (g.m2 < 1 || (size_t)g.m2 > half))
                return strata__fail(STRATA_EINVAL, "%s (module %d): modes2 %d: %d columns have "
                                    "%zu frequencies (modes2 1 to %zu)", name, l->index, g.m2,
                                    g.w, half, half);
        if (nd == 2)
                STRATA_TRY(check_extent(l, "H", g.h));
        STRATA_TRY(check_extent(l, "W", g.w));
        w = (unsigned long long)g.cin * (unsigned long long)g.cout * g.modes * 2;
        if ((unsigned long long)g.cout * g.npts > INT_MAX || w > (1ULL << 40) ||
            (unsigned long long)g.cin + (unsigned long long)g.cout > (1ULL << 24) ||
            row_room(&g) > ((size_t)1 << 36))
                return strata__fail(STRATA_EOVERFLOW, "%s (module %d): %d to %d channels of "
                                    "%zu points with %zu modes are too large", name, l->index,
                                    g.cin, g.cout, g.npts, g.modes);
        *s = (struct strata_module_shape){
                .out = (int)((size_t)g.cout * g.npts),
                .params = (size_t)w * (size_t)g.blocks,
                .aux_per_row = row_room(&g),
                .ngroups = g.blocks,
                .groups = { { "weights1", STRATA_F32, (size_t)w, STRATA_ROLE_WEIGHT, nd + 3,
                              { (size_t)g.cin, (size_t)g.cout, (size_t)(nd > 1 ? g.m1 : g.m2) } },
                            { "weights2", STRATA_F32, (size_t)w, STRATA_ROLE_WEIGHT, nd + 3,
                              { (size_t)g.cin, (size_t)g.cout, (size_t)g.m1 } } },
                .out_dims = { .channels = g.cout, .ndim = nd, .size = { nd > 1 ? g.h : g.w } },
                .host_loops = 1 };
        for (int b = 0; b < g.blocks; b++) {
                s->groups[b].shape[3] = nd > 1 ? (size_t)g.m2 : 2;
                s->groups[b].shape[2 + nd] = 2;
        }
        if (nd > 1)
                s->out_dims.size[1] = g.w;
        return STRATA_OK;
}

/* A room the planner may look at when the layer has no rows (no aux). */
static float plan_room[4];

/* The layer's plans, on its first row's room (arena memory) when it has rows. */
static void spec_init(struct strata_layer *l, int nd)
{
        struct geom g;
        float *in = plan_room, *out = plan_room + 2;

        geom_of(l, nd, &g);
        if (l->aux && l->naux_per_row) {
                in = l->aux + 2 * ((size_t)g.cin + (size_t)g.cout) * g.kept;
                out = in + 2 * g.line;
        }
        plan_get(g.w, FFTW_FORWARD, in, out);
        plan_get(g.w, FFTW_BACKWARD, in, out);
        if (nd > 1) {
                plan_get(g.h, FFTW_FORWARD, in, out);
                plan_get(g.h, FFTW_BACKWARD, in, out);
        }
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

/* One row's room: its spectra and work lines. */
struct room {
        float *xs;   /* cin spectra of kept modes (complex pairs) */
        float *gs;   /* cout spectra */
        float *t, *f; /* two lines of work */
        float *a;    /* h x m2: the rows' kept columns */
};

static struct room room_of(const struct strata_layer *l, const struct geom *g, int r)
{
        struct room m;

        m.xs = l->aux + (size_t)r * l->naux_per_row;
        m.gs = m.xs + 2 * (size_t)g->cin * g->kept;
        m.t = m.gs + 2 * (size_t)g->cout * g->kept;
        m.f = m.t + 2 * g->line;
        m.a = m.f + 2 * g->line;
        return m;
}

/* Real channel @p x (h x w) to its kept modes @p s (kept complex values, block by block). */
static void to_modes(const struct geom *g, const struct plans *p, const struct room *m,
                     const float *x, float *s)
{
        for (int r = 0; r < g->h; r++) {
                for (int n = 0; n < g->w; n++) {
                        m->t[2 * n] = x[(size_t)r * (size_t)g->w + (size_t)n];
                        m->t[2 * n + 1] = 0.0f;
                }
                fftwf_execute_dft(p->fw, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                memcpy(g->nd > 1 ? m->a + 2 * (size_t)r * (size_t)g->m2 : s, m->f,
                       sizeof(float) * 2 * (size_t)g->m2);
        }
        for (int k = 0; k < g->m2 && g->nd > 1; k++) {
                for (int r = 0; r < g->h; r++) {
                        m->t[2 * r] = m->a[2 * ((size_t)r * (size_t)g->m2 + (size_t)k)];
                        m->t[2 * r + 1] = m->a[2 * ((size_t)r * (size_t)g->m2 + (size_t)k) + 1];
                }
                fftwf_execute_dft(p->fh, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int b = 0; b < g->blocks; b++)
                        for (int r = 0; r < g->m1; r++) {
                                int k1 = b == 0 ? r : g->h - g->m1 + r;
                                size_t j = (size_t)b * g->modes + (size_t)r * (size_t)g->m2 +
                                           (size_t)k;

                                s[2 * j] = m->f[2 * k1];
                                s[2 * j + 1] = m->f[2 * k1 + 1];
                        }
        }
}

/*
 * Kept modes @p s to the real channel @p y: sum over the kept modes of
 * c_k Re(s_k e^{+i theta}), the unscaled c2r transform of a spectrum zero elsewhere.
 */
static void from_modes(const struct geom *g, const struct plans *p, const struct room *m,
                       const float *s, float *y)
{
        if (g->nd == 1)
                memcpy(m->a, s, sizeof(float) * 2 * (size_t)g->m2);
        for (int k = 0; k < g->m2 && g->nd > 1; k++) {
                memset(m->t, 0, sizeof(float) * 2 * (size_t)g->h);
                for (int b = 0; b < g->blocks; b++)
                        for (int r = 0; r < g->m1; r++) {
                                int k1 = b == 0 ? r : g->h - g->m1 + r;
                                size_t j = (size_t)b * g->modes + (size_t)r * (size_t)g->m2 +
                                           (size_t)k;

                                m->t[2 * k1] = s[2 * j];
                                m->t[2 * k1 + 1] = s[2 * j + 1];
                        }
                fftwf_execute_dft(p->bh, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int r = 0; r < g->h; r++) {
                        m->a[2 * ((size_t)r * (size_t)g->m2 + (size_t)k)] = m->f[2 * r];
                        m->a[2 * ((size_t)r * (size_t)g->m2 + (size_t)k) + 1] = m->f[2 * r + 1];
                }
        }
        for (int r = 0; r < g->h; r++) {
                const float *ar = m->a + 2 * (size_t)r * (size_t)g->m2;

                memset(m->t, 0, sizeof(float) * 2 * (size_t)g->w);
                for (int k = 0; k < g->m2; k++) {
                        float c = mode_weight(g, (size_t)k);

                        m->t[2 * k] = c * ar[2 * k];
                        m->t[2 * k + 1] = c * ar[2 * k + 1];
                }
                fftwf_execute_dft(p->bw, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int n = 0; n < g->w; n++)
                        y[(size_t)r * (size_t)g->w + (size_t)n] = m->f[2 * n];
        }
}

/* Where the weight pair of mode @p j of input @p i and output @p o lies (block by block). */
static size_t weight_at(const struct geom *g, size_t j, int i, int o)
{
        size_t b = j / g->modes, w = (size_t)g->cin * (size_t)g->cout * g->modes * 2;

        return b * w + 2 * (((size_t)i * (size_t)g->cout + (size_t)o) * g->modes +
                            j % g->modes);
}

/* Y[o] = scale * sum over i of X[i] W[i, o], mode by mode. */
static void mix_forward(const struct geom *g, const float *wt, const float *x, float *y,
                        float scale)
{
        for (int o = 0; o < g->cout; o++)
                for (size_t j = 0; j < g->kept; j++) {
                        float re = 0.0f, im = 0.0f;

                        for (int i = 0; i < g->cin; i++) {
                                const float *xv = x + 2 * ((size_t)i * g->kept + j);
                                const float *wv = wt + weight_at(g, j, i, o);

                                re += xv[0] * wv[0] - xv[1] * wv[1];
                                im += xv[0] * wv[1] + xv[1] * wv[0];
                        }
                        y[2 * ((size_t)o * g->kept + j)] = re * scale;
                        y[2 * ((size_t)o * g->kept + j) + 1] = im * scale;
                }
}

static void spec_forward(struct strata_layer *l, int nd, const float *x, float *y, int rows)
{
        struct geom g;
        struct plans p;
        float scale;

        geom_of(l, nd, &g);
        if ((l->failed = plans_of(&g, &p)) != STRATA_OK) {
                memset(y, 0, sizeof(float) * (size_t)rows * (size_t)l->out);
                return;
        }
        scale = 1.0f / (float)g.npts;
        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * (size_t)l->in;
                float *yr = y + (size_t)r * (size_t)l->out;
                struct room m = room_of(l, &g, r);

                for (int i = 0; i < g.cin; i++)
                        to_modes(&g, &p, &m, xr + (size_t)i * g.npts,
                                 m.xs + 2 * (size_t)i * g.kept);
                mix_forward(&g, l->param, m.xs, m.gs, scale);
                for (int o = 0; o < g.cout; o++)
                        from_modes(&g, &p, &m, m.gs + 2 * (size_t)o * g.kept,
                                   yr + (size_t)o * g.npts);
        }
}

/* dW[i, o] += conj(X[i]) G[o] c_k / N, mode by mode, for one row. */
static void mix_wgrad(const struct geom *g, const float *x, const float *gy, float *dw,
                      float scale)
{
        for (int i = 0; i < g->cin; i++)
                for (int o = 0; o < g->cout; o++)
                        for (size_t j = 0; j < g->kept; j++) {
                                const float *xv = x + 2 * ((size_t)i * g->kept + j);
                                const float *gv = gy + 2 * ((size_t)o * g->kept + j);
                                float *d = dw + weight_at(g, j, i, o);
                                float c = mode_weight(g, j % g->modes) * scale;

                                d[0] += (xv[0] * gv[0] + xv[1] * gv[1]) * c;
                                d[1] += (xv[0] * gv[1] - xv[1] * gv[0]) * c;
                        }
}

/* Z[i] = scale * sum over o of G[o] conj(W[i, o]), mode by mode. */
static void mix_input_grad(const struct geom *g, const float *wt, const float *gy, float *z,
                           float scale)
{
        for (int i = 0; i < g->cin; i++)
                for (size_t j = 0; j < g->kept; j++) {
                        float re = 0.0f, im = 0.0f;

                        for (int o = 0; o < g->cout; o++) {
                                const float *gv = gy + 2 * ((size_t)o * g->kept + j);
                                const float *wv = wt + weight_at(g, j, i, o);

                                re += gv[0] * wv[0] + gv[1] * wv[1];
                                im += gv[1] * wv[0] - gv[0] * wv[1];
                        }
                        z[2 * ((size_t)i * g->kept + j)] = re * scale;
                        z[2 * ((size_t)i * g->kept + j) + 1] = im * scale;
                }
}

static void spec_backward(struct strata_layer *l, int nd, const float *x, const float *dy,
                          float *dx, int rows)
{
        struct geom g;
        struct plans p;
        float scale;

        geom_of(l, nd, &g);
        if (l->grad_fresh)
                memset(l->grad, 0, sizeof(float) * l->nparam);
        if ((l->failed = plans_of(&g, &p)) != STRATA_OK) {
                if (dx)
                        memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)l->in);
                return;
        }
        scale = 1.0f / (float)g.npts;
        for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * (size_t)l->in;
                const float *dyr = dy + (size_t)r * (size_t)l->out;
                struct room m = room_of(l, &g, r);

                /* X again from x (the same bits as forward's): backward keeps nothing */
                for (int i = 0; i < g.cin; i++)
                        to_modes(&g, &p, &m, xr + (size_t)i * g.npts,
                                 m.xs + 2 * (size_t)i * g.kept);
                for (int o = 0; o < g.cout; o++)
                        to_modes(&g, &p, &m, dyr + (size_t)o * g.npts,
                                 m.gs + 2 * (size_t)o * g.kept);
                mix_wgrad(&g, m.xs, m.gs, l->grad, scale);
                if (!dx)
                        continue;
                /* X is spent: its room takes the input gradient's spectrum */
                mix_input_grad(&g, l->param, m.gs, m.xs, scale);
                for (int i = 0; i < g.cin; i++)
                        from_modes(&g, &p, &m, m.xs + 2 * (size_t)i * g.kept,
                                   dx + (size_t)r * (size_t)l->in + (size_t)i * g.npts);
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
