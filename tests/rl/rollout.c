/*
 * PPO's rollout buffer: advantages and returns equal GAE computed by hand in double for two
 * environments with an episode end; minibatches of an epoch cover every row once, the same
 * seed and epoch give the same order; bad calls are refused with nothing changed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/rl.h"
#include "strata/strata.h"

#define T 5
#define E 2

static struct strata_rl_rollout_config cfg(void)
{
        return (struct strata_rl_rollout_config){ .steps = T, .n_envs = E, .state_dim = 1,
                                                  .action_dim = 1, .gamma = 0.9f,
                                                  .lambda = 0.8f, .seed = 3 };
}

static void *make(struct strata_rl_rollout *ro, const struct strata_rl_rollout_config *c)
{
        struct strata_arena a;
        size_t bytes;
        void *mem;

        cr_assert_eq(strata_rl_rollout_bytes(c, &bytes), STRATA_OK, "%s", strata_last_error());
        mem = aligned_alloc(64, bytes);
        cr_assert_eq(strata_arena_init(&a, mem, bytes, NULL), STRATA_OK);
        cr_assert_eq(strata_rl_rollout_init(ro, &a, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_arena_used(&a), bytes);
        return mem;
}

static const float rew[T][E] = { { 1, -1 }, { 2, 0.5f }, { 0, 3 }, { 1, 1 }, { -2, 2 } };
static const float val[T][E] = { { 0.5f, 0.1f }, { 1, 0.2f }, { -1, 0.3f }, { 2, 0.4f },
                                 { 0.3f, 0.5f } };
static const int dn[T][E] = { { 0, 0 }, { 1, 0 }, { 0, 0 }, { 0, 1 }, { 0, 0 } };
static const float last[E] = { 0.7f, -0.2f };

static void record(struct strata_rl_rollout *ro)
{
        for (int t = 0; t < T; t++) {
                float s[E] = { (float)(t * E), (float)(t * E + 1) }, lp[E] = { -1, -2 };

                cr_assert_eq(strata_rl_rollout_add(ro, s, s, lp, rew[t], val[t], dn[t]),
                             STRATA_OK, "%s", strata_last_error());
        }
}

Test(rl_rollout, gae_equals_the_hand_computation)
{
        struct strata_rl_rollout_config c = cfg();
        struct strata_rl_rollout ro;
        void *mem = make(&ro, &c);
        float st[T * E], adv[T * E], ret[T * E];
        uint32_t rows;

        record(&ro);
        cr_assert_eq(strata_rl_rollout_finish(&ro, last), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_rl_rollout_minibatch(&ro, 0, 0, T * E, st, NULL, NULL, adv, ret,
                                                 &rows),
                     STRATA_OK);
        cr_assert_eq(rows, T * E);
        for (int e = 0; e < E; e++) {
                double next_v = last[e], next_a = 0, want[T];

                for (int t = T - 1; t >= 0; t--) {
                        double keep = 1.0 - dn[t][e];
                        double delta = rew[t][e] + 0.9 * next_v * keep - val[t][e];

                        next_a = delta + 0.9 * 0.8 * keep * next_a;
                        want[t] = next_a;
                        next_v = val[t][e];
                }
                for (int j = 0; j < T * E; j++) {
                        int row = (int)st[j], t = row / E;

                        if (row % E != e)
                                continue;
                        cr_assert(fabs(adv[j] - want[t]) < 1e-5, "t %d e %d: %g, not %g", t, e,
                                  (double)adv[j], want[t]);
                        cr_assert(fabs(ret[j] - (want[t] + val[t][e])) < 1e-5);
                }
        }
        free(mem);
}

Test(rl_rollout, an_epoch_covers_every_row_once_in_a_repeatable_order)
{
        struct strata_rl_rollout_config c = cfg();
        struct strata_rl_rollout x, y;
        void *mx = make(&x, &c), *my = make(&y, &c);
        float sx[4], sy[4];
        int seen[T * E] = { 0 }, moved = 0;
        uint32_t n, total = 0;

        record(&x);
        record(&y);
        cr_assert_eq(strata_rl_rollout_finish(&x, last), STRATA_OK);
        cr_assert_eq(strata_rl_rollout_finish(&y, last), STRATA_OK);
        for (uint32_t k = 0; k < 3; k++) {
                cr_assert_eq(strata_rl_rollout_minibatch(&x, 4, k, 4, sx, NULL, NULL, NULL, NULL,
                                                         &n),
                             STRATA_OK);
                cr_assert_eq(strata_rl_rollout_minibatch(&y, 4, k, 4, sy, NULL, NULL, NULL, NULL,
                                                         NULL),
                             STRATA_OK);
                cr_assert_eq(n, k < 2 ? 4u : 2u);
                cr_assert_eq(memcmp(sx, sy, n * sizeof(float)), 0);
                for (uint32_t j = 0; j < n; j++) {
                        seen[(int)sx[j]]++;
                        moved += (int)sx[j] != (int)(k * 4 + j);
                }
                total += n;
        }
        cr_assert_eq(total, T * E);
        for (int i = 0; i < T * E; i++)
                cr_assert_eq(seen[i], 1, "row %d", i);
        cr_assert_gt(moved, 0, "the order is permuted");
        cr_assert_eq(strata_rl_rollout_minibatch(&x, 4, 3, 4, sx, NULL, NULL, NULL, NULL, &n),
                     STRATA_EINVAL, "past the last minibatch");
        free(mx);
        free(my);
}

Test(rl_rollout, bad_calls_are_refused_and_change_nothing)
{
        struct strata_rl_rollout_config c = cfg(), bad;
        struct strata_rl_rollout ro;
        void *mem;
        float s[E] = { 0 }, nan2[E] = { 0, NAN };
        int d[E] = { 0 };
        size_t bytes;

        bad = c, bad.steps = 0;
        cr_assert_eq(strata_rl_rollout_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.lambda = 2;
        cr_assert_eq(strata_rl_rollout_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.n_envs = 1u << 20, bad.steps = 1u << 20;
        cr_assert_eq(strata_rl_rollout_bytes(&bad, &bytes), STRATA_EINVAL);
        mem = make(&ro, &c);
        cr_assert_eq(strata_rl_rollout_finish(&ro, last), STRATA_EBADSTATE, "not full");
        cr_assert_eq(strata_rl_rollout_minibatch(&ro, 0, 0, 2, s, NULL, NULL, NULL, NULL, NULL),
                     STRATA_EBADSTATE, "not finished");
        cr_assert_eq(strata_rl_rollout_add(&ro, s, s, s, nan2, s, d), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "reward[1]"), "%s", strata_last_error());
        cr_assert_eq(strata_rl_rollout_add(&ro, s, s, NULL, s, s, d), STRATA_EINVAL);
        record(&ro); /* all five steps still fit: nothing was recorded by the refusals */
        cr_assert_eq(strata_rl_rollout_add(&ro, s, s, s, s, s, d), STRATA_EBADSTATE, "full");
        cr_assert_eq(strata_rl_rollout_finish(&ro, nan2), STRATA_ENONFINITE);
        cr_assert_eq(strata_rl_rollout_finish(&ro, last), STRATA_OK);
        cr_assert_eq(strata_rl_rollout_finish(&ro, last), STRATA_EBADSTATE, "twice");
        cr_assert_eq(strata_rl_rollout_clear(&ro), STRATA_OK);
        record(&ro);
        free(mem);
}

