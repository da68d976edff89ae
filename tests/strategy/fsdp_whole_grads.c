/*
 * fsdp's whole local vector of layer gradients (clipping by norm on a driver without
 * sumsq_from, or accumulation in the window order) is a flag of the shard plan, not read from
 * the buffers' sizes: on a model of one layer whose parameter count is a multiple of the
 * shards' lines (672 = 2 shards of 336), the whole vector is exactly the largest layer's. The
 * plan says so, and fsdp on 2 devices clipping by norm on a driver without sumsq_from gathers
 * the shards (it does not call the missing kernel) and gives ddp's bits.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "nn/shard.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

#define OUT 32
#define NP ((RIG_IN + 1) * OUT) /* 672: 2 x 336, 336 = 21 lines of 16 floats */

Test(fsdp_whole_grads, the_plan_keeps_the_flag_where_the_vector_is_one_layer)
{
        struct strata__shard_sizes z;

        cr_assert_eq(strata__shard_plan(NP, NP, 2, STRATA__SHARD_PARAMS |
                                        STRATA__SHARD_WHOLE_GRADS, &z), STRATA_OK);
        cr_assert_eq(z.npad, (size_t)NP, "the case: npad %zu, lmax %u", z.npad, NP);
        cr_assert_eq(z.lgrad, z.lbuf, "the case: lgrad %zu, lbuf %zu", z.lgrad, z.lbuf);
        cr_assert(z.whole_grads, "a whole local vector of %zu floats, not planned so", z.lgrad);
        cr_assert_eq(strata__shard_plan(NP, NP, 2, STRATA__SHARD_PARAMS, &z), STRATA_OK);
        cr_assert(!z.whole_grads, "one layer's gradients planned as the whole vector");
}

/* @p kind on 2 devices, clipping by norm 0.05 on @p drv: 12 steps' parameters into @p out. */
static void train(struct rig *r, enum strata_strategy_kind kind,
                  const struct strata_device_ops *drv, float *out)
{
        struct strata_config c = rig_cfg(r, kind, 2, 0);
        struct strata_runtime *rt;
        const float *p;
        size_t n, at = 0;

        c.train.clip_norm = 0.05f;
        c.device.driver = drv;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, 12, NULL);
        for (int d = 0; d < (kind == STRATA_STRATEGY_FSDP ? 2 : 1); d++, at += n) {
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                n = kind == STRATA_STRATEGY_FSDP ? n : NP;
                cr_assert_leq(at + n, (size_t)NP);
                memcpy(out + at, p, n * sizeof(float));
        }
        cr_assert_eq(at, (size_t)NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(fsdp_whole_grads, clipping_without_sumsq_from_on_one_layer_gives_ddps_bits, .timeout = 60)
{
        static struct driver_copy dc;
        static float ddp[NP], fsdp[NP];
        const struct strata_device_ops *cpu;
        struct rig r;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        driver_copy(&dc, cpu);
        dc.k.sumsq_from = NULL;
        rig_init(&r, 0);
        r.mods[0].out = OUT; /* linear(32) alone: labels 0..3 of 32 classes */
        r.model.nmodules = 1;
        r.cfg.classes = OUT;
        train(&r, STRATA_STRATEGY_DDP, &dc.dev, ddp);
        train(&r, STRATA_STRATEGY_FSDP, &dc.dev, fsdp);
        cr_assert_eq(memcmp(ddp, fsdp, sizeof(ddp)), 0, "fsdp's parameters differ from ddp's");
}
