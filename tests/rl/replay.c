/*
 * Replay buffers (include/strata/rl.h): the planned bytes are the carved ones; transitions
 * come back as stored, n-step returns as summed by hand; each environment's ring overwrites its
 * oldest; same seed and calls give the same draws, restored state continues bitwise; priorities
 * steer the draws in proportion; no heap call while recording and sampling; every bad argument
 * is refused with nothing changed; grouped draws (decision 0079) stay in their group.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/rl.h"
#include "strata/strata.h"
#include "tools/heapcount.h"
#include "rl/rl.h"

#define S 3
#define A 2

static struct strata_rl_replay_config cfg(uint32_t max, uint32_t envs, uint32_t nstep, int prio)
{
        return (struct strata_rl_replay_config){ .max_size = max, .min_size = 1, .n_envs = envs,
                                                 .state_dim = S, .action_dim = A, .nstep = nstep,
                                                 .gamma = 0.5f, .prioritized = prio,
                                                 .alpha = 1.0f, .beta = 0.4f, .beta_steps = 100,
                                                 .seed = 7 };
}

struct buf {
        struct strata_arena arena;
        struct strata_rl_replay rb;
        void *mem;
};

static void make(struct buf *b, const struct strata_rl_replay_config *c)
{
        size_t bytes;

        cr_assert_eq(strata_rl_replay_bytes(c, &bytes), STRATA_OK, "%s", strata_last_error());
        b->mem = aligned_alloc(64, bytes);
        cr_assert_eq(strata_arena_init(&b->arena, b->mem, bytes, NULL), STRATA_OK);
        cr_assert_eq(strata_rl_replay_init(&b->rb, &b->arena, c), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_arena_used(&b->arena), bytes, "the plan is the carve");
}

/* Step t of environment e: state (t, e, 0.5), action (t, -t), reward t + 1. */
static void add(struct buf *b, uint32_t e, int t, int done)
{
        float s[S] = { (float)t, (float)e, 0.5f }, a[A] = { (float)t, (float)-t };
        float s2[S] = { (float)t + 1, (float)e, 0.5f };

        cr_assert_eq(strata_rl_replay_add(&b->rb, e, s, a, (float)t + 1, s2, done), STRATA_OK,
                     "%s", strata_last_error());
}

struct rows {
        float s[256 * S], a[256 * A], r[256], s2[256 * S], d[256], w[256];
        uint32_t i[256];
};

static struct strata_rl_sample out_of(struct rows *r)
{
        return (struct strata_rl_sample){ r->s, r->a, r->r, r->s2, r->d, r->i, r->w };
}

Test(rl_replay, planned_bytes_equal_a_planning_arena)
{
        struct strata_rl_replay_config c = cfg(1000, 3, 4, 1);
        struct strata_arena plan;
        struct strata_rl_replay rb;
        size_t bytes;

        cr_assert_eq(strata_rl_replay_bytes(&c, &bytes), STRATA_OK);
        cr_assert_eq(strata_arena_init_plan(&plan, NULL), STRATA_OK);
        cr_assert_eq(strata_rl_replay_init(&rb, &plan, &c), STRATA_OK);
        cr_assert_eq(strata_arena_used(&plan), bytes);
        cr_assert_gt(bytes, (size_t)999 * (2 * S + A + 2) * sizeof(float));
}

Test(rl_replay, one_step_transitions_come_back_as_stored)
{
        struct strata_rl_replay_config c = cfg(64, 1, 1, 0);
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);

        make(&b, &c);
        for (int t = 0; t < 10; t++)
                add(&b, 0, t, t == 9);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 10);
        cr_assert_eq(strata_rl_replay_sample(&b.rb, 200, &o), STRATA_OK);
        for (int j = 0; j < 200; j++) {
                float t = r.s[j * S];

                cr_assert_eq(r.a[j * A + 1], -t);
                cr_assert_eq(r.r[j], t + 1);
                cr_assert_eq(r.s2[j * S], t + 1);
                cr_assert_eq(r.d[j], t == 9 ? 0.0f : 0.5f, "row %d: t %g", j, (double)t);
                cr_assert_eq(r.w[j], 1.0f);
        }
        free(b.mem);
}

