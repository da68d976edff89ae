/*
 * The float-target losses (MSE, L1, smooth L1, BCE with logits): values against an
 * independent double-precision evaluation of PyTorch's documented formulas, under mean and
 * sum reduction; gradients against central finite differences; the gradient independent of
 * how rows are split; targets and inputs checked with a message.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define ROWS 7
#define OUTS 5
#define N (ROWS * OUTS)

static const struct strata_device_ops *dev;
static float out[N], tgt[N], unit[N];

static void setup(void)
{
        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
        for (int i = 0; i < N; i++) {
                out[i] = 2.5f * sinf(0.9f * (float)i + 0.2f);
                tgt[i] = 1.5f * cosf(1.7f * (float)i);
                unit[i] = 0.5f + 0.5f * sinf(2.3f * (float)i); /* BCE targets in [0, 1] */
        }
        out[3] = tgt[3]; /* an exact zero difference: L1's gradient is 0 there */
}

/* PyTorch's element formulas (torch.nn docs), in double. */
static double ref_elem(const struct strata_loss_ops *l, double beta, double x, double y)
{
        double d = x - y;

        if (l == &strata_mse)
                return d * d;
        if (l == &strata_l1)
                return fabs(d);
        if (l == &strata_huber)
                return fabs(d) < beta ? 0.5 * d * d / beta : fabs(d) - 0.5 * beta;
        /* BCEWithLogitsLoss: -[y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] */
        return -(y * log(1.0 / (1.0 + exp(-x))) + (1.0 - y) * log(1.0 / (1.0 + exp(x))));
}

/* The loss as the runtime reports it: forward's row sum over the rows (mean) or itself. */
static double reported(const struct strata_loss_ops *l, enum strata_reduction red, float beta,
                       const float *t, const float *o, float *dout, float scale)
{
        struct strata_step_ctx c = { .k = dev->kernels, .rows_global = ROWS,
                                     .loss_scale = scale, .reduction = red,
                                     .loss_beta = beta };
        double s = l->forward(&c, o, t, ROWS, OUTS, dout, NULL);

        return red == STRATA_REDUCTION_MEAN ? s / ROWS : s;
}

static void values(const struct strata_loss_ops *l, float beta, const float *t)
{
        double ref = 0.0, b = beta > 0.0f ? beta : 1.0;

        for (int i = 0; i < N; i++)
                ref += ref_elem(l, b, out[i], t[i]);
        for (int red = 0; red < STRATA_REDUCTION_COUNT; red++) {
                double want = red == STRATA_REDUCTION_MEAN ? ref / N : ref;
                double got = reported(l, red, beta, t, out, NULL, 1.0f);

                cr_assert(fabs(got - want) <= 1e-6 * (1.0 + fabs(want)),
                          "%s reduction %d: %.9g, reference %.9g", l->name, red, got, want);
        }
}

/* d(reported loss)/d(out) (scale 1/ROWS under mean) against central differences. */
static void gradients(const struct strata_loss_ops *l, float beta, const float *t)
{
        for (int red = 0; red < STRATA_REDUCTION_COUNT; red++) {
                float scale = red == STRATA_REDUCTION_MEAN ? 1.0f / ROWS : 1.0f, d[N], o[N];

                memcpy(o, out, sizeof(o));
                reported(l, red, beta, t, o, d, scale);
                for (int i = 0; i < N; i++) {
                        float h = 1e-3f, keep = o[i];
                        double up, down, num;

                        if (i == 3 && l == &strata_l1)
                                continue; /* the kink: PyTorch's sign(0) = 0 is checked below */
                        o[i] = keep + h;
                        up = reported(l, red, beta, t, o, NULL, scale);
                        o[i] = keep - h;
                        down = reported(l, red, beta, t, o, NULL, scale);
                        o[i] = keep;
                        num = (up - down) / ((double)(keep + h) - (double)(keep - h));
                        cr_assert(fabs(num - d[i]) <= 2e-3 * (1.0 + fabs(num)),
                                  "%s red %d element %d: analytic %g, numeric %g", l->name, red,
                                  i, d[i], num);
                }
                if (l == &strata_l1)
                        cr_assert_eq(d[3], 0.0f, "L1's gradient at a zero difference is 0");
        }
}

