/*
 * fsdp's per-device plan, for strata-train's default model (784-256-128-10, 235146
 * parameters) with AdamW: each device plans one shard of the parameters, of the reduced
 * gradients and of the optimizer state (ZeRO stage 3: 4L + 4L + 8L bytes, L the zero shard
 * length), plus the live layer (a buffer of the largest layer for its parameters and one for
 * its gradients, or a whole local gradient vector when micro-batches accumulate or clipping by
 * norm gathers the shards); its per-device bytes fall from ddp's by exactly that, to the 64-byte
 * line; a model whose replica does not fit a region trains there under fsdp while ddp is refused
 * at init with the numbers; and what fsdp does not take (a bf16 gradient all-reduce, a driver
 * with memory of its own) is refused with a message before anything is built.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

#define PSI 235146u /* 784*256 + 256 + 256*128 + 128 + 128*10 + 10 */
#define LMAX 200960u /* the first layer: 784*256 + 256 */

static struct strata_plan_info plan_of(const struct strata_config *c)
{
        struct strata_plan_info pl;

        cr_assert_eq(strata_plan(c, &pl), STRATA_OK, "%s", strata_last_error());
        return pl;
}

static size_t line_up(size_t n)
{
        return (n + 63) / 64 * 64;
}

/* ddp's parameters, gradients and state against fsdp's shards and live layer, to the byte. */
static void zero3(int n, int accumulate)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_FSDP, n);
        struct strata_plan_info d, f;
        size_t f32 = sizeof(float), lgrad, ddp_states, fsdp_states;

        c.train.accumulate = accumulate;
        f = plan_of(&c);
        c.strategy.kind = STRATA_STRATEGY_DDP;
        d = plan_of(&c);
        cr_assert_eq(f.params, PSI);
        cr_assert_geq(f.shard_params * n, PSI);
        cr_assert_lt(f.shard_params * n - PSI, 16u * n, "a line per shard");
        cr_assert_eq(f.optimizer_bytes, 2 * f32 * f.shard_params, "AdamW: one shard of m, v");
        lgrad = accumulate > 1 ? f.shard_params * n : LMAX;
        cr_assert_eq(f.layer_bytes, f32 * (LMAX + lgrad), "%d devices", n);
        cr_assert_eq(d.layer_bytes, 0);
        ddp_states = 2 * line_up(f32 * PSI) + line_up(2 * f32 * PSI);
        fsdp_states = 2 * line_up(f32 * f.shard_params) + line_up(f.optimizer_bytes) +
                      line_up(f32 * LMAX) + line_up(f32 * lgrad);
        cr_assert_eq(d.per_device - f.per_device, ddp_states - fsdp_states,
                     "%d devices: fsdp %zu, ddp %zu bytes a device", n, f.per_device,
                     d.per_device);
}

Test(fsdp_plan, zero3_formula)
{
        for (int n = 1; n <= 4; n++) {
                zero3(n, 0);
                zero3(n, 2);
        }
}

/* The decision's table: 4 devices, L = 58800; 16L = 940800 of model states, 1607680 live. */
Test(fsdp_plan, four_devices)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_FSDP, 4);
        struct strata_plan_info f = plan_of(&c);

        cr_assert_eq(f.shard_params, 58800u);
        cr_assert_eq(f.optimizer_bytes, 470400u);
        cr_assert_eq(f.layer_bytes, 1607680u);
        c.strategy.kind = STRATA_STRATEGY_DDP;
        /* 16 psi = 3762336 bytes, 3762432 in 64-byte lines, against 16 L and the live layer */
        cr_assert_eq(plan_of(&c).per_device - f.per_device, 3762432u - 940800u - 1607680u);
}

/* A region the full replicas do not fit: fsdp trains in it, ddp is refused with the numbers. */
Test(fsdp_plan, shards_fit_where_replicas_do_not, .timeout = 60)
{
        static unsigned char region[64 << 20] __attribute__((aligned(1 << 21)));
        struct strata_plan_info d, f;
        struct strata_runtime *rt;
        char need[64];
        struct rig r;

        rig_init(&r, 0);
        r.mods[0].out = 1024; /* 20-1024-relu-4: the parameters weigh in the plan */
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_FSDP, 4, 0);
        r.cfg.device.bind = STRATA_BIND_NONE;
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        f = plan_of(&r.cfg);
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        d = plan_of(&r.cfg);
        cr_assert_lt(f.bytes, d.bytes);
        cr_assert_leq(f.bytes, sizeof(region));
        cr_assert_leq(f.align, 1u << 21);
        r.cfg.memory = region;
        r.cfg.memory_size = f.bytes;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENOMEM, "ddp does not fit");
        snprintf(need, sizeof(need), "needs %zu", d.bytes);
        cr_assert(strstr(strata_last_error(), need), "%s", strata_last_error());
        r.cfg.strategy.kind = STRATA_STRATEGY_FSDP;
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 4, NULL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* What fsdp does not take is refused before anything is built, saying why. */
Test(fsdp_plan, refuses_bf16_gradient_all_reduce)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_FSDP, 2);
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;

        c.strategy.grad_allreduce = STRATA_BF16;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "fsdp"), "%s", strata_last_error());
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt, "nothing built");
}

/* Layers are gathered in host memory: a driver with memory of its own is refused. */
Test(fsdp_plan, refuses_device_memory)
{
        struct strata_config c = rig_default_mlp(STRATA_STRATEGY_FSDP, 2);
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;

        c.device.driver = devsim_driver();
        cr_assert_eq(strata_plan(&c, &pl), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "fsdp"), "%s", strata_last_error());
        cr_assert_eq(strata_init(&rt, &c), STRATA_ENOTSUP);
        cr_assert_null(rt, "nothing built");
        c.strategy.kind = STRATA_STRATEGY_ZERO2;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_OK, "%s", strata_last_error());
}