Test(rl_replay, n_step_returns_are_the_discounted_sums)
{
        struct strata_rl_replay_config c = cfg(64, 1, 3, 0);
        /* rewards 1..5, the episode ends at the fifth step (gamma 0.5) */
        const float ret[5] = { 1 + 0.5f * 2 + 0.25f * 3, 2 + 0.5f * 3 + 0.25f * 4,
                               3 + 0.5f * 4 + 0.25f * 5, 4 + 0.5f * 5, 5 };
        const float disc[5] = { 0.125f, 0.125f, 0, 0, 0 }, next[5] = { 3, 4, 5, 5, 5 };
        int seen[5] = { 0 };
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);

        make(&b, &c);
        add(&b, 0, 0, 0);
        add(&b, 0, 1, 0);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 0, "no step has its three successors yet");
        add(&b, 0, 2, 0);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 1);
        add(&b, 0, 3, 0);
        add(&b, 0, 4, 1);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 5, "the end stores every waiting step");
        cr_assert_eq(strata_rl_replay_sample(&b.rb, 100, &o), STRATA_OK);
        for (int j = 0; j < 100; j++) {
                int t = (int)r.s[j * S];

                cr_assert(t >= 0 && t < 5);
                seen[t] = 1;
                cr_assert_eq(r.r[j], ret[t], "t %d: %g, not %g", t, (double)r.r[j],
                             (double)ret[t]);
                cr_assert_eq(r.d[j], disc[t], "t %d", t);
                cr_assert_eq(r.s2[j * S], next[t], "t %d", t);
        }
        for (int t = 0; t < 5; t++)
                cr_expect(seen[t], "step %d never drawn in 100", t);
        free(b.mem);
}

Test(rl_replay, each_environment_overwrites_its_own_oldest)
{
        struct strata_rl_replay_config c = cfg(8, 2, 1, 0);
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);

        make(&b, &c);
        for (int t = 0; t < 10; t++)
                add(&b, 0, t, 0);
        add(&b, 1, 100, 0);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 5, "4 slots of environment 0, 1 of 1");
        cr_assert_eq(strata_rl_replay_sample(&b.rb, 250, &o), STRATA_OK);
        for (int j = 0; j < 250; j++) {
                float t = r.s[j * S];

                if (r.s[j * S + 1] == 1.0f)
                        cr_assert_eq(t, 100.0f);
                else
                        cr_assert(t >= 6.0f, "step %g was overwritten", (double)t);
        }
        free(b.mem);
}

static void fill(struct buf *b)
{
        for (int t = 0; t < 40; t++)
                add(b, (uint32_t)t % 3, t, t % 7 == 6);
}

Test(rl_replay, same_seed_same_draws_and_a_restore_continues_bitwise)
{
        struct strata_rl_replay_config c = cfg(30, 3, 2, 1);
        struct buf x, y;
        struct rows r1, r2;
        struct strata_rl_sample o1 = out_of(&r1), o2 = out_of(&r2);
        const void *mem;
        size_t bytes;
        void *saved;
        uint32_t idx[4] = { 0, 1, 10, 11 };
        float pr[4] = { 3, 0.5f, 2, 9 };

        memset(&r1, 0, sizeof(r1));
        memset(&r2, 0, sizeof(r2));
        make(&x, &c);
        make(&y, &c);
        fill(&x);
        fill(&y);
        for (int k = 0; k < 3; k++) {
                cr_assert_eq(strata_rl_replay_sample(&x.rb, 64, &o1), STRATA_OK);
                cr_assert_eq(strata_rl_replay_sample(&y.rb, 64, &o2), STRATA_OK);
                cr_assert_eq(memcmp(&r1, &r2, sizeof(r1)), 0, "draw %d", k);
        }
        cr_assert_eq(strata_rl_replay_set_priorities(&x.rb, idx, pr, 4), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_rl_state(&x.rb, STRATA_RL_REPLAY, &mem, &bytes), STRATA_OK);
        saved = malloc(bytes);
        memcpy(saved, mem, bytes);
        cr_assert_eq(strata_rl_replay_sample(&x.rb, 64, &o1), STRATA_OK);
        add(&x, 0, 99, 0);
        cr_assert_eq(strata_rl_restore(&y.rb, STRATA_RL_REPLAY, saved, bytes), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_rl_replay_sample(&y.rb, 64, &o2), STRATA_OK);
        cr_assert_eq(memcmp(&r1, &r2, sizeof(r1)), 0, "the restored buffer draws as the first");
        free(saved);
        free(x.mem);
        free(y.mem);
}

