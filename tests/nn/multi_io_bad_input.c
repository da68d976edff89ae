/*
 * Models with several inputs and outputs that cannot run are refused by name, at
 * strata_model_output() and strata_init() alike, and a step's targets that do not fit them are
 * refused with the runtime left as it was: a branch or a merge reading no earlier module or
 * input, an output's module out of range or twice, a weight that is not finite or negative, a
 * loss without forward, a label output of one value, labels that are no class index, the last
 * module not an output, a module nothing reads, inputs not
 * adding up to in_features, targets of the wrong width or out of BCE's range; and the lines
 * that write them wrong.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/multinet.h"

static struct strata_module mods[MULTINET_MODULES];
static struct strata_model m;

/* A copy of the two-input, two-output model to break. */
static void fresh(void)
{
        memcpy(mods, multinet_model.modules, sizeof(mods));
        m = multinet_model;
        m.modules = mods;
}

/*
 * @p model refused by strata_model_targets(), the message containing @p needle, *values and
 * the widths unchanged.
 */
static void targets_refused(const struct strata_model *model, const char *what,
                            const char *needle)
{
        int tv = -7, wd[STRATA_MAX_OUTPUTS];

        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                wd[k] = -7 - k;
        cr_assert_eq(strata_model_targets(model, &tv, wd), STRATA_EINVAL, "%s: targets accepted",
                     what);
        cr_assert(strstr(strata_last_error(), needle), "%s: targets' '%s' lacks '%s'", what,
                  strata_last_error(), needle);
        cr_assert_eq(tv, -7, "%s: *values changed", what);
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                cr_assert_eq(wd[k], -7 - k, "%s: width %d changed", what, k);
}

/* @p m refused by strata_model_output() and strata_init(), the message containing @p needle. */
static void refused(const char *what, const char *needle)
{
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        struct strata_dims out = { .channels = -7 };
        struct strata_runtime *rt = NULL;

        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL, "%s: accepted", what);
        cr_assert(strstr(strata_last_error(), needle), "%s: '%s' lacks '%s'", what,
                  strata_last_error(), needle);
        cr_assert_eq(out.channels, -7, "%s: out changed", what);
        targets_refused(&m, what, needle);
        c.model = &m;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL, "%s: init accepted", what);
        cr_assert(strstr(strata_last_error(), needle), "%s: init's '%s' lacks '%s'", what,
                  strata_last_error(), needle);
        cr_assert_null(rt);
}

