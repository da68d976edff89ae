/*
 * MaxPool1d/2d/3d against PyTorch's definition evaluated in the test: each output the largest
 * of the inputs at o s - p + k d (those inside the sample), the first of equals in scan order
 * (kernel dimensions outermost first), a NaN winning; the backward routes each output's
 * gradient to that input. Odd sizes, strides, padding and dilation in 1-D, 2-D and 3-D, rows
 * and channels, the defaults (stride = kernel), ties, -inf and NaN windows, windows wholly in
 * the padding (dilation can leave one: -inf, no gradient), and a sweep of small cases.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch/bits.h"
#include "nn/spatial.h"
#include "tests/support/modcall.h"

#define ROWS 3

static float x[MODCALL_MAX], y[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double want[MODCALL_MAX], dwant[MODCALL_MAX];
static int negative_zero; /* run_case: the first output's gradient is -0 */

/* The reference for one output: its input index (flat in the channel) and value. */
static int ref_max(const struct pool_case *t, const float *xc, const int *o)
{
        int e[3] = { 1, 1, 1 }, n[3] = { 1, 1, 1 }, best = -1, at[3];
        double v = -INFINITY;

        for (int i = 0; i < t->nd; i++) {
                e[3 - t->nd + i] = t->in[i];
                n[3 - t->nd + i] = t->k[i];
        }
        for (int a = 0; a < n[0]; a++)
                for (int b = 0; b < n[1]; b++)
                        for (int c = 0; c < n[2]; c++) {
                                int kk[3] = { a, b, c }, inside = 1, idx = 0;

                                for (int j = 0; j < 3; j++) {
                                        int i = j - (3 - t->nd);

                                        at[j] = i < 0 ? 0 : o[i] * t->s[i] - t->p[i] +
                                                                kk[j] * t->d[i];
                                        inside &= at[j] >= 0 && at[j] < e[j];
                                        idx = idx * e[j] + at[j];
                                }
                                if (!inside)
                                        continue;
                                if (best < 0)
                                        best = idx; /* PyTorch's start: the first inside */
                                if (xc[idx] > v || isnan(xc[idx])) {
                                        v = xc[idx];
                                        best = idx;
                                }
                        }
        return best;
}

/* Forward and backward of case @p t against the reference; x already filled. */
static void run_case(const struct pool_case *t)
{
        struct modcall *m = &(struct modcall){ 0 };
        int ins, outs, o[3];

        pool_case_layer(m, t, ROWS, &ins, &outs);
        modcall_wave(dy, ROWS * m->l.out, 0.91, 0.2);
        if (negative_zero)
                dy[0] = -0.0f;
        memset(dwant, 0, sizeof(dwant));
        for (int pl = 0; pl < ROWS * t->c; pl++)
                for (int n = 0; n < outs; n++) {
                        int best;

                        pool_case_coords(t, n, o);
                        best = ref_max(t, x + pl * ins, o);
                        if (best < 0) { /* a window wholly in the padding: -inf, as PyTorch */
                                want[pl * outs + n] = -INFINITY;
                                continue;
                        }
                        want[pl * outs + n] = x[pl * ins + best];
                        dwant[pl * ins + best] += dy[pl * outs + n];
                }
        t->ops->forward(&m->l, &m->c, x, y, ROWS);
        for (int i = 0; i < ROWS * m->l.out; i++)
                cr_assert(y[i] == (float)want[i] || (isnan(y[i]) && isnan(want[i])),
                          "%s y[%d] = %g, want %g", t->ops->name, i, y[i], want[i]);
        t->ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        cr_assert_leq(modcall_rel_diff(dx, dwant, ROWS * m->l.in), 1e-6, "%s dx",
                      t->ops->name);
}

