/*
 * The activations beside ReLU against independent references: each kernel's forward against
 * the formula of PyTorch's documentation evaluated in double, and its backward against
 * central finite differences of that formula, at many points (a fine grid over [-12, 12],
 * 0, -0, tiny, large and huge |x|). The modules run those kernels with LeakyReLU's slope
 * (0 meaning PyTorch's 0.01). ReLU's backward is checked bit for bit against its definition.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define GRID 1537 /* -12 .. 12 by 1/64 */
#define NSPECIAL 30
#define N (GRID + NSPECIAL)

static const double special[NSPECIAL] = {
        0.0,   -0.0,   1e-30, -1e-30, 1e-6,  -1e-6, 0.5,   -0.5,  15.0,  -15.0,
        20.0,  -20.0,  30.0,  -30.0,  50.0,  -50.0, 88.0,  -88.0, 100.0, -100.0,
        500.0, -500.0, 1e4,   -1e4,   1e6,   -1e6,  1e8,   -1e8,  1e10,  -1e10,
};

/* PyTorch's documented formulas, in double. */
static double sigmoid_ref(double x)
{
        return 1.0 / (1.0 + exp(-x));
}

static double reference(enum strata_activation k, double slope, double x)
{
        switch (k) {
        case STRATA_ACT_TANH:
                return tanh(x);
        case STRATA_ACT_SIGMOID:
                return sigmoid_ref(x);
        case STRATA_ACT_GELU:
                return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        case STRATA_ACT_GELU_TANH:
                return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        case STRATA_ACT_SILU:
                return x * sigmoid_ref(x);
        default:
                return fmax(0.0, x) + slope * fmin(0.0, x);
        }
}

static const char *const names[STRATA_ACT_COUNT] = { "tanh", "sigmoid", "gelu", "gelu-tanh",
                                                     "silu", "leaky-relu" };

static float xs[N], ys[N], dys[N], dxs[N];

static const struct strata_kernel_ops *kernels(void)
{
        const struct strata_device_ops *d;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &d), STRATA_OK);
        return d->kernels;
}

static void points(void)
{
        for (int i = 0; i < GRID; i++)
                xs[i] = (float)(-12.0 + i / 64.0);
        for (int i = 0; i < NSPECIAL; i++)
                xs[GRID + i] = (float)special[i];
        for (int i = 0; i < N; i++)
                dys[i] = 0.5f + 0.25f * (float)(i % 7);
}

/* f32 results against the double formula: within 2e-6 of (1 + |f|). */
static void forward_matches(const struct strata_kernel_ops *k, enum strata_activation kind,
                            float slope)
{
        k->act(kind, slope, xs, ys, N);
        for (int i = 0; i < N; i++) {
                double want = reference(kind, slope, xs[i]);

                cr_assert(fabs(ys[i] - want) <= 2e-6 * (1.0 + fabs(want)),
                          "%s(%a) = %.9g, want %.9g", names[kind], xs[i], ys[i], want);
        }
}

/* dx = dy f'(x) against central differences of the double formula (LeakyReLU's kink apart). */
static void backward_matches(const struct strata_kernel_ops *k, enum strata_activation kind,
                             float slope)
{
        k->act(kind, slope, xs, ys, N);
        k->act_backward(kind, slope, xs, ys, dys, dxs, N);
        for (int i = 0; i < N; i++) {
                double x = xs[i], h = 1e-4 * fmax(1.0, fabs(x)), fd;

                if (kind == STRATA_ACT_LEAKY_RELU && fabs(x) < h) {
                        /* differences would straddle the kink; at 0, PyTorch's slope side */
                        cr_assert_eq(dxs[i], x > 0.0 ? dys[i] : dys[i] * slope,
                                     "leaky-relu'(%a)", xs[i]);
                        continue;
                }
                fd = (reference(kind, slope, x + h) - reference(kind, slope, x - h)) / (2 * h);
                cr_assert(fabs(dxs[i] - dys[i] * fd) <= 2e-5 * (1.0 + fabs(dys[i] * fd)),
                          "%s'(%a) * %g = %.9g, finite differences %.9g", names[kind], xs[i],
                          dys[i], dxs[i], dys[i] * fd);
        }
}

/* @p check for every kind (LeakyReLU's default slope), then LeakyReLU at 0.2 and -0.5. */
static void every_kind(void (*check)(const struct strata_kernel_ops *, enum strata_activation,
                                     float))
{
        const struct strata_kernel_ops *k = kernels();

        points();
        for (int kind = 0; kind < STRATA_ACT_COUNT; kind++)
                check(k, (enum strata_activation)kind, 0.01f);
        check(k, STRATA_ACT_LEAKY_RELU, 0.2f);
        check(k, STRATA_ACT_LEAKY_RELU, -0.5f);
}

Test(activation_values, forward_against_pytorch_formulas)
{
        every_kind(forward_matches);
}

Test(activation_values, backward_against_finite_differences)
{
        every_kind(backward_matches);
}

