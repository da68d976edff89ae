/*
 * Agents (include/strata/rl.h, decision 0077): the planned bytes are the carved ones; TD3, SAC
 * and PPO act, record and train with no heap call; two runs of one seed end with bitwise the same
 * policy; every bad hyper-parameter, wrong count, NaN and call out of order is refused, the
 * value named, nothing changed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/rl.h"
#include "strata/strata.h"
#include "tools/heapcount.h"

#define S 3
#define A 2
#define E 2

static struct strata_rl_agent_config config(enum strata_rl_algo algo)
{
        struct strata_rl_agent_config c;

        memset(&c, 0, sizeof(c));
        c.algo = algo;
        c.state_dim = S;
        c.action_dim = A;
        c.n_envs = E;
        c.hidden = 16;
        c.batch = 16;
        c.max_size = 256;
        c.min_size = 32;
        c.steps = 32;
        c.epochs = 2;
        c.minibatch = 16;
        c.seed = 11;
        return c;
}

struct live {
        struct strata_arena arena;
        struct strata_rl_agent ag;
        void *mem;
        size_t bytes;
};

static void make(struct live *l, const struct strata_rl_agent_config *c)
{
        cr_assert_eq(strata_rl_agent_bytes(c, &l->bytes), STRATA_OK, "%s", strata_last_error());
        l->mem = aligned_alloc(64, l->bytes);
        cr_assert_eq(strata_arena_init(&l->arena, l->mem, l->bytes, NULL), STRATA_OK);
        cr_assert_eq(strata_rl_agent_init(&l->ag, &l->arena, c), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_arena_used(&l->arena), l->bytes, "the plan is the carve");
}

static void drop(struct live *l)
{
        cr_assert_eq(strata_rl_agent_teardown(&l->ag), STRATA_OK);
        free(l->mem);
}

/* A toy task: reward -|a - (s0, -s1)|^2; states from step t. */
static void env_state(float *s, int t)
{
        for (int e = 0; e < E; e++)
                for (int j = 0; j < S; j++)
                        s[e * S + j] = sinf(0.37f * (float)(t * E * S + e * S + j));
}

static void run(struct live *l, int steps)
{
        float s[E * S], s2[E * S], a[E * A], r[E];
        int done[E];

        for (int t = 0; t < steps; t++) {
                env_state(s, t);
                env_state(s2, t + 1);
                cr_assert_eq(strata_rl_act(&l->ag, s, E * S, a, E * A, 1), STRATA_OK, "%s",
                             strata_last_error());
                for (int e = 0; e < E; e++) {
                        float d0 = a[e * A] - s[e * S], d1 = a[e * A + 1] + s[e * S + 1];

                        r[e] = -(d0 * d0 + d1 * d1);
                        done[e] = t % 10 == 9;
                }
                cr_assert_eq(strata_rl_record(&l->ag, s, a, r, s2, done, E), STRATA_OK, "%s",
                             strata_last_error());
                if (strata_rl_ready(&l->ag))
                        cr_assert_eq(strata_rl_train(&l->ag, 1), STRATA_OK, "%s",
                                     strata_last_error());
        }
}

/* The policy's parameters of a live agent, copied. */
static size_t policy(struct live *l, float *out, size_t cap)
{
        const float *p;
        size_t n;
        int m = l->ag.cfg.algo != STRATA_RL_PPO ? 2 : 0;

        cr_assert_eq(strata_model_parameters(l->ag.rt, m, 0, &p, &n), STRATA_OK);
        cr_assert_leq(n, cap);
        memcpy(out, p, n * sizeof(float));
        return n;
}

