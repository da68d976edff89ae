/*
 * Graph models with skip connections train through the public API within the promises: a
 * ResNet of two residual blocks (conv, relu, conv, add) and a small U-Net (conv, maxpool,
 * conv, upsample, concat, conv) learn on synthetic 1 x 6 x 6 samples (the loss falls), repeat
 * bitwise, use exactly the memory their plan said and allocate nothing during steps (training,
 * evaluation, prediction), under single, ddp, dp, zero1, zero2 and fsdp on 2 devices,
 * invariant mode, 16-mixed and bf16-mixed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/skipnet.h"

#define STEPS 48

static double mean(const double *v, int n)
{
        double s = 0.0;

        for (int i = 0; i < n; i++)
                s += v[i];
        return s / n;
}

static void learns(enum skipnet_kind kind)
{
        static struct skipnet_run a, b;
        struct strata_config c = skipnet_cfg(kind, STRATA_STRATEGY_SINGLE, 1);
        double first, last;

        skipnet_train(&c, STEPS, &a);
        skipnet_train(&c, STEPS, &b);
        cr_assert_eq(memcmp(a.p, b.p, a.np * sizeof(float)), 0, "runs differ");
        cr_assert_eq(memcmp(a.loss, b.loss, sizeof(a.loss)), 0, "losses differ");
        first = mean(a.loss, 16);
        last = mean(a.loss + STEPS - 16, 16);
        cr_assert_lt(last, 0.8 * first, "the loss did not fall: %g then %g", first, last);
        cr_assert_leq(a.heap_calls, 0, "%ld heap calls during steps", a.heap_calls);
}

Test(skip_training, resnet_learns_repeats_and_keeps_the_promises, .timeout = 120)
{
        learns(SKIPNET_RESNET);
}

Test(skip_training, unet_learns_repeats_and_keeps_the_promises, .timeout = 120)
{
        learns(SKIPNET_UNET);
}

/* 8 steps of @p kind under strategy @p s on 2 devices: no heap, planned == used (asserted). */
static void promises(enum skipnet_kind kind, enum strata_strategy_kind s, int invariant,
                     enum strata_precision prec)
{
        static struct skipnet_run r;
        struct strata_config c = skipnet_cfg(kind, s, s == STRATA_STRATEGY_SINGLE ? 1 : 2);

        c.strategy.invariant = invariant;
        c.precision.kind = prec;
        skipnet_train(&c, 8, &r);
        cr_assert_leq(r.heap_calls, 0, "strategy %d, invariant %d, %s: %ld heap calls", s,
                      invariant, strata_precision_name(prec), r.heap_calls);
        for (int i = 0; i < 8; i++)
                cr_assert(r.loss[i] == r.loss[i] && r.loss[i] < 10.0, "step %d: loss %g", i,
                          r.loss[i]);
}

static void every_strategy(enum skipnet_kind kind)
{
        static const enum strata_strategy_kind all[] = {
                STRATA_STRATEGY_DDP, STRATA_STRATEGY_DP, STRATA_STRATEGY_ZERO1,
                STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };

        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                promises(kind, all[i], 0, STRATA_PRECISION_32);
        promises(kind, STRATA_STRATEGY_DDP, 1, STRATA_PRECISION_32);
        promises(kind, STRATA_STRATEGY_FSDP, 1, STRATA_PRECISION_32);
        promises(kind, STRATA_STRATEGY_DDP, 0, STRATA_PRECISION_16_MIXED);
        promises(kind, STRATA_STRATEGY_SINGLE, 0, STRATA_PRECISION_BF16_MIXED);
}

Test(skip_training, resnet_under_every_strategy, .timeout = 240)
{
        every_strategy(SKIPNET_RESNET);
}

Test(skip_training, unet_under_every_strategy, .timeout = 240)
{
        every_strategy(SKIPNET_UNET);
}
