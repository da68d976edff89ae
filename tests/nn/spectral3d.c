/*
 * SpectralConv3d (decision 0072) against the reference FNO's definition evaluated in double
 * with direct sums (no FFT): X = rfftn(x) on the kept modes (the first and last modes1 planes
 * along D times the first and last modes2 rows along H, the first modes3 columns; weights1 low
 * D low H, weights2 high D low H, weights3 low D high H, weights4 high high), Y[o] = sum_i X[i]
 * W[i, o], y = irfftn(Y) (c_k 2 off the first and an even W's last column, scaled by 1 / N),
 * and its gradients by the chain rule. One call's forward and backward, three SGD steps from the
 * same weights within 1e-5 of the weights' largest magnitude, the groups' names and shapes,
 * no heap call as it runs, the same weights at twice the resolution, and the bad inputs:
 * modes past each axis's limit named, an extent FFTW would run with allocations, a flat input,
 * the model line's spectralconv3d(out, modes1, modes2, modes3) and its refusals.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"
#include "tools/heapcount.h"

#define ROWS 2
#define KMAX 512

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double xd[MODCALL_MAX], wd[MODCALL_MAX], yd[MODCALL_MAX], dyd[MODCALL_MAX];
static double dxd[MODCALL_MAX], dwd[MODCALL_MAX];

struct case3 {
        int cin, cout, n[3], m[3];
};

/* A kept mode: its index in the weights (block, j) and frequencies along D, H, W. */
struct mode {
        size_t at;
        int k[3];
};

static int points(const struct case3 *t)
{
        return t->n[0] * t->n[1] * t->n[2];
}

static size_t per_block(const struct case3 *t)
{
        return (size_t)t->m[0] * t->m[1] * t->m[2];
}

/* The kept modes in the module's order, each with the offset of weight (i 0, o 0). */
static int modes_of(const struct case3 *t, struct mode *md)
{
        int k = 0;

        for (int b = 0; b < 4; b++)
                for (int p = 0; p < t->m[0]; p++)
                        for (int q = 0; q < t->m[1]; q++)
                                for (int c = 0; c < t->m[2]; c++) {
                                        size_t j = ((size_t)p * t->m[1] + q) * t->m[2] + c;

                                        md[k].at = (size_t)b * t->cin * t->cout *
                                                           per_block(t) * 2 + 2 * j;
                                        md[k].k[0] = b & 1 ? t->n[0] - t->m[0] + p : p;
                                        md[k].k[1] = b & 2 ? t->n[1] - t->m[1] + q : q;
                                        md[k++].k[2] = c;
                                }
        return k;
}

static double phase(const struct case3 *t, const struct mode *md, int p)
{
        int z = p / (t->n[1] * t->n[2]), r = p / t->n[2] % t->n[1], c = p % t->n[2];

        return 2.0 * M_PI * ((double)md->k[0] * z / t->n[0] + (double)md->k[1] * r / t->n[1] +
                             (double)md->k[2] * c / t->n[2]);
}

static size_t widx(const struct case3 *t, const struct mode *md, int i, int o)
{
        return md->at + 2 * ((size_t)i * t->cout + o) * per_block(t);
}

