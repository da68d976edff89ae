/*
 * TorchFort's cart-pole, trained in situ by a Strata agent (TD3, SAC or PPO,
 * include/strata/rl.h).
 *
 * The environment is CartPole-v1's physics written here (Euler steps of 0.02 s; a pole of half
 * length 0.5 m and 0.1 kg on a 1 kg cart) with a continuous action: a force of a x 10 N,
 * a clipped to [-1, 1]. Reward 1 a step; an episode ends when |x| > 2.4 m or the pole leans
 * more than 12 degrees, or after 500 steps (truncated). It is solved when the mean return of
 * the last 100 episodes reaches 475.
 *
 * Usage: cartpole td3|sac|ppo [--steps N] [--seed S] [--solve] [--export FILE]
 *                             [--save PREFIX --save-every N] [--resume PREFIX] [--kill-at N]
 *                             [--normalize] [--returns FILE.csv]
 *                             [--envs N [--devices D | --mpi] [--zero1 | --zero2]] [--batch B]
 *   --steps: environment steps in all (default 20000); --solve: stop once solved; --export:
 *   the policy's weights as safetensors at the end; --save: every N steps, the agent
 *   (strata_rl_save(): PREFIX-K.ckpt, PREFIX-rl.state) and the environment's own state
 *   (PREFIX-app.bin); --resume: continue from them (bitwise the run that was not stopped);
 *   --kill-at: SIGKILL this process after step N (what the tests stop a run with);
 *   --normalize: the agent normalises the states (running mean and variance); --returns: every
 *   episode's return at the end as CSV (episode,return,mean100: the mean of the last 100
 *   episodes), what `strata-plot --returns` draws.
 *   --envs N: N environments stepped together (their rows of one act and one record; PPO's
 *   rollout then holds steps x N rows); --devices D: the agent trains under ddp on D
 *   devices; --mpi: under `mpirun -np P`, strategy mpi, one device a process: process p steps
 *   only the environments of its rows (those its device computes, [N p / P, N (p + 1) / P)),
 *   the other rows of its arrays stay zero, and its replay rows draw only its own
 *   environments' transitions (PPO: the rollout's rows are gathered across the processes,
 *   decision 0094), so P processes train bitwise the agent of one process on P devices
 *   (decision 0079). Process 0 reports, exports and writes the returns (its own
 *   environments'). --zero1, --zero2: that strategy instead of ddp (--devices) or mpi (--mpi):
 *   each device steps AdamW over its shard of every network, bitwise ddp's (decision 0116).
 *   --batch B: the replay batch of TD3 and SAC, PPO's minibatch (defaults 64);
 *   under --mpi it is the batch of all the processes, each computing its own rows' share, so
 *   `--envs P --batch 64P` on P processes gives each process its own environment and 64 rows,
 *   as TorchFort's distributed mode does.
 * Prints one line per 10 episodes, then one JSON line: episodes, steps, updates, the mean
 * return of the first and last 10 episodes, the episode it was solved at (-1: not), an FNV
 * hash of every return's bits (two runs of one seed print the same), and the agent's
 * throughput, (environment steps + updates) per second.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/rl.h>

#define MAX_EPISODES 20000
#define WARMUP 1000 /* TD3 and SAC: uniform random actions first */
#define MAX_ENVS 64

struct cartpole {
        double x, x_dot, th, th_dot;
        int t;
        uint64_t rng;
};

/* A uniform value in [lo, hi) from the environment's own generator. */
static double uniform(struct cartpole *e, double lo, double hi)
{
        e->rng = e->rng * 6364136223846793005ull + 1442695040888963407ull;
        return lo + (hi - lo) * (double)(e->rng >> 11) / 9007199254740992.0;
}

static void reset(struct cartpole *e, float *obs)
{
        e->x = uniform(e, -0.05, 0.05);
        e->x_dot = uniform(e, -0.05, 0.05);
        e->th = uniform(e, -0.05, 0.05);
        e->th_dot = uniform(e, -0.05, 0.05);
        e->t = 0;
        obs[0] = (float)e->x, obs[1] = (float)e->x_dot, obs[2] = (float)e->th;
        obs[3] = (float)e->th_dot;
}