Test(multi_io_bad_input, the_model_itself_is_fine)
{
        struct strata_dims out;

        struct strata_module lm[8];
        struct strata_model doc = { 0 };

        fresh();
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, MULTINET_T);
        /* strata_model_parse()'s example (strata/runtime.h) */
        cr_assert_eq(strata_model_parse("input(4) input(2) linear(8) relu linear(8,from=input1) "
                                        "add(from=1) linear(3) output(mse) linear(1,from=3) "
                                        "output(bce,weight=0.5)", lm, 8, &doc), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_model_output(&doc, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(out.channels, 4);
        cr_assert_eq(doc.in_features, 6);
        cr_assert_eq(doc.outputs[1].loss, &strata_bce_with_logits);
        cr_assert_eq(doc.outputs[1].weight, 0.5f);
        cr_assert_eq(doc.outputs[0].weight, 0.0f, "no weight given: the struct's default");
}

Test(multi_io_bad_input, bad_from)
{
        fresh();
        mods[2].from = 5;
        refused("branch from a later module", "module 2 (linear): branch from=5 is not an "
                "earlier module (0..1) or an input (-1..-2)");
        fresh();
        mods[2].from = -3;
        refused("branch from a third input", "branch from=-3");
        fresh();
        mods[7].from = -3; /* add */
        refused("add from a third input", "module 7 (add): from=-3 is not an earlier module");
        fresh();
        mods[4].branch = 1; /* concat */
        refused("a merge module as a branch", "module 4 (concat) is a merge module");
}

Test(multi_io_bad_input, bad_outputs)
{
        fresh();
        m.outputs[1].module = MULTINET_MODULES;
        refused("output past the modules", "model output 1: module 10 is not one of its "
                "modules (0..9)");
        fresh();
        m.outputs[1].module = -1;
        refused("output before the modules", "module -1 is not one of its modules");
        fresh();
        m.outputs[1].module = 8;
        refused("one module twice", "module 8 is an output already");
        fresh();
        m.noutputs = STRATA_MAX_OUTPUTS + 1;
        refused("too many outputs", "noutputs 9");
        fresh();
        m.outputs[1] = (struct strata_model_output){ .module = 7, .loss = &strata_mse };
        refused("last module no output", "the last module (9, linear) is not one of its "
                "outputs");
        fresh();
        m.outputs[0].module = 6;
        refused("a module nothing reads", "module 8 (linear)'s output is read by no module");
}

static const struct strata_loss_ops no_forward = { .name = "no_forward", .float_targets = 1 };

Test(multi_io_bad_input, bad_weights_and_losses)
{
        static const float weights[] = { NAN, INFINITY, -INFINITY, -0.5f };

        for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++) {
                fresh();
                m.outputs[0].weight = weights[i];
                refused("weight", "model output 0 (module 8): weight");
        }
        fresh();
        m.outputs[1].loss = &no_forward;
        refused("a loss without forward", "model output 1 (module 9): loss no_forward lacks "
                "check or forward");
}

Test(multi_io_bad_input, bad_inputs)
{
        fresh();
        m.in_features = MULTINET_IN + 1;
        refused("inputs short of in_features", "its 2 inputs hold 9 values a row; in_features "
                "is 10");
        fresh();
        m.inputs[1].features = 0;
        refused("an empty input", "input 1 has 0 features");
        fresh();
        m.in_dims = (struct strata_dims){ .channels = 9 };
        refused("in_dims beside inputs", "in_dims and inputs both given");
        fresh();
        m.inputs[0].dims = (struct strata_dims){ .channels = 2, .ndim = 1, .size = { 2 } };
        refused("dims not holding an input", "input 0's dims");
        fresh();
        m.ninputs = -1;
        refused("negative ninputs", "ninputs -1");
}

