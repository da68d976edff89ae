/*
 * Every argument the spatial modules refuse, refused by their shape with a message that names
 * the module, its index and the shape that does not fit; through the public API the model is
 * refused before anything runs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/modcall.h"

static const struct strata_dims flat64 = { 64, 0, { 0 } }, img8 = { 2, 2, { 8, 8 } };

/* The last error is @p status's name then @p message. */
static void said(int status, const char *message)
{
        char want[512];

        snprintf(want, sizeof(want), "%s: %s", strata_strerror(status), message);
        cr_assert_str_eq(strata_last_error(), want);
}

static void refused(struct strata_module desc, struct strata_dims in, int status,
                    const char *message)
{
        struct modcall *m = &(struct modcall){ 0 };

        cr_assert_eq(modcall_shape(m, &desc, in), status, "%s: %s", desc.ops->name, message);
        said(status, message);
}

Test(spatial_bad_input, pools)
{
        refused((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 3 } },
                (struct strata_dims){ 1, 2, { 2, 2 } }, STRATA_EINVAL,
                "maxpool2d (module 3): kernel 3 over an input of 2 x 2 (padding 0) leaves no "
                "output");
        refused((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 2 },
                                        .dilation = { 3 } },
                (struct strata_dims){ 1, 2, { 3, 9 } }, STRATA_EINVAL,
                "maxpool2d (module 3): kernel 2 (dilation 3) over an input of 3 x 9 (padding 0) "
                "leaves no output");
        refused((struct strata_module){ .ops = &strata_avgpool3d, .kernel = { 3, 6, 3 },
                                        .padding = { 1, 2, 1 } },
                (struct strata_dims){ 1, 3, { 4, 1, 4 } }, STRATA_EINVAL,
                "avgpool3d (module 3): kernel 3 x 6 x 3 over an input of 4 x 1 x 4 (padding "
                "1 x 2 x 1) leaves no output");
        refused((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 2 } }, flat64,
                STRATA_EINVAL, "maxpool2d (module 3): needs an input of (C, H, W); its input "
                "is a flat vector of 64 features");
        refused((struct strata_module){ .ops = &strata_maxpool1d, .kernel = { 2 } }, img8,
                STRATA_EINVAL, "maxpool1d (module 3): needs an input of (C, L); its input is "
                "2 channels of 8 x 8");
        refused((struct strata_module){ .ops = &strata_avgpool3d, .kernel = { 2 } }, img8,
                STRATA_EINVAL, "avgpool3d (module 3): needs an input of (C, D, H, W); its "
                "input is 2 channels of 8 x 8");
        refused((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 2, -3 } }, img8,
                STRATA_EINVAL, "maxpool2d (module 3): kernel -3, stride 0, padding 0, dilation "
                "0 in dimension 1 (kernel > 0, stride and dilation >= 0, padding >= 0 or "
                "STRATA_PADDING_NONE)");
        refused((struct strata_module){ .ops = &strata_maxpool2d }, img8, STRATA_EINVAL,
                "maxpool2d (module 3): kernel 0, stride 0, padding 0, dilation 0 in dimension 0 "
                "(kernel > 0, stride and dilation >= 0, padding >= 0 or STRATA_PADDING_NONE)");
        refused((struct strata_module){ .ops = &strata_avgpool2d, .kernel = { 3 },
                                        .padding = { STRATA_PADDING_SAME } },
                img8, STRATA_EINVAL, "avgpool2d (module 3): kernel 3, stride 0, padding -1, "
                "dilation 0 in dimension 0 (kernel > 0, stride and dilation >= 0, padding >= 0 "
                "or STRATA_PADDING_NONE)");
        refused((struct strata_module){ .ops = &strata_maxpool2d, .kernel = { 3 },
                                        .stride = { 1, -1 } },
                img8, STRATA_EINVAL, "maxpool2d (module 3): kernel 3, stride -1, padding 0, "
                "dilation 0 in dimension 1 (kernel > 0, stride and dilation >= 0, padding >= 0 "
                "or STRATA_PADDING_NONE)");
        refused((struct strata_module){ .ops = &strata_avgpool2d, .kernel = { 3, 4 },
                                        .padding = { 2 } },
                img8, STRATA_EINVAL, "avgpool2d (module 3): padding 2 is more than half of "
                "kernel 3 x 4");
        refused((struct strata_module){ .ops = &strata_maxpool1d, .kernel = { 1 << 28 },
                                        .dilation = { 4 } },
                (struct strata_dims){ 1, 1, { 1 << 20 } }, STRATA_EOVERFLOW,
                "maxpool1d (module 3): kernel 268435456, dilation 4, padding 0 over 1048576 in "
                "dimension 0 overflow an int");
        refused((struct strata_module){ .ops = &strata_avgpool1d, .kernel = { 2 },
                                        .dilation = { 2 } },
                (struct strata_dims){ 1, 1, { 8 } }, STRATA_EINVAL,
                "avgpool1d (module 3): dilation 2: PyTorch's AvgPool has none");
}

