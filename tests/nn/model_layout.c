/*
 * Sample layouts through a model: the model's in_dims must hold in_features, a module's
 * declared out_dims must hold its width (both refused with a message), and an elementwise
 * module passes its input's layout on, so a convolution after a ReLU still sees 2-D samples.
 */
#include <criterion/criterion.h>

#include "tests/support/rig.h"

/* Planning refused with STRATA_EINVAL and a message holding @p needle. */
static void refused(const struct rig *r, const char *what, const char *needle)
{
        rig_plan_refused(r, STRATA_EINVAL, what, needle);
}

Test(model_layout, in_dims_not_holding_in_features_refused)
{
        struct rig r;

        rig_init_conv(&r);
        r.model.in_features = 40;
        refused(&r, "6 x 6 for 40", "model: in_dims (1 channels, 2 spatial dimensions 6 x 6 x 0) "
                                    "do not hold in_features 40 values");
        rig_init_conv(&r);
        r.model.in_dims.size[1] = -6;
        refused(&r, "negative extent", "do not hold in_features 36 values");
        rig_init_conv(&r);
        r.model.in_dims.ndim = 4;
        refused(&r, "4 spatial dimensions", "do not hold in_features 36 values");
}

/* A module that declares a layout of 3 x 3 = 9 values for a width of 10. */
static int bad_dims_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        (void)in;
        s->out = 10;
        s->out_dims = (struct strata_dims){ 3, 1, { 3 } };
        return STRATA_OK;
}

static void nothing(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                    float *y, int rows)
{
        (void)l, (void)c, (void)x, (void)y, (void)rows;
}

static void nothing_back(struct strata_layer *l, const struct strata_step_ctx *c,
                         const float *x, const float *y, const float *dy, float *dx, int rows)
{
        (void)l, (void)c, (void)x, (void)y, (void)dy, (void)dx, (void)rows;
}

static const struct strata_module_ops bad_dims = {
        .name = "bad-dims", .shape = bad_dims_shape, .forward = nothing,
        .backward = nothing_back,
};

Test(model_layout, out_dims_not_holding_the_width_refused)
{
        struct rig r;

        rig_init_conv(&r);
        r.mods[1] = (struct strata_module){ .ops = &bad_dims };
        refused(&r, "3 x 3 for 10", "module 1 (bad-dims) declares an output of 3 channels over "
                                    "1 dimensions that is not its width 10");
}

Test(model_layout, elementwise_modules_pass_the_layout_on)
{
        struct strata_plan_info pl;
        struct rig r;

        rig_init_conv(&r);
        /* conv2d (4 x 6 x 6) - relu - conv2d stride 2 (2 x 3 x 3) - linear */
        r.mods[3] = r.mods[2];
        r.mods[2] = (struct strata_module){ .ops = &strata_conv2d, .out = 2, .kernel = { 3 },
                                            .stride = { 2 }, .padding = { 1 } };
        r.model.nmodules = 4;
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        r.mods[1] = (struct strata_module){ .ops = &strata_linear, .out = 144 };
        refused(&r, "a conv after a linear", "conv2d (module 2): needs an input of 2 spatial "
                                             "dimensions, got 144 flat features");
}
