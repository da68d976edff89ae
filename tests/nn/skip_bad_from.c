/*
 * Merge modules refuse what they cannot read: a from that names no earlier module (itself, a
 * later one, below -1), and layouts that do not fit (add: the same layout; concat: the same
 * spatial extents), each message naming both modules and both shapes; strata_plan() and
 * strata_init() refuse the same model, and a driver without the add kernel is refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/devsim.h"

static struct strata_module mods[4];
static struct strata_model model = { .in_features = 32, .nmodules = 3, .modules = mods };

/* A model linear(16) linear(32) <merge>(from): refused by strata_model_output with @p words. */
static void refused(const struct strata_module_ops *ops, int from, const char *const *words)
{
        struct strata_dims out = { 7, 0, { 0 } };

        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        mods[1] = (struct strata_module){ .ops = &strata_linear, .out = 32 };
        mods[2] = (struct strata_module){ .ops = ops, .from = from };
        cr_assert_eq(strata_model_output(&model, &out), STRATA_EINVAL, "%s from=%d accepted",
                     ops->name, from);
        cr_assert_eq(out.channels, 7, "a refused model changed *out");
        for (int i = 0; words[i]; i++)
                cr_assert_not_null(strstr(strata_last_error(), words[i]), "'%s' not in: %s",
                                   words[i], strata_last_error());
}

Test(skip_bad_from, a_from_that_is_not_earlier)
{
        static const char *const later[] = { "module 2 (add)", "from=3",
                                             "not an earlier module", "0..1", NULL };
        static const char *const self[] = { "module 2 (concat)", "from=2", NULL };
        static const char *const below[] = { "module 2 (add)", "from=-2", "-1: the model's input",
                                             NULL };

        refused(&strata_add, 3, later);
        refused(&strata_concat, 2, self);
        refused(&strata_add, -2, below);
        refused(&strata_add, 1000, later + 3);
}

Test(skip_bad_from, module_0_reads_only_the_input)
{
        struct strata_model m = { .in_features = 4, .nmodules = 2, .modules = mods };
        struct strata_dims out;

        mods[0] = (struct strata_module){ .ops = &strata_add, .from = 0 };
        mods[1] = (struct strata_module){ .ops = &strata_linear, .out = 2 };
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "module 0 (add): from=0 is not an "
                                  "earlier module (only -1, the model's input, comes before "
                                  "it)"), "%s", strata_last_error());
        mods[0].from = -1;
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
}

/* The model's input is (2, 4, 4); linear(32) gives a flat (32): the same width, no layout. */
Test(skip_bad_from, layouts_that_do_not_fit)
{
        static const char *const add_in[] = { "module 2 (add, from=-1)", "its input (32)",
                                              "the model's input (2, 4, 4)",
                                              "add needs the same layout", NULL };
        static const char *const cat_in[] = { "module 2 (concat, from=-1)",
                                              "the model's input (2, 4, 4)",
                                              "concat needs the same spatial extents", NULL };
        static const char *const add_w[] = { "module 3 (add, from=0)", "its input (8)",
                                             "module 0 (linear)'s output (16)", NULL };
        struct strata_dims out;

        model.in_dims = (struct strata_dims){ 2, 2, { 4, 4, 0 } };
        refused(&strata_add, -1, add_in);
        refused(&strata_concat, -1, cat_in);
        /* widths: linear(16) linear(32) linear(8) add(from=0) */
        mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 8 };
        mods[3] = (struct strata_module){ .ops = &strata_add, .from = 0 };
        model.nmodules = 4;
        cr_assert_eq(strata_model_output(&model, &out), STRATA_EINVAL);
        for (int i = 0; add_w[i]; i++)
                cr_assert_not_null(strstr(strata_last_error(), add_w[i]), "'%s' not in: %s",
                                   add_w[i], strata_last_error());
        /* flat vectors concatenate whatever their widths */
        mods[3].ops = &strata_concat;
        cr_assert_eq(strata_model_output(&model, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 24);
        cr_assert_eq(out.ndim, 0);
        model.nmodules = 3;
        model.in_dims = (struct strata_dims){ 0 };
}

/* strata_plan and strata_init refuse the model the same way; nothing is left behind. */
Test(skip_bad_from, plan_and_init_refuse_it)
{
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct strata_runtime *rt = NULL;

        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 32 };
        mods[1] = (struct strata_module){ .ops = &strata_add, .from = 1 };
        mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 4 };
        c.model = &model;
        c.batch = 8;
        c.classes = 4;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "module 1 (add)"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt);
        cr_assert_not_null(strstr(strata_last_error(), "from=1"), "%s", strata_last_error());
        mods[1].from = 0;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_OK, "%s", strata_last_error());
}

/* The skip's gradient is summed with the driver's add kernel: a driver without is refused. */
Test(skip_bad_from, a_driver_without_add)
{
        const struct strata_device_ops *cpu;
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct driver_copy noadd;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        driver_copy(&noadd, cpu);
        noadd.k.add = NULL;
        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 32 };
        mods[1] = (struct strata_module){ .ops = &strata_concat, .from = -1 };
        mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 4 };
        c.model = &model;
        c.batch = 8;
        c.classes = 4;
        c.device.driver = &noadd.dev;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_ENOTSUP);
        cr_assert_not_null(strstr(strata_last_error(), "module 1 (concat)"), "%s",
                           strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "add kernel"), "%s", strata_last_error());
        mods[1] = (struct strata_module){ .ops = &strata_relu };
        cr_assert_eq(strata_plan(&c, &plan), STRATA_OK, "%s", strata_last_error());
}

/* An application's merge module that checks nothing: the runtime refuses its from itself. */
static int lax_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .reads_from = 1 };
        return STRATA_OK;
}

static void lax_pass(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                     float *y, int rows)
{
        (void)l, (void)c, (void)x, (void)y, (void)rows;
}

static void lax_back(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                     const float *y, const float *dy, float *dx, int rows)
{
        (void)l, (void)c, (void)x, (void)y, (void)dy, (void)dx, (void)rows;
}

static const struct strata_module_ops lax = { "lax", lax_shape, NULL, lax_pass, lax_back,
                                              NULL };

Test(skip_bad_from, an_application_merge_module)
{
        static const char *const words[] = { "module 2 (lax) reads an earlier output",
                                             "from=7 is not an earlier module", NULL };
        static const char *const below[] = { "from=-3", NULL };

        refused(&lax, 7, words);
        refused(&lax, -3, below);
}