/* One step under action @p a; *done 1 when the episode ends (*trunc: by the time limit). */
static void step(struct cartpole *e, float a, float *obs, int *done, int *trunc)
{
        const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, tau = 0.02;
        double f = 10.0 * fmin(fmax(a, -1.0), 1.0), c = cos(e->th), s = sin(e->th);
        double tmp = (f + mp * l * e->th_dot * e->th_dot * s) / (mc + mp);
        double thacc = (g * s - c * tmp) / (l * (4.0 / 3.0 - mp * c * c / (mc + mp)));
        double xacc = tmp - mp * l * thacc * c / (mc + mp);

        e->x += tau * e->x_dot;
        e->x_dot += tau * xacc;
        e->th += tau * e->th_dot;
        e->th_dot += tau * thacc;
        e->t++;
        obs[0] = (float)e->x, obs[1] = (float)e->x_dot, obs[2] = (float)e->th;
        obs[3] = (float)e->th_dot;
        *trunc = e->t >= 500;
        *done = fabs(e->x) > 2.4 || fabs(e->th) > 12.0 * 2.0 * M_PI / 360.0 || *trunc;
}

static int fail(const char *what, int rc)
{
        fprintf(stderr, "cartpole: %s: %s (%s)\n", what, strata_strerror(rc), strata_last_error());
        return 1;
}

static double mean(const float *r, int lo, int hi)
{
        double s = 0.0;

        for (int i = lo; i < hi; i++)
                s += r[i];
        return hi > lo ? s / (hi - lo) : 0.0;
}

static unsigned char memory[STRATA_MIB(32)];
static struct strata_rl_agent agent;
static float returns[MAX_EPISODES];

/* The hyper-parameters of the algorithms on cart-pole (tools/peers/torch_rl_cartpole.py's). */
static struct strata_rl_agent_config config(enum strata_rl_algo algo, uint64_t seed)
{
        struct strata_rl_agent_config c;
        int ppo = algo == STRATA_RL_PPO;

        memset(&c, 0, sizeof(c));
        c.algo = algo;
        c.state_dim = 4;
        c.action_dim = 1;
        c.n_envs = 1;
        c.hidden = 64;
        c.gamma = 0.99f;
        c.seed = seed;
        if (ppo) {
                c.actor_lr = 3e-4f;
                c.critic_lr = 1e-3f;
                c.steps = 1024;
                c.epochs = 10;
                c.minibatch = 64;
                c.clip = 0.2f;
                c.lambda = 0.95f;
                c.vf_coef = 0.5f;
                c.log_std = -0.5f;
        } else {
                c.actor_lr = 1e-3f;
                c.critic_lr = 1e-3f;
                c.batch = 64;
                c.max_size = 100000;
                c.min_size = WARMUP;
                c.tau = 0.005f;
                c.policy_delay = 2;
                c.target_noise = 0.2f;
                c.target_noise_clip = 0.5f;
                c.expl_noise = 0.1f;
        }
        if (algo == STRATA_RL_SAC) {
                c.actor_lr = 3e-4f;
                c.critic_lr = 1e-3f;
                c.alpha = 0.2f;
                c.alpha_lr = 3e-4f;
        }
        return c;
}

struct run {
        enum strata_rl_algo algo;
        int ppo, solve, episodes, solved;
        long steps, budget, save_every, kill_at;
        const char *save, *resume;
        double seconds;
        /* the environment's state, saved beside the agent */
        struct cartpole e;
        float obs[4], ret;
};

/* The application's part of a checkpoint: the run's counters, the environment, the returns. */
static int save_app(const struct run *r)
{
        char path[512], tmp[520];
        FILE *f;
        int ok;

        snprintf(path, sizeof(path), "%s-app.bin", r->save);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (!(f = fopen(tmp, "wb")))
                return 1;
        ok = fwrite(r, sizeof(*r), 1, f) == 1 &&
             fwrite(returns, sizeof(float), (size_t)r->episodes, f) == (size_t)r->episodes;
        ok = fclose(f) == 0 && ok && rename(tmp, path) == 0;
        return !ok;
}