Test(rl_replay, priorities_steer_the_draws_in_proportion)
{
        struct strata_rl_replay_config c = cfg(4, 1, 1, 1);
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);
        uint32_t idx[4] = { 0, 1, 2, 3 }, hits[4] = { 0 };
        float pr[4] = { 1, 2, 3, 4 };

        c.beta_steps = 0; /* beta stays 0.4 */
        make(&b, &c);
        for (int t = 0; t < 4; t++)
                add(&b, 0, t, 0);
        cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, idx, pr, 4), STRATA_OK);
        for (int k = 0; k < 40; k++) {
                cr_assert_eq(strata_rl_replay_sample(&b.rb, 250, &o), STRATA_OK);
                for (int j = 0; j < 250; j++) {
                        hits[r.i[j]]++;
                        cr_assert_eq(r.s[j * S], (float)r.i[j], "slot t holds step t");
                        cr_assert_float_eq(r.w[j], powf(pr[r.i[j]] / 1.0f, -0.4f), 1e-6f);
                }
        }
        for (int i = 0; i < 4; i++)
                cr_expect(fabs(hits[i] / 10000.0 - pr[i] / 10.0) < 0.01, "slot %d: %u of 10000",
                          i, hits[i]);
        free(b.mem);
}

Test(rl_replay, recording_and_sampling_call_no_heap)
{
        struct strata_rl_replay_config c = cfg(512, 2, 3, 1);
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);
        float pr[64];
        long calls;

        for (int j = 0; j < 64; j++)
                pr[j] = 1.0f + (float)j;
        make(&b, &c);
        strata_heapcount_start();
        for (int t = 0; t < 2000; t++)
                add(&b, (uint32_t)t % 2, t, t % 50 == 49);
        for (int k = 0; k < 20; k++) {
                cr_assert_eq(strata_rl_replay_sample(&b.rb, 64, &o), STRATA_OK);
                cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, r.i, pr, 64), STRATA_OK);
        }
        calls = strata_heapcount_stop();
        cr_assert(calls == 0 || calls == -1, "%ld heap calls", calls);
        free(b.mem);
}

