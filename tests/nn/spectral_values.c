/*
 * SpectralConv1d and SpectralConv2d against the reference FNO's definition evaluated in double
 * in the test with direct sums (no FFT): X = rfft(x) on the kept modes, Y[o] = sum_i X[i] W[i, o],
 * y = irfft(Y) (the imaginary parts of the first and, for an even extent, the last column
 * ignored, scaled by 1 / N), and the gradients of that formula by the chain rule in real
 * arithmetic. Forward and backward of one call, then three SGD steps on an MSE objective from
 * the same weights, Strata in float and the reference in double: within 1e-5 of the weights'
 * largest magnitude. Odd and even extents, modes up to the most each extent allows. The same
 * weights also run a model of twice the resolution: a band-limited input sampled at 2N points
 * gives, at the even points, the output of N points.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"

#define ROWS 3
#define NMAX 512

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double xd[MODCALL_MAX], wd[MODCALL_MAX], yd[MODCALL_MAX], dyd[MODCALL_MAX];
static double dxd[MODCALL_MAX], dwd[MODCALL_MAX];

/* A case: dimensions, channels, extents (1-D: n[0]), modes (1-D: m[0]). */
struct spec_case {
        int nd, cin, cout, n[2], m[2];
};

/* The kept modes in the module's order: block, frequencies (k1 along H, k2 along the last). */
struct mode {
        int b, j, k1, k2;
};

static int modes_of(const struct spec_case *t, struct mode *md)
{
        int k = 0;

        for (int b = 0; b < t->nd; b++)
                for (int j = 0; j < t->m[0] * (t->nd > 1 ? t->m[1] : 1); j++) {
                        int r = t->nd > 1 ? j / t->m[1] : 0, c = t->nd > 1 ? j % t->m[1] : j;

                        md[k++] = (struct mode){ b, j, b == 0 ? r : t->n[0] - t->m[0] + r, c };
                }
        return k;
}

static int points(const struct spec_case *t)
{
        return t->n[0] * (t->nd > 1 ? t->n[1] : 1);
}

/* The phase of point p at mode md: 2 pi (k1 n1 / H + k2 n2 / W). */
static double phase(const struct spec_case *t, const struct mode *md, int p)
{
        if (t->nd == 1)
                return 2.0 * M_PI * md->k2 * p / t->n[0];
        return 2.0 * M_PI * ((double)md->k1 * (p / t->n[1]) / t->n[0] +
                             (double)md->k2 * (p % t->n[1]) / t->n[1]);
}

/* c_k: 1 on the first column and an even extent's last, else 2. */
static double ck(const struct spec_case *t, const struct mode *md)
{
        int last = t->n[t->nd - 1];

        return md->k2 == 0 || (last % 2 == 0 && md->k2 == last / 2) ? 1.0 : 2.0;
}

/* Weight (re, im) of (b, i, o, j) in the module's layout. */
static size_t widx(const struct spec_case *t, const struct mode *md, int i, int o)
{
        size_t per = (size_t)t->m[0] * (t->nd > 1 ? t->m[1] : 1);
        size_t w = (size_t)t->cin * t->cout * per * 2;

        return (size_t)md->b * w + 2 * (((size_t)i * t->cout + o) * per + md->j);
}

/*
 * The reference over ROWS rows: yd from xd and wd; with @p grad, dxd and dwd (summed over
 * rows) from dyd.
 */
static void reference(const struct spec_case *t, int grad)
{
        static struct mode md[NMAX];
        static double xr[NMAX], xi[NMAX], gr[NMAX], gi[NMAX];
        int nm = modes_of(t, md), np = points(t), in = t->cin * np, out = t->cout * np;
        size_t nw = (size_t)t->nd * t->cin * t->cout * (size_t)nm / t->nd * 2;

        if (grad)
                memset(dwd, 0, sizeof(double) * nw);
        for (int r = 0; r < ROWS; r++) {
                for (int q = 0; q < out; q++)
                        yd[r * out + q] = 0.0;
                for (int q = 0; q < in && grad; q++)
                        dxd[r * in + q] = 0.0;
                for (int k = 0; k < nm; k++) {
                        /* X[i] at this mode, Y[o] and its gradient dY[o] */
                        for (int i = 0; i < t->cin; i++) {
                                xr[i] = xi[i] = 0.0;
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p), v = xd[r * in + i * np + p];

                                        xr[i] += v * cos(a);
                                        xi[i] -= v * sin(a);
                                }
                        }
                        for (int o = 0; o < t->cout; o++) {
                                double yr = 0.0, yi = 0.0, c = ck(t, &md[k]) / np;

                                for (int i = 0; i < t->cin; i++) {
                                        const double *w = wd + widx(t, &md[k], i, o);

                                        yr += xr[i] * w[0] - xi[i] * w[1];
                                        yi += xr[i] * w[1] + xi[i] * w[0];
                                }
                                gr[o] = gi[o] = 0.0;
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p);

                                        yd[r * out + o * np + p] += c * (yr * cos(a) -
                                                                         yi * sin(a));
                                        gr[o] += c * dyd[r * out + o * np + p] * cos(a);
                                        gi[o] -= c * dyd[r * out + o * np + p] * sin(a);
                                }
                        }
                        if (!grad)
                                continue;
                        for (int i = 0; i < t->cin; i++) {
                                double ar = 0.0, ai = 0.0;

                                for (int o = 0; o < t->cout; o++) {
                                        const double *w = wd + widx(t, &md[k], i, o);
                                        double *d = dwd + widx(t, &md[k], i, o);

                                        /* Yr = Xr Wr - Xi Wi, Yi = Xr Wi + Xi Wr */
                                        d[0] += gr[o] * xr[i] + gi[o] * xi[i];
                                        d[1] += -gr[o] * xi[i] + gi[o] * xr[i];
                                        ar += gr[o] * w[0] + gi[o] * w[1];
                                        ai += -gr[o] * w[1] + gi[o] * w[0];
                                }
                                /* Xr = sum x cos, Xi = -sum x sin */
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p);

                                        dxd[r * in + i * np + p] += ar * cos(a) - ai * sin(a);
                                }
                        }
                }
        }
}

