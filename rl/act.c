/*
 * An agent's calls from the simulation's loop (contract in include/strata/rl.h): act on the
 * states of n_envs environments, record what followed, train when ready, export the policy,
 * tear down. Every count and every float is checked before anything changes; the arrays the
 * calls need are the agent's block (rl/agent.c lays it out).
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/agent.h"
#include "rl/rl.h"

static int live(const struct strata_rl_agent *ag)
{
        if (!ag || ag->magic != AGENT_MAGIC || !ag->rt)
                return strata__fail(STRATA_EINVAL, "rl agent: not initialised");
        return STRATA_OK;
}

static int count(const char *what, size_t got, size_t want)
{
        if (got == want)
                return STRATA_OK;
        return strata__fail(STRATA_EINVAL, "rl agent: %s holds %zu values, n_envs x its width "
                            "is %zu", what, got, want);
}

/* PPO's exploring act: draws, their log-probabilities and the states' values kept. */
static int ppo_explore(struct strata_rl_agent *ag, const float *state, float *action)
{
        struct strata__agent_scratch sc = strata__agent_scratch_of(ag);
        uint32_t E = ag->cfg.n_envs, A = ag->cfg.action_dim;
        struct strata_batch b = strata__agent_batch(state, (int)E, (int)ag->cfg.state_dim, NULL, 0);

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ PPO_VALUE }, 1, &b,
                                         (float *const[]){ sc.act_value }, E));
        for (uint32_t e = 0; e < E; e++) {
                float *eps = sc.mu + (size_t)e * A, *a = action + (size_t)e * A;

                memset(eps, 0, A * sizeof(float));
                STRATA_TRY(strata_rl_noise_add(&ag->noise, e, eps));
                for (uint32_t j = 0; j < A; j++)
                        eps[j] = a[j] + expf(sc.logstd[j]) * eps[j];
        }
        for (uint32_t e = 0; e < E; e++) {
                const float *mean = action + (size_t)e * A;
                float *draw = sc.mu + (size_t)e * A;

                sc.act_logp[e] = strata__ppo_logp(draw, mean, sc.logstd, A);
        }
        memcpy(action, sc.mu, (size_t)E * A * sizeof(float));
        sc.head->pending = 1;
        return STRATA_OK;
}

/* SAC's act: tanh of the mean, or a draw of the squashed Gaussian. */
static int sac_act(struct strata_rl_agent *ag, const struct strata_batch *b, float *action,
                   int explore)
{
        struct strata__agent_scratch sc = strata__agent_scratch_of(ag);
        uint32_t E = ag->cfg.n_envs, A = ag->cfg.action_dim;

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ SAC_ACTOR }, 1, b,
                                         (float *const[]){ sc.pol }, (size_t)E * 2 * A));
        for (uint32_t e = 0; explore && e < E; e++) {
                memset(sc.eps + (size_t)e * A, 0, A * sizeof(float));
                STRATA_TRY(strata_rl_noise_add(&ag->noise, e, sc.eps + (size_t)e * A));
        }
        strata__sac_squash(sc.pol, explore ? sc.eps : NULL, E, A, action, NULL);
        return STRATA_OK;
}

int strata_rl_act(struct strata_rl_agent *ag, const float *state, size_t state_count,
                  float *action, size_t action_count, int explore)
{
        uint32_t E, A;
        struct strata_batch b;
        int policy;

        STRATA_TRY(live(ag));
        E = ag->cfg.n_envs;
        A = ag->cfg.action_dim;
        if (!state || !action)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL state or action");
        STRATA_TRY(count("state", state_count, (size_t)E * ag->cfg.state_dim));
        STRATA_TRY(count("action", action_count, (size_t)E * A));
        STRATA_TRY(strata__rl_finite(state, state_count, "state"));
        if (ag->cfg.normalize_states) {
                struct strata__agent_scratch sc = strata__agent_scratch_of(ag);

                STRATA_TRY(strata_rl_normalizer_apply(&ag->norm, state, sc.xs, E));
                state = sc.xs;
        }
        policy = ag->cfg.algo == STRATA_RL_PPO ? PPO_ACTOR : TD3_ACTOR;
        b = strata__agent_batch(state, (int)E, (int)ag->cfg.state_dim, NULL, 0);
        if (ag->cfg.algo == STRATA_RL_SAC)
                return sac_act(ag, &b, action, explore);
        STRATA_TRY(strata__agent_predict(ag, &policy, 1, &b, (float *const[]){ action },
                                         action_count));
        if (!explore)
                return STRATA_OK;
        if (ag->cfg.algo == STRATA_RL_PPO)
                return ppo_explore(ag, state, action);
        for (uint32_t e = 0; e < E; e++) {
                float *a = action + (size_t)e * A;

                STRATA_TRY(strata_rl_noise_add(&ag->noise, e, a));
                for (uint32_t j = 0; j < A; j++)
                        a[j] = fminf(fmaxf(a[j], -1.0f), 1.0f);
        }
        return STRATA_OK;
}