Test(multi_io_bad_input, targets_that_do_not_fit)
{
        static float t[MULTINET_BATCH * MULTINET_T];
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_SINGLE, 1);
        struct strata_batch b = multinet_batch(0, MULTINET_BATCH);
        struct strata_runtime *rt;
        struct strata_metrics e0, e1;
        struct strata_plan_info pi;

        c.classes = MULTINET_T - 1;
        cr_assert_eq(strata_plan(&c, &pi), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "outputs 5 values per row (its outputs' widths' "
                         "sum); classes is 4"), "%s", strata_last_error());
        c.classes = MULTINET_T;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_eval_step(rt, &b, &e0), STRATA_OK, "%s", strata_last_error());
        b.tdim = MULTINET_T - 1;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "targets are 4 values a row (tdim); the model "
                         "has 5 outputs"), "%s", strata_last_error());
        memcpy(t, multinet_t(0), sizeof(t));
        t[7 * MULTINET_T + 4] = 1.5f; /* row 7, output 1's second value: BCE's */
        b = multinet_batch(0, MULTINET_BATCH);
        b.t = t;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "target of row 7, column 4 (output 1) is 1.5 "
                         "(not in [0, 1])"), "%s", strata_last_error());
        t[7 * MULTINET_T + 4] = NAN;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        t[7 * MULTINET_T + 4] = 0.25f;
        t[2 * MULTINET_T + 1] = 3.0f; /* MSE's: any finite value */
        b = multinet_batch(0, MULTINET_BATCH);
        cr_assert_eq(strata_eval_step(rt, &b, &e1), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(memcmp(&e0.loss, &e1.loss, sizeof(double)), 0, "the refused steps "
                     "changed the model");
        b.t = t;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * The cross-entropy head's labels (one float of the row each): a value that is no class
 * index (a fraction, out of range, negative, NaN, infinite) is refused naming the output, the
 * row and the column, in training and evaluation, the model unchanged; so are a row of the
 * predictions' width and labels in y; a label output on one value a row is refused.
 */
Test(multi_io_bad_input, labels_that_are_no_class)
{
        static const float bad[] = { 1.5f, 4.0f, -1.0f, NAN, INFINITY, 0.999f };
        static const char *const shown[] = { "1.5", "4", "-1", "nan", "inf", "0.999" };
        static float t[MULTINET_BATCH * MULTINET_CE_T];
        static int32_t y[MULTINET_BATCH];
        struct strata_config c = multinet_cfg(STRATA_STRATEGY_DDP, 2);
        struct strata_batch b = multinet_ce_batch(0, MULTINET_BATCH);
        struct strata_runtime *rt;
        struct strata_metrics e0, e1;
        char needle[160];

        c.model = &multinet_ce_model;
        c.classes = MULTINET_CE_OUT;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_eval_step(rt, &b, &e0), STRATA_OK, "%s", strata_last_error());
        memcpy(t, multinet_ce_t(0), sizeof(t));
        b.t = t;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                t[11 * MULTINET_CE_T + MULTINET_OUT0] = bad[i]; /* row 11's class index */
                snprintf(needle, sizeof(needle), "label of output 1, row (sample) 11, column 3 "
                         "is %s: not a class index (an integer in [0, 4))", shown[i]);
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL, "%s", shown[i]);
                cr_assert(strstr(strata_last_error(), needle), "'%s' lacks '%s'",
                          strata_last_error(), needle);
                cr_assert_eq(strata_eval_step(rt, &b, &e1), STRATA_EINVAL, "%s", shown[i]);
                cr_assert(strstr(strata_last_error(), needle), "%s", strata_last_error());
        }
        t[11 * MULTINET_CE_T + MULTINET_OUT0] = 3.0f; /* the largest class: fine */
        b.tdim = MULTINET_CE_OUT;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "targets are 7 values a row (tdim); the model's "
                         "outputs take 4 (one class index per label output)"), "%s",
                  strata_last_error());
        b = (struct strata_batch){ .x = multinet_x(0), .y = y, .rows = MULTINET_BATCH,
                                   .dim = MULTINET_IN };
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "the model's 2 outputs take a row of float "
                         "targets"), "%s", strata_last_error());
        b = multinet_ce_batch(0, MULTINET_BATCH);
        cr_assert_eq(strata_eval_step(rt, &b, &e1), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(memcmp(&e0.loss, &e1.loss, sizeof(double)), 0, "the refused steps "
                     "changed the model");
        cr_assert_eq(memcmp(e0.losses, e1.losses, sizeof(e0.losses)), 0);
        b.t = t;
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        fresh();
        mods[8].out = 1; /* output 0 on one value, under cross-entropy */
        m.outputs[0].loss = &strata_softmax_cross_entropy;
        refused("one class", "model output 0 (module 8): loss softmax_cross_entropy takes class "
                "labels: its module gives 1 value a row, classes need >= 2");
        fresh();
        m.outputs[0].loss = NULL; /* the model's: cross-entropy, on 3 classes: fine */
        {
                struct strata_dims out;
                int tv, wd[STRATA_MAX_OUTPUTS];

                cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(out.channels, MULTINET_T, "the predictions: both outputs' widths");
                cr_assert_eq(strata_model_targets(&m, &tv, wd), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_eq(tv, 1 + MULTINET_OUT1, "output 0's class index, output 1's floats");
                cr_assert_eq(wd[0], MULTINET_OUT0);
                cr_assert_eq(wd[1], MULTINET_OUT1);
                cr_assert_eq(wd[2], 0);
                cr_assert_eq(strata_model_targets(&m, NULL, NULL), STRATA_EINVAL);
        }
}

/* A line refused names the output or module at fault and leaves the model as it was. */
static void line_refused(const char *line, const char *needle)
{
        struct strata_module lm[16];
        struct strata_model lmod = { .in_features = 3 };

        cr_assert_eq(strata_model_parse(line, lm, 16, &lmod), STRATA_EINVAL, "'%s' accepted",
                     line);
        cr_assert(strstr(strata_last_error(), needle), "'%s': '%s' lacks '%s'", line,
                  strata_last_error(), needle);
        cr_assert_eq(lmod.in_features, 3);
        cr_assert_eq(lmod.nmodules, 0);
        cr_assert_eq(lmod.noutputs, 0);
}

Test(multi_io_bad_input, lines)
{
        line_refused("input(3) output(mse) linear(2)", "output 0 comes after the module it "
                     "marks");
        line_refused("input(3) linear(2) output(cross)", "output 0 (module 0): loss 'cross' "
                     "is not mse, l1, huber, bce or ce");
        line_refused("input(3) linear(2) output(mse,weight=-1)", "output 0 (module 0): weight "
                     "'-1' is not a finite number > 0");
        line_refused("input(3) linear(2) output(mse,weight=0)", "weight '0' is not");
        line_refused("input(3) linear(2) output(mse,weight=inf)", "weight 'inf'");
        line_refused("input(3) linear(2) output(mse,)", "an argument is empty");
        line_refused("input(3) input(2) linear(2,from=input9)", "module 0 (linear): from "
                     "'input9' is not a module's index or input");
        line_refused("input(3) linear(2) relu(from=x)", "module 1 (relu): from 'x'");
}

/* An earlier output's loss gradient is added with the driver's add: a driver without it. */
Test(multi_io_bad_input, a_driver_without_add)
{
        static const struct strata_module chain[] = {
                { .ops = &strata_linear, .out = 3 }, { .ops = &strata_linear, .out = 2 },
        };
        struct strata_model two = { .in_features = 4, .nmodules = 2, .modules = chain,
                                    .noutputs = 2,
                                    .outputs = { { .module = 0, .loss = &strata_mse },
                                                 { .module = 1, .loss = &strata_l1 } } };
        const struct strata_device_ops *cpu;
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct driver_copy noadd;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        driver_copy(&noadd, cpu);
        noadd.k.add = NULL;
        c.model = &two;
        c.batch = 8;
        c.classes = 5;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_OK, "%s", strata_last_error());
        c.device.driver = &noadd.dev;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "model output 0 (module 0) is not the last "
                         "module: the cpu driver has no add kernel"), "%s", strata_last_error());
}

/*
 * strata_model_targets() on a model it cannot walk: NULL, no module, no input, a module whose
 * input does not fit; refused naming itself ("model targets: ") or the module, nothing written.
 */
Test(multi_io_bad_input, model_targets_refuses_a_model_it_cannot_walk)
{
        struct strata_module lm[8];
        struct strata_model lmod = { 0 };

        targets_refused(NULL, "NULL model", "model targets: NULL argument or no module");
        fresh();
        m.nmodules = 0;
        targets_refused(&m, "no module", "model targets: NULL argument or no module");
        fresh();
        m.in_features = 0;
        targets_refused(&m, "in_features 0", "model targets: in_features 0 <= 0");
        cr_assert_eq(strata_model_parse("input(1,4,4) conv2d(2,3) maxpool2d(4)", lm, 8, &lmod),
                     STRATA_OK, "%s", strata_last_error());
        targets_refused(&lmod, "a pool larger than its input", "maxpool2d (module 1)");
        fresh();
        cr_assert_eq(strata_model_targets(&m, NULL, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "model targets: NULL argument"), "%s",
                  strata_last_error());
}