Test(losses, mse, .init = setup)
{
        values(&strata_mse, 0.0f, tgt);
        gradients(&strata_mse, 0.0f, tgt);
}

Test(losses, l1, .init = setup)
{
        values(&strata_l1, 0.0f, tgt);
        gradients(&strata_l1, 0.0f, tgt);
}

Test(losses, huber_default_beta_and_half, .init = setup)
{
        values(&strata_huber, 0.0f, tgt); /* beta 0: 1.0 */
        gradients(&strata_huber, 0.0f, tgt);
        values(&strata_huber, 0.5f, tgt);
        gradients(&strata_huber, 0.5f, tgt);
        values(&strata_huber, 3.0f, tgt);
}

Test(losses, bce_with_logits, .init = setup)
{
        values(&strata_bce_with_logits, 0.0f, unit);
        gradients(&strata_bce_with_logits, 0.0f, unit);
}

/* The stable form: logits of +-100 give finite values (a naive log(sigmoid) would not). */
Test(losses, bce_with_large_logits_is_finite, .init = setup)
{
        float o[2] = { 100.0f, -100.0f }, t[2] = { 0.0f, 1.0f }, d[2];
        struct strata_step_ctx c = { .k = dev->kernels, .loss_scale = 1.0f,
                                     .reduction = STRATA_REDUCTION_SUM };
        double s = strata_bce_with_logits.forward(&c, o, t, 2, 1, d, NULL);

        cr_assert(fabs(s - 200.0) < 1e-4, "BCE of +-100 logits against the wrong class: %g", s);
        cr_assert(fabs(d[0] - 1.0f) < 1e-6f && fabs(d[1] + 1.0f) < 1e-6f);
}

/*
 * Rows split in two: bitwise the whole batch's gradient (elementwise), and its sum up to the
 * order of the double additions (each part's rows in order, then the parts in order).
 */
Test(losses, split_rows_sum_bitwise, .init = setup)
{
        const struct strata_loss_ops *all[] = { &strata_mse, &strata_l1, &strata_huber,
                                                &strata_bce_with_logits };
        struct strata_step_ctx c = { .k = dev->kernels, .loss_scale = 0.125f };

        for (int k = 0; k < 4; k++) {
                float d1[N], d2[N];
                double whole = all[k]->forward(&c, out, unit, ROWS, OUTS, d1, NULL);
                double part = all[k]->forward(&c, out, unit, 3, OUTS, d2, NULL);

                part += all[k]->forward(&c, out + 3 * OUTS, unit + 3 * OUTS, ROWS - 3, OUTS,
                                        d2 + 3 * OUTS, NULL);
                cr_assert(fabs(whole - part) <= 1e-12 * fabs(whole), "%s", all[k]->name);
                cr_assert_eq(memcmp(d1, d2, sizeof(d1)), 0, "%s gradient", all[k]->name);
        }
}

static int check(const struct strata_loss_ops *l, const struct strata_batch *b,
                 const char *needle)
{
        int rc = l->check(b, OUTS);

        if (needle)
                cr_assert(strstr(strata_last_error(), needle), "message '%s' lacks '%s'",
                          strata_last_error(), needle);
        return rc;
}

