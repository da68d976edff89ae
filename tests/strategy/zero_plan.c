/*
 * The per-device plan of the sharded strategies, for strata-train's default model
 * (784-256-128-10, 235146 parameters) with AdamW: each device of zero1 and zero2 plans the
 * optimizer state of one shard (a quarter of ddp's on 4 devices, within a 64-byte line per
 * shard and slot), its per-device bytes shrink by what the state saves less the padding of
 * the parameters and gradients to whole shards, and zero2 refuses a bf16 gradient all-reduce.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

#define PSI 235146u /* 784*256 + 256 + 256*128 + 128 + 128*10 + 10 */

static struct strata_plan_info plan(enum strata_strategy_kind kind, int devices)
{
        struct strata_config c = rig_default_mlp(kind, devices);
        struct strata_plan_info pl;

        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
        return pl;
}

static size_t line_up(size_t n)
{
        return (n + 63) / 64 * 64;
}

Test(zero_plan, optimizer_state_is_one_shard)
{
        struct strata_plan_info ddp = plan(STRATA_STRATEGY_DDP, 4);

        cr_assert_eq(ddp.params, PSI);
        cr_assert_eq(ddp.optimizer_bytes, 2 * sizeof(float) * PSI, "AdamW: m and v");
        cr_assert_eq(ddp.shard_params, PSI);
        for (int n = 1; n <= 4; n++)
                for (int k = 0; k < 2; k++) {
                        enum strata_strategy_kind kind = k ? STRATA_STRATEGY_ZERO2
                                                           : STRATA_STRATEGY_ZERO1;
                        struct strata_plan_info z = plan(kind, n), d = plan(STRATA_STRATEGY_DDP, n);
                        /* parameters and gradients grow to whole shards */
                        size_t pad = 2 * (line_up(sizeof(float) * z.shard_params * n) -
                                          line_up(sizeof(float) * PSI));

                        cr_assert_eq(z.params, PSI);
                        cr_assert_geq(z.shard_params * n, PSI);
                        cr_assert_lt(z.shard_params * n - PSI, 16u * n, "a line per shard");
                        cr_assert_eq(z.optimizer_bytes, 2 * sizeof(float) * z.shard_params);
                        /* 4 devices: 470400 bytes against ddp's 1881168 / 4 = 470292 */
                        cr_assert_geq(z.optimizer_bytes * n, d.optimizer_bytes);
                        cr_assert_leq(z.optimizer_bytes * n - d.optimizer_bytes,
                                      2 * 64 * (size_t)n);
                        /* what the state saves, less the padding of parameters and grads */
                        cr_assert_eq(d.per_device - z.per_device,
                                     line_up(d.optimizer_bytes) - line_up(z.optimizer_bytes) -
                                             pad, "%d devices: %zu against %zu", n,
                                     z.per_device, d.per_device);
                }
}

Test(zero_plan, four_devices_quarter)
{
        struct strata_plan_info d = plan(STRATA_STRATEGY_DDP, 4), z = plan(STRATA_STRATEGY_ZERO1, 4);

        cr_assert_eq(z.shard_params, 58800u, "ceil(235146 / 4) = 58787, up to 16 floats");
        cr_assert_eq(z.optimizer_bytes, 470400u);
        cr_assert_eq(d.optimizer_bytes, 1881168u);
        cr_assert_lt(z.per_device, d.per_device);
}

Test(zero_plan, zero2_refuses_bf16_all_reduce)
{
        struct strata_module mods[1] = { { .ops = &strata_linear, .out = 4 } };
        struct strata_model m = { .in_features = 8, .nmodules = 1, .modules = mods };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info pl;

        c.model = &m;
        c.batch = 8;
        c.classes = 4;
        c.strategy.kind = STRATA_STRATEGY_ZERO2;
        c.strategy.devices = 2;
        c.strategy.grad_allreduce = STRATA_BF16;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "zero2"), "%s", strata_last_error());
        c.strategy.kind = STRATA_STRATEGY_ZERO1;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "zero1 all-reduces as ddp: %s",
                     strata_last_error());
}