Test(spatial_bad_input, upsample_layernorm)
{
        refused((struct strata_module){ .ops = &strata_upsample }, flat64, STRATA_EINVAL,
                "upsample (module 3): needs an input of 1 to 3 spatial dimensions; its input is "
                "a flat vector of 64 features");
        refused((struct strata_module){ .ops = &strata_upsample, .scale = { 2, -1 } }, img8,
                STRATA_EINVAL, "upsample (module 3): scale 2 x -1 over an input of 8 x 8 "
                "(integer scale factors >= 1 whose output fits an int)");
        refused((struct strata_module){ .ops = &strata_upsample, .mode = 2 }, img8,
                STRATA_EINVAL, "upsample (module 3): mode 2 is neither nearest (0) nor linear "
                "(1)");
        refused((struct strata_module){ .ops = &strata_upsample, .scale = { 40000 } },
                (struct strata_dims){ 1, 2, { 20, 20 } }, STRATA_EOVERFLOW,
                "upsample (module 3): an output of 640000000000 values per sample is too large");
        refused((struct strata_module){ .ops = &strata_layernorm, .eps = -1.0f }, img8,
                STRATA_EINVAL, "layernorm (module 3): eps -1 (>= 0, 0 for 1e-5)");
}

/* A layout that does not hold the width it is given (a caller's own runtime) is refused. */
Test(spatial_bad_input, layout_and_width_disagree)
{
        struct strata_module desc = { .ops = &strata_maxpool2d, .kernel = { 2 } };
        struct strata_layer l = { .desc = &desc, .index = 5, .in = 100, .in_dims = img8 };
        struct strata_module_shape s;

        cr_assert_eq(desc.ops->shape(&l, 100, &s), STRATA_EINVAL);
        said(STRATA_EINVAL, "maxpool2d (module 5): its input layout (2 channels of 8 x 8) does "
             "not hold its width 100");
}

/* strata_plan() and strata_init() refuse the model, naming the module. */
Test(spatial_bad_input, model_refused_at_plan)
{
        struct strata_module mods[3] = {
                { .ops = &strata_maxpool2d, .kernel = { 2 } },
                { .ops = &strata_maxpool2d, .kernel = { 5 } },
                { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model model = { .in_features = 128, .nmodules = 3, .modules = mods,
                                      .in_dims = img8 };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info pl;
        struct strata_runtime *rt = NULL;

        c.model = &model;
        c.batch = 8;
        c.classes = 4;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "maxpool2d (module 1): kernel 5 over an input of "
                                              "4 x 4 (padding 0) leaves no output"),
                  "%s", strata_last_error());
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt);
}

/* The modules that compute on the host are refused on a device with memory of its own. */
Test(spatial_bad_input, refused_where_memory_is_the_devices)
{
        struct strata_module mods[2] = {
                { .ops = &strata_layernorm },
                { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model model = { .in_features = 128, .nmodules = 2, .modules = mods,
                                      .in_dims = img8 };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info pl;

        c.model = &model;
        c.batch = 8;
        c.classes = 4;
        c.device.driver = devsim_driver();
        cr_assert_eq(strata_plan(&c, &pl), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "module 0 (layernorm) computes on the host: the "),
                  "%s", strata_last_error());
        mods[0].ops = &strata_flatten; /* through the kernels: it runs there */
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
}