Test(rl_agent, planned_bytes_equal_the_carve_and_a_planning_arena_is_refused)
{
        struct strata_rl_agent_config c = config(STRATA_RL_TD3);
        struct strata_arena plan;
        struct strata_rl_agent ag;
        struct live l;

        make(&l, &c);
        cr_assert_eq(strata_rl_agent_init(&l.ag, &l.arena, &c), STRATA_EBADSTATE,
                     "a live agent made again");
        cr_assert(strstr(strata_last_error(), "live already"));
        cr_assert_eq(strata_rl_act(&l.ag, (float[E * S]){ 0 }, E * S, (float[E * A]){ 0 },
                                   E * A, 0), STRATA_OK, "the refused init changed the agent");
        drop(&l);
        c = config(STRATA_RL_SAC);
        make(&l, &c);
        drop(&l);
        c = config(STRATA_RL_PPO);
        make(&l, &c);
        drop(&l);
        cr_assert_eq(strata_arena_init_plan(&plan, NULL), STRATA_OK);
        memset(&ag, 0, sizeof(ag));
        cr_assert_eq(strata_rl_agent_init(&ag, &plan, &c), STRATA_EINVAL);
        cr_assert_eq(strata_arena_used(&plan), l.bytes, "a planning arena counts the bytes");
}

static void no_heap_and_updates(enum strata_rl_algo algo, int steps, uint64_t updates)
{
        struct strata_rl_agent_config c = config(algo);
        struct live l;
        long calls;

        make(&l, &c);
        run(&l, 1); /* the first calls may touch lazily made state of the runtime */
        strata_heapcount_start();
        run(&l, steps);
        calls = strata_heapcount_stop();
        cr_assert(calls == 0 || calls == -1, "%ld heap calls while acting and training", calls);
        cr_assert_eq(strata_rl_updates(&l.ag), updates, "%llu updates",
                     (unsigned long long)strata_rl_updates(&l.ag));
        drop(&l);
}

Test(rl_agent, td3_acts_records_and_trains_without_heap, .timeout = 120)
{
        /* 32 transitions (16 steps of 2) before training: the 101 steps give 86 updates */
        no_heap_and_updates(STRATA_RL_TD3, 100, 86);
}

Test(rl_agent, sac_acts_records_and_trains_without_heap, .timeout = 120)
{
        no_heap_and_updates(STRATA_RL_SAC, 100, 86);
}

Test(rl_agent, ppo_acts_records_and_trains_without_heap, .timeout = 120)
{
        /* rollouts of 32 steps x 2: 4 minibatches of 16, 2 epochs; 96 steps fill 3 */
        no_heap_and_updates(STRATA_RL_PPO, 95, 3 * 8);
}

static void twice(enum strata_rl_algo algo)
{
        static float p1[20000], p2[20000];
        struct strata_rl_agent_config c = config(algo);
        struct live l;
        size_t n1, n2;

        make(&l, &c);
        run(&l, 80);
        n1 = policy(&l, p1, 20000);
        drop(&l);
        make(&l, &c);
        run(&l, 80);
        n2 = policy(&l, p2, 20000);
        drop(&l);
        cr_assert_eq(n1, n2);
        cr_assert(memcmp(p1, p2, n1 * sizeof(float)) == 0, "two runs of one seed differ");
        c.seed++;
        make(&l, &c);
        run(&l, 80);
        n2 = policy(&l, p2, 20000);
        drop(&l);
        cr_assert(memcmp(p1, p2, n1 * sizeof(float)) != 0, "another seed gives the same policy");
}

Test(rl_agent, td3_two_runs_are_bitwise_equal, .timeout = 120)
{
        twice(STRATA_RL_TD3);
}

Test(rl_agent, sac_two_runs_are_bitwise_equal, .timeout = 120)
{
        twice(STRATA_RL_SAC);
}

Test(rl_agent, ppo_two_runs_are_bitwise_equal, .timeout = 120)
{
        twice(STRATA_RL_PPO);
}

static void refused(struct strata_rl_agent_config c, const char *name)
{
        size_t bytes = 12345;

        cr_assert_eq(strata_rl_agent_bytes(&c, &bytes), STRATA_EINVAL, "%s accepted", name);
        cr_assert(strstr(strata_last_error(), name), "message '%s' does not name %s",
                  strata_last_error(), name);
        cr_assert_eq(bytes, 12345, "bytes written on error");
}

