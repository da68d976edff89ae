/*
 * A model from one line (strata_model_parse) and its output layout (strata_model_output):
 * what each form sets, and every refusal named, with the caller's model left unchanged.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "strata/strata.h"

static struct strata_module mods[16];

Test(model_line, an_input_and_modules_set_the_model)
{
        struct strata_model m = { .loss = &strata_mse, .loss_beta = 0.5f };

        cr_assert_eq(strata_model_parse("input(1,28,28)  linear(256) relu dropout(0.25)\t"
                                        "leaky-relu(slope=0.1) batchnorm1d(eps=1e-3,momentum=0.2)"
                                        " linear(out=10)",
                                        mods, 8, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.in_features, 784);
        cr_assert_eq(m.in_dims.channels, 1);
        cr_assert_eq(m.in_dims.ndim, 2);
        cr_assert_eq(m.in_dims.size[0], 28);
        cr_assert_eq(m.in_dims.size[1], 28);
        cr_assert_eq(m.nmodules, 6);
        cr_assert_eq(m.modules, mods);
        cr_assert_eq(m.loss, &strata_mse, "the loss is kept");
        cr_assert_float_eq(m.loss_beta, 0.5f, 0);
        cr_assert_eq(mods[0].ops, &strata_linear);
        cr_assert_eq(mods[0].out, 256);
        cr_assert_eq(mods[1].ops, &strata_relu);
        cr_assert_eq(mods[2].ops, &strata_dropout);
        cr_assert_float_eq(mods[2].p, 0.25f, 0);
        cr_assert_eq(mods[3].ops, &strata_leaky_relu);
        cr_assert_float_eq(mods[3].slope, 0.1f, 0);
        cr_assert_eq(mods[4].ops, &strata_batchnorm1d);
        cr_assert_float_eq(mods[4].eps, 1e-3f, 0);
        cr_assert_float_eq(mods[4].decay, 0.2f, 0);
        cr_assert_eq(mods[5].out, 10);
}

Test(model_line, without_input_the_width_is_the_callers)
{
        struct strata_model m = { .in_features = 20, .in_dims = { 20, 0, { 0 } } };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("linear(7) tanh linear(3)", mods, 8, &m), STRATA_OK);
        cr_assert_eq(m.in_features, 20);
        cr_assert_eq(m.in_dims.channels, 0, "in_dims cleared: a flat input");
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 3);
        cr_assert_eq(out.ndim, 0);
}

Test(model_line, an_elementwise_module_keeps_its_inputs_layout)
{
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(2,3,4) relu sigmoid", mods, 8, &m), STRATA_OK);
        cr_assert_eq(m.in_features, 24);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 2);
        cr_assert_eq(out.ndim, 2);
        cr_assert_eq(out.size[0], 3);
        cr_assert_eq(out.size[1], 4);
}

/* Each line is refused with a message holding @p what, and the model is as it was. */
static void refused(const char *line, int max, const char *what)
{
        struct strata_model m = { .in_features = 5, .loss = &strata_l1 }, before = m;

        cr_assert_eq(strata_model_parse(line, mods, max, &m), STRATA_EINVAL, "'%s' accepted",
                     line);
        cr_assert(strstr(strata_last_error(), what), "'%s': message '%s' lacks '%s'", line,
                  strata_last_error(), what);
        cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0, "'%s' changed the model", line);
}

Test(model_line, bad_lines_are_refused_by_name)
{
        refused("", 8, "no module");
        refused("   ", 8, "no module");
        refused("linear", 8, "output count is missing");
        refused("linear(0)", 8, "not a positive count");
        refused("linear(-3)", 8, "not a positive count");
        refused("linear(1x2)", 8, "not a positive count");
        refused("linear(10,20)", 8, "too many arguments");
        refused("linear(out=10,20)", 8, "too many arguments");
        refused("linear(outs=10)", 8, "no argument 'outs'");
        refused("linear(10,)", 8, "argument is empty");
        refused("linear(10", 8, "unbalanced");
        refused("linear)10(", 8, "unbalanced");
        refused("linear(10)relu", 8, "a space follows");
        refused("frobnicate(3)", 8, "no such module");
        refused("relu(3)", 8, "too many arguments");
        refused("dropout(p=half)", 8, "not a number");
        refused("dropout(nan)", 8, "not a number");
        refused("relu input(1,2)", 8, "comes once, first");
        refused("input(1,2) relu input(1,2)", 8, "comes once, first"); /* inputs come first */
        refused("input relu", 8, "comes once, first");
        refused("input(1,2,3,4,5) relu", 8, "up to 3");
        refused("input(1,0) relu", 8, "up to 3");
        refused("input(1,2,) relu", 8, "up to 3");
        refused("input(1,2)", 8, "no module");
        refused("relu relu relu", 2, "more than 2 modules");
        refused("relu add", 8, "module 1 (add): the earlier module it reads is missing");
        refused("relu concat()", 8, "e.g. add(from=3)");
        refused("relu add(from=x)", 8, "from 'x' is not a module's index or input");
        refused("relu add(from=-2)", 8, "from '-2'");
        refused("relu add(from=1x2)", 8, "not a module's index");
        refused("relu add(0,1)", 8, "too many arguments");
        refused("relu add(out=1)", 8, "no argument 'out'");
}

