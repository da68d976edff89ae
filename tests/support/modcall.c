/* One module called directly through its ops table (tests/support/modcall.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/modcall.h"

int modcall_count(struct strata_dims d)
{
        int n = d.channels;

        for (int i = 0; i < d.ndim; i++)
                n *= d.size[i];
        return n;
}

int modcall_shape(struct modcall *m, const struct strata_module *desc, struct strata_dims in)
{
        const struct strata_device_ops *dev;
        int width = modcall_count(in), rc;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
        memset(&m->s, 0, sizeof(m->s));
        m->desc = *desc;
        m->l = (struct strata_layer){ .desc = &m->desc, .index = 3, .in = width,
                                      .param = m->param, .grad = m->grad, .aux = m->aux,
                                      .grad_fresh = 1, .in_dims = in };
        if ((rc = desc->ops->shape(&m->l, width, &m->s)) != STRATA_OK)
                return rc;
        m->l.out = m->s.out;
        m->l.out_dims = m->s.out_dims;
        m->l.nparam = m->s.params;
        m->l.naux_per_row = m->s.aux_per_row;
        m->c = (struct strata_step_ctx){ .k = dev->kernels, .seed = 9, .step = 1, .train = 1,
                                         .rows_global = 1 };
        if (desc->ops->init)
                desc->ops->init(&m->l, 42);
        return STRATA_OK;
}

void modcall_init(struct modcall *m, const struct strata_module *desc, struct strata_dims in,
                  int rows)
{
        cr_assert_eq(modcall_shape(m, desc, in), STRATA_OK, "%s", strata_last_error());
        cr_assert_leq(m->s.params, (size_t)MODCALL_MAX);
        cr_assert_leq(m->s.aux_fixed + (size_t)rows * m->s.aux_per_row, (size_t)MODCALL_MAX);
        cr_assert_leq((size_t)rows * (size_t)(m->l.in > m->l.out ? m->l.in : m->l.out),
                      (size_t)MODCALL_MAX);
        m->c.rows_global = rows;
}

void modcall_wave(float *x, int n, double a, double b)
{
        for (int i = 0; i < n; i++)
                x[i] = (float)sin(a * i + b);
}

double modcall_rel_diff(const float *a, const double *b, int n)
{
        double worst = 0.0;

        for (int i = 0; i < n; i++) {
                double d = fabs(a[i] - b[i]) / (1.0 + fabs(b[i]));

                worst = d > worst || isnan(d) ? d : worst;
        }
        return worst;
}

int pool_case_out(const struct pool_case *t, int i)
{
        int d = t->d[i] ? t->d[i] : 1;

        return (t->in[i] + 2 * t->p[i] - d * (t->k[i] - 1) - 1) / t->s[i] + 1;
}

/* Case @p t's module description and input layout. */
static void pool_case_module(const struct pool_case *t, struct strata_module *desc,
                             struct strata_dims *in)
{
        *desc = (struct strata_module){ .ops = t->ops };
        *in = (struct strata_dims){ .channels = t->c, .ndim = t->nd };
        for (int i = 0; i < t->nd; i++) {
                in->size[i] = t->in[i];
                desc->kernel[i] = t->k[i];
                desc->stride[i] = t->s[i];
                desc->padding[i] = t->p[i] ? t->p[i] : STRATA_PADDING_NONE;
                desc->dilation[i] = t->d[i];
        }
}

void pool_case_layer(struct modcall *m, const struct pool_case *t, int rows, int *ins,
                     int *outs)
{
        struct strata_module desc;
        struct strata_dims in;

        pool_case_module(t, &desc, &in);
        *ins = *outs = 1;
        for (int i = 0; i < t->nd; i++) {
                *ins *= t->in[i];
                *outs *= pool_case_out(t, i);
        }
        modcall_init(m, &desc, in, rows);
        cr_assert_eq(m->s.out, t->c * *outs, "%s: width %d", t->ops->name, m->s.out);
        cr_assert_eq(m->s.out_dims.channels, t->c);
        cr_assert_eq(m->s.out_dims.ndim, t->nd);
        for (int i = 0; i < t->nd; i++)
                cr_assert_eq(m->s.out_dims.size[i], pool_case_out(t, i));
}

void pool_case_coords(const struct pool_case *t, int n, int *o)
{
        for (int i = t->nd - 1; i >= 0; i--) {
                o[i] = n % pool_case_out(t, i);
                n /= pool_case_out(t, i);
        }
}

/* Whether the module accepts case @p t (its shape's verdict). */
static int pool_case_ok(const struct pool_case *t)
{
        static struct modcall m;
        struct strata_module desc;
        struct strata_dims in;

        pool_case_module(t, &desc, &in);
        return modcall_shape(&m, &desc, in) == STRATA_OK;
}

int pool_case_sweep(const struct strata_module_ops *const ops[3], int dilate,
                    void (*run)(const struct pool_case *t))
{
        int n = 0;

        for (int nd = 1; nd <= 3; nd++)
                for (int v = 0; v < 4 * 3 * 3 * 3 * (dilate ? 3 : 1); v++) {
                        int k = 1 + v % 4, s = 1 + v / 4 % 3, p = v / 12 % 3, e = v / 36 % 3;
                        int d = 1 + v / 108;
                        struct pool_case t = { ops[nd - 1], nd, 2, { 0 }, { 0 }, { 0 }, { 0 },
                                               { 0 } };

                        for (int i = 0; i < nd; i++) { /* the dimensions differ a little */
                                t.in[i] = 2 * e + 1 + i + (nd == 1 ? 6 : 0);
                                t.k[i] = i == nd - 1 ? k : 1 + (k + i) % 3;
                                t.s[i] = i == nd - 1 ? s : 1 + (s + i) % 2;
                                t.p[i] = i == nd - 1 ? p : (p + i) % 2;
                                t.d[i] = i == nd - 1 ? d : 1 + (d + i) % 2 * dilate;
                        }
                        if (pool_case_ok(&t)) {
                                run(&t);
                                n++;
                        }
                }
        return n;
}
