/* Gradient accumulation equals a k-times larger batch; clipping matches a serial reference. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

/* Train with the given batch rows per step, feeding the same 64 samples in order. */
static void train(struct rig *r, struct strata_config c, int rows, int steps, float *out)
{
        struct strata_runtime *rt;
        const float *p;
        size_t n;

        c.batch = rows;
        cr_assert_eq(strata_loader_init(&r->loader, &r->data, &r->ds, rows, 1), STRATA_OK);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(r, rt, steps, NULL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(out, p, n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(accumulate_clip, k_micro_batches_equal_one_big_batch, .timeout = 60)
{
        static float big[NP], acc[NP];
        struct rig r;

        for (int kind = 0; kind < 3; kind++) {
                struct strata_config c;

                rig_init(&r, 0);
                c = r.cfg;
                c.strategy.kind = (enum strata_strategy_kind)kind;
                c.strategy.devices = kind == STRATA_STRATEGY_SINGLE ? 1 : 2;
                train(&r, c, 32, 3, big);          /* 3 steps of 32 rows */
                c.train.accumulate = 4;
                train(&r, c, 8, 12, acc);          /* 12 micro-batches of 8, step every 4 */
                cr_assert_leq(rig_rel_diff(acc, big, NP), 1e-5, "strategy %d: %g", kind,
                              rig_rel_diff(acc, big, NP));
        }
}

Test(accumulate_clip, clipping_matches_reference)
{
        static float p0[NP], g[NP], clipped[NP], want[NP];
        struct strata_config c;
        struct rig r;
        double norm = 0.0;
        float maxn, maxv = 0.01f;

        rig_init(&r, 0);
        c = r.cfg;
        c.optim.lr = 1.0f;
        c.optim.momentum = 0.0f;
        train(&r, c, 16, 0, p0);
        train(&r, c, 16, 1, g);                    /* p1 = p0 - grad */
        for (int i = 0; i < NP; i++) {
                g[i] = p0[i] - g[i];
                norm += (double)g[i] * g[i];
        }
        norm = sqrt(norm);
        maxn = (float)(norm / 4.0);
        for (int kind = 0; kind < 3; kind++) {
                c.strategy.kind = (enum strata_strategy_kind)kind;
                c.strategy.devices = kind == STRATA_STRATEGY_SINGLE ? 1 : 2;
                c.train.clip_norm = maxn;
                c.train.clip_value = 0.0f;
                train(&r, c, 16, 1, clipped);
                for (int i = 0; i < NP; i++)
                        want[i] = p0[i] - g[i] * (float)(maxn / (norm + 1e-6));
                cr_assert_leq(rig_rel_diff(clipped, want, NP), 1e-5, "norm, strategy %d", kind);
                c.train.clip_norm = 0.0f;
                c.train.clip_value = maxv;
                train(&r, c, 16, 1, clipped);
                for (int i = 0; i < NP; i++)
                        want[i] = p0[i] - (g[i] > maxv ? maxv : g[i] < -maxv ? -maxv : g[i]);
                cr_assert_leq(rig_rel_diff(clipped, want, NP), 1e-5, "value, strategy %d", kind);
        }
}