/* The reference over ROWS rows: yd; with @p grad, dxd and dwd from dyd. */
static void reference(const struct case3 *t, int grad)
{
        static struct mode md[KMAX];
        static double xr[64], xi[64], gr[64], gi[64];
        int nm = modes_of(t, md), np = points(t), in = t->cin * np, out = t->cout * np;

        if (grad)
                memset(dwd, 0, sizeof(double) * 4 * t->cin * t->cout * per_block(t) * 2);
        memset(yd, 0, sizeof(double) * ROWS * out);
        memset(dxd, 0, sizeof(double) * ROWS * in);
        for (int r = 0; r < ROWS; r++)
                for (int k = 0; k < nm; k++) {
                        int last = t->n[2];
                        double c = (md[k].k[2] == 0 || (last % 2 == 0 && md[k].k[2] == last / 2)
                                    ? 1.0 : 2.0) / np;

                        for (int i = 0; i < t->cin; i++) {
                                xr[i] = xi[i] = 0.0;
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p);

                                        xr[i] += xd[r * in + i * np + p] * cos(a);
                                        xi[i] -= xd[r * in + i * np + p] * sin(a);
                                }
                        }
                        for (int o = 0; o < t->cout; o++) {
                                double vr = 0.0, vi = 0.0;

                                for (int i = 0; i < t->cin; i++) {
                                        const double *w = wd + widx(t, &md[k], i, o);

                                        vr += xr[i] * w[0] - xi[i] * w[1];
                                        vi += xr[i] * w[1] + xi[i] * w[0];
                                }
                                gr[o] = gi[o] = 0.0;
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p);
                                        double g = dyd[r * out + o * np + p];

                                        yd[r * out + o * np + p] += c * (vr * cos(a) - vi * sin(a));
                                        gr[o] += c * g * cos(a);
                                        gi[o] -= c * g * sin(a);
                                }
                        }
                        for (int i = 0; i < t->cin && grad; i++) {
                                double ar = 0.0, ai = 0.0;

                                for (int o = 0; o < t->cout; o++) {
                                        const double *w = wd + widx(t, &md[k], i, o);
                                        double *d = dwd + widx(t, &md[k], i, o);

                                        d[0] += gr[o] * xr[i] + gi[o] * xi[i];
                                        d[1] += -gr[o] * xi[i] + gi[o] * xr[i];
                                        ar += gr[o] * w[0] + gi[o] * w[1];
                                        ai += -gr[o] * w[1] + gi[o] * w[0];
                                }
                                for (int p = 0; p < np; p++) {
                                        double a = phase(t, &md[k], p);

                                        dxd[r * in + i * np + p] += ar * cos(a) - ai * sin(a);
                                }
                        }
                }
}

static int layer(struct modcall *m, const struct case3 *t, int rows, int check)
{
        struct strata_module desc = { .ops = &strata_spectralconv3d, .out = t->cout,
                                      .modes = { t->m[0], t->m[1], t->m[2] } };
        struct strata_dims in = { t->cin, 3, { t->n[0], t->n[1], t->n[2] } };

        if (!check)
                return modcall_shape(m, &desc, in);
        modcall_init(m, &desc, in, rows);
        return STRATA_OK;
}

static double rel_to_max(const float *a, const double *b, size_t n)
{
        double d = 0.0, mx = 0.0;

        for (size_t i = 0; i < n; i++) {
                d = fmax(d, fabs(a[i] - b[i]));
                mx = fmax(mx, fabs(b[i]));
        }
        return d / (mx > 0.0 ? mx : 1.0);
}

static const struct case3 cases[] = {
        { 2, 2, { 4, 6, 8 }, { 2, 3, 5 } },  /* every mode each axis allows, W/2 among them */
        { 1, 2, { 5, 4, 7 }, { 2, 1, 3 } },  /* odd D and W */
        { 2, 1, { 6, 2, 4 }, { 1, 1, 2 } },
};

