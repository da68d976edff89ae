/*
 * The convolution's small products (nn/conv_small.c runs a reduction of at most 16 terms, and a
 * weight gradient of at most 64 elements, in its own loops instead of the GEMM) give the
 * GEMM's bits: the forward output, the weight gradient and the column gradient against the
 * driver's gemm on the same operands, bitwise; and a step gives the same bits under every
 * CPU kernel set (native, portable, scalar). Shapes: TorchFort's FCN (1 -> 1 channel, 3 x 3
 * circular over 32 x 32, batch 16: every product direct, the weight gradient in 4 chunks of
 * the GEMM's 256), the first layer of the Fashion-MNIST CNN (1 -> 32, 28 x 28: forward
 * direct, gradients through the GEMM), 1 -> 9 channels (an odd row after the pairs of AVX2's
 * two-row product, decision 0115; 144 and 25 positions), a 1-D case whose 70 positions leave
 * a tail, and 2-D and 3-D cases with dilation, reflect and replicate padding. Where the stride is 1 the module
 * reads a padded copy of the input instead of columns (its direct path): the columns the
 * GEMM gets here are the definition's (conv_ref_cols), so the check is against the
 * definition's operands, not the module's own saved values.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/drivers.h"
#include "tests/support/conv_ref.h"

static const struct conv_case cases[] = {
        /* what, nd, cin, cout, rows, size, kernel, stride, dilation, padding, mode, no_bias */
        { "fcn 1->1 k3 circular 32x32", 2, 1, 1, 16, { 32, 32 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_CIRCULAR, 0 },
        { "cnn 1->32 k3 zeros 28x28", 2, 1, 32, 2, { 28, 28 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_ZEROS, 0 },
        /* the forward's product on columns (9 x 9 weights: off the direct path) with an odd
         * last row, 144 = 4 x 32 + 2 x 8 positions, then fewer than 32 (decision 0115) */
        { "2d 1->9 k3 replicate 12x12", 2, 1, 9, 2, { 12, 12 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_REPLICATE, 0 },
        { "2d 1->9 k3 reflect 5x5", 2, 1, 9, 2, { 5, 5 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 },
          STRATA_PAD_REFLECT, 0 },
        { "1d 2->3 k5 replicate 70 no bias", 1, 2, 3, 3, { 70 }, { 5 }, { 1 }, { 1 }, { 2 },
          STRATA_PAD_REPLICATE, 1 },
        { "2d 1->3 k3 reflect d2x1 p2x1 40x37", 2, 1, 3, 2, { 40, 37 }, { 3, 3 }, { 1, 1 },
          { 2, 1 }, { 2, 1 }, STRATA_PAD_REFLECT, 0 },
        { "3d 1->3 k2x2x3 replicate d1x2x1 p1", 3, 1, 3, 2, { 3, 5, 4 }, { 2, 2, 3 }, { 1, 1, 1 },
          { 1, 2, 1 }, { 1, 1, 1 }, STRATA_PAD_REPLICATE, 0 },
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static float want[1 << 16], cols[1 << 16], y0[1 << 16], g0[1 << 16], dx0[1 << 16];

/* Rows, positions and K of the rig's layer. */
static void dims(const struct conv_rig *r, int *p, int *kk)
{
        *p = r->s.out / r->cc->cout;
        *kk = (int)((r->s.params - (r->cc->no_bias ? 0 : (size_t)r->cc->cout)) / r->cc->cout);
}

Test(conv_small_products, forward_is_the_gemm_bitwise)
{
        for (int i = 0; i < NCASES; i++) {
                struct conv_rig r;
                int p, kk, co = cases[i].cout;

                conv_rig_init(&r, &cases[i]);
                dims(&r, &p, &kk);
                r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cases[i].rows);
                for (int n = 0; n < cases[i].rows; n++) {
                        conv_ref_cols(&r, n, cols);
                        r.c.k->gemm(0, 0, co, p, kk, 1.0f, r.l.param, kk, cols, p, 0.0f, want, p);
                        for (int o = 0; o < co && !cases[i].no_bias; o++)
                                for (int q = 0; q < p; q++)
                                        want[(size_t)o * p + q] += r.l.param[co * kk + o];
                        cr_assert_eq(memcmp(want, r.y + (size_t)n * r.l.out,
                                            (size_t)r.l.out * sizeof(float)), 0,
                                     "%s: sample %d's output differs from the GEMM's",
                                     cases[i].what, n);
                }
        }
}

Test(conv_small_products, gradients_are_the_gemm_bitwise)
{
        for (int i = 0; i < NCASES; i++) {
                struct conv_rig r;
                int p, kk, co = cases[i].cout, rows = cases[i].rows;

                conv_rig_init(&r, &cases[i]);
                dims(&r, &p, &kk);
                r.desc.ops->forward(&r.l, &r.c, r.x, r.y, rows);
                r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, NULL, rows);
                for (int n = 0; n < rows; n++) {
                        conv_ref_cols(&r, n, cols);
                        r.c.k->gemm(0, 1, co, kk, p, 1.0f, r.dy + (size_t)n * r.l.out, p, cols,
                                    p, n ? 1.0f : 0.0f, want, kk);
                }
                cr_assert_eq(memcmp(want, r.l.grad, (size_t)co * kk * sizeof(float)), 0,
                             "%s: the weight gradient differs from the GEMM's", cases[i].what);
                if (co > 16 || co * kk > 64)
                        continue; /* the GEMM itself, or off the direct path, where the
                                   * columns' gradient is not kept in aux */
                r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, r.dx, rows);
                for (int n = 0; n < rows; n++) {
                        r.c.k->gemm(1, 0, kk, p, co, 1.0f, r.l.param, kk,
                                    r.dy + (size_t)n * r.l.out, p, 0.0f, want, p);
                        cr_assert_eq(memcmp(want, r.l.aux + (size_t)n * r.l.naux_per_row,
                                            (size_t)kk * p * sizeof(float)), 0,
                                     "%s: sample %d's column gradient differs from the GEMM's",
                                     cases[i].what, n);
                }
        }
}