static int load_app(struct run *r)
{
        struct run saved;
        char path[512];
        FILE *f;
        int ok;

        snprintf(path, sizeof(path), "%s-app.bin", r->resume);
        if (!(f = fopen(path, "rb")))
                return 1;
        ok = fread(&saved, sizeof(saved), 1, f) == 1 && saved.episodes >= 0 &&
             saved.episodes <= MAX_EPISODES &&
             fread(returns, sizeof(float), (size_t)saved.episodes, f) ==
                     (size_t)saved.episodes;
        fclose(f);
        if (!ok)
                return 1;
        r->episodes = saved.episodes;
        r->solved = saved.solved;
        r->steps = saved.steps;
        r->e = saved.e;
        memcpy(r->obs, saved.obs, sizeof(r->obs));
        r->ret = saved.ret;
        return 0;
}

/* Every save_every steps: the agent and the application; --kill-at stops the process dead. */
static int checkpoint(struct run *r)
{
        int rc;

        if (r->save && r->save_every > 0 && r->steps % r->save_every == 0) {
                if ((rc = strata_rl_save(&agent, r->save)) != STRATA_OK)
                        return fail("save", rc);
                if (save_app(r))
                        return fail("save the application's state", STRATA_EIO);
        }
        if (r->kill_at > 0 && r->steps == r->kill_at)
                raise(SIGKILL);
        return 0;
}

/* One environment step of the agent: act, step, record, train when due. */
static int agent_step(struct run *r, struct cartpole *e, float *obs, float *ret)
{
        float a, next[4], rew = 1.0f;
        int done, trunc, rc, store_done;

        if (!r->ppo && r->steps < WARMUP)
                a = (float)uniform(e, -1.0, 1.0);
        else if ((rc = strata_rl_act(&agent, obs, 4, &a, 1, 1)) != STRATA_OK)
                return fail("act", rc);
        step(e, a, next, &done, &trunc);
        store_done = r->ppo ? done : done && !trunc; /* off-policy: bootstrap at the limit */
        if ((rc = strata_rl_record(&agent, obs, &a, &rew, next, &store_done, 1)) != STRATA_OK)
                return fail("record", rc);
        *ret += rew;
        r->steps++;
        if (strata_rl_ready(&agent) &&
            (rc = strata_rl_train(&agent, 1)) != STRATA_OK)
                return fail("train", rc);
        memcpy(obs, next, sizeof(next));
        return done ? 2 : 0;
}

