/*
 * Reinforcement learning's memory, in the plan: the replay buffers of off-policy agents
 * (DDPG, TD3, SAC), the rollout buffer of PPO, running normalisation of states and rewards,
 * and exploration noise. Each object's whole state — its counters and its arrays — is one
 * block carved from the caller's arena at init: its size is known before (the *_bytes()
 * calls), nothing allocates afterwards, and saving or restoring the block is the object's
 * checkpoint (a restored object continues bitwise). Random draws come from Philox keyed by
 * the configured seed and a counter kept in the block: two runs with the same seed and the
 * same calls are bitwise equal.
 *
 * A bad argument (a NaN reward or state, an environment index out of range, a sample asked
 * before min_size transitions are stored) returns a status with a message naming the value,
 * and changes nothing.
 */
#ifndef STRATA_RL_H
#define STRATA_RL_H

#include <stddef.h>
#include <stdint.h>

#include "strata/arena.h"
#include "strata/strata.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a replay buffer holds and how it samples (TorchFort's names where it has them). */
struct strata_rl_replay_config {
        uint32_t max_size;   /**< transitions held in all; each environment owns max_size / n_envs */
        uint32_t min_size;   /**< transitions stored before sampling is allowed */
        uint32_t n_envs;     /**< environments feeding the buffer (>= 1) */
        uint32_t state_dim;  /**< floats of a state */
        uint32_t action_dim; /**< floats of an action */
        uint32_t nstep;      /**< n-step returns; 1 stores plain transitions */
        float gamma;         /**< discount in [0, 1] */
        int prioritized;     /**< 0: uniform; 1: proportional prioritized replay (sum tree) */
        float alpha;         /**< prioritized: priority exponent in [0, 1] */
        float beta;          /**< prioritized: importance exponent at the start, in [0, 1] */
        uint64_t beta_steps; /**< prioritized: sample calls over which beta anneals to 1 */
        uint64_t seed;       /**< the sampler's Philox key */
};

/** A replay buffer: every field is private; its state lives in the arena block. */
struct strata_rl_replay {
        /* private */
        struct strata_rl_replay_config cfg;
        void *block;  /* the whole state: header, slots, pending windows, trees */
        size_t bytes; /* its size */
};

/** One sampled batch: arrays of the caller's, @c batch rows each. */
struct strata_rl_sample {
        float *state;      /**< batch x state_dim */
        float *action;     /**< batch x action_dim */
        float *reward;     /**< batch: the n-step discounted reward */
        float *next_state; /**< batch x state_dim: the state n steps later */
        float *discount;   /**< batch: gamma^n, or 0 where the episode ended within n steps */
        uint32_t *index;   /**< batch: slots, for strata_rl_replay_set_priorities() (may be NULL) */
        float *weight;     /**< batch: importance weights (1 when uniform; may be NULL) */
};

/**
 * @brief Bytes of the block a replay buffer of @p cfg takes from its arena (exact).
 * @retval STRATA_OK, STRATA_EINVAL (a bad field, named in the message), STRATA_EOVERFLOW.
 */
int strata_rl_replay_bytes(const struct strata_rl_replay_config *cfg, size_t *bytes);

/**
 * @brief Carve a replay buffer's block from @p arena and make it empty.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM, STRATA_ESEALED (from the arena).
 */
int strata_rl_replay_init(struct strata_rl_replay *rb, struct strata_arena *arena,
                          const struct strata_rl_replay_config *cfg);

/**
 * @brief Record one step of environment @p env: state, action, reward, next state, done.
 *
 * The arrays are read, not kept. With nstep > 1 a transition is stored once n steps of its
 * environment have followed it, or when its episode ends. The oldest slot of the environment
 * is overwritten once its share is full.
 * @retval STRATA_OK, STRATA_EINVAL (env out of range, NULL arrays), STRATA_ENONFINITE (a NaN
 *         or infinite value: named, nothing recorded).
 */
int strata_rl_replay_add(struct strata_rl_replay *rb, uint32_t env, const float *state,
                         const float *action, float reward, const float *next_state, int done);

/** @brief Transitions stored now (over every environment). */
uint64_t strata_rl_replay_size(const struct strata_rl_replay *rb);

/** @brief Non-zero once min_size transitions are stored (and at least one). */
int strata_rl_replay_ready(const struct strata_rl_replay *rb);

