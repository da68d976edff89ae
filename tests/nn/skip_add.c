/*
 * The add module (a residual x + h): its forward and backward called alone (the skip's
 * gradient written, then added onto by a second reader), and residual models through the
 * public API against the same models computed by hand in double: y = relu(linear(x)) + x, and
 * a source with parameters read by two add modules, whose gradient gathers both.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/skipref.h"

Test(skip_add, forward_and_backward_of_the_module)
{
        const struct strata_device_ops *dev;
        struct strata_module d = { .ops = &strata_add, .from = 0 };
        struct strata_layer l = { .desc = &d, .index = 2, .in = 6, .out = 6,
                                  .in_dims = { 6, 0, { 0 } }, .from_width = 6,
                                  .from_dims = { 6, 0, { 0 } }, .from_name = "linear" };
        struct strata_module_shape s;
        struct strata_step_ctx c;
        float x[12], h[12], y[12], dy[12], dx[12], dh[12];

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
        c = (struct strata_step_ctx){ .k = dev->kernels, .train = 1 };
        cr_assert_eq(strata_add.shape(&l, 6, &s), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(s.out, 6);
        cr_assert(s.reads_from);
        cr_assert_eq(s.params + s.state + s.aux_fixed + s.aux_per_row, 0);
        cr_assert_eq(s.bf16_io, 0, "its boundaries stay f32");
        for (int i = 0; i < 12; i++) {
                x[i] = (float)i - 3.5f;
                h[i] = 0.25f * (float)(i * i);
                dy[i] = 1.0f / (float)(i + 1);
                dh[i] = 100.0f;
        }
        l.skip = h;
        strata_add.forward(&l, &c, x, y, 2);
        for (int i = 0; i < 12; i++)
                cr_assert_eq(y[i], x[i] + h[i]);
        l.dskip = dh;
        l.dskip_add = 0;
        strata_add.backward(&l, &c, x, y, dy, dx, 2);
        for (int i = 0; i < 12; i++) {
                cr_assert_eq(dx[i], dy[i]);
                cr_assert_eq(dh[i], dy[i], "the last reader writes the skip's gradient");
        }
        l.dskip_add = 1;
        strata_add.backward(&l, &c, x, y, dy, NULL, 2);
        for (int i = 0; i < 12; i++)
                cr_assert_eq(dh[i], dy[i] + dy[i], "another reader adds onto it");
}

/* y = relu(linear(x)) + x, then a linear head: the skip reads the model's input. */
Test(skip_add, residual_over_the_input_matches_double)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 12 },
                { .ops = &strata_relu },
                { .ops = &strata_add, .from = -1 },
                { .ops = &strata_linear, .out = 3 },
        };
        struct strata_model m = { .in_features = 12, .nmodules = 4, .modules = mods };

        skipref_check(&m, 8, 1e-5);
}

/* Module 0's output feeds the chain and two add modules: its gradient is the sum of three. */
Test(skip_add, a_source_read_twice_gathers_every_gradient)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 16 },
                { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 16 },
                { .ops = &strata_add, .from = 0 },
                { .ops = &strata_tanh },
                { .ops = &strata_add, .from = 0 },
                { .ops = &strata_linear, .out = 3 },
        };
        struct strata_model m = { .in_features = 10, .nmodules = 7, .modules = mods };

        skipref_check(&m, 8, 1e-5);
}
