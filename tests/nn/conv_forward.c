/*
 * Conv1d/2d/3d forward against PyTorch's definition evaluated in double (tests/support/
 * conv_ref.c): every padding mode, stride, dilation, 'same', odd sizes, with and without bias;
 * a second forward gives the same bits, and so do equal samples whichever way round their
 * GEMM ran (the last sample of a call runs untransposed).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/conv_ref.h"

static double want[1 << 16];
static float again[1 << 16];

Test(conv_forward, matches_the_direct_convolution)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                size_t n;
                double err;

                conv_rig_init(&r, cc);
                n = (size_t)cc->rows * r.l.out;
                r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cc->rows);
                conv_ref_forward(&r, want);
                err = conv_rel_err(r.y, want, n);
                cr_assert_leq(err, 1e-5, "%s: relative error %g", cc->what, err);
                memcpy(again, r.y, n * sizeof(float));
                r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cc->rows);
                cr_assert_eq(memcmp(again, r.y, n * sizeof(float)), 0, "%s: not repeatable",
                             cc->what);
        }
}

/* The declared output layout: out channels over the output extents, PyTorch's formula. */
Test(conv_forward, declares_its_output_layout)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                int n;

                conv_rig_init(&r, cc);
                n = r.s.out_dims.channels;
                cr_assert_eq(n, cc->cout, "%s", cc->what);
                cr_assert_eq(r.s.out_dims.ndim, cc->nd, "%s", cc->what);
                for (int d = 0; d < cc->nd; d++) {
                        cr_assert_eq(r.s.out_dims.size[d], r.out[3 - cc->nd + d], "%s dim %d",
                                     cc->what, d);
                        n *= r.s.out_dims.size[d];
                }
                cr_assert_eq(n, r.s.out, "%s", cc->what);
                cr_assert_eq(r.s.groups[0].ndim, 2 + cc->nd, "%s", cc->what);
                cr_assert_eq(r.s.groups[0].shape[0], (size_t)cc->cout);
                cr_assert_eq(r.s.groups[0].shape[1], (size_t)cc->cin);
                for (int d = 0; d < cc->nd; d++)
                        cr_assert_eq(r.s.groups[0].shape[2 + d], (size_t)cc->kernel[d]);
                cr_assert_eq(r.s.ngroups, cc->no_bias ? 1 : 2, "%s", cc->what);
        }
}

Test(conv_forward, equal_samples_equal_bits_either_way_round)
{
        const struct conv_case *cc = &conv_cases[conv_ncases - 1];
        struct conv_rig r;
        size_t out;

        conv_rig_init(&r, cc);
        out = (size_t)r.l.out;
        cr_assert_gt((size_t)cc->cout, out / (size_t)cc->cout, "%s: not transposed", cc->what);
        for (int n = 1; n < cc->rows; n++)
                memcpy(r.x + (size_t)n * r.l.in, r.x, (size_t)r.l.in * sizeof(float));
        r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cc->rows);
        for (int n = 1; n < cc->rows; n++)
                cr_assert_eq(memcmp(r.y + (size_t)n * out, r.y, out * sizeof(float)), 0,
                             "%s: sample %d differs from sample 0", cc->what, n);
}