Test(rl_rollout, full_says_when_every_step_is_recorded)
{
        struct strata_rl_rollout_config c = cfg();
        struct strata_rl_rollout ro, none;
        void *mem = make(&ro, &c);
        float s[E] = { 0 }, lp[E] = { 0 };

        memset(&none, 0, sizeof(none));
        cr_assert_eq(strata_rl_rollout_full(NULL), 0);
        cr_assert_eq(strata_rl_rollout_full(&none), 0, "an uninitialised rollout is not full");
        cr_assert_eq(strata_rl_rollout_full(&ro), 0);
        for (int t = 0; t < T; t++) {
                cr_assert_eq(strata_rl_rollout_full(&ro), 0, "full after %d of %d steps", t, T);
                cr_assert_eq(strata_rl_rollout_add(&ro, s, s, lp, rew[t], val[t], dn[t]),
                             STRATA_OK);
        }
        cr_assert_eq(strata_rl_rollout_full(&ro), 1);
        cr_assert_eq(strata_rl_rollout_finish(&ro, last), STRATA_OK);
        cr_assert_eq(strata_rl_rollout_full(&ro), 1, "finished is still full");
        cr_assert_eq(strata_rl_rollout_clear(&ro), STRATA_OK);
        cr_assert_eq(strata_rl_rollout_full(&ro), 0);
        free(mem);
}