Test(spectral3d, forward_backward_against_the_definition)
{
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                const struct case3 *t = &cases[c];
                struct modcall *m = &(struct modcall){ 0 };
                int in, out;

                layer(m, t, ROWS, 1);
                in = m->l.in;
                out = m->l.out;
                cr_assert_eq(out, t->cout * points(t));
                cr_assert_eq(m->l.out_dims.ndim, 3);
                cr_assert_eq(m->l.out_dims.size[2], t->n[2]);
                cr_assert_eq(m->s.ngroups, 4);
                cr_assert_str_eq(m->s.groups[3].name, "weights4");
                cr_assert_eq(m->s.groups[1].ndim, 6);
                cr_assert(m->s.groups[2].shape[2] == (size_t)t->m[0] &&
                          m->s.groups[2].shape[3] == (size_t)t->m[1] &&
                          m->s.groups[2].shape[4] == (size_t)t->m[2] &&
                          m->s.groups[2].shape[5] == 2);
                for (size_t i = 0; i < m->l.nparam; i++)
                        cr_assert(m->param[i] >= 0.0f && m->param[i] < 1.0f / (t->cin * t->cout));
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
                cr_assert_eq(m->l.failed, STRATA_OK);
                cr_assert_leq(modcall_rel_diff(y, yd, ROWS * out), 2e-6, "case %zu y: %g", c,
                              modcall_rel_diff(y, yd, ROWS * out));
                m->l.grad_fresh = 1;
                m->desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
                cr_assert_leq(modcall_rel_diff(dx, dxd, ROWS * in), 2e-6, "case %zu dx: %g", c,
                              modcall_rel_diff(dx, dxd, ROWS * in));
                cr_assert_leq(rel_to_max(m->grad, dwd, m->l.nparam), 2e-6, "case %zu dW: %g", c,
                              rel_to_max(m->grad, dwd, m->l.nparam));
        }
}

Test(spectral3d, three_sgd_steps_against_double)
{
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                const struct case3 *t = &cases[c];
                struct modcall *m = &(struct modcall){ 0 };
                static double target[MODCALL_MAX];
                int in, out;

                layer(m, t, ROWS, 1);
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
                cr_assert_leq(rel_to_max(m->param, wd, m->l.nparam), 1e-5,
                              "case %zu weights after 3 steps: %g", c,
                              rel_to_max(m->param, wd, m->l.nparam));
        }
}

Test(spectral3d, no_heap_as_it_runs)
{
        static const struct case3 grids[] = {
                { 1, 1, { 18, 18, 18 }, { 4, 4, 4 } }, { 1, 1, { 7, 9, 17 }, { 3, 4, 9 } },
                { 2, 1, { 2, 28, 10 }, { 1, 6, 6 } },
        };

        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        for (size_t c = 0; c < sizeof(grids) / sizeof(grids[0]); c++) {
                struct modcall *m = &(struct modcall){ 0 };
                long calls;

                layer(m, &grids[c], 1, 1);
                modcall_wave(x, m->l.in, 0.3, 0.1);
                strata_heapcount_start();
                m->desc.ops->forward(&m->l, &m->c, x, y, 1);
                m->l.grad_fresh = 1;
                m->desc.ops->backward(&m->l, &m->c, x, y, y, dx, 1);
                calls = strata_heapcount_stop();
                cr_assert_eq(m->l.failed, STRATA_OK);
                cr_assert_eq(calls, 0, "grid %zu: %ld heap calls", c, calls);
        }
}

/* A field of frequencies below the modes at 8^3 and 16^3: the fine output at even points. */
Test(spectral3d, a_finer_resolution_with_the_same_weights)
{
        struct case3 ca = { 1, 1, { 8, 8, 8 }, { 3, 3, 3 } };
        struct case3 cb = { 1, 1, { 16, 16, 16 }, { 3, 3, 3 } };
        struct modcall *a = &(struct modcall){ 0 }, *b = &(struct modcall){ 0 };
        static float xa[MODCALL_MAX], ya[MODCALL_MAX], yb[MODCALL_MAX];

        layer(a, &ca, 1, 1);
        layer(b, &cb, 1, 1);
        cr_assert_eq(a->l.nparam, b->l.nparam);
        memcpy(b->param, a->param, sizeof(float) * a->l.nparam);
        for (int p = 0; p < 4096; p++) {
                double z = (p / 256) / 16.0, r = (p / 16 % 16) / 16.0, c = (p % 16) / 16.0;
                double v = 0.2 + cos(2 * M_PI * c) + 0.5 * sin(2 * M_PI * (2 * z - r)) +
                           0.3 * cos(2 * M_PI * (z + 2 * r + c));

                x[p] = (float)v;
                if (p / 256 % 2 == 0 && p / 16 % 2 == 0 && p % 2 == 0)
                        xa[(p / 512) * 64 + (p / 32 % 8) * 8 + p % 16 / 2] = (float)v;
        }
        a->desc.ops->forward(&a->l, &a->c, xa, ya, 1);
        b->desc.ops->forward(&b->l, &b->c, x, yb, 1);
        for (int p = 0; p < 512; p++) {
                float fine = yb[(p / 64) * 512 + (p / 8 % 8) * 32 + (p % 8) * 2];

                cr_assert(fabsf(ya[p] - fine) <= 1e-5f, "point %d: %g at N, %g at 2N", p, ya[p],
                          fine);
        }
}

