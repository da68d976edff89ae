/*
 * SpectralConv3d through the runtime (decision 0072): an FNO block over a (1, 2, 3, 6) sample
 * (the conv rig's 36 values read as D x H x W) under ddp and dp repeats bitwise, one device is
 * bitwise the single strategy, two within 1e-5; invariant mode gives bitwise the same
 * parameters on one, two and four devices; an epoch under ddp and
 * in invariant mode calls no heap function and uses the plan to the byte; the four weight
 * groups are named and shaped as PyTorch's.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define LINE "input(1,2,3,6) conv3d(4,1) spectralconv3d(4,1,1,3) conv3d(4,1,from=0) " \
             "add(from=1) gelu linear(4)"
/* conv 1->4, spectral 4 x (4 x 4 x 1 x 1 x 3 x 2), conv 4->4, linear 4 * 36 -> classes */
#define NP (4 + 4 + 4 * 4 * 4 * 3 * 2 + 16 + 4 + 4 * 36 * RIG_CLASSES + RIG_CLASSES)

static void fno3_rig(struct rig *r)
{
        rig_init_conv(r);
        cr_assert_eq(strata_model_parse(LINE, r->mods, 6, &r->model), STRATA_OK, "%s",
                     strata_last_error());
        r->cfg.optim.lr = 0.02f;
}

Test(spectral3d_parallel, ddp_and_dp_match_single, .timeout = 120)
{
        struct rig r;

        fno3_rig(&r);
        rig_equivalence(&r, STRATA_STRATEGY_DDP, 2, NP, 4);
        rig_equivalence(&r, STRATA_STRATEGY_DP, 2, NP, 4);
}

Test(spectral3d_parallel, invariant_on_any_device_count, .timeout = 120)
{
        static float ref[NP], got[NP];
        struct strata_config c;
        struct rig r;

        fno3_rig(&r);
        r.cfg.strategy.invariant = 1;
        rig_train(&r, 4, ref, NP);
        for (int n = 1; n <= 4; n *= 2) {
                c = rig_cfg(&r, STRATA_STRATEGY_DDP, n, 0);
                rig_train_cfg(&r, &c, 4, got, NP);
                cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0, "%d devices differ", n);
        }
}

Test(spectral3d_parallel, no_heap_and_the_plan_exact, .timeout = 120)
{
        rig_no_heap(fno3_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 0);
        rig_no_heap(fno3_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 1);
}

Test(spectral3d_parallel, the_weights_names)
{
        static const char *const names[4] = { "layers.1.weights1", "layers.1.weights2",
                                              "layers.1.weights3", "layers.1.weights4" };
        struct rig r;
        struct strata_runtime *rt;
        struct strata_param p;

        fno3_rig(&r);
        rt = rig_open(&r.cfg);
        for (int g = 0; g < 4; g++) {
                cr_assert_eq(strata_parameter(rt, 0, 2 + g, &p), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_str_eq(p.name, names[g]);
                cr_assert_eq(p.group.ndim, 6);
                cr_assert(p.group.shape[0] == 4 && p.group.shape[1] == 4 &&
                          p.group.shape[2] == 1 && p.group.shape[3] == 1 &&
                          p.group.shape[4] == 3 && p.group.shape[5] == 2);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
