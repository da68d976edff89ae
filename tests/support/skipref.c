/* Skip connections' double reference (tests/support/skipref.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/skipref.h"

/* Width of what module @p i's from names (-1: the model's input). */
static int from_width(const struct skipref *r, int from)
{
        return from < 0 ? r->in : r->width[from];
}

static void forward(struct skipref *r, const struct strata_model *m, const float *p)
{
        size_t off = 0;

        for (int i = 0; i < m->nmodules; i++) {
                const struct strata_module *d = &m->modules[i];
                int in = i ? r->width[i - 1] : r->in, w = in;
                const double *x = r->a[i], *s = r->a[d->from + 1];
                double *y = r->a[i + 1];

                if (d->ops == &strata_linear) {
                        w = d->out;
                        for (int q = 0; q < r->rows; q++)
                                for (int o = 0; o < w; o++) {
                                        double v = p[off + (size_t)w * in + o];

                                        for (int k = 0; k < in; k++)
                                                v += (double)p[off + (size_t)o * in + k] *
                                                     x[q * in + k];
                                        y[q * w + o] = v;
                                }
                        off += (size_t)w * in + w;
                } else if (d->ops == &strata_concat) {
                        int sw = from_width(r, d->from);

                        w = in + sw;
                        for (int q = 0; q < r->rows; q++) {
                                for (int k = 0; k < in; k++)
                                        y[q * w + k] = x[q * in + k];
                                for (int k = 0; k < sw; k++)
                                        y[q * w + in + k] = s[q * sw + k];
                        }
                } else {
                        for (int k = 0; k < r->rows * in; k++)
                                y[k] = d->ops == &strata_relu ? (x[k] > 0 ? x[k] : 0.0)
                                       : d->ops == &strata_tanh ? tanh(x[k])
                                                                : x[k] + s[k]; /* add */
                }
                r->width[i] = w;
        }
}

static void backward(struct skipref *r, const struct strata_model *m, const float *p)
{
        size_t off = 0;

        for (int i = 0; i < m->nmodules; i++)
                off += m->modules[i].ops == &strata_linear
                               ? (size_t)m->modules[i].out * ((i ? r->width[i - 1] : r->in) + 1)
                               : 0;
        for (int i = m->nmodules - 1; i >= 0; i--) {
                const struct strata_module *d = &m->modules[i];
                int in = i ? r->width[i - 1] : r->in, w = r->width[i];
                const double *x = r->a[i], *y = r->a[i + 1], *dy = r->d[i + 1];
                double *dx = r->d[i], *ds = r->d[d->from + 1];

                if (d->ops == &strata_linear) {
                        off -= (size_t)w * in + w;
                        for (int q = 0; q < r->rows; q++)
                                for (int o = 0; o < w; o++) {
                                        r->grad[off + (size_t)w * in + o] += dy[q * w + o];
                                        for (int k = 0; k < in; k++) {
                                                r->grad[off + (size_t)o * in + k] +=
                                                        dy[q * w + o] * x[q * in + k];
                                                dx[q * in + k] += p[off + (size_t)o * in + k] *
                                                                  dy[q * w + o];
                                        }
                                }
                } else if (d->ops == &strata_concat) {
                        int sw = w - in;

                        for (int q = 0; q < r->rows; q++) {
                                for (int k = 0; k < in; k++)
                                        dx[q * in + k] += dy[q * w + k];
                                for (int k = 0; k < sw; k++)
                                        ds[q * sw + k] += dy[q * w + in + k];
                        }
                } else {
                        for (int k = 0; k < r->rows * in; k++)
                                if (d->ops == &strata_relu)
                                        dx[k] += x[k] > 0 ? dy[k] : 0.0;
                                else if (d->ops == &strata_tanh)
                                        dx[k] += dy[k] * (1.0 - y[k] * y[k]);
                                else { /* add */
                                        dx[k] += dy[k];
                                        ds[k] += dy[k];
                                }
                }
        }
}

void skipref_run(struct skipref *r, const struct strata_model *m, const float *p,
                 const float *x, const float *t, int rows)
{
        int n = m->nmodules, w;

        cr_assert_leq(n, SKIPREF_MODS);
        cr_assert_leq(rows, SKIPREF_ROWS);
        memset(r, 0, sizeof(*r));
        r->n = n;
        r->rows = rows;
        r->in = m->in_features;
        for (int k = 0; k < rows * r->in; k++)
                r->a[0][k] = x[k];
        forward(r, m, p);
        w = r->width[n - 1];
        for (int k = 0; k < rows * w; k++) {
                double e = r->a[n][k] - t[k];

                r->loss += e * e / (rows * w);
                r->d[n][k] = 2.0 * e / (rows * w);
        }
        backward(r, m, p);
}

/* Largest |got - want| over the largest |want|, for a message. */
static double rel_err(const float *got, const double *want, size_t n, double scale)
{
        double worst = 0.0, big = 0.0;

        for (size_t i = 0; i < n; i++)
                big = fabs(want[i]) > big ? fabs(want[i]) : big;
        for (size_t i = 0; i < n; i++) {
                double e = fabs(scale * got[i] - want[i]) / (big > 0.0 ? big : 1.0);

                worst = e > worst ? e : worst;
        }
        return worst;
}

void skipref_check(const struct strata_model *m0, int rows, double tol)
{
        static struct skipref ref;
        static float x[SKIPREF_ROWS * SKIPREF_WIDTH], t[SKIPREF_ROWS * SKIPREF_WIDTH];
        static float out[SKIPREF_ROWS * SKIPREF_WIDTH], p[SKIPREF_PARAMS];
        struct strata_model m = *m0;
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;
        struct strata_batch b = { 0 };
        struct strata_dims od;
        const float *flat;
        size_t np;
        int groups;

        m.loss = &strata_mse;
        cr_assert_eq(strata_model_output(&m, &od), STRATA_OK, "%s", strata_last_error());
        for (int k = 0; k < rows * m.in_features; k++)
                x[k] = sinf(0.37f * (float)k + 0.1f);
        for (int k = 0; k < rows * od.channels; k++)
                t[k] = cosf(0.71f * (float)k);
        c.model = &m;
        c.batch = rows;
        c.classes = od.channels;
        c.seed = 5;
        c.train.accumulate = 2; /* the first micro-batch leaves its gradients, unstepped */
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &flat, &np), STRATA_OK);
        cr_assert_leq(np, SKIPREF_PARAMS);
        memcpy(p, flat, np * sizeof(float));
        skipref_run(&ref, &m, p, x, t, rows);
        b = (struct strata_batch){ .x = x, .rows = rows, .dim = m.in_features, .t = t,
                                   .tdim = od.channels };
        cr_assert_eq(strata_predict_step(rt, &b, out, SKIPREF_ROWS * SKIPREF_WIDTH), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_leq(rel_err(out, ref.a[m.nmodules], (size_t)rows * od.channels, 1.0), tol,
                      "outputs differ from the double reference");
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameter_count(rt, &groups), STRATA_OK);
        for (int g = 0; g < groups; g++) {
                struct strata_param sp;
                double e;

                cr_assert_eq(strata_parameter(rt, 0, g, &sp), STRATA_OK);
                /* the micro-batch's loss gradient carries 1 / accumulate */
                e = rel_err(sp.grad, ref.grad + sp.offset, sp.group.count, 2.0);
                cr_assert_leq(e, tol, "%s: gradient differs from the double reference by %g",
                              sp.name, e);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
