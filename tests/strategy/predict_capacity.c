/*
 * strata_predict_step() writes into the caller's array only when its capacity holds the
 * batch's rows x outputs: one value short is refused with both numbers and nothing written
 * (a guard after it stays), on one device and on the workers of ddp.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define NEED (RIG_BATCH * RIG_CLASSES)

static void capacity(const struct strata_config *c, struct rig *r)
{
        static float out[NEED + 8];
        struct strata_runtime *rt = rig_open(c);
        struct strata_batch b;

        rig_steps(r, rt, 1, &b);
        for (int k = 0; k < NEED + 8; k++)
                out[k] = -7.0f;
        cr_assert_eq(strata_predict_step(rt, &b, out, NEED - 1), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "out holds 63 values; the batch's 16 "
                                                       "rows x 4 outputs need 64"),
                           "%s", strata_last_error());
        for (int k = 0; k < NEED + 8; k++)
                cr_assert_eq(out[k], -7.0f, "a refused predict wrote value %d", k);
        cr_assert_eq(strata_predict_step(rt, &b, out, 0), STRATA_EINVAL);
        cr_assert_eq(strata_predict_step(rt, &b, out, NEED), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_neq(out[NEED - 1], -7.0f, "the last row was written");
        cr_assert_eq(out[NEED], -7.0f, "nothing past rows x outputs");
        b.rows = 3; /* a partial batch in a batch-sized array */
        cr_assert_eq(strata_predict_step(rt, &b, out, NEED), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(predict_capacity, single_refuses_a_small_array)
{
        struct rig r;

        rig_init(&r, 0);
        capacity(&r.cfg, &r);
}

Test(predict_capacity, ddp_refuses_a_small_array, .timeout = 60)
{
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        capacity(&c, &r);
}
