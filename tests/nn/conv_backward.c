/*
 * Conv1d/2d/3d backward against the adjoint of PyTorch's definition in double: the input,
 * weight and bias gradients of every geometry of the table (padded positions folded back onto
 * the positions their mode read); the parameter gradients are the same bits without dx, and
 * accumulate when the gradients are not fresh. Stride 1 with zero padding (the module folds
 * onto a padded plane there): dx is bitwise the definition's col2im of the GEMM's column
 * gradient, each input adding its terms onto 0 in the columns' row order.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/conv_ref.h"

static double dx_want[1 << 16], dp_want[1 << 16];
static float dp_first[1 << 16];

/* Case @p cc's layer, a forward and a backward (into @p dx, or none). */
static void run(struct conv_rig *r, const struct conv_case *cc, float *dx)
{
        r->desc.ops->forward(&r->l, &r->c, r->x, r->y, cc->rows);
        r->desc.ops->backward(&r->l, &r->c, r->x, r->y, r->dy, dx, cc->rows);
}

Test(conv_backward, matches_the_adjoint)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                double err;

                conv_rig_init(&r, cc);
                run(&r, cc, r.dx);
                conv_ref_backward(&r, dx_want, dp_want);
                err = conv_rel_err(r.dx, dx_want, (size_t)cc->rows * r.l.in);
                cr_assert_leq(err, 1e-5, "%s: dx relative error %g", cc->what, err);
                err = conv_rel_err(r.l.grad, dp_want, r.l.nparam);
                cr_assert_leq(err, 1e-5, "%s: dparam relative error %g", cc->what, err);
        }
}

Test(conv_backward, no_dx_same_parameter_gradients_and_accumulation)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                double err;

                conv_rig_init(&r, cc);
                run(&r, cc, r.dx);
                memcpy(dp_first, r.l.grad, r.l.nparam * sizeof(float));
                run(&r, cc, NULL);
                cr_assert_eq(memcmp(dp_first, r.l.grad, r.l.nparam * sizeof(float)), 0,
                             "%s: parameter gradients differ without dx", cc->what);
                r.l.grad_fresh = 0; /* the second of an accumulation window */
                run(&r, cc, NULL);
                conv_ref_backward(&r, dx_want, dp_want);
                for (size_t k = 0; k < r.l.nparam; k++)
                        dp_want[k] *= 2.0;
                err = conv_rel_err(r.l.grad, dp_want, r.l.nparam);
                cr_assert_leq(err, 2e-5, "%s: accumulated relative error %g", cc->what, err);
        }
}

/* 2-D, stride 1, zero padding: the CNN's second layer ([P x K] column gradient), its first
 * (the direct path's), a 'same' padding with dilation and an uneven kernel. */
