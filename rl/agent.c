/*
 * Agents over several models of one runtime (contract in include/strata/rl.h, decision 0077).
 * This file checks the hyper-parameters, builds the networks and the runtime, and lays out the
 * agent's block (the same walk sizes and carves it); acting, recording and training are
 * rl/act.c's, the updates TD3's (rl/td3.c), SAC's (rl/sac.c) and PPO's (rl/ppo.c). Every array
 * an update needs is in the block: nothing allocates after init.
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/agent.h"
#include "rl/rl.h"
#include "strategy/alike.h"


/* @p cfg with its zeros replaced by the defaults. */
static struct strata_rl_agent_config defaults(const struct strata_rl_agent_config *cfg)
{
        struct strata_rl_agent_config c = *cfg;
        int td3 = c.algo == STRATA_RL_TD3;

#define DEF(f, v) do { if (c.f == 0) c.f = (v); } while (0)
        DEF(n_envs, 1);
        DEF(hidden, 64);
        DEF(gamma, 0.99f);
        DEF(actor_lr, 3e-4f);
        DEF(critic_lr, td3 ? 1e-3f : 3e-4f);
        DEF(batch, 64);
        DEF(max_size, 100000);
        DEF(min_size, c.batch);
        DEF(tau, 0.005f);
        DEF(policy_delay, 2);
        DEF(target_noise, 0.2f);
        DEF(target_noise_clip, 0.5f);
        DEF(expl_noise, 0.1f);
        DEF(steps, 2048 / c.n_envs ? 2048 / c.n_envs : 1);
        DEF(epochs, 10);
        DEF(minibatch, 64);
        DEF(clip, 0.2f);
        DEF(lambda, 0.95f);
        DEF(vf_coef, 0.5f);
        DEF(alpha, 0.2f);
        DEF(alpha_lr, 3e-4f);
        DEF(normalize_clip, 10.0f);
#undef DEF
        return c;
}

static int out_of_range(const char *what, double v)
{
        return strata__fail(STRATA_EINVAL, "rl agent: %s = %g is out of range", what, v);
}

/*
 * Whether each process of the agent's runtime computes only its own devices' rows (decision
 * 0079): under mpi, and under zero1 or zero2 joined across processes (decision 0116), which
 * only the runtime @p rt knows (NULL: before init, mpi alone).
 */
static int across(const struct strata_config *rc, const struct strata_runtime *rt)
{
        if (!rc)
                return 0;
        if (rc->strategy.kind == STRATA_STRATEGY_MPI)
                return 1;
        return rt && (rc->strategy.kind == STRATA_STRATEGY_ZERO1 ||
                      rc->strategy.kind == STRATA_STRATEGY_ZERO2) &&
               strata_world_size(rt) > rc->strategy.devices;
}

/* The devices a process of a runtime across processes may have, by algorithm. */
static int across_fits(const struct strata_rl_agent_config *c)
{
        /* SAC under mpi gathers a batch a local device in the scratch's input gradients */
        if (c->algo == STRATA_RL_SAC &&
            (uint64_t)c->runtime->strategy.devices * c->batch >
                    (uint64_t)(c->batch > c->n_envs ? c->batch : c->n_envs) *
                            (c->state_dim + c->action_dim))
                return out_of_range("devices a process (SAC under mpi, or zero across "
                                    "processes: at most state_dim + action_dim)",
                                    c->runtime->strategy.devices);
        /* PPO under mpi stages its rows in place: one device a process */
        if (c->algo == STRATA_RL_PPO && c->runtime->strategy.devices > 1)
                return out_of_range("devices a process (PPO under mpi, or zero across "
                                    "processes: 1)", c->runtime->strategy.devices);
        return STRATA_OK;
}

