/*
 * A convolutional model (Conv2d circular-relu-linear on 1 x 6 x 6 samples) trains, evaluates
 * and predicts with nothing allocated in the process during the steps, and uses exactly the
 * memory its plan said, under single, ddp and fsdp on 2 devices, 16-mixed and bf16-mixed, and
 * invariant mode.
 */
#include <criterion/criterion.h>

#include "tests/support/rig.h"
#include "tools/heapcount.h"

static void conv_no_heap(enum strata_strategy_kind kind, int n, enum strata_precision prec,
                         int invariant)
{
        static float logits[RIG_BATCH * RIG_CLASSES];
        struct strata_runtime *rt;
        struct strata_memory_info mi;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        long calls;

        rig_init_conv(&r);
        r.cfg.strategy.kind = kind;
        r.cfg.strategy.devices = n;
        r.cfg.strategy.invariant = invariant;
        r.cfg.precision.kind = prec;
        rt = rig_open(&r.cfg);
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_heapcount_start();
        while (strata_loader_next(&r.loader, &b)) {
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK);
                cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES),
                             STRATA_OK);
        }
        calls = strata_heapcount_stop();
        cr_assert_eq(calls, 0, "strategy %d on %d: %ld heap calls during training", kind, n,
                     calls);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "strategy %d: used %zu bytes, planned %zu", kind,
                     mi.used, mi.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void counted_or_skip(void)
{
        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
}

Test(conv_no_heap, single_ddp_fsdp)
{
        counted_or_skip();
        conv_no_heap(STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 0);
        conv_no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 0);
        conv_no_heap(STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_32, 0);
}

Test(conv_no_heap, mixed_precision_and_invariant)
{
        counted_or_skip();
        conv_no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_16_MIXED, 0);
        conv_no_heap(STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_BF16_MIXED, 0);
        conv_no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 1);
}