Test(rl_agent, bad_hyper_parameters_are_refused_by_name)
{
        struct strata_rl_agent_config c = config(STRATA_RL_TD3), b;
        struct strata_arena arena;
        struct strata_rl_agent ag;
        static unsigned char mem[4096];

        b = c, b.algo = 0, refused(b, "algo");
        b = c, b.state_dim = 0, refused(b, "state_dim");
        b = c, b.action_dim = 0, refused(b, "action_dim");
        b = c, b.gamma = 1.5f, refused(b, "gamma");
        b = c, b.gamma = NAN, refused(b, "gamma");
        b = c, b.tau = 2.0f, refused(b, "tau");
        b = c, b.actor_lr = -1.0f, refused(b, "actor_lr");
        b = c, b.critic_lr = NAN, refused(b, "critic_lr");
        b = c, b.target_noise = -0.1f, refused(b, "target_noise");
        b = c, b.target_noise_clip = INFINITY, refused(b, "target_noise_clip");
        b = c, b.expl_noise = -1.0f, refused(b, "expl_noise");
        b = c, b.min_size = 1000, refused(b, "min_size");
        b = c, b.max_size = 1, refused(b, "max_size");
        b = c, b.algo = 4, refused(b, "algo");
        c = config(STRATA_RL_SAC);
        b = c, b.alpha = -0.1f, refused(b, "alpha");
        {
                struct strata_config rc;

                memset(&rc, 0, sizeof(rc));
                rc.strategy.kind = STRATA_STRATEGY_MPI;
                rc.strategy.devices = 3; /* 3 x batch floats gathered; room for 2 x batch */
                b = c, b.state_dim = 1, b.action_dim = 1, b.runtime = &rc;
                refused(b, "SAC under mpi");
        }
        b = c, b.alpha = NAN, refused(b, "alpha");
        b = c, b.alpha_lr = 2.0f, refused(b, "alpha_lr");
        c = config(STRATA_RL_PPO);
        b = c, b.clip = 1.0f, refused(b, "clip");
        b = c, b.lambda = -0.5f, refused(b, "lambda");
        b = c, b.vf_coef = -1.0f, refused(b, "vf_coef");
        b = c, b.ent_coef = NAN, refused(b, "ent_coef");
        b = c, b.log_std = 50.0f, refused(b, "log_std");
        b = c, b.minibatch = 1000, refused(b, "minibatch");
        b = c, b.action_dim = 65, refused(b, "action_dim");
        {
                struct strata_config rc;

                memset(&rc, 0, sizeof(rc));
                rc.strategy.kind = STRATA_STRATEGY_MPI;
                rc.strategy.devices = 2; /* PPO under mpi: one device a process */
                b = c, b.runtime = &rc;
                refused(b, "PPO under mpi");
        }
        b = c, b.normalize_states = 2, refused(b, "normalize_states");
        b = c, b.normalize_states = 1, b.normalize_clip = -1.0f, refused(b, "normalize_clip");
        /* init refuses too, and carves nothing */
        cr_assert_eq(strata_arena_init(&arena, mem, sizeof(mem), NULL), STRATA_OK);
        memset(&ag, 0, sizeof(ag));
        b = c, b.gamma = 2.0f;
        cr_assert_eq(strata_rl_agent_init(&ag, &arena, &b), STRATA_EINVAL);
        cr_assert_eq(strata_arena_used(&arena), 0);
        cr_assert_eq(strata_rl_agent_init(&ag, &arena, &c), STRATA_ENOMEM, "%s",
                     strata_last_error());
}

Test(rl_agent, acting_before_init_is_refused)
{
        struct strata_rl_agent ag;
        float s[E * S] = { 0 }, a[E * A] = { 7, 7, 7, 7 }, r[E] = { 0 };
        int d[E] = { 0 };

        memset(&ag, 0, sizeof(ag));
        cr_assert_eq(strata_rl_act(&ag, s, E * S, a, E * A, 1), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "not initialised"));
        cr_assert_eq(a[0], 7.0f);
        cr_assert_eq(strata_rl_act(NULL, s, E * S, a, E * A, 1), STRATA_EINVAL);
        cr_assert_eq(strata_rl_record(&ag, s, a, r, s, d, E), STRATA_EINVAL);
        cr_assert_eq(strata_rl_train(&ag, 1), STRATA_EINVAL);
        cr_assert_eq(strata_rl_export_policy(&ag, "/tmp/x"), STRATA_EINVAL);
        cr_assert_eq(strata_rl_agent_teardown(&ag), STRATA_EINVAL);
        cr_assert_eq(strata_rl_ready(&ag), 0);
        cr_assert_eq(strata_rl_updates(&ag), 0);
}