/* Every hyper-parameter in its range, the first bad one named. */
static int check(const struct strata_rl_agent_config *c)
{
        if (c->algo < STRATA_RL_TD3 || c->algo > STRATA_RL_SAC)
                return out_of_range("algo", c->algo);
        if (c->state_dim < 1 || c->state_dim > (1u << 20))
                return out_of_range("state_dim", c->state_dim);
        if (c->action_dim < 1 || c->action_dim > (1u << 16))
                return out_of_range("action_dim", c->action_dim);
        if (c->n_envs > (1u << 16))
                return out_of_range("n_envs", c->n_envs);
        if (c->hidden > (1u << 16))
                return out_of_range("hidden", c->hidden);
        if (!(c->gamma >= 0.0f && c->gamma <= 1.0f))
                return out_of_range("gamma", c->gamma);
        if (!(c->actor_lr > 0.0f && c->actor_lr < 1.0f) && c->actor_lr != 0.0f)
                return out_of_range("actor_lr", c->actor_lr);
        if (!(c->critic_lr > 0.0f && c->critic_lr < 1.0f) && c->critic_lr != 0.0f)
                return out_of_range("critic_lr", c->critic_lr);
        if (!(c->tau >= 0.0f && c->tau <= 1.0f))
                return out_of_range("tau", c->tau);
        if (!(c->target_noise >= 0.0f && isfinite(c->target_noise)))
                return out_of_range("target_noise", c->target_noise);
        if (!(c->target_noise_clip >= 0.0f && isfinite(c->target_noise_clip)))
                return out_of_range("target_noise_clip", c->target_noise_clip);
        if (!(c->expl_noise >= 0.0f && isfinite(c->expl_noise)))
                return out_of_range("expl_noise", c->expl_noise);
        if (!(c->clip >= 0.0f && c->clip < 1.0f))
                return out_of_range("clip", c->clip);
        if (!(c->lambda >= 0.0f && c->lambda <= 1.0f))
                return out_of_range("lambda", c->lambda);
        if (!(c->vf_coef >= 0.0f && isfinite(c->vf_coef)))
                return out_of_range("vf_coef", c->vf_coef);
        if (!(c->ent_coef >= 0.0f && isfinite(c->ent_coef)))
                return out_of_range("ent_coef", c->ent_coef);
        if (!(c->alpha > 0.0f && isfinite(c->alpha)))
                return out_of_range("alpha", c->alpha);
        if (!(c->alpha_lr > 0.0f && c->alpha_lr < 1.0f))
                return out_of_range("alpha_lr", c->alpha_lr);
        if (c->normalize_states != 0 && c->normalize_states != 1)
                return out_of_range("normalize_states", c->normalize_states);
        if (!(c->normalize_clip > 0.0f && isfinite(c->normalize_clip)))
                return out_of_range("normalize_clip", c->normalize_clip);
        if (!(fabsf(c->log_std) <= 20.0f))
                return out_of_range("log_std", c->log_std);
        if (c->algo != STRATA_RL_PPO && c->min_size > c->max_size)
                return out_of_range("min_size (above max_size)", c->min_size);
        if (c->algo != STRATA_RL_PPO && c->max_size < c->n_envs)
                return out_of_range("max_size (below n_envs)", c->max_size);
        if (c->batch > (1u << 20) || c->minibatch > (1u << 20) || c->steps > (1u << 24))
                return out_of_range("batch, minibatch or steps", (double)c->batch);
        if (c->algo == STRATA_RL_PPO && c->action_dim > 64)
                return out_of_range("action_dim (PPO: at most 64)", c->action_dim);
        if (c->algo == STRATA_RL_PPO && c->minibatch > (uint64_t)c->steps * c->n_envs)
                return out_of_range("minibatch (above steps x n_envs)", c->minibatch);
        return across(c->runtime, NULL) ? across_fits(c) : STRATA_OK;
}

static uint32_t rows_of(const struct strata_rl_agent_config *c)
{
        uint32_t r = c->algo != STRATA_RL_PPO ? c->batch : c->minibatch;

        return r > c->n_envs ? r : c->n_envs;
}

