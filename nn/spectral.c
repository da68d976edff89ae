/*
 * Spectral convolutions, the Fourier layer of Fourier neural operators (the reference FNO's
 * SpectralConv1d, 2d and 3d; decisions 0061, 0072): per sample, the real FFT of each input
 * channel over the spatial dimensions (torch.fft.rfft / rfft2 / rfftn), a learned complex
 * product on the lowest frequencies (1-D: the first @c modes; 2-D: the first modes1 and the
 * last modes1 rows along H, the first modes2 columns along W, weights1 and weights2; 3-D: the
 * first and last modes1 planes along D times the first and last modes2 rows along H, the first
 * modes3 columns, weights1 (low D, low H), weights2 (high D, low H), weights3 (low D, high H),
 * weights4 (high, high)), the other frequencies zero, and the inverse real FFT back to the
 * input's extents (irfft / irfft2 / irfftn, scaled by 1 / N):
 *
 *   Y[o, k] = sum over i of X[i, k] W[i, o, k],   y[o] = irfft(Y[o]).
 *
 * The weights are complex; each is stored as PyTorch's torch.view_as_real() of it, a real
 * tensor [in, out, modes..., 2] of (real, imaginary) pairs, the bytes of a complex64 tensor.
 *
 * The transforms are FFTW's one-dimensional complex DFTs in single precision (fp32 under every
 * precision: the module declares no bf16_io and calls no strata_gemm()), composed here: a row's
 * DFT along W of the real values, then the DFT along H of the kept columns only, then along D
 * of the kept rows only; the inverse the other way round, its last DFT's real part the output
 * (the c2r transform's semantics: the imaginary parts of the first and an even extent's last
 * column ignored). FFTW's
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
 * inverse. In 1-D and 2-D X is the forward's, kept in the row's room in aux (the forward's
 * later work uses other parts of it), and each input's gradient spectrum passes through the
 * kept columns' room: the backward transforms dy only, and may run again. In 3-D it transforms
 * x again, X's room taking the gradient spectra. Sums
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
 * A layer's geometry, what the shape accepted; a sample is d planes of h rows of w points (1-D:
 * one row; 2-D: one plane), a dimension it lacks of extent 1 with one mode on one side, so one
 * walk serves all three.
 */
struct geom {
        int nd;          /* spatial dimensions: 1, 2 or 3 */
        int cin, cout;   /* channels */
        int d, h, w;     /* extents (d 1 below 3-D, h 1 in 1-D) */
        int md, mh, mw;  /* modes kept per side along D, H and W (1 where absent) */
        int sd, sh;      /* sides kept along D and H: 2 (the low and the high), 1 where absent */
        int blocks;      /* weight tensors: sd * sh */
        size_t npts;     /* N: points of one channel */
        size_t modes;    /* modes of one block: md * mh * mw */
        size_t kept;     /* modes of a channel: blocks * modes */
        size_t line;     /* complex values of a line of work: max(d, h, w) */
};

/* The six plans a geometry executes. */
struct plans {
        fftwf_plan fw, bw; /* along W */
        fftwf_plan fh, bh; /* along H (2-D, 3-D) */
        fftwf_plan fd, bd; /* along D (3-D) */
};

static void geom_of(const struct strata_layer *l, int nd, struct geom *g)
{
        const int *m = l->desc->modes, *n = l->in_dims.size;

        g->nd = nd;
        g->cin = l->in_dims.channels;
        g->cout = l->desc->out;
        g->d = nd > 2 ? n[0] : 1;
        g->h = nd > 1 ? n[nd - 2] : 1;
        g->w = n[nd - 1];
        g->md = nd > 2 ? m[0] : 1;
        g->mh = nd > 1 ? strata__spatial_arg(m, nd - 2) : 1;
        g->mw = strata__spatial_arg(m, nd - 1);
        g->sd = nd > 2 ? 2 : 1;
        g->sh = nd > 1 ? 2 : 1;
        g->blocks = g->sd * g->sh;
        g->npts = (size_t)g->d * (size_t)g->h * (size_t)g->w;
        g->modes = (size_t)g->md * (size_t)g->mh * (size_t)g->mw;
        g->kept = (size_t)g->blocks * g->modes;
        g->line = (size_t)(g->h > g->w ? g->h : g->w);
        g->line = g->line > (size_t)g->d ? g->line : (size_t)g->d;
}