static void refused(struct case3 t, int status, const char *what)
{
        struct modcall *m = &(struct modcall){ 0 };

        cr_assert_eq(layer(m, &t, 1, 0), status, "%s: %s", what, strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), what), "%s", strata_last_error());
}

Test(spectral3d, bad_modes_and_extents_named)
{
        struct strata_module desc = { .ops = &strata_spectralconv3d, .out = 2,
                                      .modes = { 2, 2, 2 } };
        struct modcall *m = &(struct modcall){ 0 };

        refused((struct case3){ 1, 1, { 6, 8, 8 }, { 4, 2, 2 } }, STRATA_EINVAL,
                "modes1 4: the first and the last modes1 of 6 planes may not overlap "
                "(modes1 1 to 3)");
        refused((struct case3){ 1, 1, { 6, 8, 8 }, { 2, 5, 2 } }, STRATA_EINVAL,
                "modes2 5: the first and the last modes2 of 8 rows");
        refused((struct case3){ 1, 1, { 6, 8, 8 }, { 2, 2, 6 } }, STRATA_EINVAL,
                "modes3 6: 8 columns have 5 frequencies (modes3 1 to 5)");
        refused((struct case3){ 1, 1, { 6, 8, 8 }, { 0, 2, 2 } }, STRATA_EINVAL, "modes1 0");
        refused((struct case3){ 1, 1, { 6, 8, 8 }, { 2, 2, -1 } }, STRATA_EINVAL, "modes3 -1");
        refused((struct case3){ 1, 1, { 74, 8, 8 }, { 2, 2, 2 } }, STRATA_EINVAL, "D 74");
        refused((struct case3){ 1, 1, { 6, 8, 37 }, { 2, 2, 2 } }, STRATA_EINVAL, "W 37");
        refused((struct case3){ 1, 0, { 6, 8, 8 }, { 2, 2, 2 } }, STRATA_EINVAL,
                "out channels 0");
        cr_assert_eq(modcall_shape(m, &desc, (struct strata_dims){ 1, 2, { 8, 8 } }),
                     STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "3 spatial dimensions (C, D, H, W)"),
                           "%s", strata_last_error());
}

Test(spectral3d, the_model_line)
{
        struct strata_module mods[4];
        struct strata_model model;

        cr_assert_eq(strata_model_parse("input(2,4,6,8) spectralconv3d(3,2,modes3=4,modes2=1)",
                                        mods, 4, &model), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(mods[0].ops, &strata_spectralconv3d);
        cr_assert(mods[0].out == 3 && mods[0].modes[0] == 2 && mods[0].modes[1] == 1 &&
                  mods[0].modes[2] == 4);
        cr_assert_eq(strata_model_parse("input(2,4,6,8) spectralconv3d(3,2,2)", mods, 4,
                                        &model), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "modes1, modes2 and modes3 are missing"),
                           "%s", strata_last_error());
        cr_assert_eq(strata_model_parse("input(2,4,6,8) spectralconv3d(3,2,2,0)", mods, 4,
                                        &model), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "modes3 '0' is not a positive count"),
                           "%s", strata_last_error());
}
