/* Bad configurations, batches and call orders get a status, a message, and change nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/rig.h"

Test(runtime_bad_input, config_fields)
{
        struct strata_runtime *rt = (struct strata_runtime *)0x1;
        struct strata_plan_info pl;
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(NULL, &r.cfg), STRATA_EINVAL);
        cr_assert_eq(strata_init(&rt, NULL), STRATA_EINVAL);
        c = r.cfg;
        c.model = NULL;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        c = r.cfg;
        c.batch = 0;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "batch 0"));
        c = r.cfg;
        c.classes = 7;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        c = r.cfg;
        c.strategy.devices = 2;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL, "single runs on one device");
        c = r.cfg;
        c.struct_size = 3;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        c = r.cfg;
        c.optim.lr = -1.0f;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        c = r.cfg;
        c.device.accelerator = STRATA_ACCEL_CUDA;
        {
                const struct strata_device_ops *gpu = NULL;

                if (strata_device_driver(STRATA_ACCEL_CUDA, &gpu) == STRATA_ENODEV) {
                        cr_assert_eq(strata_init(&rt, &c), STRATA_ENODEV);
                } else { /* a usable GPU: a bad field on the CUDA path still fails first */
                        c.classes = 7;
                        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
                }
        }
        c = r.cfg;
        c.strategy.kind = (enum strata_strategy_kind)99;
        cr_assert_eq(strata_init(&rt, &c), STRATA_ENOTSUP);
        cr_assert_eq(rt, (struct strata_runtime *)0x1, "failed init must not write *rt");
}

Test(runtime_bad_input, region_too_small_states_required_size)
{
        static _Alignas(4096) unsigned char mem[1 << 20];
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;
        char want[64];
        struct rig r;

        rig_init(&r, 1);
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK);
        cr_assert_lt(pl.bytes, sizeof(mem));
        r.cfg.memory = mem;
        r.cfg.memory_size = pl.bytes - 1;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENOMEM);
        snprintf(want, sizeof(want), "needs %zu", pl.bytes);
        cr_assert_not_null(strstr(strata_last_error(), want), "%s", strata_last_error());
        r.cfg.memory_size = pl.bytes; /* exactly the plan: enough */
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        {
                struct strata_memory_info mi;

                cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
                cr_assert_eq(mi.used, pl.bytes, "the plan is exact");
                cr_assert_eq(mi.refusals, 0);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(runtime_bad_input, call_order_and_bad_batches_change_nothing)
{
        struct strata_runtime *rt;
        struct strata_batch b, bad;
        struct rig r;
        const float *p;
        size_t n;
        static float before[1024];

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_loader_next(&r.loader, &b);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EBADSTATE, "before connect");
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_EBADSTATE);
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_connect(rt), STRATA_EBADSTATE, "connect twice");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, n * sizeof(float));
        bad = b;
        bad.rows = RIG_BATCH + 1;
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        bad = b;
        bad.dim = 3;
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        bad = b;
        bad.x = NULL;
        cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
        {
                static int32_t labels[RIG_BATCH];

                memcpy(labels, b.y, sizeof(labels));
                labels[3] = RIG_CLASSES;
                bad = b;
                bad.y = labels;
                cr_assert_eq(strata_train_step(rt, &bad, NULL), STRATA_EINVAL);
                cr_assert_not_null(strstr(strata_last_error(), "label"));
        }
        cr_assert_eq(strata_train_step(rt, NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_predict_step(rt, &b, NULL, 0), STRATA_EINVAL);
        cr_assert_eq(memcmp(before, p, n * sizeof(float)), 0, "refused steps changed parameters");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_parameters(rt, 1, &p, &n), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(runtime_bad_input, teardown_from_created_state)
{
        struct strata_runtime *rt;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
        cr_assert_eq(strata_state(rt), STRATA_STATE_ENV_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_teardown(NULL), STRATA_EINVAL);
}

/*
 * The output width is the last module's, whatever it is: a model that ends in ReLU after a
 * 16-wide linear has 16 outputs, so classes 4 is refused (predict would write 16 floats per
 * row into a rows x 4 buffer); with a 4-wide linear before the ReLU it trains and predicts.
 */
Test(runtime_bad_input, output_width_is_the_last_modules_whatever_it_is)
{
        struct strata_module mods[3] = { { .ops = &strata_linear, .out = 16 },
                                         { .ops = &strata_relu } };
        struct strata_model model = { .in_features = RIG_IN, .nmodules = 2, .modules = mods };
        float logits[RIG_BATCH * RIG_CLASSES + 1];
        struct strata_plan_info pl;
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        c = r.cfg;
        c.model = &model;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "outputs 16 values per row (its last "
                                                       "module, relu); classes is 4"),
                           "%s", strata_last_error());
        mods[0].out = RIG_CLASSES;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(&r, rt, 2, &b);
        logits[RIG_BATCH * RIG_CLASSES] = 12345.0f; /* a guard after the rows x classes */
        cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        cr_assert_eq(logits[RIG_BATCH * RIG_CLASSES], 12345.0f, "predict wrote past its rows");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* A diverging run stops at the first non-finite loss, naming the step, unless allowed. */
