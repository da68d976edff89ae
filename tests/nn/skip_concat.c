/*
 * The concat module (torch.cat((x, h), dim=1)): its forward and backward called alone over
 * samples with a layout (x's channels then h's, the spatial extents kept), and models through
 * the public API against the same models computed by hand in double: concatenations of an
 * earlier module's output and of the model's input, and one beside a residual add.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/skipref.h"

/* x (2, 2, 3) and h (1, 2, 3): y (3, 2, 3) is x's 12 values then h's 6, row by row. */
Test(skip_concat, forward_and_backward_of_the_module)
{
        const struct strata_device_ops *dev;
        struct strata_module d = { .ops = &strata_concat, .from = 1 };
        struct strata_layer l = { .desc = &d, .index = 4, .in = 12,
                                  .in_dims = { 2, 2, { 2, 3, 0 } }, .from_width = 6,
                                  .from_dims = { 1, 2, { 2, 3, 0 } }, .from_name = "relu" };
        struct strata_module_shape s;
        struct strata_step_ctx c;
        float x[24], h[12], y[36], dy[36], dx[24], dh[12];

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
        c = (struct strata_step_ctx){ .k = dev->kernels, .train = 1 };
        cr_assert_eq(strata_concat.shape(&l, 12, &s), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(s.out, 18);
        cr_assert_eq(s.out_dims.channels, 3);
        cr_assert_eq(s.out_dims.ndim, 2);
        cr_assert_eq(s.out_dims.size[0], 2);
        cr_assert_eq(s.out_dims.size[1], 3);
        cr_assert(s.reads_from);
        cr_assert_eq(s.bf16_io, 0);
        l.out = s.out;
        for (int i = 0; i < 24; i++)
                x[i] = (float)i;
        for (int i = 0; i < 12; i++)
                h[i] = -(float)i - 1.0f;
        for (int i = 0; i < 36; i++)
                dy[i] = 0.5f * (float)i;
        l.skip = h;
        strata_concat.forward(&l, &c, x, y, 2);
        for (int r = 0; r < 2; r++) {
                for (int k = 0; k < 12; k++)
                        cr_assert_eq(y[r * 18 + k], x[r * 12 + k]);
                for (int k = 0; k < 6; k++)
                        cr_assert_eq(y[r * 18 + 12 + k], h[r * 6 + k]);
        }
        l.dskip = dh;
        l.dskip_add = 0;
        strata_concat.backward(&l, &c, x, y, dy, dx, 2);
        for (int r = 0; r < 2; r++) {
                for (int k = 0; k < 12; k++)
                        cr_assert_eq(dx[r * 12 + k], dy[r * 18 + k]);
                for (int k = 0; k < 6; k++)
                        cr_assert_eq(dh[r * 6 + k], dy[r * 18 + 12 + k]);
        }
        l.dskip_add = 1;
        strata_concat.backward(&l, &c, x, y, dy, NULL, 2);
        for (int r = 0; r < 2; r++)
                for (int k = 0; k < 6; k++)
                        cr_assert_eq(dh[r * 6 + k], 2.0f * dy[r * 18 + 12 + k]);
}

/* An earlier module's output and the model's input concatenated, in one model. */
Test(skip_concat, concatenations_match_double)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 8 },
                { .ops = &strata_tanh },
                { .ops = &strata_linear, .out = 6 },
                { .ops = &strata_concat, .from = 1 },   /* 6 + 8 */
                { .ops = &strata_concat, .from = -1 },  /* 14 + 10 */
                { .ops = &strata_linear, .out = 3 },
        };
        struct strata_model m = { .in_features = 10, .nmodules = 6, .modules = mods };

        skipref_check(&m, 8, 1e-5);
}

/* A concat and an add reading the same module: U-Net's and ResNet's joins together. */
Test(skip_concat, beside_an_add_matches_double)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 8 },
                { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 8 },
                { .ops = &strata_add, .from = 1 },
                { .ops = &strata_concat, .from = 1 },   /* 8 + 8 */
                { .ops = &strata_tanh },
                { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model m = { .in_features = 10, .nmodules = 7, .modules = mods };

        skipref_check(&m, 6, 1e-5);
}