/* The scratch walk: offsets when @p block is NULL (sizing), pointers otherwise. */
static size_t layout(const struct strata_rl_agent_config *c, void *block,
                     struct strata__agent_scratch *sc, int *overflow)
{
        struct strata__rl_walk w = { 0, 0 };
        size_t R = rows_of(c), S = c->state_dim, A = c->action_dim, E = c->n_envs;
        unsigned char *b = block;

#define TAKE(f, n) do { size_t o_ = strata__rl_take(&w, (n), sizeof(float)); \
                        sc->f = b ? (float *)(b + o_) : NULL; } while (0)
        (void)strata__rl_take(&w, 1, sizeof(struct strata__agent_head));
        sc->head = block;
        TAKE(s, R * S);
        TAKE(a, R * A);
        TAKE(r, R);
        TAKE(s2, R * S);
        TAKE(disc, R);
        TAKE(a2, R * A);
        TAKE(sa, R * (S + A));
        TAKE(q1, R);
        TAKE(q2, R);
        TAKE(dq, R);
        TAKE(dsa, R * (S + A));
        TAKE(g, R * A);
        TAKE(logp, R);
        TAKE(adv, R);
        TAKE(ret, R);
        TAKE(mu, R * A);
        TAKE(v, R);
        TAKE(act_logp, E);
        TAKE(act_value, E);
        TAKE(next, E * S);
        TAKE(last_value, E);
        TAKE(logstd, A);
        TAKE(adam_m, A);
        TAKE(adam_v, A);
        TAKE(pol, R * 2 * A);
        TAKE(eps, R * A);
        TAKE(xs, E * S);
        TAKE(xn, E * S);
#undef TAKE
        *overflow = w.overflow;
        return STRATA__ALIGN_UP(w.off, 64);
}

static uint64_t digest(const struct strata_rl_agent_config *c)
{
        uint64_t w[9] = { c->algo, c->state_dim, c->action_dim, c->n_envs, c->hidden,
                          c->batch, c->minibatch, c->steps, (uint64_t)c->normalize_states };

        return strata__rl_digest(w, 9);
}

/* The replay, rollout and noise configurations of agent @p c. */
static struct strata_rl_replay_config replay_cfg(const struct strata_rl_agent_config *c)
{
        return (struct strata_rl_replay_config){ .max_size = c->max_size,
                                                 .min_size = c->min_size,
                                                 .n_envs = c->n_envs,
                                                 .state_dim = c->state_dim,
                                                 .action_dim = c->action_dim, .nstep = 1,
                                                 .gamma = c->gamma, .seed = c->seed + 1 };
}

static struct strata_rl_rollout_config rollout_cfg(const struct strata_rl_agent_config *c)
{
        return (struct strata_rl_rollout_config){ .steps = c->steps, .n_envs = c->n_envs,
                                                  .state_dim = c->state_dim,
                                                  .action_dim = c->action_dim,
                                                  .gamma = c->gamma, .lambda = c->lambda,
                                                  .seed = c->seed + 1 };
}

/* The buffer's, both noises', the normaliser's and the scratch's bytes, in carving order. */
static int sizes(const struct strata_rl_agent_config *c, size_t part[5])
{
        struct strata_rl_replay_config rc = replay_cfg(c);
        struct strata_rl_rollout_config oc = rollout_cfg(c);
        struct strata__agent_scratch sc;
        int overflow;

        if (c->algo != STRATA_RL_PPO)
                STRATA_TRY(strata_rl_replay_bytes(&rc, &part[0]));
        else
                STRATA_TRY(strata_rl_rollout_bytes(&oc, &part[0]));
        STRATA_TRY(strata_rl_noise_bytes(c->action_dim, c->n_envs, &part[1]));
        STRATA_TRY(strata_rl_noise_bytes(c->action_dim, rows_of(c), &part[2]));
        STRATA_TRY(strata_rl_normalizer_bytes(c->state_dim, &part[3]));
        part[4] = layout(c, NULL, &sc, &overflow);
        if (overflow)
                return strata__fail(STRATA_EOVERFLOW, "rl agent: scratch size overflows");
        return STRATA_OK;
}