static const struct pool_case cases[] = {
        { &strata_maxpool1d, 1, 2, { 11 }, { 3 }, { 2 }, { 1 }, { 2 } },
        { &strata_maxpool1d, 1, 1, { 10 }, { 4 }, { 3 }, { 2 }, { 1 } },
        { &strata_maxpool2d, 2, 3, { 7, 9 }, { 3, 2 }, { 2, 1 }, { 1, 0 }, { 1, 2 } },
        { &strata_maxpool2d, 2, 2, { 8, 8 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 5, 6 }, { 3, 3 }, { 1, 2 }, { 1, 1 }, { 2, 1 } },
        { &strata_maxpool3d, 3, 2, { 5, 6, 7 }, { 2, 3, 2 }, { 1, 2, 2 }, { 1, 1, 0 },
          { 1, 1, 1 } },
        { &strata_maxpool3d, 3, 1, { 4, 5, 6 }, { 3, 2, 3 }, { 2, 1, 3 }, { 1, 0, 1 },
          { 1, 2, 1 } },
        /* 2 x 2 stride 2 over even widths (the plane-wide path): an odd height's last row
         * unread, output rows of 7 and 2, a depth in front, and rows of 300 outputs, more
         * than one block of the path's stack buffer; rows of 16 and 9 outputs (its backward
         * runs 16 outputs at a time: rows of 8, 17, 23, 24 and 31, tails of 1, 7, 8 and 15
         * after a whole 16) */
        { &strata_maxpool2d, 2, 2, { 9, 14 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 3, { 6, 4 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool3d, 3, 2, { 3, 5, 6 }, { 1, 2, 2 }, { 1, 2, 2 }, { 0, 0, 0 },
          { 1, 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 4, 600 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 2, { 7, 32 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool3d, 3, 1, { 2, 5, 18 }, { 1, 2, 2 }, { 1, 2, 2 }, { 0, 0, 0 },
          { 1, 1, 1 } },
        { &strata_maxpool2d, 2, 2, { 4, 16 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 5, 46 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 4, 34 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 3, 48 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        { &strata_maxpool2d, 2, 1, { 4, 62 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
};

Test(maxpool, matches_the_definition)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                modcall_wave(x, MODCALL_MAX, 0.37, 0.1);
                run_case(&cases[i]);
        }
}

static void sweep_case(const struct pool_case *t)
{
        modcall_wave(x, MODCALL_MAX, 0.37, 0.1);
        run_case(t);
}

/* Every accepted combination of small extents, kernels, strides, padding and dilation. */
Test(maxpool, sweep)
{
        static const struct strata_module_ops *const ops[3] = {
                &strata_maxpool1d, &strata_maxpool2d, &strata_maxpool3d };

        cr_assert_gt(pool_case_sweep(ops, 1, sweep_case), 300);
}

/* Equal values: the first in scan order takes the gradient, as PyTorch's. */
Test(maxpool, ties_go_to_the_first)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                for (int j = 0; j < MODCALL_MAX; j++)
                        x[j] = (float)(j % 3 == 0);
                run_case(&cases[i]);
        }
}

/* A window of -inf yields -inf from its first input; a NaN anywhere in a window wins. */
Test(maxpool, infinities_and_nan)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                for (int j = 0; j < MODCALL_MAX; j++)
                        x[j] = j % 5 == 2 ? NAN : -INFINITY;
                run_case(&cases[i]);
        }
}

/* stride 0 is the kernel and {2} is 2 in every dimension: MaxPool2d(2) on 8 x 8. */
Test(maxpool, defaults_are_pytorchs)
{
        struct strata_module desc = { .ops = &strata_maxpool2d, .kernel = { 2 } };
        struct modcall *m = &(struct modcall){ 0 };

        modcall_init(m, &desc, (struct strata_dims){ 2, 2, { 8, 8 } }, 1);
        cr_assert_eq(m->s.out, 2 * 4 * 4);
        cr_assert_eq(m->s.out_dims.size[0], 4);
        cr_assert_eq(m->s.out_dims.size[1], 4);
        cr_assert_eq(m->s.aux_per_row, (size_t)m->s.out);
        cr_assert_eq(m->s.batch_stats, 0);
        cr_assert_eq(m->s.bf16_io, 0);
        cr_assert_eq(m->s.host_loops, 1);
        modcall_wave(x, 128, 0.37, 0.1);
        desc.ops->forward(&m->l, &m->c, x, y, 1);
        cr_assert_eq(y[0], fmaxf(fmaxf(x[0], x[1]), fmaxf(x[8], x[9])));
        cr_assert_eq(y[31], fmaxf(fmaxf(x[118], x[119]), fmaxf(x[126], x[127])));
}

/*
 * Windows that do not overlap (kernel = stride, no dilation: the 2 x 2 pools and their plane
 * path among them): each input's gradient is exactly 0 + one output's gradient or 0, bitwise,
 * a -0 gradient landing as +0 as onto the zeroed input gradient; values as the definition.
 */
Test(maxpool, gradients_of_disjoint_windows_are_exact)
{
        negative_zero = 1;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct pool_case *t = &cases[i];
                int disjoint = 1, n;

                for (int j = 0; j < t->nd; j++)
                        disjoint &= t->k[j] == t->s[j] && t->d[j] == 1 && t->p[j] == 0;
                if (!disjoint)
                        continue;
                modcall_wave(x, MODCALL_MAX, 0.37, 0.1);
                run_case(t);
                n = 1;
                for (int j = 0; j < t->nd; j++)
                        n *= t->in[j];
                for (int j = 0; j < ROWS * t->c * n; j++) {
                        float w = (float)dwant[j];

                        cr_assert(memcmp(&dx[j], &w, sizeof(float)) == 0,
                                  "%s case %zu: dx[%d] = %g (signbit %d), want %g", t->ops->name,
                                  i, j, dx[j], signbit(dx[j]) != 0, w);
                }
        }
        negative_zero = 0;
}

/*
 * The 2 x 2 backward's two forms of a row (AVX-512's or AVX2's where the CPU has them, C's
 * elsewhere; AVX-512's not under the sanitizers) give the same bits, gradients of -0, +-inf
 * and NaN in every lane and tail included, and each gives what the definition's zeroed
 * scatter gives. The gradient, argmax and input gradient buffers are exactly the call's, on
 * the heap, the input gradient's followed by 16 guard floats: AVX2's rows read and write past
 * a row but not past the call's buffers, which the guards and ASan check.
 */
Test(maxpool, both_forms_of_the_2x2_backward_agree_bitwise)
{
        static float dx_c[MODCALL_MAX];
        enum { GUARD = 16 };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct pool_case *t = &cases[i];
                struct modcall *m = &(struct modcall){ 0 };
                int ins, outs, n;

                if (t->nd != 2 || t->k[0] != 2 || t->k[1] != 2 || t->s[0] != 2 ||
                    t->s[1] != 2 || t->p[0] || t->p[1] || t->d[0] > 1 || t->d[1] > 1 ||
                    t->in[1] % 2)
                        continue;
                pool_case_layer(m, t, ROWS, &ins, &outs);
                modcall_wave(x, MODCALL_MAX, 0.37, 0.1);
                modcall_wave(dy, ROWS * m->l.out, 0.91, 0.2);
                for (int j = 0; j < ROWS * m->l.out; j += 5) /* every lane meets each */
                        dy[j] = j % 4 == 0 ? -0.0f : j % 4 == 1 ? INFINITY
                                                    : j % 4 == 2 ? -INFINITY : NAN;
                n = ROWS * m->l.in;
                t->ops->forward(&m->l, &m->c, x, y, ROWS);
                strata__maxpool_force_c(1);
                memset(dx_c, 0xa5, sizeof(dx_c));
                t->ops->backward(&m->l, &m->c, x, y, dy, dx_c, ROWS);
                strata__maxpool_force_c(0);
                {
                        size_t no = (size_t)ROWS * (size_t)m->l.out;
                        float *dyh = malloc(sizeof(float) * no), *dxh;
                        void *ah = malloc(sizeof(int32_t) * no), *aux = m->l.aux;

                        dxh = malloc(sizeof(float) * (size_t)(n + GUARD));
                        cr_assert(dyh && ah && dxh);
                        memcpy(dyh, dy, sizeof(float) * no);
                        memcpy(ah, aux, sizeof(int32_t) * no);
                        memset(dxh, 0x5a, sizeof(float) * (size_t)(n + GUARD));
                        m->l.aux = ah;
                        t->ops->backward(&m->l, &m->c, x, y, dyh, dxh, ROWS);
                        m->l.aux = aux;
                        for (int j = n; j < n + GUARD; j++)
                                cr_assert_eq(strata__bits_f(dxh[j]), 0x5a5a5a5au,
                                             "case %zu: written past the call", i);
                        memcpy(dx, dxh, sizeof(float) * (size_t)n);
                        free(dyh);
                        free(ah);
                        free(dxh);
                }
                cr_assert(memcmp(dx, dx_c, sizeof(float) * (size_t)n) == 0,
                          "case %zu: the two forms differ", i);
                memset(dx_c, 0, sizeof(float) * (size_t)n); /* the zeroed scatter */
                for (int pl = 0; pl < ROWS * t->c; pl++)
                        for (int o = 0; o < outs; o++) {
                                int o2[3];

                                pool_case_coords(t, o, o2);
                                dx_c[pl * ins + ref_max(t, x + pl * ins, o2)] +=
                                        dy[pl * outs + o];
                        }
                cr_assert(memcmp(dx, dx_c, sizeof(float) * (size_t)n) == 0,
                          "case %zu: not the definition's bits", i);
        }
}