/*
 * zero2 shards its reduced gradients where one shard and a buffer of the largest layer are
 * fewer floats than the whole vector: a model of layers of similar size, 256-256-256-256-10
 * (3 * 65792 + 2570 = 199946 parameters, the largest layer 65792), with AdamW. Then the
 * device's model states are ZeRO-2's 4Ψ + (4Ψ + 8Ψ)/N plus that layer buffer, and the plan
 * says so to the byte, with clipping by norm too (the owners sum the squares shard after
 * shard); with accumulation, which needs every device's local sum of every element (decision
 * 0036), and for the default model, where the first layer holds 85% of the parameters, zero2
 * plans as zero1.
 */
#define DEEP_PSI 199946u
#define DEEP_LMAX 65792u

static struct strata_plan_info deep_plan_each(enum strata_strategy_kind kind, int devices,
                                              int accumulate, float clip_norm, int each)
{
        struct strata_module mods[7];
        struct strata_model m = { .in_features = 256, .nmodules = 7, .modules = mods };
        struct strata_config c = rig_default_mlp(kind, devices);
        struct strata_plan_info pl;

        for (int i = 0; i < 7; i++)
                mods[i] = (struct strata_module){ .ops = i % 2 ? &strata_relu : &strata_linear,
                                                  .out = i == 6 ? 10 : 256 };
        c.model = &m;
        c.train.accumulate = accumulate;
        c.train.clip_norm = clip_norm;
        c.train.accumulate_reduce = each ? STRATA_ACCUMULATE_REDUCE_EACH
                                         : STRATA_ACCUMULATE_REDUCE_WINDOW;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
        return pl;
}

static struct strata_plan_info deep_plan(enum strata_strategy_kind kind, int devices,
                                         int accumulate, float clip_norm)
{
        return deep_plan_each(kind, devices, accumulate, clip_norm, 0);
}

Test(zero_plan, zero2_shards_gradients_where_smaller)
{
        for (int n = 2; n <= 4; n++) {
                struct strata_plan_info z1 = deep_plan(STRATA_STRATEGY_ZERO1, n, 1, 0.0f);
                struct strata_plan_info z2 = deep_plan(STRATA_STRATEGY_ZERO2, n, 1, 0.0f);
                size_t len = z2.shard_params, npad = len * (size_t)n;
                /* ZeRO-2's model states, in this layout's padded terms */
                size_t states = line_up(4 * npad) + line_up(4 * len) + line_up(8 * len);

                cr_assert_eq(z2.params, DEEP_PSI);
                cr_assert_eq(z1.layer_bytes, 0u);
                cr_assert_eq(z2.layer_bytes, 4u * DEEP_LMAX, "the largest layer's gradients");
                /* the whole gradient vector becomes one shard and the layer buffer */
                cr_assert_eq(z1.per_device - z2.per_device,
                             line_up(4 * npad) - line_up(4 * len) - line_up(4 * DEEP_LMAX),
                             "%d devices: zero2 %zu, zero1 %zu", n, z2.per_device,
                             z1.per_device);
                cr_assert_eq(z1.per_device - (line_up(4 * npad) * 2 + line_up(8 * len)),
                             z2.per_device - states - line_up(4 * DEEP_LMAX),
                             "the rest (activations, staging) is zero1's");
                /* clipping by norm keeps the shard alone; accumulation the whole vector */
                cr_assert_eq(deep_plan(STRATA_STRATEGY_ZERO2, n, 1, 1.0f).per_device,
                             z2.per_device);
                cr_assert_eq(deep_plan(STRATA_STRATEGY_ZERO2, n, 2, 0.0f).per_device,
                             deep_plan(STRATA_STRATEGY_ZERO1, n, 2, 0.0f).per_device);
                cr_assert_eq(deep_plan(STRATA_STRATEGY_ZERO2, n, 2, 1.0f).per_device,
                             deep_plan(STRATA_STRATEGY_ZERO1, n, 2, 1.0f).per_device);
        }
        /* one device: no shards; the default model: the layer buffer would cost more */
        cr_assert_eq(deep_plan(STRATA_STRATEGY_ZERO2, 1, 1, 0.0f).per_device,
                     deep_plan(STRATA_STRATEGY_ZERO1, 1, 1, 0.0f).per_device);
        cr_assert_eq(plan(STRATA_STRATEGY_ZERO2, 4).per_device,
                     plan(STRATA_STRATEGY_ZERO1, 4).per_device);
}