int strata_rl_agent_bytes(const struct strata_rl_agent_config *cfg, size_t *bytes)
{
        struct strata_rl_agent_config c;
        size_t part[5], sum = 0;

        if (!cfg || !bytes)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL config or bytes");
        c = defaults(cfg);
        STRATA_TRY(check(&c));
        STRATA_TRY(sizes(&c, part));
        for (int i = 0; i < 5; i++)
                if (strata__add_size(sum, STRATA__ALIGN_UP(part[i], 64), &sum))
                        return strata__fail(STRATA_EOVERFLOW, "rl agent: size overflows");
        *bytes = sum;
        return STRATA_OK;
}

/* An MLP of two hidden ReLU layers into @p m: @p out outputs, tanh-squashed if @p squash. */
static void mlp(struct strata_module *m, struct strata_model *net, int in, int hidden, int out,
                int squash, const struct strata_loss_ops *loss)
{
        /* the built-ins by name: nn/'s registry is how a layer above names them */
        const struct strata_module_ops *linear = strata_module_ops_by_name("linear");
        const struct strata_module_ops *relu = strata_module_ops_by_name("relu");
        int n = 0;

        memset(m, 0, 6 * sizeof(*m));
        m[n++] = (struct strata_module){ .ops = linear, .out = hidden };
        m[n++] = (struct strata_module){ .ops = relu };
        m[n++] = (struct strata_module){ .ops = linear, .out = hidden };
        m[n++] = (struct strata_module){ .ops = relu };
        m[n++] = (struct strata_module){ .ops = linear, .out = out };
        if (squash)
                m[n++] = (struct strata_module){ .ops = strata_module_ops_by_name("tanh") };
        *net = (struct strata_model){ .in_features = in, .nmodules = n, .modules = m,
                                      .loss = loss, .reduction = STRATA_REDUCTION_SUM };
}

static struct strata_optim adam(float lr)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.kind = STRATA_OPTIM_ADAMW;
        o.lr = lr;
        o.weight_decay = 0.0f;
        return o;
}

/* The networks, their optimizers and targets, declared into ag->models; *model0 the first. */
static int networks(struct strata_rl_agent *ag, struct strata_optim *opt0)
{
        const struct strata_rl_agent_config *c = &ag->cfg;
        int S = (int)c->state_dim, A = (int)c->action_dim, H = (int)c->hidden;
        struct strata_optim ao = adam(c->actor_lr);
        /* the networks whose output gradient the agent computes */
        const struct strata_loss_ops *given = strata_loss_ops_by_name("given_gradient");

        ag->models = (struct strata_models)STRATA_MODELS_INIT;
        *opt0 = adam(c->critic_lr);
        if (c->algo == STRATA_RL_TD3) {
                mlp(ag->mods[0], &ag->net[0], S + A, H, 1, 0, strata_loss_ops_by_name("mse"));
                mlp(ag->mods[1], &ag->net[1], S + A, H, 1, 0, strata_loss_ops_by_name("mse"));
                mlp(ag->mods[2], &ag->net[2], S, H, A, 1, given);
                ag->net[0].reduction = ag->net[1].reduction = STRATA_REDUCTION_MEAN;
                STRATA_TRY(strata_models_add(&ag->models, &ag->net[1], 1, opt0, NULL));
                STRATA_TRY(strata_models_add(&ag->models, &ag->net[2], A, &ao, NULL));
                for (int k = TD3_C1; k <= TD3_ACTOR; k++)
                        STRATA_TRY(strata_models_add_target(&ag->models, k, c->tau, NULL));
                return STRATA_OK;
        }
        if (c->algo == STRATA_RL_SAC) {
                mlp(ag->mods[0], &ag->net[0], S + A, H, 1, 0, strata_loss_ops_by_name("mse"));
                mlp(ag->mods[1], &ag->net[1], S + A, H, 1, 0, strata_loss_ops_by_name("mse"));
                mlp(ag->mods[2], &ag->net[2], S, H, 2 * A, 0, given);
                ag->net[0].reduction = ag->net[1].reduction = STRATA_REDUCTION_MEAN;
                STRATA_TRY(strata_models_add(&ag->models, &ag->net[1], 1, opt0, NULL));
                STRATA_TRY(strata_models_add(&ag->models, &ag->net[2], 2 * A, &ao, NULL));
                STRATA_TRY(strata_models_add_target(&ag->models, SAC_C1, c->tau, NULL));
                return strata_models_add_target(&ag->models, SAC_C2, c->tau, NULL);
        }
        mlp(ag->mods[0], &ag->net[0], S, H, A, 0, given);
        mlp(ag->mods[1], &ag->net[1], S, H, 1, 0, given);
        *opt0 = ao;
        ao = adam(c->critic_lr);
        return strata_models_add(&ag->models, &ag->net[1], 1, &ao, NULL);
}