/* The set's kernels, the calling thread warmed up with a packing buffer as a device's is. */
static const struct strata_kernel_ops *kernels(enum strata_kernels set)
{
        static void *buf;
        const struct strata_device_ops *d;

        if (strata__cpu_driver_for(set, &d) != STRATA_OK || d->prepare(1) != STRATA_OK)
                return NULL;
        if (!buf)
                buf = aligned_alloc(64, (strata__cpu_driver.scratch_bytes() + 63) / 64 * 64);
        cr_assert_not_null(buf);
        strata__cpu_driver.warm_up(buf);
        return d->kernels;
}

Test(conv_small_products, same_bits_under_every_kernel_set)
{
        static const enum strata_kernels sets[] = { STRATA_KERNELS_NATIVE,
                                                    STRATA_KERNELS_PORTABLE,
                                                    STRATA_KERNELS_SCALAR };

        for (int i = 0; i < NCASES; i++) {
                for (int s = 0; s < 3; s++) {
                        const struct strata_kernel_ops *k = kernels(sets[s]);
                        struct conv_rig r;
                        size_t ny, nx, ng;

                        if (!k)
                                continue; /* a set this CPU cannot run */
                        conv_rig_init(&r, &cases[i]);
                        r.c.k = k;
                        r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cases[i].rows);
                        r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, r.dx, cases[i].rows);
                        ny = (size_t)cases[i].rows * r.l.out * sizeof(float);
                        nx = (size_t)cases[i].rows * r.l.in * sizeof(float);
                        ng = r.l.nparam * sizeof(float);
                        if (s == 0) {
                                memcpy(y0, r.y, ny);
                                memcpy(dx0, r.dx, nx);
                                memcpy(g0, r.l.grad, ng);
                                continue;
                        }
                        cr_assert_eq(memcmp(y0, r.y, ny), 0, "%s: set %d's output differs",
                                     cases[i].what, s);
                        cr_assert_eq(memcmp(dx0, r.dx, nx), 0, "%s: set %d's dx differs",
                                     cases[i].what, s);
                        cr_assert_eq(memcmp(g0, r.l.grad, ng), 0,
                                     "%s: set %d's parameter gradients differ", cases[i].what,
                                     s);
                }
        }
}