static int record_check(const struct strata_rl_agent *ag, const float *state, const float *action,
                        const float *reward, const float *next_state, const int *done,
                        size_t rows_)
{
        size_t E = ag->cfg.n_envs, S = ag->cfg.state_dim, A = ag->cfg.action_dim;

        if (!state || !action || !reward || !next_state || !done)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL array to record");
        if (rows_ != E)
                return strata__fail(STRATA_EINVAL, "rl agent: %zu rows recorded, n_envs is %zu",
                                    rows_, E);
        STRATA_TRY(strata__rl_finite(state, E * S, "state"));
        STRATA_TRY(strata__rl_finite(action, E * A, "action"));
        STRATA_TRY(strata__rl_finite(reward, E, "reward"));
        return strata__rl_finite(next_state, E * S, "next state");
}

/* PPO's record: the rollout's step, and the next states kept for the rollout's last values. */
static int ppo_record(struct strata_rl_agent *ag, const float *state, const float *action,
                      const float *reward, const float *next_state, const int *done)
{
        struct strata__agent_scratch sc = strata__agent_scratch_of(ag);

        if (!sc.head->pending)
                return strata__fail(STRATA_EBADSTATE, "rl agent: PPO records the step of an "
                                    "exploring strata_rl_act(), and none came since the last");
        if (strata_rl_ready(ag))
                return strata__fail(STRATA_EBADSTATE, "rl agent: the rollout is full: train");
        STRATA_TRY(strata_rl_rollout_add(&ag->rollout, state, action, sc.act_logp, reward,
                                         sc.act_value, done));
        memcpy(sc.next, next_state, (size_t)ag->cfg.n_envs * ag->cfg.state_dim * sizeof(float));
        sc.head->pending = 0;
        return STRATA_OK;
}

int strata_rl_record(struct strata_rl_agent *ag, const float *state, const float *action,
                     const float *reward, const float *next_state, const int *done,
                     size_t rows_)
{
        const float *raw;
        size_t S, A;

        STRATA_TRY(live(ag));
        STRATA_TRY(record_check(ag, state, action, reward, next_state, done, rows_));
        raw = state;
        if (ag->cfg.normalize_states) { /* the statistics act used, then this step's states */
                struct strata__agent_scratch sc = strata__agent_scratch_of(ag);

                STRATA_TRY(strata_rl_normalizer_apply(&ag->norm, state, sc.xs, ag->cfg.n_envs));
                STRATA_TRY(strata_rl_normalizer_apply(&ag->norm, next_state, sc.xn,
                                                      ag->cfg.n_envs));
                state = sc.xs;
                next_state = sc.xn;
        }
        if (ag->cfg.algo == STRATA_RL_PPO) {
                STRATA_TRY(ppo_record(ag, state, action, reward, next_state, done));
        } else {
                S = ag->cfg.state_dim;
                A = ag->cfg.action_dim;
                for (uint32_t e = 0; e < ag->cfg.n_envs; e++)
                        STRATA_TRY(strata_rl_replay_add(&ag->replay, e, state + e * S,
                                                        action + e * A, reward[e],
                                                        next_state + e * S, done[e]));
        }
        if (ag->cfg.normalize_states)
                STRATA_TRY(strata_rl_normalizer_update(&ag->norm, raw, ag->cfg.n_envs));
        return STRATA_OK;
}

int strata_rl_ready(const struct strata_rl_agent *ag)
{
        if (!ag || ag->magic != AGENT_MAGIC)
                return 0;
        if (ag->cfg.algo != STRATA_RL_PPO)
                return strata_rl_replay_ready(&ag->replay);
        return strata_rl_rollout_full(&ag->rollout);
}

int strata_rl_train(struct strata_rl_agent *ag, uint32_t n)
{
        struct strata__agent_scratch sc;

        STRATA_TRY(live(ag));
        if (n == 0 || (ag->cfg.algo == STRATA_RL_PPO && n != 1))
                return strata__fail(STRATA_EINVAL, "rl agent: %u updates asked (TD3: >= 1; "
                                    "PPO: 1, the epochs over one rollout)", n);
        if (!strata_rl_ready(ag))
                return strata__fail(STRATA_EBADSTATE, "rl agent: not ready to train (%s)",
                                    ag->cfg.algo != STRATA_RL_PPO ?
                                    "fewer than min_size transitions stored" :
                                    "the rollout is not full");
        sc = strata__agent_scratch_of(ag);
        if (ag->cfg.algo == STRATA_RL_TD3)
                return strata__td3_train(ag, &sc, n);
        if (ag->cfg.algo == STRATA_RL_SAC)
                return strata__sac_train(ag, &sc, n);
        return strata__ppo_train(ag, &sc);
}

uint64_t strata_rl_updates(const struct strata_rl_agent *ag)
{
        if (!ag || ag->magic != AGENT_MAGIC)
                return 0;
        return ((const struct strata__agent_head *)ag->block)->updates;
}

int strata_rl_export_policy(struct strata_rl_agent *ag, const char *path)
{
        STRATA_TRY(live(ag));
        return strata_model_export_safetensors(ag->rt, ag->cfg.algo == STRATA_RL_PPO ?
                                               PPO_ACTOR : TD3_ACTOR, path);
}

int strata_rl_agent_teardown(struct strata_rl_agent *ag)
{
        int rc;

        STRATA_TRY(live(ag));
        rc = strata_teardown(ag->rt);
        ag->rt = NULL;
        ag->magic = 0;
        return rc;
}
