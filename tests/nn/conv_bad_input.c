/*
 * A convolution that does not fit its input or its arguments is refused when the run is
 * planned, with a message naming the module, the dimension and the value at fault: a flat
 * input, an input of the wrong dimension count, a kernel larger than the padded input,
 * reflect padding not less than the extent, circular padding past it, an unknown padding
 * mode, 'same' with stride 2, negative or zero sizes, no out channels; and a device whose
 * memory is its own (the unfolding runs on the host).
 */
#include <criterion/criterion.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"

/* Planning refused with STRATA_EINVAL and a message holding @p needle. */
static void refused(const struct rig *r, const char *what, const char *needle)
{
        rig_plan_refused(r, STRATA_EINVAL, what, needle);
}

/* The conv rig afresh: its first module, the Conv2d, for the caller to change. */
static struct strata_module *conv(struct rig *r)
{
        rig_init_conv(r);
        return &r->mods[0];
}

Test(conv_bad_input, the_rig_itself_plans)
{
        struct strata_plan_info pl;
        struct rig r;

        conv(&r);
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
}

Test(conv_bad_input, flat_input_refused)
{
        struct rig r;

        conv(&r);
        r.model.in_dims = (struct strata_dims){ 0 };
        refused(&r, "flat input", "conv2d (module 0): needs an input of 2 spatial dimensions, "
                                  "got 36 flat features; set the model's in_dims");
}

Test(conv_bad_input, wrong_dimension_count_refused)
{
        struct rig r;

        conv(&r)->ops = &strata_conv3d;
        refused(&r, "conv3d on 2-D", "conv3d (module 0): needs an input of 3 spatial "
                                     "dimensions, got 2");
        conv(&r)->ops = &strata_conv1d;
        r.model.in_dims = (struct strata_dims){ 2, 2, { 3, 6 } };
        refused(&r, "conv1d on 2-D", "conv1d (module 0): needs an input of 1 spatial "
                                     "dimensions, got 2 (2 channels of 3 x 6 x 1)");
}

Test(conv_bad_input, kernel_larger_than_padded_input_refused)
{
        struct rig r;

        conv(&r)->kernel[0] = 9;
        refused(&r, "kernel 9 on 6 + 2", "kernel 9 (dilation 1) spans 9 positions in "
                                         "dimension 0, more than the padded input's 8");
        conv(&r)->padding[0] = STRATA_PADDING_NONE;
        r.mods[0].dilation[0] = 3;
        r.mods[0].padding_mode = STRATA_PAD_ZEROS;
        refused(&r, "dilated kernel", "kernel 3 (dilation 3) spans 7 positions in dimension 0, "
                                      "more than the padded input's 6");
}

Test(conv_bad_input, padding_mode_limits_refused)
{
        struct rig r;

        conv(&r)->padding_mode = STRATA_PAD_REFLECT;
        r.mods[0].padding[0] = 6;
        r.mods[0].kernel[0] = 1;
        refused(&r, "reflect 6 on 6", "reflect padding 6 in dimension 0 must be less than the "
                                      "input's extent 6");
        conv(&r)->padding[0] = 7;
        refused(&r, "circular 7 on 6", "circular padding 7 in dimension 0 must be at most the "
                                       "input's extent 6");
        conv(&r)->padding_mode = STRATA_PAD_COUNT;
        refused(&r, "mode 4", "padding_mode 4 is not one of zeros (0), circular (1), "
                              "reflect (2), replicate (3)");
        conv(&r)->padding_mode = -1;
        refused(&r, "mode -1", "padding_mode -1 is not one of");
}

Test(conv_bad_input, same_with_stride_2_refused)
{
        struct rig r;

        conv(&r)->padding[0] = STRATA_PADDING_SAME;
        r.mods[0].stride[1] = 2;
        refused(&r, "same, stride (1, 2)", "conv2d (module 0): padding 'same' needs stride 1; "
                                           "dimension 1 has stride 2");
}

Test(conv_bad_input, negative_and_zero_values_refused)
{
        struct rig r;

        conv(&r)->kernel[1] = -3;
        refused(&r, "kernel -3", "dimension 1 has kernel -3, stride 0, dilation 0");
        conv(&r)->kernel[0] = 0;
        refused(&r, "kernel 0", "dimension 0 has kernel 0");
        conv(&r)->stride[0] = -1;
        refused(&r, "stride -1", "dimension 0 has kernel 3, stride -1");
        conv(&r)->dilation[1] = -2;
        refused(&r, "dilation -2", "dimension 1 has kernel 3, stride 0, dilation -2");
        conv(&r)->padding[1] = -3;
        refused(&r, "padding -3", "dimension 1 has padding -3");
        conv(&r)->out = 0;
        refused(&r, "out 0", "conv2d (module 0): out channels 0 <= 0");
        conv(&r)->out = -4;
        refused(&r, "out -4", "out channels -4 <= 0");
}

/* The unfolding runs on the host: a device with memory of its own refuses the model. */
Test(conv_bad_input, device_with_its_own_memory_refused)
{
        struct strata_runtime *rt = NULL;
        struct rig r;

        conv(&r);
        r.cfg.device.driver = devsim_driver();
        rig_plan_refused(&r, STRATA_ENOTSUP, "devsim", "module 0 (conv2d) computes on the "
                                                       "host");
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENOTSUP);
        cr_assert_null(rt);
}