/* The runtime of the agent's networks. */
static int runtime(struct strata_rl_agent *ag)
{
        struct strata_config cfg;
        struct strata_optim o0;
        int rc;

        STRATA_TRY(networks(ag, &o0));
        if (ag->cfg.runtime) {
                cfg = *ag->cfg.runtime;
        } else {
                strata_config_init(&cfg);
                cfg.device.bind = STRATA_BIND_NONE;
        }
        cfg.model = &ag->net[0];
        cfg.classes = ag->cfg.algo != STRATA_RL_PPO ? 1 : (int)ag->cfg.action_dim;
        cfg.batch = (int)rows_of(&ag->cfg);
        cfg.seed = ag->cfg.seed;
        cfg.optim = o0;
        cfg.models = &ag->models;
        STRATA_TRY(strata_init(&ag->rt, &cfg));
        if ((rc = strata_connect(ag->rt)) != STRATA_OK) {
                strata_teardown(ag->rt);
                ag->rt = NULL;
                return rc;
        }
        return STRATA_OK;
}

uint32_t strata__agent_groups(const struct strata_rl_agent *ag)
{
        int d = strata_world_size(ag->rt);

        return d > 1 && (uint32_t)d <= ag->cfg.n_envs && (uint32_t)d <= ag->cfg.batch
                       ? (uint32_t)d : 1;
}

/*
 * Under mpi a process computes only its devices' rows (decision 0079): TD3, row by row, runs
 * when every device holds an environment; so does SAC, whose one term over every row, the
 * temperature's, gathers the rows' terms across the job (decision 0082; room for a batch a
 * local device in the scratch's input gradients, checked with the hyper-parameters); so does
 * PPO, whose finished rollout and minibatch outputs are summed across the job (decision 0094,
 * one device a process). The state normaliser reduces over every row and is refused until it
 * reduces across processes.
 */
static int mpi_fits(struct strata_rl_agent *ag)
{
        const struct strata_rl_agent_config *c = &ag->cfg;
        int d = strata_world_size(ag->rt);

        if (!across(c->runtime, ag->rt))
                return STRATA_OK;
        STRATA_TRY(across_fits(c));
        if (c->normalize_states)
                return strata__fail(STRATA_EINVAL, "rl agent: normalize_states under mpi: the "
                                    "normaliser does not reduce across processes yet");
        if (c->algo == STRATA_RL_PPO && c->n_envs < (uint32_t)d) /* rows: every environment's */
                return strata__fail(STRATA_EINVAL, "rl agent: n_envs %u under mpi of %d devices: "
                                    "each device needs an environment", c->n_envs, d);
        if (c->n_envs < (uint32_t)d || c->batch < (uint32_t)d)
                return strata__fail(STRATA_EINVAL, "rl agent: n_envs %u and batch %u under mpi "
                                    "of %d devices: each device needs an environment and a row",
                                    c->n_envs, c->batch, d);
        return STRATA_OK;
}