static void layer(struct modcall *m, const struct spec_case *t, int rows)
{
        struct strata_module desc = { .ops = t->nd == 1 ? &strata_spectralconv1d
                                                        : &strata_spectralconv2d,
                                      .out = t->cout, .modes = { t->m[0], t->m[1] } };
        struct strata_dims in = { t->cin, t->nd, { t->n[0], t->n[1] } };

        modcall_init(m, &desc, in, rows);
}

/* Largest |a - b| over the largest |b|. */
static double rel_to_max(const float *a, const double *b, size_t n)
{
        double d = 0.0, mx = 0.0;

        for (size_t i = 0; i < n; i++) {
                d = fmax(d, fabs(a[i] - b[i]));
                mx = fmax(mx, fabs(b[i]));
        }
        return d / (mx > 0.0 ? mx : 1.0);
}

static void one_call(const struct spec_case *t)
{
        struct modcall *m = &(struct modcall){ 0 };
        int in, out;

        layer(m, t, ROWS);
        in = m->l.in;
        out = m->l.out;
        cr_assert_eq(out, t->cout * points(t));
        cr_assert_eq(m->s.ngroups, t->nd);
        cr_assert_str_eq(m->s.groups[0].name, "weights1");
        cr_assert_eq(m->s.groups[0].ndim, 3 + t->nd);
        cr_assert_eq(m->s.groups[0].shape[2 + t->nd], 2);
        for (size_t i = 0; i < m->l.nparam; i++)
                cr_assert(m->param[i] >= 0.0f && m->param[i] < 1.0f / (t->cin * t->cout),
                          "init %zu: %g", i, m->param[i]);
        modcall_wave(x, ROWS * in, 0.37, 0.1);
        modcall_wave(dy, ROWS * out, 0.61, 0.3);
        modcall_wave(m->param, (int)m->l.nparam, 0.53, 0.4);
        for (int i = 0; i < ROWS * in; i++)
                xd[i] = x[i];
        for (int i = 0; i < ROWS * out; i++)
                dyd[i] = dy[i];
        for (size_t i = 0; i < m->l.nparam; i++)
                wd[i] = m->param[i];
        reference(t, 1);
        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        cr_assert_leq(modcall_rel_diff(y, yd, ROWS * out), 2e-6, "y: %g",
                      modcall_rel_diff(y, yd, ROWS * out));
        m->l.grad_fresh = 1;
        m->desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        cr_assert_leq(modcall_rel_diff(dx, dxd, ROWS * in), 2e-6, "dx: %g",
                      modcall_rel_diff(dx, dxd, ROWS * in));
        cr_assert_leq(rel_to_max(m->grad, dwd, m->l.nparam), 2e-6, "dW: %g",
                      rel_to_max(m->grad, dwd, m->l.nparam));
        /* a second backward adds */
        m->l.grad_fresh = 0;
        m->desc.ops->backward(&m->l, &m->c, x, y, dy, NULL, ROWS);
        for (size_t i = 0; i < m->l.nparam; i++)
                dwd[i] *= 2.0;
        cr_assert_leq(rel_to_max(m->grad, dwd, m->l.nparam), 2e-6, "2 dW");
}