/* Floats of one row's room: the spectra of x and of y (or dy), two lines, the kept columns. */
static size_t row_room(const struct geom *g)
{
        return 2 * (((size_t)g->cin + (size_t)g->cout) * g->kept + 2 * g->line +
                    (size_t)g->d * (size_t)g->h * (size_t)g->mw);
}

/* c_k of column @p k (< mw): 1 where the inverse reads only the real part (0, W/2), else 2. */
static float mode_weight(const struct geom *g, size_t k)
{
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
        p->fd = g->nd > 2 ? plan_find(g->d, FFTW_FORWARD) : p->fw;
        p->bd = g->nd > 2 ? plan_find(g->d, FFTW_BACKWARD) : p->bw;
        return p->fw && p->bw && p->fh && p->bh && p->fd && p->bd ? STRATA_OK : STRATA_ENOMEM;
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

/* The modes kept along an axis of @p n points, 1 to @p most, else STRATA_EINVAL naming them. */
static int check_modes(const struct strata_layer *l, const char *key, int m, int n, int most,
                       const char *what)
{
        if (m >= 1 && m <= most)
                return STRATA_OK;
        if (most < n / 2 + 1)
                return strata__fail(STRATA_EINVAL, "%s (module %d): %s %d: the first and the "
                                    "last %s of %d %s may not overlap (%s 1 to %d)",
                                    l->desc->ops->name, l->index, key, m, key, n, what, key,
                                    most);
        return strata__fail(STRATA_EINVAL, "%s (module %d): %s %d: %d %s have %d frequencies "
                            "(%s 1 to %d)", l->desc->ops->name, l->index, key, m, n, what, most,
                            key, most);
}

/* The modes of every axis, then the extents. */
static int check_axes(const struct strata_layer *l, const struct geom *g)
{
        static const char *const keys[3][3] = { { "modes" }, { "modes1", "modes2" },
                                                { "modes1", "modes2", "modes3" } };
        const char *const *k = keys[g->nd - 1];

        if (g->nd > 2)
                STRATA_TRY(check_modes(l, k[0], g->md, g->d, g->d / 2, "planes"));
        if (g->nd > 1)
                STRATA_TRY(check_modes(l, k[g->nd - 2], g->mh, g->h, g->h / 2, "rows"));
        STRATA_TRY(check_modes(l, k[g->nd - 1], g->mw, g->w, g->w / 2 + 1,
                               g->nd > 1 ? "columns" : "points"));
        if (g->nd > 2)
                STRATA_TRY(check_extent(l, "D", g->d));
        if (g->nd > 1)
                STRATA_TRY(check_extent(l, "H", g->h));
        return check_extent(l, "W", g->w);
}

static int spec_shape(const struct strata_layer *l, int in, int nd,
                      struct strata_module_shape *s)
{
        static const char *const want[3] = { "1 spatial dimension (C, W)",
                                             "2 spatial dimensions (C, H, W)",
                                             "3 spatial dimensions (C, D, H, W)" };
        static const char *const names[4] = { "weights1", "weights2", "weights3", "weights4" };
        const char *name = l->desc->ops->name;
        unsigned long long w;
        struct geom g;

        STRATA_TRY(strata__spatial_check(l, in, nd, want[nd - 1]));
        if (l->desc->out <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): out channels %d <= 0", name,
                                    l->index, l->desc->out);
        geom_of(l, nd, &g);
        STRATA_TRY(check_axes(l, &g));
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
                .out_dims = l->in_dims,
                .host_loops = 1 };
        s->out_dims.channels = g.cout;
        for (int b = 0; b < g.blocks; b++) {
                struct strata_param_group *p = &s->groups[b];
                int at = 2;

                *p = (struct strata_param_group){ names[b], STRATA_F32, (size_t)w,
                                                  STRATA_ROLE_WEIGHT, nd + 3,
                                                  { (size_t)g.cin, (size_t)g.cout } };
                if (nd > 2)
                        p->shape[at++] = (size_t)g.md;
                if (nd > 1)
                        p->shape[at++] = (size_t)g.mh;
                p->shape[at++] = (size_t)g.mw;
                p->shape[at] = 2;
        }
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
        if (nd > 2) {
                plan_get(g.d, FFTW_FORWARD, in, out);
                plan_get(g.d, FFTW_BACKWARD, in, out);
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
        float *a;    /* d x h x mw: the rows' kept columns */
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

/* The frequency of kept index @p q along an axis of @p n points, @p m kept on each side. */
static int freq(int n, int m, int q)
{
        return q < m ? q : n - 2 * m + q;
}

/* The index in a channel's spectrum of plane side @p p (0..sd*md-1), row @p q, column @p k. */
static size_t mode_at(const struct geom *g, int p, int q, int k)
{
        size_t b = (size_t)(p / g->md) + (size_t)g->sd * (size_t)(q / g->mh);

        return b * g->modes + ((size_t)(p % g->md) * (size_t)g->mh + (size_t)(q % g->mh)) *
                                      (size_t)g->mw + (size_t)k;
}

/* Complex value @p i of a work line @p t from @p v (a pair). */
static void put2(float *t, size_t i, const float *v)
{
        t[2 * i] = v[0];
        t[2 * i + 1] = v[1];
}

/*
 * Real channel @p x (d x h x w) to its kept modes @p s (kept complex values, block by block):
 * each row along W into a's kept columns, each slab's kept columns along H (the kept rows back
 * into a's first rows), the kept rows along D.
 */
static void to_modes(const struct geom *g, const struct plans *p, const struct room *m,
                     const float *x, float *s)
{
        size_t hw = (size_t)g->h * (size_t)g->mw, mw = (size_t)g->mw;

        for (size_t r = 0; r < (size_t)g->d * (size_t)g->h; r++) {
                for (int n = 0; n < g->w; n++) {
                        m->t[2 * n] = x[r * (size_t)g->w + (size_t)n];
                        m->t[2 * n + 1] = 0.0f;
                }
                fftwf_execute_dft(p->fw, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                memcpy(m->a + 2 * r * mw, m->f, sizeof(float) * 2 * mw);
        }
        for (size_t zk = 0; g->nd > 1 && zk < (size_t)g->d * mw; zk++) {
                float *a = m->a + 2 * ((zk / mw) * hw + zk % mw);

                for (int r = 0; r < g->h; r++)
                        put2(m->t, (size_t)r, a + 2 * (size_t)r * mw);
                fftwf_execute_dft(p->fh, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int q = 0; q < g->sh * g->mh; q++)
                        put2(a, (size_t)q * mw, m->f + 2 * freq(g->h, g->mh, q));
        }
        for (int q = 0; q < g->sh * g->mh; q++)
                for (int k = 0; k < g->mw; k++) {
                        const float *a = m->a + 2 * ((size_t)q * mw + (size_t)k);

                        if (g->nd < 3) {
                                put2(s, mode_at(g, 0, q, k), a);
                                continue;
                        }
                        for (int z = 0; z < g->d; z++)
                                put2(m->t, (size_t)z, a + 2 * (size_t)z * hw);
                        fftwf_execute_dft(p->fd, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                        for (int pl = 0; pl < 2 * g->md; pl++)
                                put2(s, mode_at(g, pl, q, k), m->f + 2 * freq(g->d, g->md, pl));
                }
}

/*
 * Kept modes @p s to the real channel @p y: sum over the kept modes of
 * c_k Re(s_k e^{+i theta}), the unscaled c2r transform of a spectrum zero elsewhere.
 */
static void from_modes(const struct geom *g, const struct plans *p, const struct room *m,
                       const float *s, float *y)
{
        size_t hw = (size_t)g->h * (size_t)g->mw, mw = (size_t)g->mw;

        for (int q = 0; q < g->sh * g->mh; q++)
                for (int k = 0; k < g->mw; k++) {
                        float *a = m->a + 2 * ((size_t)q * mw + (size_t)k);

                        if (g->nd < 3) {
                                put2(a, 0, s + 2 * mode_at(g, 0, q, k));
                                continue;
                        }
                        memset(m->t, 0, sizeof(float) * 2 * (size_t)g->d);
                        for (int pl = 0; pl < 2 * g->md; pl++)
                                put2(m->t, (size_t)freq(g->d, g->md, pl),
                                     s + 2 * mode_at(g, pl, q, k));
                        fftwf_execute_dft(p->bd, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                        for (int z = 0; z < g->d; z++)
                                put2(a, (size_t)z * hw, m->f + 2 * z);
                }
        for (size_t zk = 0; g->nd > 1 && zk < (size_t)g->d * mw; zk++) {
                float *a = m->a + 2 * ((zk / mw) * hw + zk % mw);

                memset(m->t, 0, sizeof(float) * 2 * (size_t)g->h);
                for (int q = 0; q < g->sh * g->mh; q++)
                        put2(m->t, (size_t)freq(g->h, g->mh, q), a + 2 * (size_t)q * mw);
                fftwf_execute_dft(p->bh, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int r = 0; r < g->h; r++)
                        put2(a, (size_t)r * mw, m->f + 2 * r);
        }
        for (size_t r = 0; r < (size_t)g->d * (size_t)g->h; r++) {
                const float *ar = m->a + 2 * r * mw;

                memset(m->t, 0, sizeof(float) * 2 * (size_t)g->w);
                for (int k = 0; k < g->mw; k++) {
                        float c = mode_weight(g, (size_t)k);

                        m->t[2 * k] = c * ar[2 * k];
                        m->t[2 * k + 1] = c * ar[2 * k + 1];
                }
                fftwf_execute_dft(p->bw, (fftwf_complex *)m->t, (fftwf_complex *)m->f);
                for (int n = 0; n < g->w; n++)
                        y[r * (size_t)g->w + (size_t)n] = m->f[2 * n];
        }
}

/*
 * The weights of block b, input i, output o: modes complex pairs from b (cin cout modes 2) +
 * 2 modes (i cout + o), in the order of the block's modes. The sums below step through them
 * by pointer (no division per product) with the modes innermost and contiguous; each mode's
 * sum still starts from 0 and adds its terms in ascending channel order: the same bits.
 */
/*
 * Y[o] = scale * sum over i of X[i] W[i, o], mode by mode: each mode's sum from 0 in ascending
 * i, accumulated in y over the inputs so that the modes (the inner loop) run contiguously.
 */
static void mix_forward(const struct geom *g, const float *wt, const float *x, float *y,
                        float scale)
{
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2, n = 2 * g->kept;

        for (int o = 0; o < g->cout; o++) {
                float *yo = y + (size_t)o * n;

                memset(yo, 0, sizeof(float) * n);
                for (int i = 0; i < g->cin; i++)
                        for (size_t b = 0; b < (size_t)g->blocks; b++) {
                                const float *xv = x + (size_t)i * n + 2 * b * g->modes;
                                const float *wv = wt + b * w + 2 * g->modes *
                                                  ((size_t)i * (size_t)g->cout + (size_t)o);
                                float *yv = yo + 2 * b * g->modes;

                                for (size_t j = 0; j < 2 * g->modes; j += 2) {
                                        yv[j] += xv[j] * wv[j] - xv[j + 1] * wv[j + 1];
                                        yv[j + 1] += xv[j] * wv[j + 1] + xv[j + 1] * wv[j];
                                }
                        }
                for (size_t j = 0; j < n; j++)
                        yo[j] *= scale;
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
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2;

        for (int i = 0; i < g->cin; i++)
                for (int o = 0; o < g->cout; o++) {
                        const float *xv = x + 2 * (size_t)i * g->kept;
                        const float *gv = gy + 2 * (size_t)o * g->kept;
                        float *d = dw + 2 * ((size_t)i * (size_t)g->cout + (size_t)o) * g->modes;

                        /* mode j = b modes + r mw + k: block b, row r of the block, column k */
                        for (size_t b = 0; b < (size_t)g->blocks; b++, d += w - 2 * g->modes)
                                for (size_t r = 0; r < g->modes / (size_t)g->mw; r++)
                                        for (size_t k = 0; k < (size_t)g->mw; k++) {
                                                float c = mode_weight(g, k) * scale;

                                                d[0] += (xv[0] * gv[0] + xv[1] * gv[1]) * c;
                                                d[1] += (xv[0] * gv[1] - xv[1] * gv[0]) * c;
                                                xv += 2, gv += 2, d += 2;
                                        }
                }
}

/*
 * Z[i] = scale * sum over o of G[o] conj(W[i, o]), mode by mode, as mix_forward sums: input
 * @p i's into @p zi.
 */
static void mix_input_grad(const struct geom *g, const float *wt, const float *gy, float *zi,
                           int i, float scale)
{
        size_t w = (size_t)g->cin * (size_t)g->cout * g->modes * 2, n = 2 * g->kept;

        memset(zi, 0, sizeof(float) * n);
        for (int o = 0; o < g->cout; o++)
                for (size_t b = 0; b < (size_t)g->blocks; b++) {
                        const float *gv = gy + (size_t)o * n + 2 * b * g->modes;
                        const float *wv = wt + b * w + 2 * g->modes *
                                          ((size_t)i * (size_t)g->cout + (size_t)o);
                        float *zv = zi + 2 * b * g->modes;

                        for (size_t j = 0; j < 2 * g->modes; j += 2) {
                                zv[j] += gv[j] * wv[j] + gv[j + 1] * wv[j + 1];
                                zv[j + 1] += gv[j + 1] * wv[j] - gv[j] * wv[j + 1];
                        }
                }
        for (size_t j = 0; j < n; j++)
                zi[j] *= scale;
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
                const float *dyr = dy + (size_t)r * (size_t)l->out;
                struct room m = room_of(l, &g, r);

                /* X: the forward's, still in the row's room (its work used t, f, a and gs);
                 * in 3-D again from x (the same bits), its room being the dx spectra's */
                for (int i = 0; g.nd > 2 && i < g.cin; i++)
                        to_modes(&g, &p, &m, x + (size_t)r * (size_t)l->in + (size_t)i * g.npts,
                                 m.xs + 2 * (size_t)i * g.kept);
                for (int o = 0; o < g.cout; o++)
                        to_modes(&g, &p, &m, dyr + (size_t)o * g.npts,
                                 m.gs + 2 * (size_t)o * g.kept);
                mix_wgrad(&g, m.xs, m.gs, l->grad, scale);
                for (int i = 0; dx && i < g.cin; i++) {
                        /* 3-D: X is spent, its room takes the input gradient's spectra; else
                         * each one in a's kept columns, which from_modes() copies onto
                         * themselves (mode_at() is the identity there), X kept */
                        float *z = g.nd > 2 ? m.xs + 2 * (size_t)i * g.kept : m.a;

                        mix_input_grad(&g, l->param, m.gs, z, i, scale);
                        from_modes(&g, &p, &m, z,
                                   dx + (size_t)r * (size_t)l->in + (size_t)i * g.npts);
                }
        }
}

/* The ops of SpectralConv<N>d: the functions above with nd = N. */
#define SPECTRAL_OPS(N)                                                                        \
        static int sc##N##_shape(const struct strata_layer *l, int in,                       \
                                 struct strata_module_shape *s)                               \
        {                                                                                      \
                return spec_shape(l, in, N, s);                                                \
        }                                                                                      \
        static void sc##N##_init(struct strata_layer *l, uint64_t seed)                        \
        {                                                                                      \
                spec_fill(l, N, seed);                                                         \
        }                                                                                      \
        static void sc##N##_forward(struct strata_layer *l, const struct strata_step_ctx *c,   \
                                    const float *x, float *y, int rows)                        \
        {                                                                                      \
                (void)c;                                                                       \
                spec_forward(l, N, x, y, rows);                                                \
        }                                                                                      \
        static void sc##N##_backward(struct strata_layer *l, const struct strata_step_ctx *c,  \
                                     const float *x, const float *y, const float *dy,          \
                                     float *dx, int rows)                                      \
        {                                                                                      \
                (void)c, (void)y;                                                              \
                spec_backward(l, N, x, dy, dx, rows);                                          \
        }                                                                                      \
        const struct strata_module_ops strata_spectralconv##N##d = {                           \
                .name = "spectralconv" #N "d",                                                 \
                .shape = sc##N##_shape,                                                        \
                .init = sc##N##_init,                                                          \
                .forward = sc##N##_forward,                                                    \
                .backward = sc##N##_backward,                                                  \
        }

SPECTRAL_OPS(1);
SPECTRAL_OPS(2);
SPECTRAL_OPS(3);