/*
 * Issue 46's model, 784-512-512-512-512-10 (1195018 parameters, the largest layer 401920),
 * AdamW, 4 devices, --clip-norm 1: zero2 holds one shard of the reduced gradients and the
 * largest layer's gradients instead of the whole vector, ZeRO-2's figure to the byte; with
 * --accumulate 2 as well it plans as zero1 (decision 0036).
 */
#define WIDE_PSI 1195018u
#define WIDE_LMAX 401920u

static struct strata_plan_info wide_plan_each(enum strata_strategy_kind kind, int accumulate,
                                              float clip_norm, int each)
{
        struct strata_module mods[9];
        struct strata_model m = { .in_features = 784, .nmodules = 9, .modules = mods };
        struct strata_config c = rig_default_mlp(kind, 4);
        struct strata_plan_info pl;

        for (int i = 0; i < 9; i++)
                mods[i] = (struct strata_module){ .ops = i % 2 ? &strata_relu : &strata_linear,
                                                  .out = i == 8 ? 10 : 512 };
        c.model = &m;
        c.train.accumulate = accumulate;
        c.train.clip_norm = clip_norm;
        c.train.accumulate_reduce = each ? STRATA_ACCUMULATE_REDUCE_EACH
                                         : STRATA_ACCUMULATE_REDUCE_WINDOW;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
        return pl;
}

static struct strata_plan_info wide_plan(enum strata_strategy_kind kind, int accumulate,
                                         float clip_norm)
{
        return wide_plan_each(kind, accumulate, clip_norm, 0);
}

Test(zero_plan, zero2_shards_gradients_with_clipping)
{
        struct strata_plan_info d = wide_plan(STRATA_STRATEGY_DDP, 1, 1.0f);
        struct strata_plan_info z1 = wide_plan(STRATA_STRATEGY_ZERO1, 1, 1.0f);
        struct strata_plan_info z2 = wide_plan(STRATA_STRATEGY_ZERO2, 1, 1.0f);
        struct strata_plan_info a1 = wide_plan(STRATA_STRATEGY_ZERO1, 2, 1.0f);
        struct strata_plan_info a2 = wide_plan(STRATA_STRATEGY_ZERO2, 2, 1.0f);
        size_t len = z2.shard_params, npad = 4 * len;

        cr_log_info("4 devices, --clip-norm 1: ddp %zu, zero1 %zu, zero2 %zu bytes per device; "
                    "with --accumulate 2: zero1 %zu, zero2 %zu", d.per_device, z1.per_device,
                    z2.per_device, a1.per_device, a2.per_device);
        cr_assert_eq(z2.params, WIDE_PSI);
        cr_assert_eq(len, 298768u, "ceil(1195018 / 4) = 298755, up to 16 floats");
        cr_assert_eq(z2.layer_bytes, 4u * WIDE_LMAX, "the largest layer's gradients");
        /* the whole gradient vector becomes one shard and the largest layer's gradients */
        cr_assert_eq(z1.per_device - z2.per_device,
                     line_up(4 * npad) - line_up(4 * len) - line_up(4 * WIDE_LMAX),
                     "zero2 %zu, zero1 %zu", z2.per_device, z1.per_device);
        cr_assert_eq(wide_plan(STRATA_STRATEGY_ZERO2, 1, 0.0f).per_device, z2.per_device,
                     "clipping by norm costs zero2 nothing");
        cr_assert_eq(a2.per_device, a1.per_device, "accumulation: the whole local vector");
}