Test(losses, bad_targets_are_refused_with_a_message, .init = setup)
{
        float t[N], x[ROWS * 2] = { 0 };
        double t64[N];
        struct strata_batch b = { .x = x, .rows = ROWS, .dim = 2, .t = t, .tdim = OUTS };

        memcpy(t, tgt, sizeof(t));
        cr_assert_eq(check(&strata_mse, &b, NULL), STRATA_OK);
        b.tdim = OUTS - 1;
        cr_assert_eq(check(&strata_mse, &b, "tdim"), STRATA_EINVAL);
        b.tdim = OUTS;
        b.t = NULL;
        cr_assert_eq(check(&strata_l1, &b, "float targets"), STRATA_EINVAL);
        b.t = t;
        t[2 * OUTS + 4] = NAN;
        cr_assert_eq(check(&strata_huber, &b, "row 2, column 4"), STRATA_EINVAL);
        t[2 * OUTS + 4] = 0.5f;
        x[5 * 2 + 1] = INFINITY;
        cr_assert_eq(check(&strata_mse, &b, "input of row 5, column 1"), STRATA_EINVAL);
        x[5 * 2 + 1] = 0.0f;
        cr_assert_eq(check(&strata_bce_with_logits, &b, "not in [0, 1]"), STRATA_EINVAL);
        for (int i = 0; i < N; i++)
                t64[i] = unit[i];
        b.t = t64;
        b.ttype = STRATA_F64;
        cr_assert_eq(check(&strata_bce_with_logits, &b, NULL), STRATA_OK);
        t64[N - 1] = -0.25;
        cr_assert_eq(check(&strata_bce_with_logits, &b, "row 6, column 4"), STRATA_EINVAL);
        b.ttype = STRATA_I32;
        cr_assert_eq(check(&strata_mse, &b, "STRATA_F64"), STRATA_EINVAL);
}

/*
 * The CPU kernel's MSE and L1 rows (eight elements at a time) against the contract the
 * generic loop defines: each element's loss (d d, |d|) as a float into double lane j & 7, the
 * lanes added in order, rows in order; the gradient (2 d, sign d) times the scale. Rows of 37
 * (whole blocks and a tail), a NaN, a zero difference and a signed zero: bitwise, and without
 * a gradient the same sum.
 */
Test(losses, cpu_rows_match_the_lanes_bitwise, .init = setup)
{
        enum { R = 3, C = 37 };
        static const enum strata_pointwise_loss kinds[] = { STRATA_PLOSS_MSE, STRATA_PLOSS_L1 };
        float o[R * C], t[R * C], d[R * C], want_d[R * C], scale = 0.3f;

        for (int i = 0; i < R * C; i++) {
                o[i] = 2.5f * sinf(0.37f * (float)i + 0.1f);
                t[i] = 1.5f * cosf(0.91f * (float)i);
        }
        o[5] = t[5];                    /* a zero difference */
        o[17] = -0.0f, t[17] = 0.0f;    /* -0 - 0 = -0 */
        o[40] = NAN;                    /* a NaN: its sign is 0, its loss NaN in that row */
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                int mse = kinds[k] == STRATA_PLOSS_MSE;
                double lane[8] = { 0.0 }, want = 0.0, got, got_nod;

                for (int i = 0; i < R * C; i++) {
                        float e = o[i] - t[i];

                        want_d[i] = mse ? 2.0f * e * scale
                                        : (float)((e > 0.0f) - (e < 0.0f)) * scale;
                        if (i < C) /* row 0's sum */
                                lane[i & 7] += mse ? (double)(e * e) : (double)fabsf(e);
                }
                for (int l = 0; l < 8; l++)
                        want += lane[l];
                got = dev->kernels->pointwise_loss(kinds[k], 1.0f, o + C, t + C, R - 1, C, scale,
                                                   d + C);
                cr_assert(isnan(got), "kind %d: the NaN row's sum is NaN", (int)kinds[k]);
                got = dev->kernels->pointwise_loss(kinds[k], 1.0f, o, t, 1, C, scale, d);
                got_nod = dev->kernels->pointwise_loss(kinds[k], 1.0f, o, t, 1, C, scale, NULL);
                cr_assert(memcmp(&got, &want, sizeof(got)) == 0 &&
                                  memcmp(&got_nod, &want, sizeof(got)) == 0,
                          "kind %d: sum %.17g (without gradient %.17g), lanes give %.17g",
                          (int)kinds[k], got, got_nod, want);
                for (int i = 0; i < R * C; i++)
                        cr_assert(memcmp(&d[i], &want_d[i], sizeof(float)) == 0 ||
                                          (isnan(d[i]) && isnan(want_d[i])),
                                  "kind %d: gradient %d is %g, want %g", (int)kinds[k], i, d[i],
                                  want_d[i]);
        }
}