/**
 * @brief Draw @p batch transitions into @p out (uniformly, or by priority with importance
 *        weights normalised by the largest possible weight).
 *
 * Each call advances the sampler's counter: the same calls give the same draws.
 * @retval STRATA_OK, STRATA_EINVAL (batch 0, NULL arrays), STRATA_EBADSTATE (fewer than
 *         min_size transitions stored: the message says how many).
 */
int strata_rl_replay_sample(struct strata_rl_replay *rb, uint32_t batch,
                            const struct strata_rl_sample *out);

/**
 * @brief Set the priorities of @p n sampled slots (|TD error| + epsilon, say); prioritized
 *        buffers only.
 * @retval STRATA_OK, STRATA_EINVAL (not prioritized, a slot not stored, a priority not finite
 *         and > 0: named, nothing changed).
 */
int strata_rl_replay_set_priorities(struct strata_rl_replay *rb, const uint32_t *index,
                                    const float *priority, uint32_t n);

/** What a PPO rollout holds. */
struct strata_rl_rollout_config {
        uint32_t steps;      /**< steps per environment in one rollout */
        uint32_t n_envs;     /**< environments stepped together */
        uint32_t state_dim;  /**< floats of a state */
        uint32_t action_dim; /**< floats of an action */
        float gamma;         /**< discount in [0, 1] */
        float lambda;        /**< GAE's lambda in [0, 1] */
        uint64_t seed;       /**< the minibatch permutation's Philox key */
};

/** A rollout buffer; private fields, its state in the arena block. */
struct strata_rl_rollout {
        /* private */
        struct strata_rl_rollout_config cfg;
        void *block;
        size_t bytes;
};

/**
 * @brief Bytes of a rollout buffer's block (exact).
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_EOVERFLOW.
 */
int strata_rl_rollout_bytes(const struct strata_rl_rollout_config *cfg, size_t *bytes);

/**
 * @brief Carve a rollout buffer from @p arena, empty.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM, STRATA_ESEALED.
 */
int strata_rl_rollout_init(struct strata_rl_rollout *ro, struct strata_arena *arena,
                           const struct strata_rl_rollout_config *cfg);

/**
 * @brief Record one step of every environment: n_envs rows each of states, actions, and
 *        one value per environment of the action's log-probability, the reward, the value
 *        estimate of the state and done (the episode ended with this step).
 * @retval STRATA_OK, STRATA_EINVAL (NULL array), STRATA_ENONFINITE (a value, named),
 *         STRATA_EBADSTATE (the rollout is full or finished: clear it first).
 */
int strata_rl_rollout_add(struct strata_rl_rollout *ro, const float *state, const float *action,
                          const float *logp, const float *reward, const float *value,
                          const int *done);

/**
 * @brief Close a full rollout: generalised advantage estimates and returns, from the value
 *        of each environment's state after the last step (@p last_value, n_envs values).
 * @retval STRATA_OK, STRATA_EBADSTATE (not full, or finished already), STRATA_ENONFINITE.
 */
int strata_rl_rollout_finish(struct strata_rl_rollout *ro, const float *last_value);

/**
 * @brief Copy minibatch @p k of epoch @p epoch (a permutation of the rollout's rows drawn
 *        from the seed and the epoch, kept until another epoch is asked; the last minibatch
 *        may be shorter) into the arrays, each may be NULL; *rows gets its row count.
 * @retval STRATA_OK, STRATA_EINVAL (size 0, k past the last minibatch), STRATA_EBADSTATE
 *         (not finished).
 */
int strata_rl_rollout_minibatch(struct strata_rl_rollout *ro, uint64_t epoch, uint32_t k,
                                uint32_t size, float *state, float *action, float *logp,
                                float *advantage, float *ret, uint32_t *rows);

/** @brief Non-zero when the rollout holds its steps (full, finished or not). */
int strata_rl_rollout_full(const struct strata_rl_rollout *ro);

/** @brief Empty the rollout for the next one. */
int strata_rl_rollout_clear(struct strata_rl_rollout *ro);

/** Running mean and variance (Welford) of vectors of @c dim floats. */
struct strata_rl_normalizer {
        /* private */
        uint32_t dim;
        float clip; /* |normalised value| bound; 0 = none */
        void *block;
        size_t bytes;
};

