/*
 * AvgPool1d/2d/3d against PyTorch's definition evaluated in double in the test
 * (count_include_pad=True, ceil_mode=False): each output the sum of the inputs of its window
 * inside the sample over the window's size with its padding; the backward gives each of those
 * inputs the output's gradient over that size. Odd sizes, strides and padding in 1-D, 2-D
 * and 3-D, over rows and channels; the defaults; values at the padded edge.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"

#define ROWS 2

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double want[MODCALL_MAX], dwant[MODCALL_MAX];

/*
 * Output @p o of the channel at @p xc: PyTorch's window [o s - p, min(o s - p + k, in + p)),
 * its size the divisor, then clipped to the sample. The gradient @p g goes to dxc.
 */
static double ref_avg(const struct pool_case *t, const float *xc, const int *o, double g,
                      double *dxc)
{
        int lo[3] = { 0, 0, 0 }, hi[3] = { 1, 1, 1 }, e[3] = { 1, 1, 1 };
        double size = 1.0, sum = 0.0;

        for (int i = 0; i < t->nd; i++) {
                int j = 3 - t->nd + i, a = o[i] * t->s[i] - t->p[i];
                int b = a + t->k[i] < t->in[i] + t->p[i] ? a + t->k[i] : t->in[i] + t->p[i];

                size *= b - a;
                lo[j] = a < 0 ? 0 : a;
                hi[j] = b > t->in[i] ? t->in[i] : b;
                e[j] = t->in[i];
        }
        for (int a = lo[0]; a < hi[0]; a++)
                for (int b = lo[1]; b < hi[1]; b++)
                        for (int c = lo[2]; c < hi[2]; c++) {
                                sum += xc[(a * e[1] + b) * e[2] + c];
                                dxc[(a * e[1] + b) * e[2] + c] += g / size;
                        }
        return sum / size;
}

static void run_case(const struct pool_case *t)
{
        struct modcall *m = &(struct modcall){ 0 };
        int ins, outs, o[3];

        pool_case_layer(m, t, ROWS, &ins, &outs);
        cr_assert_eq(m->s.aux_per_row, 0);
        modcall_wave(x, ROWS * ins * t->c, 0.37, 0.1);
        modcall_wave(dy, ROWS * m->l.out, 0.91, 0.2);
        memset(dwant, 0, sizeof(dwant));
        for (int pl = 0; pl < ROWS * t->c; pl++)
                for (int n = 0; n < outs; n++) {
                        pool_case_coords(t, n, o);
                        want[pl * outs + n] = ref_avg(t, x + pl * ins, o, dy[pl * outs + n],
                                                      dwant + pl * ins);
                }
        t->ops->forward(&m->l, &m->c, x, y, ROWS);
        cr_assert_leq(modcall_rel_diff(y, want, ROWS * m->l.out), 1e-7, "%s y", t->ops->name);
        t->ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        cr_assert_leq(modcall_rel_diff(dx, dwant, ROWS * m->l.in), 1e-6, "%s dx",
                      t->ops->name);
}

Test(avgpool, matches_the_definition)
{
        static const struct pool_case cases[] = {
                { &strata_avgpool1d, 1, 2, { 11 }, { 3 }, { 2 }, { 1 }, { 0 } },
                { &strata_avgpool1d, 1, 1, { 9 }, { 4 }, { 1 }, { 2 }, { 0 } },
                { &strata_avgpool2d, 2, 3, { 7, 9 }, { 3, 2 }, { 2, 1 }, { 1, 0 }, { 0 } },
                { &strata_avgpool2d, 2, 2, { 8, 8 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 0 } },
                { &strata_avgpool2d, 2, 1, { 5, 6 }, { 5, 3 }, { 3, 2 }, { 2, 1 }, { 0 } },
                { &strata_avgpool3d, 3, 2, { 5, 6, 7 }, { 2, 3, 2 }, { 1, 2, 2 },
                  { 1, 1, 0 }, { 0 } },
                { &strata_avgpool3d, 3, 1, { 4, 5, 3 }, { 3, 2, 3 }, { 2, 1, 3 },
                  { 1, 0, 1 }, { 0 } },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                run_case(&cases[i]);
}

/* Every accepted combination of small extents, kernels, strides and padding. */
Test(avgpool, sweep)
{
        static const struct strata_module_ops *const ops[3] = {
                &strata_avgpool1d, &strata_avgpool2d, &strata_avgpool3d };

        cr_assert_gt(pool_case_sweep(ops, 0, run_case), 100);
}

/* Padding counts in the divisor: AvgPool1d(3, stride 1, padding 1) over ones. */
Test(avgpool, padding_counts_in_the_divisor)
{
        struct strata_module desc = { .ops = &strata_avgpool1d, .kernel = { 3 },
                                      .stride = { 1 }, .padding = { 1 } };
        struct modcall *m = &(struct modcall){ 0 };
        const float ones[4] = { 1, 1, 1, 1 }, g[4] = { 3, 3, 3, 3 };

        modcall_init(m, &desc, (struct strata_dims){ 1, 1, { 4 } }, 1);
        desc.ops->forward(&m->l, &m->c, ones, y, 1);
        cr_assert_float_eq(y[0], 2.0f / 3.0f, 1e-7);
        cr_assert_eq(y[1], 1.0f);
        cr_assert_eq(y[2], 1.0f);
        cr_assert_float_eq(y[3], 2.0f / 3.0f, 1e-7);
        desc.ops->backward(&m->l, &m->c, ones, y, g, dx, 1);
        cr_assert_eq(dx[0], 2.0f);
        cr_assert_eq(dx[1], 3.0f);
        cr_assert_eq(dx[3], 2.0f);
}