Test(rl_replay, bad_arguments_are_refused_and_change_nothing)
{
        struct strata_rl_replay_config c = cfg(16, 2, 1, 0), bad;
        struct buf b;
        struct rows r;
        struct strata_rl_sample o = out_of(&r);
        float s[S] = { 0 }, a[A] = { 0 }, nan_s[S] = { 0, NAN, 0 };
        uint32_t idx = 0;
        float one = 1;
        size_t bytes;

        bad = c, bad.n_envs = 0;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.max_size = 1;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "max_size 1"), "%s", strata_last_error());
        bad = c, bad.min_size = 17;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.gamma = 1.5f;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.gamma = NAN;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.state_dim = 0;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.nstep = 0;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        bad = c, bad.prioritized = 1, bad.alpha = -1;
        cr_assert_eq(strata_rl_replay_bytes(&bad, &bytes), STRATA_EINVAL);
        cr_assert_eq(strata_rl_replay_bytes(NULL, &bytes), STRATA_EINVAL);

        make(&b, &c);
        cr_assert_eq(strata_rl_replay_sample(&b.rb, 4, &o), STRATA_EBADSTATE, "empty");
        cr_assert_not_null(strstr(strata_last_error(), "0 transitions stored"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_rl_replay_add(&b.rb, 2, s, a, 1, s, 0), STRATA_EINVAL);
        cr_assert_eq(strata_rl_replay_add(&b.rb, 0, NULL, a, 1, s, 0), STRATA_EINVAL);
        cr_assert_eq(strata_rl_replay_add(&b.rb, 0, s, a, NAN, s, 0), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "reward"), "%s", strata_last_error());
        cr_assert_eq(strata_rl_replay_add(&b.rb, 0, s, a, 1, nan_s, 0), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "next state[1]"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_rl_replay_add(&b.rb, 0, s, a, INFINITY, s, 1), STRATA_ENONFINITE);
        cr_assert_eq(strata_rl_replay_size(&b.rb), 0, "nothing recorded");
        add(&b, 0, 1, 0);
        cr_assert_eq(strata_rl_replay_sample(&b.rb, 0, &o), STRATA_EINVAL);
        cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, &idx, &one, 1), STRATA_EINVAL,
                     "a uniform buffer has no priorities");
        free(b.mem);

        c.prioritized = 1;
        make(&b, &c);
        add(&b, 0, 1, 0);
        idx = 9; /* environment 1's first slot: empty */
        cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, &idx, &one, 1), STRATA_EINVAL);
        idx = 0, one = 0;
        cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, &idx, &one, 1), STRATA_EINVAL);
        one = NAN;
        cr_assert_eq(strata_rl_replay_set_priorities(&b.rb, &idx, &one, 1), STRATA_EINVAL);
        free(b.mem);
}

Test(rl_replay, a_state_of_another_configuration_is_refused)
{
        struct strata_rl_replay_config c = cfg(16, 2, 1, 0), d = cfg(16, 2, 1, 0);
        struct buf x, y;
        const void *mem;
        size_t bytes;

        d.seed = 8;
        make(&x, &c);
        make(&y, &d);
        add(&y, 0, 5, 0);
        cr_assert_eq(strata_rl_state(&x.rb, STRATA_RL_REPLAY, &mem, &bytes), STRATA_OK);
        cr_assert_eq(strata_rl_restore(&y.rb, STRATA_RL_REPLAY, mem, bytes), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "configured differently"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_rl_restore(&y.rb, STRATA_RL_REPLAY, mem, bytes - 64), STRATA_EINVAL);
        cr_assert_eq(strata_rl_replay_size(&y.rb), 1, "y unchanged");
        free(x.mem);
        free(y.mem);
}

/* Decision 0079: grouped draws (the agents' under several devices) keep each row among its
 * group's environments; one group is the plain sampler; a bad grouping changes nothing. */
Test(rl_replay, grouped_draws_stay_in_their_group)
{
        struct strata_rl_replay_config c = cfg(40, 4, 1, 0), p = cfg(40, 4, 1, 1);
        struct buf x, y, z;
        struct rows r1, r2;
        struct strata_rl_sample o1 = out_of(&r1), o2 = out_of(&r2);

        memset(&r1, 0, sizeof(r1));
        memset(&r2, 0, sizeof(r2));
        make(&x, &c);
        make(&y, &c);
        make(&z, &p);
        for (int t = 0; t < 5; t++)
                for (uint32_t e = 0; e < 4; e++) {
                        add(&x, e, t, 0);
                        add(&y, e, t, 0);
                        add(&z, e, t, 0);
                }
        cr_assert_eq(strata__replay_sample_groups(&x.rb, 8, 1, 0, 8, &o1), STRATA_OK);
        cr_assert_eq(strata_rl_replay_sample(&y.rb, 8, &o2), STRATA_OK);
        cr_assert_eq(memcmp(&r1, &r2, sizeof(r1)), 0, "one group is the plain sampler");
        cr_assert_eq(strata__replay_sample_groups(&x.rb, 8, 5, 0, 8, &o1), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), "5 groups"), "%s", strata_last_error());
        cr_assert_eq(strata__replay_sample_groups(&z.rb, 8, 2, 0, 8, &o1), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), "prioritized"), "%s",
                           strata_last_error());
        cr_assert_eq(strata__replay_sample_groups(&x.rb, 8, 2, 0, 8, &o1), STRATA_OK);
        cr_assert_eq(strata__replay_sample_groups(&y.rb, 8, 2, 0, 8, &o2), STRATA_OK);
        cr_assert_eq(memcmp(&r1, &r2, sizeof(r1)), 0, "a refused call drew nothing");
        for (int k = 0; k < 20; k++) {
                cr_assert_eq(strata__replay_sample_groups(&x.rb, 8, 2, 0, 8, &o1), STRATA_OK);
                for (int j = 0; j < 8; j++)
                        cr_assert_eq((int)r1.s[j * S + 1] / 2, j / 4,
                                     "row %d drew environment %g", j, (double)r1.s[j * S + 1]);
        }
        free(x.mem);
        free(y.mem);
        free(z.mem);
}