/* Wrong counts, NaN states, actions, rewards and next states: refused, nothing recorded. */
static void bad_calls(enum strata_rl_algo algo)
{
        struct strata_rl_agent_config c = config(algo);
        float s[E * S] = { 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f }, a[E * A], r[E] = { 1, 1 };
        float keep[E * A], bad[E * S];
        int d[E] = { 0 };
        struct live l;

        make(&l, &c);
        for (int i = 0; i < E * A; i++)
                a[i] = keep[i] = 9.0f;
        cr_assert_eq(strata_rl_act(&l.ag, s, E * S - 1, a, E * A, 1), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "state holds 5 values"), "%s",
                  strata_last_error());
        cr_assert_eq(strata_rl_act(&l.ag, s, E * S, a, E * A + 1, 1), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "action holds 5 values"));
        memcpy(bad, s, sizeof(s));
        bad[4] = NAN;
        cr_assert_eq(strata_rl_act(&l.ag, bad, E * S, a, E * A, 1), STRATA_ENONFINITE);
        cr_assert(strstr(strata_last_error(), "state[4]"), "%s", strata_last_error());
        cr_assert(memcmp(a, keep, sizeof(a)) == 0, "actions written on error");
        if (algo == STRATA_RL_PPO) {
                cr_assert_eq(strata_rl_record(&l.ag, s, a, r, s, d, E), STRATA_EBADSTATE);
                cr_assert(strstr(strata_last_error(), "exploring"));
        }
        cr_assert_eq(strata_rl_act(&l.ag, s, E * S, a, E * A, 1), STRATA_OK);
        r[1] = NAN;
        cr_assert_eq(strata_rl_record(&l.ag, s, a, r, s, d, E), STRATA_ENONFINITE);
        cr_assert(strstr(strata_last_error(), "reward[1]"), "%s", strata_last_error());
        r[1] = 1.0f;
        cr_assert_eq(strata_rl_record(&l.ag, s, a, r, bad, d, E), STRATA_ENONFINITE);
        cr_assert(strstr(strata_last_error(), "next state[4]"), "%s", strata_last_error());
        cr_assert_eq(strata_rl_record(&l.ag, bad, a, r, s, d, E), STRATA_ENONFINITE);
        cr_assert_eq(strata_rl_record(&l.ag, s, a, r, s, d, E + 1), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "3 rows"));
        cr_assert_eq(strata_rl_record(&l.ag, s, a, NULL, s, d, E), STRATA_EINVAL);
        cr_assert_eq(strata_rl_ready(&l.ag), 0);
        cr_assert_eq(strata_rl_train(&l.ag, 1), STRATA_EBADSTATE);
        cr_assert(strstr(strata_last_error(), "not ready"));
        cr_assert_eq(strata_rl_train(&l.ag, 0), STRATA_EINVAL);
        if (algo != STRATA_RL_PPO)
                cr_assert_eq(strata_rl_replay_size(&l.ag.replay), 0, "recorded on error");
        /* the failed records left the agent as it was: the good record goes in */
        cr_assert_eq(strata_rl_record(&l.ag, s, a, r, s, d, E), STRATA_OK, "%s",
                     strata_last_error());
        if (algo != STRATA_RL_PPO)
                cr_assert_eq(strata_rl_replay_size(&l.ag.replay), E);
        else
                cr_assert_eq(strata_rl_train(&l.ag, 2), STRATA_EINVAL);
        cr_assert_eq(strata_rl_updates(&l.ag), 0);
        drop(&l);
}

Test(rl_agent, td3_bad_calls_are_refused_and_change_nothing)
{
        bad_calls(STRATA_RL_TD3);
}

Test(rl_agent, sac_bad_calls_are_refused_and_change_nothing)
{
        bad_calls(STRATA_RL_SAC);
}

Test(rl_agent, ppo_bad_calls_are_refused_and_change_nothing)
{
        bad_calls(STRATA_RL_PPO);
}

