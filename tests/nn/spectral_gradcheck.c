/*
 * SpectralConv1d and SpectralConv2d backward against central finite differences of the
 * forward: the objective sum(y * w) for fixed w (so dL/dy = w), in each input and each weight,
 * over odd and even extents with the most modes each allows and with fewer.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/fdcheck.h"
#include "tests/support/modcall.h"

#define ROWS 2

static float x[MODCALL_MAX], y[MODCALL_MAX], w[MODCALL_MAX], dx[MODCALL_MAX];
static float dp[MODCALL_MAX];

static double objective(void *ctx)
{
        struct modcall *m = ctx;
        double s = 0.0;

        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        for (int i = 0; i < ROWS * m->l.out; i++)
                s += (double)y[i] * w[i];
        return s;
}

static void check(const struct strata_module_ops *ops, int cin, int cout, struct strata_dims in,
                  int m1, int m2, const char *who)
{
        struct strata_module desc = { .ops = ops, .out = cout, .modes = { m1, m2 } };
        struct modcall *m = &(struct modcall){ 0 };

        in.channels = cin;
        modcall_init(m, &desc, in, ROWS);
        modcall_wave(x, ROWS * m->l.in, 0.41, 0.2);
        modcall_wave(w, ROWS * m->l.out, 0.73, 0.5);
        modcall_wave(m->param, (int)m->l.nparam, 0.19, 0.9);
        objective(m);
        m->l.grad_fresh = 1;
        m->desc.ops->backward(&m->l, &m->c, x, y, w, dx, ROWS);
        memcpy(dp, m->grad, m->l.nparam * sizeof(float));
        fd_check(objective, m, x, dx, (size_t)ROWS * m->l.in, 1e-2f, 1e-2, who, "dx");
        fd_check(objective, m, m->param, dp, m->l.nparam, 1e-2f, 1e-2, who, "dweights");
}

Test(spectral_gradcheck, finite_differences)
{
        check(&strata_spectralconv1d, 2, 3, (struct strata_dims){ 0, 1, { 12 } }, 7, 0,
              "1d even, every mode");
        check(&strata_spectralconv1d, 3, 2, (struct strata_dims){ 0, 1, { 11 } }, 4, 0,
              "1d odd");
        check(&strata_spectralconv2d, 2, 2, (struct strata_dims){ 0, 2, { 6, 8 } }, 3, 5,
              "2d even, every mode");
        check(&strata_spectralconv2d, 2, 3, (struct strata_dims){ 0, 2, { 7, 5 } }, 2, 2,
              "2d odd");
}
