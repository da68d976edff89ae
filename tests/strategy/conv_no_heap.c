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
        rig_no_heap(rig_init_conv, kind, n, prec, invariant);
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
