/*
 * Upsample against PyTorch's definition evaluated in the test: with integer scale s, nearest
 * reads input min(floor(o * (float)(1 / s)), in - 1) (PyTorch's nearest_idx, in float);
 * linear (bilinear, trilinear: the product over the dimensions) reads, in double,
 * src = max(0, (o + 0.5) / s - 0.5) between floor(src) and the next input (the last one at
 * the edge), weighted by their distances (align_corners=False). The backward is the adjoint:
 * each input receives the outputs' gradients times the weights it was read with. 1-D, 2-D
 * and 3-D, mixed scales per dimension, odd extents; PyTorch's own values.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"

#define ROWS 2

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double want[MODCALL_MAX], dwant[MODCALL_MAX];

struct up_case {
        int mode, nd, c, in[3], scale[3];
};

/* The two inputs (or one) output @p o reads in a dimension of @p in scaled by @p s. */
static int ref_taps(int mode, int in, int s, int o, int *at, double *w)
{
        double src;

        if (mode == STRATA_UPSAMPLE_NEAREST) { /* nearest_idx: floorf(o * scale), scale float */
                at[0] = (int)floorf((float)o * (float)(1.0 / s));
                at[0] = at[0] < in - 1 ? at[0] : in - 1;
                w[0] = 1.0;
                return 1;
        }
        src = fmax(0.0, (o + 0.5) / s - 0.5);
        at[0] = (int)floor(src);
        at[1] = at[0] + 1 < in ? at[0] + 1 : at[0];
        w[1] = src - at[0];
        w[0] = 1.0 - w[1];
        return 2;
}

static void run_case(const struct up_case *t)
{
        struct strata_module desc = { .ops = &strata_upsample, .mode = t->mode };
        struct strata_dims in = { .channels = t->c, .ndim = t->nd };
        struct modcall *m = &(struct modcall){ 0 };
        int e[3] = { 1, 1, 1 }, f[3] = { 1, 1, 1 }, s[3] = { 1, 1, 1 }, ins, outs;

        for (int i = 0; i < t->nd; i++) {
                in.size[i] = e[3 - t->nd + i] = t->in[i];
                desc.scale[i] = s[3 - t->nd + i] = t->scale[i];
                f[3 - t->nd + i] = t->in[i] * t->scale[i];
                cr_assert_gt(t->scale[i], 0);
        }
        ins = e[0] * e[1] * e[2];
        outs = f[0] * f[1] * f[2];
        modcall_init(m, &desc, in, ROWS);
        cr_assert_eq(m->s.out, t->c * outs);
        for (int i = 0; i < t->nd; i++)
                cr_assert_eq(m->s.out_dims.size[i], t->in[i] * t->scale[i]);
        modcall_wave(x, ROWS * t->c * ins, 0.37, 0.1);
        modcall_wave(dy, ROWS * t->c * outs, 0.91, 0.2);
        memset(dwant, 0, sizeof(dwant));
        for (int pl = 0; pl < ROWS * t->c; pl++)
                for (int n = 0; n < outs; n++) {
                        int o[3] = { n / (f[1] * f[2]), n / f[2] % f[1], n % f[2] };
                        int at[3][2], k[3];
                        double w[3][2], acc = 0.0;

                        for (int j = 0; j < 3; j++)
                                k[j] = j < 3 - t->nd
                                               ? ref_taps(STRATA_UPSAMPLE_NEAREST, 1, 1, 0,
                                                          at[j], w[j])
                                               : ref_taps(t->mode, e[j], s[j], o[j], at[j],
                                                          w[j]);
                        for (int a = 0; a < k[0]; a++)
                                for (int b = 0; b < k[1]; b++)
                                        for (int c = 0; c < k[2]; c++) {
                                                int i = (at[0][a] * e[1] + at[1][b]) * e[2] +
                                                        at[2][c];
                                                double wt = w[0][a] * w[1][b] * w[2][c];

                                                acc += wt * x[pl * ins + i];
                                                dwant[pl * ins + i] += wt * dy[pl * outs + n];
                                        }
                        want[pl * outs + n] = acc;
                }
        desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        cr_assert_leq(modcall_rel_diff(y, want, ROWS * m->l.out), 1e-7, "mode %d, %d-D: y",
                      t->mode, t->nd);
        desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        cr_assert_leq(modcall_rel_diff(dx, dwant, ROWS * m->l.in), 1e-6, "mode %d, %d-D: dx",
                      t->mode, t->nd);
}

Test(upsample, matches_the_definition)
{
        static const struct up_case cases[] = {
                { STRATA_UPSAMPLE_NEAREST, 1, 2, { 5 }, { 2 } },
                { STRATA_UPSAMPLE_LINEAR, 1, 2, { 5 }, { 3 } },
                { STRATA_UPSAMPLE_LINEAR, 1, 1, { 1 }, { 4 } },
                { STRATA_UPSAMPLE_NEAREST, 2, 3, { 3, 4 }, { 2, 3 } },
                { STRATA_UPSAMPLE_LINEAR, 2, 2, { 3, 5 }, { 2, 3 } },
                { STRATA_UPSAMPLE_LINEAR, 2, 1, { 7, 1 }, { 5, 2 } },
                { STRATA_UPSAMPLE_NEAREST, 3, 2, { 2, 3, 2 }, { 2, 1, 3 } },
                { STRATA_UPSAMPLE_LINEAR, 3, 2, { 2, 3, 2 }, { 2, 1, 3 } },
                { STRATA_UPSAMPLE_LINEAR, 3, 1, { 3, 3, 3 }, { 2, 2, 2 } },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                run_case(&cases[i]);
}

/* F.interpolate(torch.arange(1., 5.).view(1, 1, 4), scale_factor=2, mode='linear'). */
Test(upsample, pytorch_values)
{
        static const float in4[4] = { 1, 2, 3, 4 }, in2[2] = { 0, 3 };
        static const float lin[8] = { 1.0f, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4.0f };
        static const float lin3[6] = { 0, 0, 1, 2, 3, 3 }, near[8] = { 1, 1, 2, 2, 3, 3, 4, 4 };
        struct strata_module desc = { .ops = &strata_upsample, .mode = STRATA_UPSAMPLE_LINEAR };
        struct modcall *m = &(struct modcall){ 0 };

        modcall_init(m, &desc, (struct strata_dims){ 1, 1, { 4 } }, 1); /* scale 0: 2 */
        desc.ops->forward(&m->l, &m->c, in4, y, 1);
        cr_assert_eq(memcmp(y, lin, sizeof(lin)), 0);
        desc.scale[0] = 3;
        modcall_init(m, &desc, (struct strata_dims){ 1, 1, { 2 } }, 1);
        desc.ops->forward(&m->l, &m->c, in2, y, 1);
        cr_assert_eq(memcmp(y, lin3, sizeof(lin3)), 0);
        desc = (struct strata_module){ .ops = &strata_upsample };
        modcall_init(m, &desc, (struct strata_dims){ 1, 1, { 4 } }, 1);
        desc.ops->forward(&m->l, &m->c, in4, y, 1);
        cr_assert_eq(memcmp(y, near, sizeof(near)), 0);
}