/** @brief Bytes of a normaliser's block for @p dim values. */
int strata_rl_normalizer_bytes(uint32_t dim, size_t *bytes);

/**
 * @brief Carve a normaliser of @p dim values (mean 0, variance 1 until updated); normalised
 *        values are clipped to [-clip, clip] when @p clip > 0.
 */
int strata_rl_normalizer_init(struct strata_rl_normalizer *nz, struct strata_arena *arena,
                              uint32_t dim, float clip);

/**
 * @brief Fold @p rows vectors into the statistics, in row order (double precision).
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENONFINITE (a value, named; nothing folded).
 */
int strata_rl_normalizer_update(struct strata_rl_normalizer *nz, const float *x, uint32_t rows);

/** @brief out = clip((x - mean) / sqrt(var + 1e-8)) for @p rows vectors; in place allowed. */
int strata_rl_normalizer_apply(const struct strata_rl_normalizer *nz, const float *x,
                               float *out, uint32_t rows);

/** Exploration noise of @c dim values per environment: Gaussian or Ornstein-Uhlenbeck. */
struct strata_rl_noise {
        /* private */
        uint32_t dim, n_envs;
        int ou;                        /* 0 Gaussian, 1 Ornstein-Uhlenbeck */
        float sigma, theta, mu, dt;
        uint64_t seed;
        void *block;
        size_t bytes;
};

/** @brief Bytes of a noise process's block. */
int strata_rl_noise_bytes(uint32_t dim, uint32_t n_envs, size_t *bytes);

/**
 * @brief Carve a noise process: Gaussian N(0, sigma^2) when @p ou is 0, else
 *        Ornstein-Uhlenbeck x += theta (mu - x) dt + sigma sqrt(dt) N(0, 1), from 0.
 * @retval STRATA_OK, STRATA_EINVAL (sigma < 0, theta < 0, dt <= 0 with ou, a non-finite value).
 */
int strata_rl_noise_init(struct strata_rl_noise *nn, struct strata_arena *arena, uint32_t dim,
                         uint32_t n_envs, int ou, float sigma, float theta, float mu, float dt,
                         uint64_t seed);

/** @brief Add one draw of environment @p env's noise to @p action (dim values). */
int strata_rl_noise_add(struct strata_rl_noise *nn, uint32_t env, float *action);

/** @brief Restart environment @p env's Ornstein-Uhlenbeck state at 0 (a new episode). */
int strata_rl_noise_reset(struct strata_rl_noise *nn, uint32_t env);

/** The kinds of RL objects whose state strata_rl_state() and strata_rl_restore() move. */
enum strata_rl_kind { STRATA_RL_REPLAY, STRATA_RL_ROLLOUT, STRATA_RL_NORMALIZER, STRATA_RL_NOISE };

/**
 * @brief Where object @p obj of kind @p kind keeps its state and how many bytes: what a
 *        checkpoint saves.
 */
int strata_rl_state(const void *obj, enum strata_rl_kind kind, const void **mem, size_t *bytes);

/**
 * @brief Restore a state saved from an object configured the same way (checked: the block's
 *        header carries the configuration's digest); on a mismatch nothing changes.
 * @retval STRATA_OK, STRATA_EINVAL (wrong size, another configuration, a damaged header).
 */
int strata_rl_restore(void *obj, enum strata_rl_kind kind, const void *mem, size_t bytes);

/*
 * Agents (decision 0077): TD3 and PPO over several models of one runtime (decision 0069), their
 * buffers and noise carved from the caller's arena at init, driven from the simulation's loop:
 * strata_rl_act() for the actions of n_envs environments, strata_rl_record() for what followed,
 * strata_rl_train() for updates. The networks are MLPs of two hidden layers (ReLU). Actions
 * are in [-1, 1] for TD3 (tanh, then exploration noise, clipped) and SAC (a squashed Gaussian):
 * the application scales them to its bounds; PPO's are the Gaussian policy's raw draws (the
 * application clips them).
 */

/** The algorithms. */
enum strata_rl_algo { STRATA_RL_TD3 = 1, STRATA_RL_PPO = 2, STRATA_RL_SAC = 3 };