/*
 * The 2 x 2 forward's two forms (AVX2 where the CPU has it, the sanitized builds included,
 * C's elsewhere) give the same values and argmaxes bitwise, and the argmaxes are the
 * definition's: inputs drawn from +0, -0, equal values, NaN and +-inf (so windows meet every
 * tie and order), one row and several, rows of 2, 4, 7, 8, 9, 14, 16, 17 and 300 outputs. The
 * input, output and argmax buffers are exactly the call's, on the heap, each output buffer
 * followed by 16 guard floats: the AVX2 form's last block of a row reads and writes past the
 * row but not past the call's buffers, which the guards and ASan check.
 */
Test(maxpool, both_forms_of_the_2x2_forward_agree_bitwise)
{
        static const struct pool_case more[] = {
                { &strata_maxpool2d, 2, 2, { 28, 28 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
                { &strata_maxpool2d, 2, 3, { 14, 14 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
                { &strata_maxpool2d, 2, 1, { 5, 18 }, { 2, 2 }, { 2, 2 }, { 0, 0 }, { 1, 1 } },
        };
        static const float pick[10] = { 0.0f, -0.0f, 0.5f, 0.5f, -INFINITY, INFINITY, NAN,
                                        -0.0f, 0.0f, -1.0f };
        enum { GUARD = 16 };
        size_t nc = sizeof(cases) / sizeof(cases[0]), nm = sizeof(more) / sizeof(more[0]);
        int done = 0;

        for (size_t i = 0; i < nc + nm; i++)
                for (int rows = 1; rows <= ROWS; rows += ROWS - 1) {
                        const struct pool_case *t = i < nc ? &cases[i] : &more[i - nc];
                        struct modcall *m = &(struct modcall){ 0 };
                        int ins, outs, n, nx;
                        float *xh, *yh[2], *ah[2];

                        if (t->k[t->nd - 1] != 2 || t->k[t->nd - 2] != 2 ||
                            t->s[t->nd - 1] != 2 || t->s[t->nd - 2] != 2 ||
                            t->p[t->nd - 1] || t->p[t->nd - 2] || t->d[t->nd - 1] > 1 ||
                            t->d[t->nd - 2] > 1 || t->in[t->nd - 1] % 2 ||
                            (t->nd == 3 && (t->k[0] != 1 || t->s[0] > 1 || t->p[0])))
                                continue;
                        pool_case_layer(m, t, rows, &ins, &outs);
                        n = rows * m->l.out;
                        nx = rows * m->l.in;
                        xh = malloc(sizeof(float) * (size_t)nx);
                        cr_assert(xh);
                        for (int j = 0; j < nx; j++) /* a hash of j picks the value */
                                xh[j] = pick[((unsigned)j * 2654435761u >> 20) % 10];
                        for (int f = 0; f < 2; f++) { /* 0: C's loops, 1: the CPU's form */
                                yh[f] = malloc(sizeof(float) * (size_t)(n + GUARD));
                                ah[f] = malloc(sizeof(float) * (size_t)(n + GUARD));
                                cr_assert(yh[f] && ah[f]);
                                memset(yh[f], 0xa5, sizeof(float) * (size_t)(n + GUARD));
                                memset(ah[f], 0xa5, sizeof(float) * (size_t)(n + GUARD));
                                m->l.aux = ah[f];
                                strata__maxpool_force_c(f == 0);
                                t->ops->forward(&m->l, &m->c, xh, yh[f], rows);
                                for (int j = n; j < n + GUARD; j++)
                                        cr_assert(strata__bits_f(yh[f][j]) == 0xa5a5a5a5u &&
                                                          strata__bits_f(ah[f][j]) ==
                                                                  0xa5a5a5a5u,
                                                  "case %zu, %d rows: written past the call", i,
                                                  rows);
                        }
                        strata__maxpool_force_c(0);
                        cr_assert(memcmp(yh[0], yh[1], sizeof(float) * (size_t)n) == 0 &&
                                          memcmp(ah[0], ah[1], sizeof(float) * (size_t)n) == 0,
                                  "case %zu, %d rows: the two forms differ", i, rows);
                        for (int pl = 0; pl < rows * t->c; pl++)
                                for (int o = 0; o < outs; o++) {
                                        int o3[3], arg;

                                        pool_case_coords(t, o, o3);
                                        memcpy(&arg, &ah[1][pl * outs + o], sizeof(arg));
                                        cr_assert_eq(arg, ref_max(t, xh + pl * ins, o3),
                                                     "case %zu, plane %d, output %d", i, pl, o);
                                }
                        for (int f = 0; f < 2; f++) {
                                free(yh[f]);
                                free(ah[f]);
                        }
                        free(xh);
                        done++;
                }
        cr_assert_eq(done, 2 * 15);
}

/*
 * The ReLU before a 2 x 2 pool folded into the pool's backward (the convolutions' fused row
 * loop, decision 0109): bitwise the ReLU's backward (dx = r > 0 ? dpool : 0, r the ReLU's
 * output, the pool's input) after the pool's, on both forms of the rows; inputs of 0, -0,
 * negatives, +-inf and NaN (a pool after a ReLU meets only some of them: all are held to it),
 * gradients of -0, +-inf and NaN. Another pool or geometry is declined, nothing written.
 */
Test(maxpool, the_relu_before_folds_into_the_2x2_backward)
{
        static float dpool[MODCALL_MAX], want_dx[MODCALL_MAX];
        int done = 0;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct pool_case *t = &cases[i];
                struct modcall *m = &(struct modcall){ 0 };
                int ins, outs, n, is2x2 = t->nd >= 2 && t->k[t->nd - 2] == 2 &&
                                          t->k[t->nd - 1] == 2 && t->s[t->nd - 2] == 2 &&
                                          t->s[t->nd - 1] == 2 && !t->p[t->nd - 2] &&
                                          !t->p[t->nd - 1] && t->d[t->nd - 2] <= 1 &&
                                          t->d[t->nd - 1] <= 1 && t->in[t->nd - 1] % 2 == 0 &&
                                          (t->nd == 2 || (t->k[0] == 1 && t->s[0] <= 1 &&
                                                          !t->p[0]));

                pool_case_layer(m, t, ROWS, &ins, &outs);
                modcall_wave(x, MODCALL_MAX, 0.37, 0.1);
                for (int j = 0; j < ROWS * m->l.in; j += 3)
                        x[j] = (float[]){ 0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN }[j % 6];
                modcall_wave(dy, ROWS * m->l.out, 0.91, 0.2);
                for (int j = 0; j < ROWS * m->l.out; j += 5)
                        dy[j] = j % 4 == 0 ? -0.0f : j % 4 == 1 ? INFINITY
                                                    : j % 4 == 2 ? -INFINITY : NAN;
                n = ROWS * m->l.in;
                t->ops->forward(&m->l, &m->c, x, y, ROWS);
                t->ops->backward(&m->l, &m->c, x, y, dy, dpool, ROWS);
                for (int j = 0; j < n; j++)
                        want_dx[j] = x[j] > 0.0f ? dpool[j] : 0.0f;
                for (int c = 0; c < 2; c++) {
                        strata__maxpool_force_c(c);
                        memset(dx, 0x5a, sizeof(dx));
                        cr_assert_eq(strata__maxpool_relu_backward(&m->l, y, dy, dx, ROWS),
                                     is2x2, "case %zu: taken %d", i, !is2x2);
                        if (is2x2)
                                cr_assert(memcmp(dx, want_dx, sizeof(float) * (size_t)n) == 0,
                                          "case %zu (%s rows): not the two backwards' bits",
                                          i, c ? "C" : "the CPU's");
                        else
                                for (int j = 0; j < n; j++)
                                        cr_assert_eq(strata__bits_f(dx[j]), 0x5a5a5a5au);
                }
                strata__maxpool_force_c(0);
                done += is2x2;
        }
        cr_assert_geq(done, 8);
}