/* A small U-Net and a residual over the input: each merge module names what it reads. */
Test(model_line, skip_connections_name_the_module_they_read)
{
        static struct strata_module net[16];
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(1,8,8) conv2d(4,3,padding=1) relu maxpool2d(2) "
                                        "conv2d(8,3,padding=1) relu upsample(2) concat(from=1) "
                                        "conv2d(1,3,padding=1) add(from=input) concat(8)",
                                        net, 16, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.nmodules, 10);
        cr_assert_eq(net[6].ops, &strata_concat);
        cr_assert_eq(net[6].from, 1);
        cr_assert_eq(net[8].ops, &strata_add);
        cr_assert_eq(net[8].from, -1);
        cr_assert_eq(net[9].from, 8, "positional");
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 2);
        cr_assert_eq(out.ndim, 2);
        cr_assert_eq(out.size[0], 8);
        cr_assert_eq(out.size[1], 8);
        /* parsed, then refused by the shapes with both modules named */
        cr_assert_eq(strata_model_parse("input(1,8,8) relu add(from=2)", net, 16, &m),
                     STRATA_OK);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "module 1 (add): from=2 is not an earlier"), "%s",
                  strata_last_error());
        cr_assert_eq(strata_model_parse("input(1,8,8) conv2d(2,3) add(from=-1)", net, 16, &m),
                     STRATA_OK);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "its input (2, 6, 6) and the model's input "
                                              "(1, 8, 8) do not fit"),
                  "%s", strata_last_error());
}

Test(model_line, null_arguments_are_refused)
{
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse(NULL, mods, 8, &m), STRATA_EINVAL);
        cr_assert_eq(strata_model_parse("relu", NULL, 8, &m), STRATA_EINVAL);
        cr_assert_eq(strata_model_parse("relu", mods, 0, &m), STRATA_EINVAL);
        cr_assert_eq(strata_model_parse("relu", mods, 8, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_model_output(NULL, &out), STRATA_EINVAL);
        cr_assert_eq(strata_model_output(&m, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL, "no module");
}

Test(model_line, a_layout_that_does_not_hold_the_width_is_refused)
{
        struct strata_model m = { 0 };
        struct strata_dims out = { 9, 0, { 0 } };

        cr_assert_eq(strata_model_parse("input(1,4,4) linear(3)", mods, 8, &m), STRATA_OK);
        m.in_features = 15;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "do not hold in_features 15"), "%s",
                  strata_last_error());
        cr_assert_eq(out.channels, 9, "out unchanged");
        m.in_features = 16;
        m.in_dims.size[2] = 3; /* an extent past ndim */
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        m.in_dims.size[2] = 0;
        m.in_dims.ndim = 4;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
}

Test(model_line, convolutions_pools_and_upsampling_take_pytorchs_arguments)
{
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(1,32,32) conv2d(8,3,padding=same,"
                                        "padding_mode=circular,bias=false) maxpool2d(2,stride=2)"
                                        " conv2d(4,3x5,stride=1x2,padding=1x0,dilation=2)"
                                        " upsample(2,mode=bilinear) avgpool2d(3,padding=1)"
                                        " layernorm(eps=1e-3) flatten linear(10)",
                                        mods, 8, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(mods[0].ops, &strata_conv2d);
        cr_assert_eq(mods[0].out, 8);
        cr_assert_eq(mods[0].kernel[0], 3);
        cr_assert_eq(mods[0].padding[0], STRATA_PADDING_SAME);
        cr_assert_eq(mods[0].padding_mode, STRATA_PAD_CIRCULAR);
        cr_assert_eq(mods[0].no_bias, 1);
        cr_assert_eq(mods[1].ops, &strata_maxpool2d);
        cr_assert_eq(mods[1].stride[0], 2);
        cr_assert_eq(mods[2].kernel[1], 5);
        cr_assert_eq(mods[2].stride[1], 2);
        cr_assert_eq(mods[2].padding[0], 1);
        cr_assert_eq(mods[2].padding[1], STRATA_PADDING_NONE, "an explicit 0 past the first");
        cr_assert_eq(mods[2].dilation[0], 2);
        cr_assert_eq(mods[3].ops, &strata_upsample);
        cr_assert_eq(mods[3].scale[0], 2);
        cr_assert_eq(mods[3].mode, STRATA_UPSAMPLE_LINEAR);
        cr_assert_eq(mods[4].ops, &strata_avgpool2d);
        cr_assert_eq(mods[5].ops, &strata_layernorm);
        cr_assert_float_eq(mods[5].eps, 1e-3f, 0);
        /* 32x32 -same-> 32x32 -pool-> 16x16 -(3x5, dil 2, stride 1x2, pad 1x0)-> 14x4 */
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 10);
        m.nmodules = 3;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 4);
        cr_assert_eq(out.ndim, 2);
        cr_assert_eq(out.size[0], 14);
        cr_assert_eq(out.size[1], 4);
}

