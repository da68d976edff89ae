/*
 * What the agents' files share (private): the indices of their models on the runtime, and the
 * scratch arrays of an agent's block, laid out by rl/agent.c from the configuration (the walk
 * strata_rl_agent_bytes() counts) and handed to the algorithm's update.
 */
#ifndef STRATA_RL_AGENT_H
#define STRATA_RL_AGENT_H

#include <stdint.h>
#include <string.h>

#include "strata/rl.h"
#include "strata/strata.h"

#define AGENT_MAGIC 0x5354524c4147454eull /* "STRLAGEN": a live agent */

/* TD3's models: the twin critics, the actor, then their Polyak targets in that order. */
enum { TD3_C1, TD3_C2, TD3_ACTOR, TD3_C1T, TD3_C2T, TD3_ACTORT };
/* SAC's: the twin critics, the policy (means then log-stds), the critics' targets. */
enum { SAC_C1, SAC_C2, SAC_ACTOR, SAC_C1T, SAC_C2T };
/* PPO's: the Gaussian policy's mean, the value network. */
enum { PPO_ACTOR, PPO_VALUE };

/* The counters kept in the block (checkpointed with it). */
struct strata__agent_head {
        uint64_t magic;
        uint64_t digest;
        uint64_t updates;  /* TD3: critic updates; PPO: minibatch updates */
        uint64_t pending;  /* PPO: an exploring act waits for its record */
        uint64_t adam_t;   /* PPO: steps of the log-std's Adam */
        uint64_t epochs;   /* PPO: epochs run over all rollouts (the permutations' key) */
};

/* The block's arrays; rows R = the largest of batch, minibatch and n_envs. */
struct strata__agent_scratch {
        struct strata__agent_head *head;
        float *s, *a, *r, *s2, *disc;     /* a sampled batch (R rows) */
        float *a2, *sa, *q1, *q2, *dq;    /* TD3: target actions, critic rows, Q values */
        float *dsa, *g;                   /* input gradients, the actor's output gradient */
        float *logp, *adv, *ret, *mu, *v; /* PPO: a minibatch and its outputs */
        float *act_logp, *act_value;      /* PPO: the last exploring act's (n_envs) */
        float *next, *last_value;         /* PPO: the last record's next states and values */
        float *logstd, *adam_m, *adam_v;  /* PPO: the log-std and its Adam moments; SAC: [0]
                                             log alpha and its moments */
        float *pol, *eps;                 /* SAC: the policy's outputs (R x 2A), its draws */
        float *xs, *xn;                   /* normalised states and next states (n_envs) */
};

/* A batch of @p n rows of @p dim inputs @p x and, when @p t, @p tdim float targets each. */
static inline struct strata_batch strata__agent_batch(const float *x, int n, int dim,
                                                      const float *t, int tdim)
{
        struct strata_batch b;

        memset(&b, 0, sizeof(b));
        b.x = x;
        b.rows = n;
        b.dim = dim;
        b.t = t;
        b.tdim = tdim;
        return b;
}

/* sa = [s, a] on rows [lo, hi) of the three arrays: a critic's input (under mpi a process
 * joins only its own rows, strata__agent_own_rows()). */
static inline void strata__agent_join(float *sa, const float *s, const float *a, uint32_t lo,
                                      uint32_t hi, uint32_t S, uint32_t A)
{
        for (uint32_t i = lo; i < hi; i++) {
                memcpy(sa + (size_t)i * (S + A), s + (size_t)i * S, S * sizeof(float));
                memcpy(sa + (size_t)i * (S + A) + S, a + (size_t)i * A, A * sizeof(float));
        }
}

/* The scratch arrays of agent @p ag's block (rl/agent.c). */
struct strata__agent_scratch strata__agent_scratch_of(const struct strata_rl_agent *ag);

/* TD3: @p n updates (rl/td3.c). */
int strata__td3_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                      uint32_t n);

/* SAC: @p n updates (rl/sac.c). */
int strata__sac_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                      uint32_t n);

/* SAC: actions of @p rows policy outputs @p pol (means, log-stds) into @p a: tanh of the mean,
 * or with @p eps (rows x A normal draws) of the squashed Gaussian; the log-probabilities into
 * @p logp when not NULL (rl/sac.c). */
void strata__sac_squash(const float *pol, const float *eps, uint32_t rows, uint32_t A, float *a,
                        float *logp);

/* PPO: the epochs over the full rollout, then clear it (rl/ppo.c). */
int strata__ppo_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc);

/* PPO: the log-probability of @p a under the policy of mean @p mu and log-std @p logstd. */
float strata__ppo_logp(const float *a, const float *mu, const float *logstd, uint32_t dim);

/* The groups the replay samples in: the job's devices when every one holds an environment
 * (decision 0079: under mpi a process's rows are its own environments'), else 1. */
uint32_t strata__agent_groups(const struct strata_rl_agent *ag);

/*
 * Under mpi, local device @p dev's rows [*@p lo, *@p hi) of a batch of @p rows, as the runtime
 * splits a batch over the job's devices, and 1; 0 outside mpi or past the local devices.
 */
int strata__agent_mpi_rows(const struct strata_rl_agent *ag, int dev, uint64_t rows,
                           uint64_t *lo, uint64_t *hi);

/*
 * The rows [*@p lo, *@p hi) of a batch of @p rows that this process computes: under mpi its
 * local devices' (strata__agent_mpi_rows()), else all (in invariant mode too: its devices'
 * rows follow the chunks, not that even split). An update's host work on a batch's
 * rows (the target's noise and clip, joins, copies) is done on these only (decision 0101): the
 * runtime reads and writes only a process's own rows of an agent's batch.
 */
void strata__agent_own_rows(const struct strata_rl_agent *ag, uint32_t rows, uint32_t *lo,
                            uint32_t *hi);

/*
 * strata_models_predict_step() and strata_model_input_grad() on batches the agent builds
 * with its own sizes, the same on every process: with no agreement between the processes,
 * whose verdicts on these sizes are the same (decision 0091); and its training steps, whose
 * values that a check would refuse are gradients that are not finite instead (decision
 * 0097). Every other call is public.
 */
int strata__agent_predict(struct strata_rl_agent *ag, const int *models, int n,
                          const struct strata_batch *b, float *const *out, size_t capacity);
int strata__agent_input_grad(struct strata_rl_agent *ag, int model, const struct strata_batch *b,
                             const float *dout, size_t dout_count, float *dx, size_t capacity);
int strata__agent_train(struct strata_rl_agent *ag, const int *models, int n,
                        const struct strata_batch *b);

#endif /* STRATA_RL_AGENT_H */
