/* Two runs with the same seed give bitwise identical parameters; training reduces the loss. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

Test(single_reproducible, same_seed_bitwise_equal)
{
        static float a[NP], b[NP], c[NP];
        struct rig r;

        rig_init(&r, 0);
        rig_train(&r, 30, a, NP);
        rig_train(&r, 30, b, NP);
        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "same seed must give identical parameters");
        r.cfg.seed = 12;
        rig_train(&r, 30, c, NP);
        cr_assert_neq(memcmp(a, c, sizeof(a)), 0, "another seed must differ");
}

Test(single_reproducible, training_learns)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_metrics m0, m1;
        struct rig r;

        rig_init(&r, 1);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_loader_next(&r.loader, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &m0), STRATA_OK);
        for (int e = 0; e < 15; e++) {
                strata_loader_reset(&r.loader, r.idx, 256);
                while (strata_loader_next(&r.loader, &b))
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        }
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_loader_next(&r.loader, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &m1), STRATA_OK);
        cr_assert_lt(m1.loss, 0.7 * m0.loss, "loss %g -> %g", m0.loss, m1.loss);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
