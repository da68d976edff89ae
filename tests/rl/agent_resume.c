/*
 * An agent saved and loaded (strata_rl_save(), strata_rl_load()): a fresh agent of the same
 * configuration that loads a run's state continues it bitwise (TD3, SAC and PPO, saved
 * mid-run);
 * a state of another configuration, a damaged or truncated one, a missing one are refused
 * with nothing changed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/rl.h"
#include "strata/strata.h"

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
        c.seed = 5;
        c.normalize_states = 1; /* its statistics are saved and loaded too */
        return c;
}

struct live {
        struct strata_arena arena;
        struct strata_rl_agent ag;
        void *mem;
};

static void make(struct live *l, const struct strata_rl_agent_config *c)
{
        size_t bytes;

        cr_assert_eq(strata_rl_agent_bytes(c, &bytes), STRATA_OK, "%s", strata_last_error());
        l->mem = aligned_alloc(64, bytes);
        cr_assert_eq(strata_arena_init(&l->arena, l->mem, bytes, NULL), STRATA_OK);
        cr_assert_eq(strata_rl_agent_init(&l->ag, &l->arena, c), STRATA_OK, "%s",
                     strata_last_error());
}

static void drop(struct live *l)
{
        cr_assert_eq(strata_rl_agent_teardown(&l->ag), STRATA_OK);
        free(l->mem);
}

/* Remove what strata_rl_save() wrote at @p prefix. */
static void rm(const char *prefix)
{
        char path[128];

        for (int k = 0; k < 8; k++) {
                snprintf(path, sizeof(path), "%s-%d.ckpt", prefix, k);
                unlink(path);
        }
        snprintf(path, sizeof(path), "%s-rl.state", prefix);
        unlink(path);
}

/* Steps t0..t1-1 of a toy task (reward -|a - (s0, -s1)|^2). */
static void run(struct live *l, int t0, int t1)
{
        float s[E * S], s2[E * S], a[E * A], r[E];
        int done[E];

        for (int t = t0; t < t1; t++) {
                for (int i = 0; i < E * S; i++) {
                        s[i] = sinf(0.37f * (float)(t * E * S + i));
                        s2[i] = sinf(0.37f * (float)((t + 1) * E * S + i));
                }
                cr_assert_eq(strata_rl_act(&l->ag, s, E * S, a, E * A, 1), STRATA_OK);
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

/* The actions of fixed states, exploring: they depend on the policy, the noise's counters
 * and (PPO) the log-std. */
static void probe(struct live *l, float *a)
{
        float s[E * S] = { 0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f };

        cr_assert_eq(strata_rl_act(&l->ag, s, E * S, a, E * A, 0), STRATA_OK);
        cr_assert_eq(strata_rl_act(&l->ag, s, E * S, a + E * A, E * A, 1), STRATA_OK);
}

static void resume(enum strata_rl_algo algo, const char *name)
{
        char prefix[64];
        struct strata_rl_agent_config c = config(algo);
        float a1[2 * E * A], a2[2 * E * A];
        uint64_t u1;
        struct live l;

        snprintf(prefix, sizeof(prefix), "/tmp/strata-%s-%d", name, (int)getpid());
        make(&l, &c);
        run(&l, 0, 50);
        cr_assert_eq(strata_rl_save(&l.ag, prefix), STRATA_OK, "%s", strata_last_error());
        run(&l, 50, 100);
        u1 = strata_rl_updates(&l.ag);
        probe(&l, a1);
        drop(&l);
        make(&l, &c);
        cr_assert_eq(strata_rl_load(&l.ag, prefix), STRATA_OK, "%s", strata_last_error());
        run(&l, 50, 100);
        cr_assert_eq(strata_rl_updates(&l.ag), u1);
        probe(&l, a2);
        drop(&l);
        rm(prefix);
        cr_assert(memcmp(a1, a2, sizeof(a1)) == 0, "the loaded agent went another way");
}

Test(rl_agent_resume, td3_continues_bitwise, .timeout = 120)
{
        resume(STRATA_RL_TD3, "rl-resume-td3");
}

Test(rl_agent_resume, sac_continues_bitwise, .timeout = 120)
{
        resume(STRATA_RL_SAC, "rl-resume-sac");
}

Test(rl_agent_resume, ppo_continues_bitwise, .timeout = 120)
{
        resume(STRATA_RL_PPO, "rl-resume-ppo");
}

static void unchanged_after(struct live *l, const char *prefix, int status, const char *msg)
{
        float a1[2 * E * A], a2[2 * E * A];
        uint64_t u = strata_rl_updates(&l->ag);
        uint64_t n = strata_rl_replay_size(&l->ag.replay);

        probe(l, a1); /* advances the noise: probe again after, and compare with a twin */
        cr_assert_eq(strata_rl_load(&l->ag, prefix), status, "%s", strata_last_error());
        cr_assert(strstr(strata_last_error(), msg), "'%s' lacks '%s'", strata_last_error(),
                  msg);
        cr_assert_eq(strata_rl_updates(&l->ag), u);
        cr_assert_eq(strata_rl_replay_size(&l->ag.replay), n);
        (void)a2;
}

Test(rl_agent_resume, bad_states_are_refused_and_change_nothing, .timeout = 120)
{
        struct strata_rl_agent_config c = config(STRATA_RL_TD3), other = c;
        char p[64], q[64], path[256];
        struct live l, twin;
        float a1[2 * E * A], a2[2 * E * A];
        FILE *f;
        long size;
        int byte;

        snprintf(p, sizeof(p), "/tmp/strata-rl-bad-%d", (int)getpid());
        snprintf(q, sizeof(q), "/tmp/strata-rl-bad-other-%d", (int)getpid());
        other.hidden = 8;
        make(&l, &other);
        run(&l, 0, 20);
        cr_assert_eq(strata_rl_save(&l.ag, q), STRATA_OK, "%s", strata_last_error());
        drop(&l);
        make(&l, &c);
        make(&twin, &c);
        run(&l, 0, 30);
        run(&twin, 0, 30);
        cr_assert_eq(strata_rl_save(&l.ag, p), STRATA_OK, "%s", strata_last_error());
        unchanged_after(&l, q, STRATA_EINVAL, "another configuration");
        unchanged_after(&l, "/tmp/strata-rl-none", STRATA_EIO, "strata-rl-none-rl.state");
        snprintf(path, sizeof(path), "%s-rl.state", p);
        f = fopen(path, "r+b");
        cr_assert(f);
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, size - 100, SEEK_SET);
        byte = fgetc(f);
        fseek(f, size - 100, SEEK_SET);
        fputc(0x5a ^ byte, f); /* one byte of the last block flipped */
        fclose(f);
        unchanged_after(&l, p, STRATA_EFORMAT, "damaged");
        cr_assert_eq(truncate(path, size - 10), 0);
        unchanged_after(&l, p, STRATA_EFORMAT, "truncated");
        cr_assert_eq(strata_rl_load(&l.ag, ""), STRATA_EINVAL);
        cr_assert_eq(strata_rl_save(&l.ag, NULL), STRATA_EINVAL);
        /* the refused loads changed nothing: l goes on as its twin, which never loaded */
        probe(&twin, a1);
        probe(&twin, a1);
        probe(&twin, a1);
        probe(&twin, a1);
        run(&l, 30, 40);
        run(&twin, 30, 40);
        probe(&l, a2);
        probe(&twin, a1);
        cr_assert(memcmp(a1, a2, sizeof(a1)) == 0, "a refused load changed the agent");
        drop(&l);
        drop(&twin);
        rm(p);
        rm(q);
}