struct strata__agent_scratch strata__agent_scratch_of(const struct strata_rl_agent *ag)
{
        struct strata__agent_scratch sc;
        int overflow;

        (void)layout(&ag->cfg, ag->block, &sc, &overflow);
        return sc;
}

static int carve_all(struct strata_rl_agent *ag, struct strata_arena *arena, const size_t *part)
{
        const struct strata_rl_agent_config *c = &ag->cfg;
        struct strata_rl_replay_config rc = replay_cfg(c);
        struct strata_rl_rollout_config oc = rollout_cfg(c);

        if (c->algo != STRATA_RL_PPO)
                STRATA_TRY(strata_rl_replay_init(&ag->replay, arena, &rc));
        else
                STRATA_TRY(strata_rl_rollout_init(&ag->rollout, arena, &oc));
        STRATA_TRY(strata_rl_noise_init(&ag->noise, arena, c->action_dim, c->n_envs, 0,
                                        c->algo == STRATA_RL_TD3 ? c->expl_noise : 1.0f, 0.0f,
                                        0.0f, 1.0f, c->seed + 2));
        STRATA_TRY(strata_rl_noise_init(&ag->smooth, arena, c->action_dim, rows_of(c), 0,
                                        c->algo == STRATA_RL_TD3 ? c->target_noise : 1.0f,
                                        0.0f, 0.0f, 1.0f, c->seed + 3));
        STRATA_TRY(strata_rl_normalizer_init(&ag->norm, arena, c->state_dim,
                                             c->normalize_clip));
        STRATA_TRY(strata__rl_carve(arena, part[4], AGENT_MAGIC, digest(c), &ag->block));
        ag->bytes = part[4];
        return STRATA_OK;
}

int strata_rl_agent_init(struct strata_rl_agent *ag, struct strata_arena *arena,
                         const struct strata_rl_agent_config *cfg)
{
        struct strata__agent_scratch sc;
        size_t part[5], need;
        int rc;

        if (!ag || !arena || !cfg)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL agent, arena or config");
        if (ag->magic == AGENT_MAGIC && ag->rt)
                return strata__fail(STRATA_EBADSTATE, "rl agent: live already: tear it down "
                                    "before making it again");
        STRATA_TRY(strata_rl_agent_bytes(cfg, &need));
        memset(ag, 0, sizeof(*ag));
        ag->cfg = defaults(cfg);
        STRATA_TRY(sizes(&ag->cfg, part));
        if ((rc = carve_all(ag, arena, part)) != STRATA_OK || !ag->block)
                goto fail;
        if ((rc = runtime(ag)) != STRATA_OK)
                goto fail;
        if ((rc = mpi_fits(ag)) != STRATA_OK) {
                strata_teardown(ag->rt);
                goto fail;
        }
        sc = strata__agent_scratch_of(ag);
        for (uint32_t j = 0; j < ag->cfg.action_dim; j++)
                sc.logstd[j] = ag->cfg.log_std;
        if (ag->cfg.algo == STRATA_RL_SAC)
                sc.logstd[0] = logf(ag->cfg.alpha);
        ag->magic = AGENT_MAGIC;
        return STRATA_OK;
fail:
        if (rc == STRATA_OK)
                rc = strata__fail(STRATA_EINVAL, "rl agent: a planning arena cannot hold one");
        memset(ag, 0, sizeof(*ag));
        return rc;
}