Test(model_line, a_module_that_does_not_fit_its_input_is_named)
{
        struct strata_model m = { 0 };
        struct strata_dims out = { 0 };

        cr_assert_eq(strata_model_parse("input(784) conv2d(4,3)", mods, 8, &m), STRATA_OK);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "conv2d (module 0)"), "%s", strata_last_error());
        cr_assert_eq(out.channels, 0, "out unchanged");
        refused("conv2d(4)", 8, "kernel size is missing");
        refused("conv2d(4,3,padding=lots)", 8, "not a count");
        refused("conv2d(4,3x3x3x3)", 8, "not a count");
        refused("conv2d(4,3,padding_mode=mirror)", 8, "not one of its words");
        refused("conv2d(4,3,bias=maybe)", 8, "not one of its words");
        refused("upsample(2,mode=cubic)", 8, "not one of its words");
        refused("maxpool2d(2,padding_mode=circular)", 8, "no argument 'padding_mode'");
}

/* The attention family: mha(heads, causal=0|1), rmsnorm(eps=), posembed over input(L,E). */
Test(model_line, attention_modules_take_their_arguments)
{
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(6,8) posembed rmsnorm(eps=1e-6) mha(2) "
                                        "add(from=1) mha(heads=4,causal=1) gelu",
                                        mods, 8, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.nmodules, 6);
        cr_assert_eq(mods[0].ops, &strata_posembed);
        cr_assert_eq(mods[1].ops, &strata_rmsnorm);
        cr_assert_float_eq(mods[1].eps, 1e-6f, 0);
        cr_assert_eq(mods[2].ops, &strata_mha);
        cr_assert_eq(mods[2].heads, 2);
        cr_assert_eq(mods[2].causal, 0);
        cr_assert_eq(mods[4].heads, 4);
        cr_assert_eq(mods[4].causal, 1);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 6, "the sequence's layout kept: L");
        cr_assert_eq(out.ndim, 1);
        cr_assert_eq(out.size[0], 8);
        refused("input(6,8) mha", 8, "module 0 (mha): its head count is missing");
        refused("input(6,8) mha(0)", 8, "heads '0' is not a positive count");
        refused("input(6,8) mha(2,causal=2)", 8, "causal '2' is not one of its words");
        refused("input(6,8) mha(2,1)", 8, "too many arguments");
        refused("input(6,8) rmsnorm(eps=x)", 8, "eps 'x' is not a number");
        refused("input(6,8) rmsnorm(dims=4)", 8, "dims '4' is not a count of 0 to 3");
        refused("input(6,8) tokens(1)", 8, "too many arguments");
        m = (struct strata_model){ 0 };
        cr_assert_eq(strata_model_parse("input(3,8,8) conv2d(16,4,stride=4) tokens posembed "
                                        "rmsnorm(dims=1) mha(4) tokens conv1d(32,1) gelu "
                                        "conv1d(16,1) tokens", mods, 16, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(mods[3].norm_dims, 1);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 4, "(L, E) = (4, 16) patches of 4 x 4");
        cr_assert_eq(out.size[0], 16);
        m = (struct strata_model){ 0 };
        cr_assert_eq(strata_model_parse("input(6,8) layernorm(dims=1,eps=1e-6)", mods, 16, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(mods[0].norm_dims, 1);
        cr_assert_float_eq(mods[0].eps, 1e-6f, 0);
        m = (struct strata_model){ 0 }; /* the guide's ViT-style line */
        cr_assert_eq(strata_model_parse("input(1,32,32) conv2d(64,4,stride=4) tokens posembed "
                                        "rmsnorm(dims=1) mha(4) add(from=2) "
                                        "rmsnorm(dims=1) tokens conv1d(128,1) gelu conv1d(64,1) "
                                        "tokens add(from=5) rmsnorm(dims=1) flatten linear(10)",
                                        mods, 16, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 10);
        m = (struct strata_model){ 0 };
        cr_assert_eq(strata_model_parse("input(6,8) mha(3)", mods, 8, &m), STRATA_OK);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "heads 3 does not divide the "
                                                       "embedding 8"), "%s",
                           strata_last_error());
}