/* Large |x| saturates cleanly: no NaN, the limits PyTorch gives (and exact where they are). */
Test(activation_values, saturation_is_finite_and_exact)
{
        const struct strata_kernel_ops *k = kernels();

        points();
        for (int kind = 0; kind < STRATA_ACT_COUNT; kind++) {
                k->act((enum strata_activation)kind, 0.01f, xs, ys, N);
                k->act_backward((enum strata_activation)kind, 0.01f, xs, ys, dys, dxs, N);
                for (int i = 0; i < N; i++)
                        cr_assert(isfinite(ys[i]) && isfinite(dxs[i]), "%s at %a: %g, %g",
                                  names[kind], xs[i], ys[i], dxs[i]);
        }
        k->act(STRATA_ACT_SIGMOID, 0.0f, (const float[]){ -100.0f, 100.0f }, ys, 2);
        cr_assert(ys[0] == 0.0f && ys[1] == 1.0f);
        k->act(STRATA_ACT_TANH, 0.0f, (const float[]){ -100.0f, 100.0f }, ys, 2);
        cr_assert(ys[0] == -1.0f && ys[1] == 1.0f);
        for (int kind = STRATA_ACT_GELU; kind <= STRATA_ACT_SILU; kind++) {
                k->act((enum strata_activation)kind, 0.0f, (const float[]){ -1e4f, 1e4f }, ys, 2);
                cr_assert(ys[0] == 0.0f && ys[1] == 1e4f, "%s: %g %g", names[kind], ys[0], ys[1]);
        }
}

/* The modules: their names, and LeakyReLU's slope as the kernel receives it. */
Test(activation_values, modules_run_their_kind)
{
        const struct strata_module_ops *ops[STRATA_ACT_COUNT] = {
                &strata_tanh, &strata_sigmoid, &strata_gelu, &strata_gelu_tanh, &strata_silu,
                &strata_leaky_relu,
        };
        const struct strata_kernel_ops *k = kernels();
        static float want[N];

        points();
        for (int kind = 0; kind < STRATA_ACT_COUNT; kind++)
                for (int s = 0; s < 2; s++) {
                        float slope = s ? -0.3f : 0.0f; /* 0: PyTorch's 0.01 */
                        struct strata_module m = { .ops = ops[kind], .slope = slope };
                        struct strata_layer l = { .desc = &m, .in = N, .out = N };
                        struct strata_step_ctx c = { .k = k, .train = 1 };
                        struct strata_module_shape sh;

                        cr_assert_eq(strata_module_ops_by_name(names[kind]), ops[kind]);
                        cr_assert_str_eq(ops[kind]->name, names[kind]);
                        cr_assert_eq(ops[kind]->shape(&l, N, &sh), STRATA_OK);
                        cr_assert(sh.out == N && sh.params == 0 && sh.aux_fixed == 0 &&
                                  sh.aux_per_row == 0 && !sh.bf16_io);
                        ops[kind]->forward(&l, &c, xs, ys, 1);
                        k->act((enum strata_activation)kind, s ? -0.3f : 0.01f, xs, want, N);
                        cr_assert_eq(memcmp(ys, want, sizeof(want)), 0, "%s", names[kind]);
                }
}

/*
 * ReLU's backward, f32 and with bf16 outputs: dy where y > 0, else +0, bit for bit, for every
 * pairing of outputs 1, a subnormal, 0, -0, -1, +-inf, a quiet and a signalling NaN with
 * gradients 2.5, -3, -0, +-inf, a quiet and a signalling NaN and a subnormal, over 9 x 8 = 72
 * elements, run from the first (72: whole vectors) and from the second (71, an odd start: a
 * tail of 7 on the 8-wide clones, of 3 on SSE2's), against that definition.
 */
Test(activation_values, relu_backward_bits)
{
        static const uint32_t outs[9] = { 0x3f800000u, 0x00080000u /* 0x1p-130 */, 0u,
                                          0x80000000u, 0xbf800000u, 0x7f800000u, 0xff800000u,
                                          0x7fc00000u, 0x7fa00000u /* signalling */ };
        static const uint32_t grads[8] = { 0x40200000u, 0xc0400000u, 0x80000000u, 0x7f800000u,
                                           0xff800000u, 0x7fc00000u, 0x7fa00000u, 0x00000001u };
        const struct strata_kernel_ops *k = kernels();
        float y[72], dy[72], dx[72], want, yb;
        uint16_t yh[72];

        for (int i = 0; i < 72; i++) {
                memcpy(&y[i], &outs[i % 9], 4);
                memcpy(&dy[i], &grads[i / 9], 4);
                yh[i] = (uint16_t)(outs[i % 9] >> 16); /* each of outs is exact in bf16 */
        }
        for (int form = 0; form < 4; form++) {
                int at = form & 1, n = 72 - at;

                memset(dx, 0x5a, sizeof(dx));
                if (form < 2)
                        k->relu_backward(y + at, dy + at, dx + at, (size_t)n);
                else if (k->relu_backward_bf16)
                        k->relu_backward_bf16(yh + at, dy + at, dx + at, (size_t)n);
                else
                        continue;
                for (int i = at; i < 72; i++) {
                        uint32_t u = (uint32_t)yh[i] << 16;

                        memcpy(&yb, &u, 4);
                        want = (form < 2 ? y[i] : yb) > 0.0f ? dy[i] : 0.0f;
                        cr_assert(memcmp(&dx[i], &want, 4) == 0,
                                  "%s from %d: y %a dy %a gave %a, want %a",
                                  form < 2 ? "f32" : "bf16", at, y[i], dy[i], dx[i], want);
                }
        }
}
