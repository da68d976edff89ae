/* Every module's backward (and the loss gradient) matches central finite differences. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define ROWS 5
#define IN 6
#define OUT 4

static const struct strata_device_ops *dev;

static void setup(void)
{
        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
}

/* Scalar objective: sum(y * w) for fixed weights w, so dL/dy = w. */
struct rig {
        struct strata_module desc;
        struct strata_layer l;
        struct strata_step_ctx c;
        float param[IN * IN + IN], grad[IN * IN + IN], state[2 * IN], aux[4 * IN + ROWS * IN];
        float x[ROWS * IN], y[ROWS * IN], w[ROWS * IN], dx[ROWS * IN];
};

static void rig_init(struct rig *r, const struct strata_module_ops *ops, int out)
{
        struct strata_module_shape s;

        memset(r, 0, sizeof(*r));
        r->desc = (struct strata_module){ .ops = ops, .out = out, .p = 0.5f };
        r->l = (struct strata_layer){ .desc = &r->desc, .index = 3, .in = IN, .param = r->param,
                                      .grad = r->grad, .state = r->state, .aux = r->aux,
                                      .grad_fresh = 1 };
        cr_assert_eq(ops->shape(&r->l, IN, &s), STRATA_OK);
        r->l.out = s.out;
        r->l.nparam = s.params;
        if (ops->init)
                ops->init(&r->l, 42);
        for (size_t i = 0; i < s.params; i++)
                r->param[i] += 0.1f * sinf((float)i);
        for (int i = 0; i < ROWS * IN; i++) {
                r->x[i] = sinf(0.7f * (float)i + 0.3f);
                if (fabsf(r->x[i]) < 0.05f) /* keep finite differences off ReLU's kink */
                        r->x[i] = r->x[i] < 0.0f ? -0.1f : 0.1f;
                r->w[i] = cosf(1.3f * (float)i);
        }
        r->c = (struct strata_step_ctx){ .k = dev->kernels, .seed = 9, .step = 1, .train = 1,
                                         .rows_global = ROWS };
}

static double objective(struct rig *r)
{
        double s = 0.0;

        r->desc.ops->forward(&r->l, &r->c, r->x, r->y, ROWS);
        for (int i = 0; i < ROWS * r->l.out; i++)
                s += (double)r->y[i] * r->w[i];
        return s;
}

/* Central differences of the objective in each of v[0..n) against the analytic gradient. */
static void against_numeric(struct rig *r, float *v, const float *analytic, size_t n,
                            const char *what)
{
        float h = 1e-2f;

        for (size_t i = 0; i < n; i++) {
                float keep = v[i];
                double up, down, num;

                v[i] = keep + h;
                up = objective(r);
                v[i] = keep - h;
                down = objective(r);
                v[i] = keep;
                num = (up - down) / (2.0 * h);
                cr_assert(fabs(num - analytic[i]) <= 2e-2 * (1.0 + fabs(num)),
                          "%s %s[%zu]: analytic %g, numeric %g", r->desc.ops->name, what, i,
                          analytic[i], num);
        }
}

static void check(const struct strata_module_ops *ops, int out)
{
        struct rig r;

        rig_init(&r, ops, out);
        objective(&r);
        ops->backward(&r.l, &r.c, r.x, r.y, r.w, r.dx, ROWS);
        against_numeric(&r, r.x, r.dx, ROWS * IN, "dx");
        against_numeric(&r, r.param, r.grad, r.l.nparam, "dparam");
}

Test(gradcheck, linear, .init = setup)
{
        check(&strata_linear, OUT);
}

Test(gradcheck, relu, .init = setup)
{
        check(&strata_relu, 0);
}

Test(gradcheck, batchnorm1d, .init = setup)
{
        check(&strata_batchnorm1d, 0);
}

Test(gradcheck, dropout_same_mask, .init = setup)
{
        /* The mask is a function of (seed, step, layer): forward reruns draw the same mask. */
        check(&strata_dropout, 0);
}

Test(gradcheck, softmax_cross_entropy, .init = setup)
{
        float z[3 * 5], d[3 * 5], h = 1e-2f;
        int32_t y[3] = { 1, 4, 0 };
        int correct;

        for (int i = 0; i < 15; i++)
                z[i] = sinf((float)i);
        dev->kernels->softmax_xent(z, y, 3, 5, 1.0f / 3.0f, d, &correct);
        for (int i = 0; i < 15; i++) {
                float keep = z[i];
                double up, down;

                z[i] = keep + h;
                up = dev->kernels->softmax_xent(z, y, 3, 5, 1.0f, NULL, NULL) / 3.0;
                z[i] = keep - h;
                down = dev->kernels->softmax_xent(z, y, 3, 5, 1.0f, NULL, NULL) / 3.0;
                z[i] = keep;
                cr_assert(fabs((up - down) / (2 * h) - d[i]) < 1e-3, "dlogit %d", i);
        }
}

/* Tanh, Sigmoid, GELU (both forms), SiLU and LeakyReLU (slope 0.01): a failure names it. */
Test(gradcheck, activations, .init = setup)
{
        const struct strata_module_ops *ops[] = { &strata_tanh, &strata_sigmoid, &strata_gelu,
                                                  &strata_gelu_tanh, &strata_silu,
                                                  &strata_leaky_relu };

        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
                check(ops[i], 0);
}