/** An agent's hyper-parameters (TorchFort's names); 0 picks the default shown. */
struct strata_rl_agent_config {
        enum strata_rl_algo algo;
        uint32_t state_dim;      /**< floats of a state */
        uint32_t action_dim;     /**< floats of an action */
        uint32_t n_envs;         /**< environments acting together (1) */
        uint32_t hidden;         /**< width of both hidden layers (64) */
        float gamma;             /**< discount in [0, 1] (0.99) */
        float actor_lr;          /**< the policy's Adam learning rate (3e-4) */
        float critic_lr;         /**< critics' (TD3) or value network's (PPO) (3e-4, 1e-3 TD3) */
        /* TD3 */
        uint32_t batch;          /**< transitions an update samples (64) */
        uint32_t max_size;       /**< replay capacity (100000) */
        uint32_t min_size;       /**< transitions before training (batch) */
        float tau;               /**< Polyak rate, rho = 1 - tau (0.005) */
        uint32_t policy_delay;   /**< critic updates per policy update (2) */
        float target_noise;      /**< target policy smoothing sigma (0.2) */
        float target_noise_clip; /**< its clip (0.5) */
        float expl_noise;        /**< exploration Gaussian sigma (0.1) */
        /* SAC (and batch, max_size, min_size, tau above) */
        float alpha;             /**< the entropy temperature, or its start when tuned (0.2) */
        float alpha_lr;          /**< its Adam learning rate (3e-4) */
        int fixed_alpha;         /**< 1: alpha stays; 0: tuned towards entropy -action_dim */
        /* PPO */
        uint32_t steps;          /**< rollout steps per environment (2048 / n_envs) */
        uint32_t epochs;         /**< passes over a rollout (10) */
        uint32_t minibatch;      /**< rows of a minibatch (64) */
        float clip;              /**< surrogate clip epsilon (0.2) */
        float lambda;            /**< GAE lambda in [0, 1] (0.95) */
        float vf_coef;           /**< value loss coefficient (0.5) */
        float ent_coef;          /**< entropy bonus coefficient, >= 0 (0) */
        float log_std;           /**< the policy's initial log standard deviation (0) */
        int fixed_std;           /**< 1: log_std stays; 0: learned */
        /* every algorithm */
        int normalize_states;    /**< 1: states to running mean 0, variance 1 (Welford, from
                                      the recorded states; saved with the agent) */
        float normalize_clip;    /**< |normalised state| bound (10) */
        uint64_t seed;           /**< networks, noise and sampling */
        const struct strata_config *runtime; /**< NULL: single, 1 device; else its strategy,
                                                 devices and device settings */
};

/** An agent: every field private; the caller keeps it in place from init to teardown. */
struct strata_rl_agent {
        /* private */
        uint64_t magic;
        struct strata_rl_agent_config cfg;
        struct strata_runtime *rt;
        struct strata_models models;
        struct strata_module mods[3][6];
        struct strata_model net[3];
        struct strata_rl_replay replay;
        struct strata_rl_rollout rollout;
        struct strata_rl_noise noise, smooth;
        struct strata_rl_normalizer norm;
        void *block;        /* counters and scratch arrays */
        size_t bytes;
};

/**
 * @brief Bytes of the arena block an agent of @p cfg carves (buffers, noise, scratch; exact).
 *        The networks live in the runtime's own memory.
 * @retval STRATA_OK, STRATA_EINVAL (a hyper-parameter, named), STRATA_EOVERFLOW.
 */
int strata_rl_agent_bytes(const struct strata_rl_agent_config *cfg, size_t *bytes);

/**
 * @brief Make an agent: its runtime (networks, optimizers, targets) and its block from
 *        @p arena. On failure nothing is left running (what was carved stays carved).
 * @retval STRATA_OK, STRATA_EINVAL (a hyper-parameter, named), STRATA_ENOMEM,
 *         STRATA_EBADSTATE (@p ag is live: tear it down first), and the runtime's statuses.
 */
int strata_rl_agent_init(struct strata_rl_agent *ag, struct strata_arena *arena,
                         const struct strata_rl_agent_config *cfg);

/**
 * @brief Bytes of one region that holds an agent of @p cfg whole: its struct, its arena and
 *        its block (for strata_rl_agent_init_region(); what a Fortran program allocates).
 * @retval As strata_rl_agent_bytes().
 */
int strata_rl_agent_region_bytes(const struct strata_rl_agent_config *cfg, size_t *bytes);

