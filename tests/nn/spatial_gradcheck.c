/*
 * The spatial modules' backward (input gradient, and LayerNorm's parameter gradients) match
 * central finite differences of sum(y * w) for fixed w, in 1-D, 2-D and 3-D.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/support/fdcheck.h"
#include "tests/support/modcall.h"

#define ROWS 2

static float x[MODCALL_MAX], y[MODCALL_MAX], w[MODCALL_MAX], dx[MODCALL_MAX];

static double objective(struct modcall *m)
{
        double s = 0.0;

        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        for (int i = 0; i < ROWS * m->l.out; i++)
                s += (double)y[i] * w[i];
        return s;
}

/* objective() for fd_check(). */
static double objective_of(void *ctx)
{
        return objective(ctx);
}

static void against_numeric(struct modcall *m, float *v, const float *analytic, size_t n,
                            const char *what)
{
        fd_check(objective_of, m, v, analytic, n, 1e-2f, 2e-2, m->desc.ops->name, what);
}

static void check(struct strata_module desc, struct strata_dims in)
{
        struct modcall *m = &(struct modcall){ 0 };
        int n = ROWS * modcall_count(in);

        modcall_init(m, &desc, in, ROWS);
        modcall_wave(m->param, (int)m->s.params, 0.53, 0.4);
        for (int i = 0; i < n; i++) /* distinct values 0.05 apart: no max flips under h */
                x[i] = 0.05f * (float)((i * 37) % n) - 0.025f * (float)n;
        modcall_wave(w, ROWS * m->l.out, 1.3, 0.0);
        objective(m);
        desc.ops->backward(&m->l, &m->c, x, y, w, dx, ROWS);
        against_numeric(m, x, dx, (size_t)n, "dx");
        against_numeric(m, m->param, m->grad, m->s.params, "dparam");
}

Test(spatial_gradcheck, pools)
{
        struct strata_dims l1 = { 2, 1, { 9 } }, l2 = { 2, 2, { 5, 6 } };
        struct strata_dims l3 = { 1, 3, { 3, 4, 5 } };

        check((struct strata_module){ .ops = &strata_maxpool1d, .kernel = { 3 },
                                      .stride = { 2 }, .padding = { 1 }, .dilation = { 2 } }, l1);
        check((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 3 },
                                      .stride = { 2 }, .padding = { 1 } }, l2);
        check((struct strata_module){ .ops = &strata_maxpool3d, .kernel = { 2 },
                                      .stride = { 1 } }, l3);
        check((struct strata_module){ .ops = &strata_avgpool1d, .kernel = { 4 },
                                      .stride = { 2 }, .padding = { 2 } }, l1);
        check((struct strata_module){ .ops = &strata_avgpool2d, .kernel = { 3, 2 },
                                      .stride = { 1, 2 }, .padding = { 1, STRATA_PADDING_NONE } },
              l2);
        check((struct strata_module){ .ops = &strata_avgpool3d, .kernel = { 2, 3, 2 },
                                      .stride = { 1 } }, l3);
}

Test(spatial_gradcheck, upsample_flatten_layernorm)
{
        struct strata_dims l1 = { 2, 1, { 5 } }, l2 = { 2, 2, { 3, 4 } };
        struct strata_dims l3 = { 1, 3, { 2, 3, 2 } };
        const struct strata_dims *all[3] = { &l1, &l2, &l3 };

        for (int i = 0; i < 3; i++) {
                check((struct strata_module){ .ops = &strata_upsample, .scale = { 3, 2 } },
                      *all[i]);
                check((struct strata_module){ .ops = &strata_upsample, .scale = { 2, 3 },
                                              .mode = STRATA_UPSAMPLE_LINEAR }, *all[i]);
                check((struct strata_module){ .ops = &strata_flatten }, *all[i]);
                check((struct strata_module){ .ops = &strata_layernorm }, *all[i]);
        }
}