/* Decision 0101: a process writes only its own rows [lo, hi) of a grouped draw; those hold what
 * a draw of every row holds, the others are left as they were, and the next draw is the same. */
Test(rl_replay, grouped_draws_write_only_the_rows_asked)
{
        struct strata_rl_replay_config c = cfg(40, 4, 1, 0);
        struct buf x, y;
        static struct rows r1, r2;
        struct strata_rl_sample o1 = out_of(&r1), o2 = out_of(&r2);

        make(&x, &c);
        make(&y, &c);
        for (int t = 0; t < 5; t++)
                for (uint32_t e = 0; e < 4; e++) {
                        add(&x, e, t, 0);
                        add(&y, e, t, 0);
                }
        for (int k = 0; k < 3; k++) {
                memset(&r1, 0, sizeof(r1));
                memset(&r2, 0x7f, sizeof(r2));
                /* rows 3 to 7: of both groups (rows 0-3 and 4-7) */
                cr_assert_eq(strata__replay_sample_groups(&x.rb, 8, 2, 0, 8, &o1), STRATA_OK);
                cr_assert_eq(strata__replay_sample_groups(&y.rb, 8, 2, 3, 8, &o2), STRATA_OK);
                cr_assert_eq(memcmp(r1.s + 3 * S, r2.s + 3 * S, 5 * S * sizeof(float)), 0);
                cr_assert_eq(memcmp(r1.a + 3 * A, r2.a + 3 * A, 5 * A * sizeof(float)), 0);
                cr_assert_eq(memcmp(r1.s2 + 3 * S, r2.s2 + 3 * S, 5 * S * sizeof(float)), 0);
                cr_assert_eq(memcmp(r1.r + 3, r2.r + 3, 5 * sizeof(float)), 0);
                cr_assert_eq(memcmp(r1.d + 3, r2.d + 3, 5 * sizeof(float)), 0);
                cr_assert_eq(memcmp(r1.i + 3, r2.i + 3, 5 * sizeof(uint32_t)), 0);
                for (int j = 0; j < 3 * S; j++)
                        cr_assert_eq(((unsigned char *)r2.s)[j * sizeof(float)], 0x7f,
                                     "row %d written", j / S);
                cr_assert_eq(((unsigned char *)r2.r)[2 * sizeof(float)], 0x7f);
        }
        /* rows 2 to 4 only: rows 5 to 7 keep their fill */
        memset(&r2, 0x7f, sizeof(r2));
        cr_assert_eq(strata__replay_sample_groups(&y.rb, 8, 2, 2, 5, &o2), STRATA_OK);
        for (int j = 5 * S; j < 8 * S; j++)
                cr_assert_eq(((unsigned char *)r2.s)[j * sizeof(float)], 0x7f, "row %d written",
                             j / S);
        cr_assert_eq(((unsigned char *)r2.r)[5 * sizeof(float)], 0x7f);
        cr_assert_eq(((unsigned char *)r2.d)[7 * sizeof(float)], 0x7f);
        free(x.mem);
        free(y.mem);
}