Test(runtime_bad_input, nonfinite_loss_stops_the_run_naming_the_step)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_metrics m;
        struct strata_config c;
        struct rig r;
        int rc = STRATA_OK, steps = 0;

        rig_init(&r, 0);
        c = r.cfg;
        c.optim.lr = 1e30f;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        while (rc == STRATA_OK && strata_loader_next(&r.loader, &b)) {
                rc = strata_train_step(rt, &b, &m);
                steps++;
        }
        cr_assert_eq(rc, STRATA_ENONFINITE, "16 steps at lr 1e30 must diverge");
        cr_assert_not_null(strstr(strata_last_error(), "step "), "%s", strata_last_error());
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        c.train.allow_nonfinite = 1;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK);
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        while (strata_loader_next(&r.loader, &b))
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "allowed: goes on");
        cr_assert(!isfinite(m.loss), "and the loss is still not finite (%g)", m.loss);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * Calls on a runtime that was torn down are refused, not followed into freed memory: with the
 * runtime's own mapping (unmapped at teardown) and with the caller's memory; teardown twice
 * too. Before, the first case read unmapped memory.
 */
Test(runtime_bad_input, calls_after_teardown_are_refused)
{
        static _Alignas(4096) unsigned char region[1 << 22];
        struct strata_plan_info pl;
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        for (int own = 0; own < 2; own++) {
                struct strata_config c;

                rig_init(&r, 0);
                c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
                if (!own) {
                        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK);
                        cr_assert_leq(pl.bytes, sizeof(region));
                        c.memory = region;
                        c.memory_size = sizeof(region);
                }
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK);
                rig_steps(&r, rt, 2, &b);
                cr_assert_eq(strata_device_rank(rt, 0), 0);
                cr_assert_eq(strata_device_rank(rt, 1), 1, "one process: the device itself");
                cr_assert_eq(strata_device_rank(rt, 2), -1, "no third device");
                cr_assert_eq(strata_device_rank(rt, -1), -1, "a negative device");
                cr_assert_eq(strata_device_rank(NULL, 0), -1, "no runtime");
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
                cr_assert_eq(strata_device_rank(rt, 0), -1, "a dead runtime");
                cr_assert_eq(strata_teardown(rt), STRATA_EINVAL, "teardown twice");
                cr_assert_not_null(strstr(strata_last_error(), "not live"), "%s",
                                   strata_last_error());
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
                cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_EINVAL);
                cr_assert_eq(strata_connect(rt), STRATA_EINVAL);
                cr_assert_eq(strata_save_checkpoint(rt, "/tmp/never.ckpt", NULL, 0),
                             STRATA_EINVAL);
                cr_assert_eq(strata_broadcast(rt, NULL, 0, STRATA_F32, 0), STRATA_EINVAL);
                cr_assert_eq(strata_barrier(rt), STRATA_EINVAL);
                cr_assert_eq(strata_world_size(rt), 0);
                cr_assert_eq(strata_state(rt), -1);
        }
}

/* A collective on one device whose size overflows is refused, not handed to memmove. */
Test(runtime_bad_input, one_device_collective_size_overflow_refused)
{
        struct strata_runtime *rt;
        struct rig r;
        float a = 1.0f, b = 0.0f;
        const void *send[1] = { &a };
        void *recv[1] = { &b };

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_all_gather(rt, send, recv, SIZE_MAX / 2, STRATA_F32),
                     STRATA_EOVERFLOW);
        cr_assert_eq(strata_all_gather(rt, send, recv, 1, STRATA_F32), STRATA_OK);
        cr_assert_eq(b, 1.0f);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* A module that declares an enormous parameter count: the plan's sums overflow, and say so. */
static int huge_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .params = SIZE_MAX / 2 + 1 };
        return STRATA_OK;
}

Test(runtime_bad_input, plan_sums_that_overflow_are_refused)
{
        struct strata_module_ops huge = strata_relu;
        struct strata_plan_info pl;
        struct rig r;

        huge.name = "huge";
        huge.shape = huge_shape;
        rig_init(&r, 0);
        r.mods[1] = (struct strata_module){ .ops = &huge }; /* in place of the relu */
        r.mods[3] = r.mods[2];
        r.mods[2] = (struct strata_module){ .ops = &huge };
        r.model.nmodules = 4;
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_EOVERFLOW, "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "overflow"), "%s", strata_last_error());
}