/**
 * @brief strata_rl_agent_init() with everything in the caller's region @p mem of @p size
 *        bytes (strata_rl_agent_region_bytes(), 64-byte aligned or not): *ag points into it.
 * @retval As strata_rl_agent_init(); STRATA_ENOMEM (the message says the bytes needed).
 */
int strata_rl_agent_init_region(struct strata_rl_agent **ag, void *mem, size_t size,
                                const struct strata_rl_agent_config *cfg);

/**
 * @brief Actions of n_envs environments for their states (n_envs rows of state_dim floats,
 *        @p state_count values) into @p action (n_envs rows of action_dim, @p action_count
 *        values). @p explore 1: with exploration (TD3: Gaussian noise; PPO: a draw of the
 *        policy, its log-probability and the state's value kept for strata_rl_record());
 *        SAC: a draw of the squashed Gaussian); 0: the policy's mean (SAC: its tanh).
 * @retval STRATA_OK, STRATA_EINVAL (not an agent, a wrong count: named), STRATA_ENONFINITE
 *         (a state, named). Nothing changes on error.
 */
int strata_rl_act(struct strata_rl_agent *ag, const float *state, size_t state_count,
                  float *action, size_t action_count, int explore);

/**
 * @brief Record one step of every environment: n_envs rows of states, actions, rewards, next
 *        states and done flags (the episode ended with this step). PPO records the step of
 *        its last exploring strata_rl_act() (whose states and actions these must be).
 * @retval STRATA_OK, STRATA_EINVAL (a wrong count, a NULL array), STRATA_ENONFINITE (a
 *         value, named), STRATA_EBADSTATE (PPO: no exploring act since the last record, or the
 *         rollout is full: train first). Nothing is recorded on error.
 */
int strata_rl_record(struct strata_rl_agent *ag, const float *state, const float *action,
                     const float *reward, const float *next_state, const int *done,
                     size_t rows);

/** @brief Non-zero when strata_rl_train() may run: TD3's replay holds min_size transitions,
 *         PPO's rollout is full. */
int strata_rl_ready(const struct strata_rl_agent *ag);

/**
 * @brief Train: TD3, @p n updates (critics each, the policy and targets every policy_delay);
 *        SAC, @p n updates (critics, policy, alpha when tuned, targets);
 *        PPO, @p n must be 1: the epochs over the full rollout, which is then cleared.
 * @retval STRATA_OK, STRATA_EINVAL (n), STRATA_EBADSTATE (not ready), the runtime's statuses.
 */
int strata_rl_train(struct strata_rl_agent *ag, uint32_t n);

/** @brief Updates made so far (TD3, SAC: critic updates; PPO: minibatch updates). */
uint64_t strata_rl_updates(const struct strata_rl_agent *ag);

/**
 * @brief Write the policy (its network's weights) as safetensors to @p path.
 * @retval As strata_model_export_safetensors().
 */
int strata_rl_export_policy(struct strata_rl_agent *ag, const char *path);

/**
 * @brief Save the agent: every model's checkpoint (strata_model_save_checkpoint()) to
 *        PREFIX-K.ckpt, K its index, and its buffer, noise, counters and the PPO log-std to
 *        PREFIX-rl.state (atomically, with each block's CRC). Between calls, not inside one.
 * @retval STRATA_OK, STRATA_EINVAL (not an agent, a NULL, empty or too long prefix),
 *         STRATA_EIO, the runtime's statuses.
 */
int strata_rl_save(struct strata_rl_agent *ag, const char *prefix);

/**
 * @brief Load what strata_rl_save() wrote for an agent of the same configuration; a loaded
 *        agent continues bitwise the run that saved. PREFIX-rl.state is checked completely
 *        (header, sizes, configuration digests, every block's CRC) before anything changes,
 *        and each model's checkpoint before it loads; a model's checkpoint refused after
 *        earlier ones loaded leaves those models loaded (load again).
 * @retval STRATA_OK, STRATA_EINVAL (another configuration: named), STRATA_EFORMAT (damaged,
 *         truncated, not a state), STRATA_EIO, the runtime's statuses.
 */
int strata_rl_load(struct strata_rl_agent *ag, const char *prefix);

/** @brief Stop the agent's runtime; the agent is dead afterwards (init again to reuse). */
int strata_rl_agent_teardown(struct strata_rl_agent *ag);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_RL_H */