static const struct conv_case folded[] = {
        /* what, nd, cin, cout, rows, size, kernel, stride, dilation, padding, mode, no_bias */
        { "cnn 32->64 k3 zeros 14x14", 2, 32, 64, 2, { 14, 14 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_ZEROS, 0 },
        { "cnn 1->32 k3 zeros 28x28", 2, 1, 32, 2, { 28, 28 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_ZEROS, 0 },
        { "2d 3->4 k2x5 zeros same d2x1 9x11", 2, 3, 4, 2, { 9, 11 }, { 2, 5 }, { 1, 1 },
          { 2, 1 }, { STRATA_PADDING_SAME, STRATA_PADDING_SAME }, STRATA_PAD_ZEROS, 1 },
};

static float dcols[1 << 18], dx_bits[1 << 16];

Test(conv_backward, stride_1_zero_padding_dx_is_col2im_bitwise)
{
        for (size_t i = 0; i < sizeof(folded) / sizeof(folded[0]); i++) {
                const struct conv_case *cc = &folded[i];
                int kh = cc->kernel[0], kw = cc->kernel[1], h = cc->size[0], w = cc->size[1];
                int co = cc->cout, kk = cc->cin * kh * kw;
                struct conv_rig r;
                int oh, ow, p;

                conv_rig_init(&r, cc);
                oh = r.out[1];
                ow = r.out[2];
                p = oh * ow;
                run(&r, cc, r.dx);
                memset(dx_bits, 0, sizeof(float) * (size_t)cc->rows * r.l.in);
                for (int n = 0; n < cc->rows; n++) {
                        float *dxn = dx_bits + (size_t)n * r.l.in;

                        r.c.k->gemm(1, 0, kk, p, co, 1.0f, r.l.param, kk,
                                    r.dy + (size_t)n * r.l.out, p, 0.0f, dcols, p);
                        for (int k = 0; k < kk; k++) { /* row k = (c, a, b), in order */
                                int c = k / (kh * kw), a = k / kw % kh, b = k % kw;

                                for (int q = 0; q < p; q++) {
                                        int y = q / ow - r.lo[1] + a * cc->dilation[0];
                                        int x = q % ow - r.lo[2] + b * cc->dilation[1];

                                        if (y >= 0 && y < h && x >= 0 && x < w)
                                                dxn[(c * h + y) * w + x] += dcols[(size_t)k * p + q];
                                }
                        }
                }
                cr_assert_eq(memcmp(dx_bits, r.dx, sizeof(float) * (size_t)cc->rows * r.l.in),
                             0, "%s: dx differs from the definition's col2im", cc->what);
        }
}

static float dx_first[1 << 16];

/*
 * The backward unfolds each sample's columns again from its input (decision 0093): with
 * more than 16 rows of columns (no direct path, which keeps its padded copies), the saved
 * values the forward left, overwritten with NaN before the backward, change no bit of dx
 * or the parameter gradients.
 */
Test(conv_backward, columns_unfolded_again_not_read_from_the_forward)
{
        for (int i = -2; i < conv_ncases; i++) {
                const struct conv_case *cc = i < 0 ? &folded[i == -2 ? 0 : 2] : &conv_cases[i];
                struct conv_rig r;
                int kk = cc->cin;

                for (int j = 0; j < cc->nd; j++)
                        kk *= cc->kernel[j];
                if (kk <= 16)
                        continue;
                conv_rig_init(&r, cc);
                run(&r, cc, r.dx);
                memcpy(dp_first, r.l.grad, r.l.nparam * sizeof(float));
                memcpy(dx_first, r.dx, sizeof(float) * (size_t)cc->rows * r.l.in);
                r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cc->rows);
                for (size_t k = 0; k < (size_t)cc->rows * r.l.naux_per_row; k++)
                        r.l.aux[k] = __builtin_nanf("");
                memset(r.dx, 0, sizeof(float) * (size_t)cc->rows * r.l.in);
                r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, r.dx, cc->rows);
                cr_assert_eq(memcmp(dp_first, r.l.grad, r.l.nparam * sizeof(float)), 0,
                             "%s: parameter gradients read the forward's saved values", cc->what);
                cr_assert_eq(memcmp(dx_first, r.dx, sizeof(float) * (size_t)cc->rows * r.l.in),
                             0, "%s: dx read the forward's saved values", cc->what);
        }
}

/*
 * The bias gradient is each channel's sum in double, one chain in row and position order,
 * rounded once (the module's contract, which the fused row loop repeats): bitwise, with
 * out-channel counts of 8 and 11 (the loop's whole groups of eight channels and a remainder),
 * positions 35 and 784, values 1e20, s, -1e20, s' along each channel (another order of the
 * additions gives another sum), and accumulation onto the gradient.
 */
Test(conv_backward, bias_gradient_is_each_channels_chain_in_order)
{
        static const struct conv_case bc[] = {
                { "2d 2->11 5x7 k3 p1", 2, 2, 11, 3, { 5, 7 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
                  { 1, 1 }, STRATA_PAD_ZEROS, 0 },
                { "2d 1->8 28x28 k3 p1", 2, 1, 8, 2, { 28, 28 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
                  { 1, 1 }, STRATA_PAD_ZEROS, 0 },
        };

        for (size_t i = 0; i < sizeof(bc) / sizeof(bc[0]); i++) {
                const struct conv_case *cc = &bc[i];
                struct conv_rig r;
                size_t wsize, sp;

                conv_rig_init(&r, cc);
                sp = (size_t)r.l.out / (size_t)cc->cout;
                wsize = r.l.nparam - (size_t)cc->cout;
                for (int j = 0; j < cc->rows * r.l.out; j++) { /* 1e20, s, -1e20, s' */
                        size_t q = (size_t)j % sp;

                        r.dy[j] = q % 4 == 0 ? 1e20f : q % 4 == 2 ? -1e20f
                                                     : (float)(j % 11) + 0.5f;
                }
                for (int pass = 0; pass < 2; pass++) {
                        if (pass)
                                memcpy(dp_first, r.l.grad, r.l.nparam * sizeof(float));
                        r.l.grad_fresh = !pass;
                        r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, NULL, cc->rows);
                        for (int o = 0; o < cc->cout; o++) {
                                double s = 0.0;
                                float want;

                                for (int n = 0; n < cc->rows; n++)
                                        for (size_t q = 0; q < sp; q++)
                                                s += r.dy[(size_t)n * r.l.out + o * sp + q];
                                want = pass ? dp_first[wsize + o] + (float)s : (float)s;
                                cr_assert(memcmp(&r.l.grad[wsize + o], &want, sizeof(want)) == 0,
                                          "%s pass %d: db[%d] = %.9g, want %.9g", cc->what,
                                          pass, o, r.l.grad[wsize + o], want);
                        }
                }
        }
}