Test(rl_agent, a_region_holds_an_agent_whole_and_one_byte_short_is_refused, .timeout = 60)
{
        struct strata_rl_agent_config c = config(STRATA_RL_TD3);
        struct strata_rl_agent *ag = NULL;
        size_t bytes;
        char msg[64];
        unsigned char *mem;
        float s[E * S] = { 0 }, a[E * A];

        cr_assert_eq(strata_rl_agent_region_bytes(&c, &bytes), STRATA_OK);
        mem = malloc(bytes + 1);
        cr_assert_eq(strata_rl_agent_init_region(&ag, mem, bytes - 1, &c), STRATA_ENOMEM);
        snprintf(msg, sizeof(msg), "needs %zu", bytes);
        cr_assert(strstr(strata_last_error(), msg), "%s", strata_last_error());
        cr_assert_null(ag);
        cr_assert_eq(strata_rl_agent_init_region(NULL, mem, bytes, &c), STRATA_EINVAL);
        c.gamma = -1.0f;
        cr_assert_eq(strata_rl_agent_init_region(&ag, mem, bytes, &c), STRATA_EINVAL);
        c.gamma = 0.0f;
        cr_assert_eq(strata_rl_agent_init_region(&ag, mem + 1, bytes, &c), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert(ag != NULL);
        cr_assert_eq(strata_rl_act(ag, s, E * S, a, E * A, 0), STRATA_OK);
        cr_assert_eq(strata_rl_agent_teardown(ag), STRATA_OK);
        free(mem);
}

/* Under ddp on 2 devices (cfg.runtime): every algorithm runs, and two runs are bitwise equal. */
static void twice_ddp(enum strata_rl_algo algo)
{
        static float p1[20000], p2[20000];
        struct strata_rl_agent_config c = config(algo);
        struct strata_config rc;
        struct live l;
        size_t n1, n2;

        strata_config_init(&rc);
        rc.strategy.kind = STRATA_STRATEGY_DDP;
        rc.strategy.devices = 2;
        rc.device.bind = STRATA_BIND_NONE;
        c.runtime = &rc;
        make(&l, &c);
        run(&l, 70);
        n1 = policy(&l, p1, 20000);
        drop(&l);
        make(&l, &c);
        run(&l, 70);
        n2 = policy(&l, p2, 20000);
        drop(&l);
        cr_assert_eq(n1, n2);
        cr_assert(memcmp(p1, p2, n1 * sizeof(float)) == 0, "two ddp runs of one seed differ");
}

Test(rl_agent, every_algorithm_runs_under_ddp_bitwise_twice, .timeout = 180)
{
        twice_ddp(STRATA_RL_TD3);
        twice_ddp(STRATA_RL_SAC);
        twice_ddp(STRATA_RL_PPO);
}

/* With normalised states: every algorithm trains without heap, two runs are bitwise equal, and
 * the policy differs from the run on raw states (the networks saw other inputs). */
Test(rl_agent, normalised_states_train_repeat_and_change_the_inputs, .timeout = 180)
{
        static float p1[20000], p2[20000], p3[20000];
        enum strata_rl_algo algos[3] = { STRATA_RL_TD3, STRATA_RL_SAC, STRATA_RL_PPO };

        for (int k = 0; k < 3; k++) {
                struct strata_rl_agent_config c = config(algos[k]);
                struct live l;
                size_t n1, n2, n3;
                long calls;

                c.normalize_states = 1;
                make(&l, &c);
                run(&l, 1);
                strata_heapcount_start();
                run(&l, 69);
                calls = strata_heapcount_stop();
                cr_assert(calls == 0 || calls == -1, "%ld heap calls", calls);
                n1 = policy(&l, p1, 20000);
                drop(&l);
                make(&l, &c);
                run(&l, 1);
                run(&l, 69);
                n2 = policy(&l, p2, 20000);
                drop(&l);
                c.normalize_states = 0;
                make(&l, &c);
                run(&l, 1);
                run(&l, 69);
                n3 = policy(&l, p3, 20000);
                drop(&l);
                cr_assert(n1 == n2 && n1 == n3);
                cr_assert(memcmp(p1, p2, n1 * sizeof(float)) == 0, "algo %d: runs differ", k);
                cr_assert(memcmp(p1, p3, n1 * sizeof(float)) != 0,
                          "algo %d: normalising changed nothing", k);
        }
}
