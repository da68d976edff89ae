/*
 * strata_set_lr(): a rate set between steps is the rate the following steps use (a run
 * started at 0.05 and set to 0.2 after two steps is bitwise a run whose two first steps used
 * 0.05 and the rest 0.2, whatever the strategy); bad rates and a runtime not READY are refused
 * with a message and change nothing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"

static void params(struct strata_runtime *rt, float *out, size_t n)
{
        const float *p;
        size_t np;

        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_leq(np, n);
        memcpy(out, p, np * sizeof(float));
}

/* Two steps at 0.05, then two at @p later (set with strata_set_lr when @p set, else not). */
static void run(struct rig *r, enum strata_strategy_kind kind, int devices, int set,
                float *out)
{
        struct strata_config c = rig_cfg(r, kind, devices, 0);
        struct strata_runtime *rt;

        c.optim.lr = 0.05f;
        rt = rig_open(&c);
        rig_steps(r, rt, 2, NULL);
        if (set)
                cr_assert_eq(strata_set_lr(rt, 0.2f), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, 2, NULL);
        params(rt, out, 4096);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(set_lr, later_steps_use_the_rate_set)
{
        static float a[4096], b[4096], c[4096];
        struct rig r;

        rig_init(&r, 0);
        run(&r, STRATA_STRATEGY_SINGLE, 1, 0, a);
        run(&r, STRATA_STRATEGY_SINGLE, 1, 1, b);
        cr_expect_neq(memcmp(a, b, sizeof(a)), 0, "the rate set changed nothing");
        run(&r, STRATA_STRATEGY_DDP, 2, 1, c);
        cr_expect_lt(rig_rel_diff(b, c, 4096), 1e-5, "ddp took another rate than single");
        run(&r, STRATA_STRATEGY_SINGLE, 1, 1, c);
        cr_expect_eq(memcmp(b, c, sizeof(b)), 0, "the same rates, not the same bits");
}

Test(set_lr, bad_rates_and_states_refused)
{
        struct strata_runtime *rt;
        struct rig r;
        static float a[4096], b[4096];

        rig_init(&r, 0);
        cr_expect_eq(strata_set_lr(NULL, 0.1f), STRATA_EINVAL);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_expect_eq(strata_set_lr(rt, 0.1f), STRATA_EBADSTATE, "before connect");
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        params(rt, a, 4096);
        cr_expect_eq(strata_set_lr(rt, 0.0f), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), "learning rate 0 must be > 0"));
        cr_expect_eq(strata_set_lr(rt, -1.0f), STRATA_EINVAL);
        cr_expect_eq(strata_set_lr(rt, INFINITY), STRATA_EINVAL);
        cr_expect_eq(strata_set_lr(rt, NAN), STRATA_EINVAL);
        params(rt, b, 4096);
        cr_expect_eq(memcmp(a, b, sizeof(a)), 0);
        cr_expect_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