/*
 * Rows narrower than the lanes (1 to 7 columns: a critic's or a regression's outputs), and 8
 * and 9 beside them: the call's sum over its first 2, 3 and 4 rows (rows in order, each row's
 * lanes added in order) and the gradients, bitwise against that contract, with and without a
 * gradient. Row 0 is finite (a signed zero, a zero difference); row 1 differs by 1 and then
 * by amounts each too small to move 1 (2^-53 for L1, whose square 2^-54 for MSE: the tiny
 * ones summed first, from 3 or 5 columns, give 1 + 2^-52), so its sum depends on its order;
 * row 2 holds +inf and row 3 a NaN: each sum is checked finite, infinite and NaN.
 */
Test(losses, cpu_narrow_rows_match_the_lanes_bitwise, .init = setup)
{
        enum { R = 4, CMAX = 9 };
        static const enum strata_pointwise_loss kinds[] = { STRATA_PLOSS_MSE, STRATA_PLOSS_L1 };
        float o[R * CMAX], t[R * CMAX], d[R * CMAX], want_d[R * CMAX], scale = 0.7f;

        for (int c = 1; c <= CMAX; c++)
                for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                        int mse = kinds[k] == STRATA_PLOSS_MSE;
                        double want[R + 1] = { 0.0 }, got, got_nod;

                        for (int i = 0; i < R * c; i++) {
                                o[i] = 2.5f * sinf(0.37f * (float)i + 0.1f);
                                t[i] = 1.5f * cosf(0.91f * (float)i);
                        }
                        o[0] = -0.0f, t[0] = 0.0f;   /* row 0: -0 - 0 = -0 */
                        o[c - 1] = t[c - 1];         /* and a zero difference */
                        for (int j = 0; j < c; j++) { /* row 1: order matters */
                                o[c + j] = j == 0 ? 1.0f : mse ? 0x1p-27f : 0x1p-53f;
                                t[c + j] = 0.0f;
                        }
                        o[2 * c] = INFINITY;         /* row 2: +inf */
                        o[4 * c - 1] = NAN;          /* row 3: a NaN */
                        for (int i = 0; i < R; i++) {
                                double lane[8] = { 0.0 }, row = 0.0;

                                for (int j = 0; j < c; j++) {
                                        float e = o[i * c + j] - t[i * c + j];

                                        lane[j & 7] += mse ? (double)(e * e) : (double)fabsf(e);
                                        want_d[i * c + j] =
                                                mse ? 2.0f * e * scale
                                                    : (float)((e > 0.0f) - (e < 0.0f)) * scale;
                                }
                                for (int l = 0; l < 8; l++)
                                        row += lane[l];
                                want[i + 1] = want[i] + row; /* the sum of rows 0 .. i */
                        }
                        cr_assert(isfinite(want[2]) && isinf(want[3]) && isnan(want[4]));
                        for (int n = 2; n <= R; n++) {
                                memset(d, 0x5a, sizeof(d));
                                got = dev->kernels->pointwise_loss(kinds[k], 1.0f, o, t, n, c,
                                                                   scale, d);
                                got_nod = dev->kernels->pointwise_loss(kinds[k], 1.0f, o, t, n,
                                                                       c, scale, NULL);
                                cr_assert(memcmp(&got, &want[n], sizeof(got)) == 0 &&
                                                  memcmp(&got_nod, &want[n], sizeof(got)) == 0,
                                          "kind %d, %d columns, %d rows: sum %a (without "
                                          "gradient %a), lanes %a", (int)kinds[k], c, n, got,
                                          got_nod, want[n]);
                                for (int i = 0; i < n * c; i++)
                                        cr_assert(memcmp(&d[i], &want_d[i], sizeof(float)) == 0,
                                                  "kind %d, %d columns: gradient %d is %a, "
                                                  "want %a", (int)kinds[k], c, i, d[i],
                                                  want_d[i]);
                        }
                }
}