static int train(struct run *r)
{
        struct timespec t0, t1;
        int rc;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (r->steps < r->budget && r->episodes < MAX_EPISODES) {
                if ((rc = agent_step(r, &r->e, r->obs, &r->ret)) == 1)
                        return 1;
                if (rc == 2) {
                        returns[r->episodes++] = r->ret;
                        r->ret = 0.0f;
                        reset(&r->e, r->obs);
                }
                if (checkpoint(r))
                        return 1;
                if (rc != 2)
                        continue;
                if (r->episodes % 10 == 0)
                        printf("episode %d  steps %ld  mean return of the last 10: %.1f\n",
                               r->episodes, r->steps, mean(returns, r->episodes - 10,
                                                           r->episodes));
                if (r->solved < 0 && r->episodes >= 100 &&
                    mean(returns, r->episodes - 100, r->episodes) >= 475.0)
                        r->solved = r->episodes;
                if (r->solve && r->solved >= 0)
                        break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        return 0;
}

/* The per-episode returns as CSV: episode (from 1), its return, the mean of the last 100. */
static int write_returns(const char *path, int episodes)
{
        FILE *f = fopen(path, "w");
        int ok;

        if (!f)
                return 1;
        fprintf(f, "episode,return,mean100\n");
        for (int i = 0; i < episodes; i++)
                fprintf(f, "%d,%.1f,%.3f\n", i + 1, returns[i],
                        mean(returns, i + 1 > 100 ? i + 1 - 100 : 0, i + 1));
        ok = !ferror(f);
        return fclose(f) == 0 && ok ? 0 : 1;
}

/* --envs: N environments at once, this process's [lo, hi); no save, resume or kill. */
static int train_envs(struct run *r, int N, int lo, int hi)
{
        static struct cartpole es[MAX_ENVS];
        static float obs[MAX_ENVS * 4], next[MAX_ENVS * 4], act[MAX_ENVS], rew[MAX_ENVS],
                ret[MAX_ENVS];
        static int done[MAX_ENVS], trunc[MAX_ENVS], store[MAX_ENVS];
        struct timespec t0, t1;
        int rc;

        for (int e = lo; e < hi; e++) {
                es[e].rng = 12345u + 7919u * (uint64_t)e;
                reset(&es[e], obs + 4 * e);
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (r->steps < r->budget && r->episodes < MAX_EPISODES) {
                if ((r->ppo || r->steps >= WARMUP) &&
                    (rc = strata_rl_act(&agent, obs, (size_t)N * 4, act, N, 1)) != STRATA_OK)
                        return fail("act", rc);
                for (int e = lo; e < hi; e++) {
                        if (!r->ppo && r->steps < WARMUP)
                                act[e] = (float)uniform(&es[e], -1.0, 1.0);
                        step(&es[e], act[e], next + 4 * e, &done[e], &trunc[e]);
                        rew[e] = 1.0f;
                        store[e] = r->ppo ? done[e] : done[e] && !trunc[e];
                }
                if ((rc = strata_rl_record(&agent, obs, act, rew, next, store, N)) != STRATA_OK)
                        return fail("record", rc);
                r->steps++;
                if (strata_rl_ready(&agent) && (rc = strata_rl_train(&agent, 1)) != STRATA_OK)
                        return fail("train", rc);
                memcpy(obs, next, sizeof(obs));
                for (int e = lo; e < hi && r->episodes < MAX_EPISODES; e++) {
                        ret[e] += rew[e];
                        if (!done[e])
                                continue;
                        returns[r->episodes++] = ret[e];
                        ret[e] = 0.0f;
                        reset(&es[e], obs + 4 * e);
                }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        return 0;
}

/* The launcher's rank of this process (0 outside mpirun). */
static int launcher_rank(void)
{
        const char *v = getenv("OMPI_COMM_WORLD_RANK");

        if (!v)
                v = getenv("PMI_RANK");
        return v ? atoi(v) : 0;
}

static uint64_t hash(const float *v, int n)
{
        uint64_t h = 0xcbf29ce484222325ull;
        uint32_t u;

        for (int i = 0; i < n; i++) {
                memcpy(&u, &v[i], 4);
                for (int b = 0; b < 4; b++) {
                        h ^= (u >> (8 * b)) & 0xff;
                        h *= 0x100000001b3ull;
                }
        }
        return h;
}

int main(int argc, char **argv)
{
        struct run r = { .budget = 20000, .episodes = 0, .solved = -1, .e = { .rng = 12345 } };
        struct strata_rl_agent_config c;
        struct strata_config rcfg;
        struct strata_arena arena;
        const char *export = NULL, *returns_csv = NULL;
        uint64_t seed = 1, updates;
        long batch = -1;
        int normalize = 0, envs = 0, devices = 1, mpi = 0, world, lo = 0, hi = 1, zero = 1;
        int sharded = 0; /* 1: zero1, 2: zero2 */
        size_t bytes;
        int rc;

        if (argc < 2 || (strcmp(argv[1], "td3") && strcmp(argv[1], "sac") &&
                         strcmp(argv[1], "ppo"))) {
                fprintf(stderr, "usage: cartpole td3|sac|ppo [--steps N] [--seed S] [--solve] "
                        "[--export FILE] [--returns FILE.csv]\n");
                return 2;
        }
        r.ppo = !strcmp(argv[1], "ppo");
        r.algo = r.ppo ? STRATA_RL_PPO : !strcmp(argv[1], "sac") ? STRATA_RL_SAC : STRATA_RL_TD3;
        for (int i = 2; i < argc; i++) {
                if (!strcmp(argv[i], "--steps") && i + 1 < argc)
                        r.budget = atol(argv[++i]);
                else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
                        seed = strtoull(argv[++i], NULL, 10);
                else if (!strcmp(argv[i], "--export") && i + 1 < argc)
                        export = argv[++i];
                else if (!strcmp(argv[i], "--solve"))
                        r.solve = 1;
                else if (!strcmp(argv[i], "--normalize"))
                        normalize = 1;
                else if (!strcmp(argv[i], "--save") && i + 1 < argc)
                        r.save = argv[++i];
                else if (!strcmp(argv[i], "--save-every") && i + 1 < argc)
                        r.save_every = atol(argv[++i]);
                else if (!strcmp(argv[i], "--resume") && i + 1 < argc)
                        r.resume = argv[++i];
                else if (!strcmp(argv[i], "--kill-at") && i + 1 < argc)
                        r.kill_at = atol(argv[++i]);
                else if (!strcmp(argv[i], "--returns") && i + 1 < argc)
                        returns_csv = argv[++i];
                else if (!strcmp(argv[i], "--envs") && i + 1 < argc)
                        envs = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--devices") && i + 1 < argc)
                        devices = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--mpi"))
                        mpi = 1;
                else if (!strcmp(argv[i], "--zero1") || !strcmp(argv[i], "--zero2"))
                        sharded = argv[i][6] - '0';
                else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
                        batch = atol(argv[++i]);
        }
        c = config(r.algo, seed);
        if (batch == 0 || batch < -1 || batch > 65536) {
                fprintf(stderr, "cartpole: --batch: 1 to 65536\n");
                return 2;
        }
        if (batch > 0 && r.ppo)
                c.minibatch = (uint32_t)batch;
        else if (batch > 0)
                c.batch = (uint32_t)batch;
        c.normalize_states = normalize;
        if (envs && (envs > MAX_ENVS || r.save || r.resume || r.kill_at)) {
                fprintf(stderr, "cartpole: --envs: 1 to %d, no save, resume or kill\n",
                        MAX_ENVS);
                return 2;
        }
        if (sharded && !mpi && devices < 2) {
                fprintf(stderr, "cartpole: --zero1, --zero2: with --mpi or --devices 2 or more\n");
                return 2;
        }
        if (envs || devices > 1 || mpi) {
                strata_config_init(&rcfg);
                rcfg.device.bind = STRATA_BIND_NONE;
                rcfg.strategy.kind = sharded == 1 ? STRATA_STRATEGY_ZERO1
                                     : sharded ? STRATA_STRATEGY_ZERO2
                                     : mpi ? STRATA_STRATEGY_MPI
                                     : devices > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE;
                rcfg.strategy.devices = mpi ? 1 : devices;
                c.runtime = &rcfg;
                c.n_envs = (uint32_t)(envs ? envs : 1);
        }
        if ((rc = strata_rl_agent_bytes(&c, &bytes)) != STRATA_OK)
                return fail("bytes", rc);
        if (bytes > sizeof(memory))
                return fail("memory", STRATA_ENOMEM);
        if ((rc = strata_arena_init(&arena, memory, sizeof(memory), NULL)) != STRATA_OK ||
            (rc = strata_rl_agent_init(&agent, &arena, &c)) != STRATA_OK)
                return fail("init", rc);
        if (r.resume && (rc = strata_rl_load(&agent, r.resume)) != STRATA_OK)
                return fail("resume", rc);
        if (r.resume && load_app(&r))
                return fail("resume the application's state", STRATA_EIO);
        if (!r.resume)
                reset(&r.e, r.obs);
        world = strata_world_size(agent.rt);
        if (c.runtime && world > c.runtime->strategy.devices) { /* processes: mpi, or zero's */
                int p = launcher_rank(), d = c.runtime->strategy.devices;

                lo = c.n_envs * p * d / world, hi = c.n_envs * (p + 1) * d / world;
                zero = strata_is_global_zero(agent.rt);
        } else {
                hi = (int)c.n_envs;
        }
        if (envs ? train_envs(&r, (int)c.n_envs, lo, hi) : train(&r))
                return 1;
        updates = strata_rl_updates(&agent);
        if (zero && export && (rc = strata_rl_export_policy(&agent, export)) != STRATA_OK)
                return fail("export", rc);
        if (zero && returns_csv && write_returns(returns_csv, r.episodes))
                return fail(returns_csv, STRATA_EIO);
        if (zero)
                printf("{\"algo\": \"%s\", \"episodes\": %d, \"steps\": %ld, \"updates\": %llu, "
                       "\"first10\": %.3f, \"last10\": %.3f, \"solved_at\": %d, "
                       "\"returns_hash\": \"%016llx\", \"seconds\": %.3f, \"throughput\": %.1f}\n",
                       argv[1], r.episodes, r.steps, (unsigned long long)updates,
                       mean(returns, 0, r.episodes < 10 ? r.episodes : 10),
                       mean(returns, r.episodes < 10 ? 0 : r.episodes - 10, r.episodes), r.solved,
                       (unsigned long long)hash(returns, r.episodes), r.seconds,
                       (double)(r.steps + (long)updates) / r.seconds);
        rc = strata_rl_agent_teardown(&agent);
        return rc == STRATA_OK ? 0 : fail("teardown", rc);
}