/*
 * accumulate_reduce each (decision 0047), issue 46's model and configuration (784-512x4-10,
 * AdamW, 4 devices, --clip-norm 1) with --accumulate 2: every micro-batch is reduce-scattered
 * layer by layer into the owners' shards of the window's sum, so zero2 plans as without
 * accumulation: ZeRO-2's model states 4Ψ + (4Ψ + 8Ψ)/N plus one buffer of the largest layer's
 * gradients. Every strategy of that mode keeps that buffer (ddp, zero1: the whole window's
 * sum and the buffer), so zero2 saves exactly the gradients but one shard against zero1 in
 * the same mode: at least 3/4 of them (issue 46's bound); against zero1 reducing once a
 * window it saves that less the buffer.
 */
Test(zero_plan, zero2_shards_gradients_with_accumulation_each)
{
        struct strata_plan_info d = wide_plan_each(STRATA_STRATEGY_DDP, 2, 1.0f, 1);
        struct strata_plan_info z1 = wide_plan_each(STRATA_STRATEGY_ZERO1, 2, 1.0f, 1);
        struct strata_plan_info z2 = wide_plan_each(STRATA_STRATEGY_ZERO2, 2, 1.0f, 1);
        struct strata_plan_info f = wide_plan_each(STRATA_STRATEGY_FSDP, 2, 1.0f, 1);
        struct strata_plan_info w1 = wide_plan(STRATA_STRATEGY_ZERO1, 2, 1.0f);
        struct strata_plan_info w2 = wide_plan(STRATA_STRATEGY_ZERO2, 2, 1.0f);
        struct strata_plan_info wf = wide_plan(STRATA_STRATEGY_FSDP, 2, 1.0f);
        size_t len = z2.shard_params, npad = 4 * len;

        cr_log_info("4 devices, --clip-norm 1 --accumulate 2, each: ddp %zu, zero1 %zu, zero2 "
                    "%zu, fsdp %zu bytes per device; window: zero1 %zu, zero2 %zu, fsdp %zu",
                    d.per_device, z1.per_device, z2.per_device, f.per_device, w1.per_device,
                    w2.per_device, wf.per_device);
        cr_assert_eq(len, 298768u);
        cr_assert_eq(z2.layer_bytes, 4u * WIDE_LMAX, "one buffer of the largest layer");
        cr_assert_eq(z1.layer_bytes, 4u * WIDE_LMAX);
        cr_assert_eq(d.layer_bytes, 4u * WIDE_LMAX);
        /* as without accumulation: the shard of the sum and the layer buffer */
        cr_assert_eq(z2.per_device, wide_plan(STRATA_STRATEGY_ZERO2, 1, 1.0f).per_device);
        /* issue 46: at most zero1's (same mode) less 3/4 of the gradients, 3 * 4Ψ / 4 */
        cr_assert_leq(z2.per_device, z1.per_device - 3u * WIDE_PSI, "zero2 %zu, zero1 %zu",
                      z2.per_device, z1.per_device);
        cr_assert_eq(z1.per_device - z2.per_device, line_up(4 * npad) - line_up(4 * len));
        /* against zero1 of the window order: ZeRO-2's figure plus the layer buffer */
        cr_assert_eq(w1.per_device - z2.per_device,
                     line_up(4 * npad) - line_up(4 * len) - line_up(4 * WIDE_LMAX));
        cr_assert_eq(w2.per_device, w1.per_device, "window: the whole local vector");
        /* zero1, ddp: the window's sum whole, and the buffer */
        cr_assert_eq(z1.per_device - w1.per_device, line_up(4 * WIDE_LMAX));
        /* fsdp: the whole local vector of layer gradients becomes the one layer's */
        cr_assert_eq(wf.per_device - f.per_device, line_up(4 * npad) - line_up(4 * WIDE_LMAX));
        cr_assert_eq(f.layer_bytes, 2 * 4u * WIDE_LMAX, "parameters and gradients of a layer");
}

