/*
 * Flow control in situ: a 1-D heat equation driven towards a target profile by boundary
 * actuation, solved by a Strata SAC agent (include/strata/rl.h).
 *
 * The rod has N cells, u_t = u_xx by explicit steps (r = dt/dx^2 = 0.25), its right end held
 * at 0 and its left end at the action a in [-1, 1]. Each episode draws a goal g in [-0.8, 0.8]
 * and the rod starts at rest (u = 0); the target is the steady profile of the goal, the line
 * from g at the left to 0 at the right. The state is the temperature at 8 probes and g; the
 * reward each step is -10 x mean (u - target)^2. Episodes are 100 steps: reaching the target
 * faster than diffusion from a constant boundary value would needs overshooting, then
 * settling.
 *
 * Usage: heat [td3|sac|ppo] [--steps N] [--seed S]: prints the mean return of every 20
 * episodes, then one JSON line (episodes, first10, last10 mean returns, the returns' hash).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/rl.h>

#define N 16      /* cells */
#define PROBES 8
#define LEN 100   /* steps an episode */
#define MAXEP 10000

struct rod {
        double u[N], g;
        int t;
        uint64_t rng;
};

static double uniform(struct rod *r, double lo, double hi)
{
        r->rng = r->rng * 6364136223846793005ull + 1442695040888963407ull;
        return lo + (hi - lo) * (double)(r->rng >> 11) / 9007199254740992.0;
}

static double target(const struct rod *r, int i)
{
        return r->g * (double)(N - i) / (N + 1);
}

static void observe(const struct rod *r, float *obs)
{
        for (int p = 0; p < PROBES; p++)
                obs[p] = (float)r->u[p * N / PROBES];
        obs[PROBES] = (float)r->g;
}

static void reset(struct rod *r, float *obs)
{
        memset(r->u, 0, sizeof(r->u));
        r->g = uniform(r, -0.8, 0.8);
        r->t = 0;
        observe(r, obs);
}

/* One step with the left end at @p a; the reward; *done at the episode's end. */
static float step(struct rod *r, float a, float *obs, int *done)
{
        double v[N], left = fmin(fmax(a, -1.0), 1.0), err = 0.0;

        for (int i = 0; i < N; i++) {
                double l = i > 0 ? r->u[i - 1] : left, rt = i < N - 1 ? r->u[i + 1] : 0.0;

                v[i] = r->u[i] + 0.25 * (l - 2.0 * r->u[i] + rt);
        }
        memcpy(r->u, v, sizeof(v));
        for (int i = 0; i < N; i++)
                err += (r->u[i] - target(r, i)) * (r->u[i] - target(r, i));
        observe(r, obs);
        *done = ++r->t >= LEN;
        return (float)(-10.0 * err / N);
}

static int fail(const char *what, int rc)
{
        fprintf(stderr, "heat: %s: %s (%s)\n", what, strata_strerror(rc), strata_last_error());
        return 1;
}

static unsigned char memory[STRATA_MIB(16)];
static struct strata_rl_agent agent;
static float returns[MAXEP];

static double mean(int lo, int hi)
{
        double s = 0.0;

        for (int i = lo; i < hi; i++)
                s += returns[i];
        return hi > lo ? s / (hi - lo) : 0.0;
}

int main(int argc, char **argv)
{
        struct strata_rl_agent_config c;
        struct strata_arena arena;
        struct rod rod = { .rng = 777 };
        const char *algo = "sac";
        float obs[PROBES + 1], next[PROBES + 1], a, rew, ret = 0.0f;
        long steps = 30000;
        int rc, done, stored, ep = 0;
        uint64_t h = 0xcbf29ce484222325ull, seed = 1;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--steps") && i + 1 < argc)
                        steps = atol(argv[++i]);
                else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
                        seed = strtoull(argv[++i], NULL, 10);
                else
                        algo = argv[i];
        }
        memset(&c, 0, sizeof(c));
        c.algo = !strcmp(algo, "td3") ? STRATA_RL_TD3 : !strcmp(algo, "ppo") ? STRATA_RL_PPO
                                                                            : STRATA_RL_SAC;
        c.state_dim = PROBES + 1;
        c.action_dim = 1;
        c.hidden = 64;
        c.gamma = 0.98f;
        c.batch = 64;
        c.min_size = 1000;
        c.steps = 1000;
        c.seed = seed;
        if ((rc = strata_arena_init(&arena, memory, sizeof(memory), NULL)) != STRATA_OK ||
            (rc = strata_rl_agent_init(&agent, &arena, &c)) != STRATA_OK)
                return fail("init", rc);
        reset(&rod, obs);
        for (long n = 0; n < steps && ep < MAXEP; n++) {
                if ((rc = strata_rl_act(&agent, obs, PROBES + 1, &a, 1, 1)) != STRATA_OK)
                        return fail("act", rc);
                rew = step(&rod, a, next, &done);
                /* the time limit is not a terminal state: off-policy agents bootstrap past it */
                stored = c.algo == STRATA_RL_PPO ? done : 0;
                if ((rc = strata_rl_record(&agent, obs, &a, &rew, next, &stored, 1)) != STRATA_OK)
                        return fail("record", rc);
                if (strata_rl_ready(&agent) && (rc = strata_rl_train(&agent, 1)) != STRATA_OK)
                        return fail("train", rc);
                memcpy(obs, next, sizeof(obs));
                ret += rew;
                if (!done)
                        continue;
                returns[ep++] = ret;
                if (ep % 20 == 0)
                        printf("episode %d  mean return of the last 20: %.3f\n", ep,
                               mean(ep - 20, ep));
                ret = 0.0f;
                reset(&rod, obs);
        }
        for (int i = 0; i < ep; i++) {
                uint32_t u;

                memcpy(&u, &returns[i], 4);
                for (int b = 0; b < 4; b++) {
                        h ^= (u >> (8 * b)) & 0xff;
                        h *= 0x100000001b3ull;
                }
        }
        printf("{\"algo\": \"%s\", \"episodes\": %d, \"first10\": %.4f, \"last10\": %.4f, "
               "\"returns_hash\": \"%016llx\"}\n", algo, ep, mean(0, ep < 10 ? ep : 10),
               mean(ep < 10 ? 0 : ep - 10, ep), (unsigned long long)h);
        rc = strata_rl_agent_teardown(&agent);
        return rc == STRATA_OK ? 0 : fail("teardown", rc);
}
