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
