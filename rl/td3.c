/*
 * TD3's update (Fujimoto et al.: twin critics, target policy smoothing, delayed policy
 * updates) on the agent's models (rl/agent.h): sample a batch from the replay; the target
 * actor's actions on the next states, plus clipped Gaussian noise, clipped to [-1, 1]; the
 * target y = r + discount x min of the two target critics; each critic regresses y (MSE);
 * every policy_delay updates the actor follows critic 1 up (its input gradient of -mean Q,
 * the action columns, is the actor's output gradient) and the three targets move by Polyak
 * averaging. Every array is the block's (no allocation); every draw is Philox's. The twin
 * critics train, and their targets predict, in one call each (one agreement between the
 * processes of a job, decision 0082). Under mpi a process's host work is on its own rows of
 * the batch only, the rows the runtime reads (decision 0101).
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/agent.h"
#include "rl/rl.h"

/*
 * The critics' target: y (into sc->r) = r + discount x min(Q1'(s', a'), Q2'(s', a')), on the
 * process's rows [lo, hi) (strata__agent_own_rows()); every row's smoothing draw is counted.
 */
static int target(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                  uint32_t lo, uint32_t hi)
{
        const struct strata_rl_agent_config *c = &ag->cfg;
        uint32_t B = c->batch, S = c->state_dim, A = c->action_dim;
        struct strata_batch b = strata__agent_batch(sc->s2, (int)B, (int)S, NULL, 0);
        static const int targets[2] = { TD3_C1T, TD3_C2T };
        float *const q[2] = { sc->q1, sc->q2 };
        float lim = c->target_noise_clip;

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ TD3_ACTORT }, 1, &b,
                                         (float *const[]){ sc->a2 }, (size_t)B * A));
        STRATA_TRY(strata__noise_skip(&ag->smooth, 0, lo));
        STRATA_TRY(strata__noise_skip(&ag->smooth, hi, B));
        for (uint32_t i = lo; i < hi; i++) {
                float *a2 = sc->a2 + (size_t)i * A, *n = sc->g + (size_t)i * A;

                memset(n, 0, A * sizeof(float));
                STRATA_TRY(strata_rl_noise_add(&ag->smooth, i, n));
                for (uint32_t j = 0; j < A; j++)
                        a2[j] = fminf(fmaxf(a2[j] + fminf(fmaxf(n[j], -lim), lim), -1.0f),
                                      1.0f);
        }
        strata__agent_join(sc->sa, sc->s2, sc->a2, lo, hi, S, A);
        b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), NULL, 0);
        STRATA_TRY(strata__agent_predict(ag, targets, 2, &b, q, B));
        for (uint32_t i = lo; i < hi; i++)
                sc->r[i] += sc->disc[i] * fminf(sc->q1[i], sc->q2[i]);
        return STRATA_OK;
}

/* The actor up critic 1: dQ/da of -mean Q at the actor's own actions; then the targets. */
static int policy(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                  uint32_t lo, uint32_t hi)
{
        uint32_t B = ag->cfg.batch, S = ag->cfg.state_dim, A = ag->cfg.action_dim;
        struct strata_batch b = strata__agent_batch(sc->s, (int)B, (int)S, NULL, 0);

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ TD3_ACTOR }, 1, &b,
                                         (float *const[]){ sc->a2 }, (size_t)B * A));
        strata__agent_join(sc->sa, sc->s, sc->a2, lo, hi, S, A);
        for (uint32_t i = lo; i < hi; i++)
                sc->dq[i] = -1.0f / (float)B;
        b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), NULL, 0);
        STRATA_TRY(strata__agent_input_grad(ag, TD3_C1, &b, sc->dq, B, sc->dsa,
                                            (size_t)B * (S + A)));
        for (uint32_t i = lo; i < hi; i++)
                memcpy(sc->g + (size_t)i * A, sc->dsa + (size_t)i * (S + A) + S,
                       A * sizeof(float));
        b = strata__agent_batch(sc->s, (int)B, (int)S, sc->g, (int)A);
        STRATA_TRY(strata__agent_train(ag, (const int[]){ TD3_ACTOR }, 1, &b));
        for (int k = TD3_C1T; k <= TD3_ACTORT; k++)
                STRATA_TRY(strata_model_polyak_update(ag->rt, k));
        return STRATA_OK;
}

static int update(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc)
{
        const struct strata_rl_agent_config *c = &ag->cfg;
        uint32_t B = c->batch, S = c->state_dim, A = c->action_dim;
        struct strata_rl_sample out = { sc->s, sc->a, sc->r, sc->s2, sc->disc, NULL, NULL };
        static const int critics[2] = { TD3_C1, TD3_C2 };
        struct strata_batch b;
        uint32_t lo, hi;

        strata__agent_own_rows(ag, B, &lo, &hi);
        STRATA_TRY(strata__replay_sample_groups(&ag->replay, B, strata__agent_groups(ag), lo, hi,
                                                &out));
        STRATA_TRY(target(ag, sc, lo, hi));
        strata__agent_join(sc->sa, sc->s, sc->a, lo, hi, S, A);
        b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), sc->r, 1);
        STRATA_TRY(strata__agent_train(ag, critics, 2, &b));
        if (++sc->head->updates % c->policy_delay == 0)
                STRATA_TRY(policy(ag, sc, lo, hi));
        return STRATA_OK;
}

int strata__td3_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                      uint32_t n)
{
        for (uint32_t k = 0; k < n; k++)
                STRATA_TRY(update(ag, sc));
        return STRATA_OK;
}
