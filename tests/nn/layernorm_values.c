/*
 * LayerNorm over the whole sample against PyTorch's definition evaluated in double in the
 * test: y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance of the row;
 * dx, dweight and dbias from the analytic gradient. Its groups are PyTorch's (weight and bias
 * shaped as the normalized shape); init 1 and 0; eps 0 is 1e-5; a second backward adds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"

#define ROWS 4

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double want[MODCALL_MAX], dxw[MODCALL_MAX], dw[MODCALL_MAX], db[MODCALL_MAX];

/* The reference over @p rows rows of @p f features with eps @p eps. */
static void reference(const struct modcall *m, int f, double eps)
{
        const float *w = m->param, *b = m->param + f;

        memset(dw, 0, sizeof(dw));
        memset(db, 0, sizeof(db));
        for (int r = 0; r < ROWS; r++) {
                const float *xr = x + r * f, *g = dy + r * f;
                double mean = 0.0, var = 0.0, rstd, a = 0.0, bsum = 0.0;

                for (int j = 0; j < f; j++)
                        mean += xr[j] / (double)f;
                for (int j = 0; j < f; j++)
                        var += (xr[j] - mean) * (xr[j] - mean) / f;
                rstd = 1.0 / sqrt(var + eps);
                for (int j = 0; j < f; j++) {
                        double xh = (xr[j] - mean) * rstd;

                        want[r * f + j] = xh * w[j] + b[j];
                        dw[j] += g[j] * xh;
                        db[j] += g[j];
                        a += g[j] * w[j];
                        bsum += g[j] * w[j] * xh;
                }
                for (int j = 0; j < f; j++)
                        dxw[r * f + j] = rstd * (g[j] * w[j] - a / f -
                                                 (xr[j] - mean) * rstd * bsum / f);
        }
}

static void run(struct strata_dims in, float eps)
{
        struct strata_module desc = { .ops = &strata_layernorm, .eps = eps };
        struct modcall *m = &(struct modcall){ 0 };
        int f = modcall_count(in);

        modcall_init(m, &desc, in, ROWS);
        cr_assert_eq(m->s.params, 2 * (size_t)f);
        for (int j = 0; j < f; j++)
                cr_assert(m->param[j] == 1.0f && m->param[f + j] == 0.0f, "init");
        modcall_wave(m->param, 2 * f, 0.53, 0.4);
        modcall_wave(x, ROWS * f, 0.37, 0.1);
        for (int i = 0; i < ROWS * f; i++)
                x[i] = 3.0f * x[i] + 0.5f * (float)(i / f); /* a mean per row */
        modcall_wave(dy, ROWS * f, 0.91, 0.2);
        reference(m, f, eps > 0.0f ? eps : 1e-5);
        desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        cr_assert_leq(modcall_rel_diff(y, want, ROWS * f), 1e-6, "y");
        desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        cr_assert_leq(modcall_rel_diff(dx, dxw, ROWS * f), 1e-6, "dx");
        cr_assert_leq(modcall_rel_diff(m->grad, dw, f), 1e-6, "dweight");
        cr_assert_leq(modcall_rel_diff(m->grad + f, db, f), 1e-6, "dbias");
        m->l.grad_fresh = 0; /* the next backward adds onto them */
        desc.ops->backward(&m->l, &m->c, x, y, dy, NULL, ROWS);
        for (int j = 0; j < f; j++) {
                dw[j] *= 2.0;
                db[j] *= 2.0;
        }
        cr_assert_leq(modcall_rel_diff(m->grad, dw, f), 1e-6, "dweight accumulated");
        cr_assert_leq(modcall_rel_diff(m->grad + f, db, f), 1e-6, "dbias accumulated");
}

Test(layernorm, matches_the_definition)
{
        run((struct strata_dims){ 10, 0, { 0 } }, 0.0f);
        run((struct strata_dims){ 3, 1, { 7 } }, 1e-3f);
        run((struct strata_dims){ 2, 2, { 5, 3 } }, 0.0f);
        run((struct strata_dims){ 2, 3, { 3, 2, 5 } }, 0.5f);
}

/* weight and bias as PyTorch's LayerNorm([C, H, W]) holds them; flat: LayerNorm(F). */
Test(layernorm, groups_have_the_normalized_shape)
{
        struct strata_module desc = { .ops = &strata_layernorm };
        struct modcall *m = &(struct modcall){ 0 };

        modcall_init(m, &desc, (struct strata_dims){ 2, 2, { 5, 3 } }, 1);
        cr_assert_eq(m->s.ngroups, 2);
        cr_assert_str_eq(m->s.groups[0].name, "weight");
        cr_assert_str_eq(m->s.groups[1].name, "bias");
        cr_assert_eq(m->s.groups[1].role, STRATA_ROLE_BIAS);
        for (int g = 0; g < 2; g++) {
                cr_assert_eq(m->s.groups[g].ndim, 3);
                cr_assert_eq(m->s.groups[g].count, 30);
                cr_assert_eq(m->s.groups[g].shape[0], 2);
                cr_assert_eq(m->s.groups[g].shape[1], 5);
                cr_assert_eq(m->s.groups[g].shape[2], 3);
        }
        modcall_init(m, &desc, (struct strata_dims){ 12, 0, { 0 } }, 1);
        cr_assert_eq(m->s.groups[0].ndim, 1);
        cr_assert_eq(m->s.groups[0].shape[0], 12);
        cr_assert_eq(m->s.out_dims.channels, 0, "left to the runtime: the input's layout");
        cr_assert_eq(m->s.batch_stats, 0);
        cr_assert_eq(m->s.aux_fixed, 0);
}