/* Three SGD steps (lr 0.5) on 0.5 sum (y - target)^2: float module, double reference. */
static void sgd_steps(const struct spec_case *t)
{
        struct modcall *m = &(struct modcall){ 0 };
        static double target[MODCALL_MAX];
        int in, out;

        layer(m, t, ROWS);
        in = m->l.in;
        out = m->l.out;
        modcall_wave(x, ROWS * in, 0.29, 0.7);
        for (int i = 0; i < ROWS * in; i++)
                xd[i] = x[i];
        for (int i = 0; i < ROWS * out; i++)
                target[i] = sin(0.17 * i);
        for (size_t i = 0; i < m->l.nparam; i++)
                wd[i] = m->param[i];
        for (int s = 0; s < 3; s++) {
                m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
                for (int i = 0; i < ROWS * out; i++)
                        dy[i] = y[i] - (float)target[i];
                m->l.grad_fresh = 1;
                m->desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
                for (size_t i = 0; i < m->l.nparam; i++)
                        m->param[i] -= 0.5f * m->grad[i];
                reference(t, 0);
                for (int i = 0; i < ROWS * out; i++)
                        dyd[i] = yd[i] - target[i];
                reference(t, 1);
                for (size_t i = 0; i < m->l.nparam; i++)
                        wd[i] -= 0.5 * dwd[i];
        }
        cr_assert_leq(rel_to_max(m->param, wd, m->l.nparam), 1e-5, "weights after 3 steps: %g",
                      rel_to_max(m->param, wd, m->l.nparam));
}

static const struct spec_case cases[] = {
        { 1, 2, 3, { 16 }, { 5 } },      { 1, 2, 3, { 15 }, { 8 } },  /* odd: all 8 */
        { 1, 3, 2, { 16 }, { 9 } },      /* the last frequency, N / 2 */
        { 2, 2, 3, { 8, 6 }, { 2, 3 } }, { 2, 2, 3, { 7, 8 }, { 3, 5 } }, /* both at most */
        { 2, 1, 2, { 6, 5 }, { 1, 2 } }, { 2, 2, 2, { 4, 4 }, { 2, 1 } },
};

Test(spectral_values, forward_backward_against_the_definition)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                one_call(&cases[i]);
}

Test(spectral_values, three_sgd_steps_against_double)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                sgd_steps(&cases[i]);
}

/*
 * The same weights at twice the resolution: x(s) = sum of the frequencies 0..3 (below the
 * modes), sampled at N and 2N points. The layer keeps only those, so y at 2N points, read at
 * the even points, is y at N points.
 */
Test(spectral_values, a_finer_resolution_with_the_same_weights)
{
        for (int nd = 1; nd <= 2; nd++) {
                struct modcall *a = &(struct modcall){ 0 }, *b = &(struct modcall){ 0 };
                struct spec_case ca = { nd, 2, 2, { 16, 16 }, { 5, 5 } };
                struct spec_case cb = { nd, 2, 2, { 32, 32 }, { 5, 5 } };
                static float xa[MODCALL_MAX], xb[MODCALL_MAX], ya[MODCALL_MAX], yb[MODCALL_MAX];
                int pa = points(&ca), pb = points(&cb), w = nd > 1 ? 16 : 1;

                if (nd == 1)
                        ca.n[1] = cb.n[1] = 0;
                layer(a, &ca, 1);
                layer(b, &cb, 1);
                cr_assert_eq(a->l.nparam, b->l.nparam, "the weights do not depend on the size");
                memcpy(b->param, a->param, sizeof(float) * a->l.nparam);
                for (int c = 0; c < 2; c++)
                        for (int p = 0; p < pb; p++) {
                                int i1 = nd > 1 ? p / (2 * w) : 0, i2 = nd > 1 ? p % (2 * w) : p;
                                double s1 = (double)i1 / (nd > 1 ? 32 : 1), s2 = i2 / 32.0;
                                double v = 0.3 + cos(2 * M_PI * (s2 + c)) +
                                           0.5 * sin(2 * M_PI * (3 * s2 + 2 * s1)) +
                                           0.25 * cos(2 * M_PI * (2 * s1 - s2));

                                xb[c * pb + p] = (float)v;
                                if (i2 % 2 == 0 && i1 % 2 == 0)
                                        xa[c * pa + (i1 / 2) * w + i2 / 2] = (float)v;
                        }
                a->desc.ops->forward(&a->l, &a->c, xa, ya, 1);
                b->desc.ops->forward(&b->l, &b->c, xb, yb, 1);
                cr_assert_eq(a->l.failed, STRATA_OK);
                cr_assert_eq(b->l.failed, STRATA_OK);
                for (int c = 0; c < 2; c++)
                        for (int p = 0; p < pa; p++) {
                                int i1 = nd > 1 ? p / w : 0, i2 = nd > 1 ? p % w : p;
                                float fine = yb[c * pb + (2 * i1) * (2 * w) * (nd > 1) +
                                                2 * i2];

                                cr_assert(fabsf(ya[c * pa + p] - fine) <= 1e-5f,
                                          "%dd channel %d point %d: %g at N, %g at 2N", nd, c,
                                          p, ya[c * pa + p], fine);
                        }
        }
}