/* A region's layout: the agent, its arena, then (64-byte aligned) the arena's memory. */
static size_t region_head(void)
{
        return STRATA__ALIGN_UP(STRATA__ALIGN_UP(sizeof(struct strata_rl_agent), 64) +
                                sizeof(struct strata_arena), 64);
}

int strata_rl_agent_region_bytes(const struct strata_rl_agent_config *cfg, size_t *bytes)
{
        size_t n;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL bytes");
        STRATA_TRY(strata_rl_agent_bytes(cfg, &n));
        if (strata__add_size(n, region_head() + 64, bytes))
                return strata__fail(STRATA_EOVERFLOW, "rl agent: region size overflows");
        return STRATA_OK;
}

int strata_rl_agent_init_region(struct strata_rl_agent **ag, void *mem, size_t size,
                                const struct strata_rl_agent_config *cfg)
{
        uintptr_t base = STRATA__ALIGN_UP((uintptr_t)mem, 64);
        struct strata_rl_agent *a = (struct strata_rl_agent *)base;
        struct strata_arena *arena;
        size_t need, skew = base - (uintptr_t)mem;

        if (!ag || !mem)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL agent or region");
        STRATA_TRY(strata_rl_agent_region_bytes(cfg, &need));
        if (size < need)
                return strata__fail(STRATA_ENOMEM, "rl agent: the region holds %zu bytes, the "
                                    "agent needs %zu", size, need);
        arena = (struct strata_arena *)(base + STRATA__ALIGN_UP(sizeof(*a), 64));
        memset(a, 0, sizeof(*a)); /* the region is the agent's: whatever it held is not one */
        STRATA_TRY(strata_arena_init(arena, (unsigned char *)base + region_head(),
                                     size - skew - region_head(), NULL));
        STRATA_TRY(strata_rl_agent_init(a, arena, cfg));
        *ag = a;
        return STRATA_OK;
}

int strata__agent_mpi_rows(const struct strata_rl_agent *ag, int dev, uint64_t rows,
                           uint64_t *lo, uint64_t *hi)
{
        const struct strata_config *rc = ag->cfg.runtime;
        uint64_t world;
        int64_t g;

        if (!across(rc, ag->rt) || (g = strata_device_rank(ag->rt, dev)) < 0)
                return 0;
        world = (uint64_t)strata_world_size(ag->rt);
        *lo = rows * (uint64_t)g / world;
        *hi = rows * (uint64_t)(g + 1) / world;
        return 1;
}

void strata__agent_own_rows(const struct strata_rl_agent *ag, uint32_t rows, uint32_t *lo,
                            uint32_t *hi)
{
        const struct strata_config *rc = ag->cfg.runtime;
        uint64_t l, h, a = rows, b = 0;

        if (rc && rc->strategy.invariant) { /* the runtime splits by chunks there: every row */
                *lo = 0;
                *hi = rows;
                return;
        }
        for (int d = 0; d < STRATA_MAX_DEVICES && strata__agent_mpi_rows(ag, d, rows, &l, &h);
             d++) {
                a = l < a ? l : a;
                b = h > b ? h : b;
        }
        *lo = a < b ? (uint32_t)a : 0;
        *hi = a < b ? (uint32_t)b : rows;
}

int strata__agent_predict(struct strata_rl_agent *ag, const int *models, int n,
                          const struct strata_batch *b, float *const *out, size_t capacity)
{
        return strata__models_predict_alike(ag->rt, models, n, b, out, capacity);
}

int strata__agent_input_grad(struct strata_rl_agent *ag, int model, const struct strata_batch *b,
                             const float *dout, size_t dout_count, float *dx, size_t capacity)
{
        return strata__models_input_grad_alike(ag->rt, model, b, dout, dout_count, dx,
                                               capacity);
}

int strata__agent_train(struct strata_rl_agent *ag, const int *models, int n,
                        const struct strata_batch *b)
{
        return strata__models_train_alike(ag->rt, models, n, b);
}