/* Where each micro-batch is reduced, zero2 holds its shard on any model from 2 devices. */
Test(zero_plan, zero2_each_shards_on_any_model)
{
        for (int n = 2; n <= 4; n++) {
                struct strata_plan_info z1 = deep_plan_each(STRATA_STRATEGY_ZERO1, n, 3, 1.0f, 1);
                struct strata_plan_info z2 = deep_plan_each(STRATA_STRATEGY_ZERO2, n, 3, 1.0f, 1);
                size_t npad = z2.shard_params * (size_t)n;

                cr_assert_eq(z2.per_device,
                             deep_plan(STRATA_STRATEGY_ZERO2, n, 1, 0.0f).per_device);
                cr_assert_eq(z1.per_device - z2.per_device,
                             line_up(4 * npad) - line_up(4 * z2.shard_params));
        }
        /* the default model, whose first layer holds 85%: zero2's shard and the buffer still
         * beat zero1's whole sum and the same buffer */
        {
                struct strata_config c = rig_default_mlp(STRATA_STRATEGY_ZERO2, 4);
                struct strata_plan_info a, b;

                c.train.accumulate = 4;
                c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
                cr_assert_eq(strata_plan(&c, &a), STRATA_OK, "%s", strata_last_error());
                c.strategy.kind = STRATA_STRATEGY_ZERO1;
                cr_assert_eq(strata_plan(&c, &b), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(b.per_device - a.per_device,
                             line_up(4 * 4 * (size_t)a.shard_params) -
                                     line_up(4 * (size_t)a.shard_params));
        }
}

/*
 * Bad input: an accumulate_reduce that is neither value is refused by the plan and by init
 * with its value named, the configuration unchanged; by name too (strata_config_set() takes
 * the integer, the checks refuse it).
 */
Test(zero_plan, accumulate_reduce_refuses_unknown_values)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_ZERO2, 2), before;
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;

        c.train.accumulate = 2;
        cr_assert_eq(strata_config_set(&c, "accumulate_reduce", 2), STRATA_OK);
        before = c;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "accumulate_reduce 2 is not "
                                              "STRATA_ACCUMULATE_REDUCE_WINDOW (0) or "
                                              "STRATA_ACCUMULATE_REDUCE_EACH (1)"),
                  "%s", strata_last_error());
        cr_assert_eq(memcmp(&c, &before, sizeof(c)), 0);
        c.train.accumulate_reduce = (enum strata_accumulate_reduce)-1;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt);
        cr_assert(strstr(strata_last_error(), "accumulate_reduce -1"), "%s",
                  strata_last_error());
        cr_assert_eq(strata_config_set(&c, "accumulate_reduce", 1), STRATA_OK);
        cr_assert_eq(c.train.accumulate_reduce, STRATA_ACCUMULATE_REDUCE_EACH);
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
}

/*
 * A driver without the add kernel cannot add the reduced micro-batches into the window's sum:
 * each is refused there with the reason (ENOTSUP), where it would apply only; window runs.
 */
Test(zero_plan, accumulate_each_needs_the_add_kernel)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_DDP, 2);
        static struct driver_copy dc;
        struct strata_plan_info pl;

        driver_copy(&dc, devsim_driver());
        dc.k.add = NULL;
        c.device.driver = &dc.dev;
        c.train.accumulate = 2;
        c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "accumulate_reduce each adds every micro-batch's "
                                              "reduced gradients on the device: the devsim "
                                              "driver has no add kernel (use window)"),
                  "%s", strata_last_error());
        c.train.accumulate = 1; /* nothing to add: each is the window */
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
        c.train.accumulate = 2;
        c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_WINDOW;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
}
