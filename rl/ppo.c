/*
 * PPO's update (Schulman et al., clipped surrogate) on the agent's models (rl/agent.h): a
 * Gaussian policy whose mean is a network and whose log standard deviation is a vector of the
 * agent's block (learned by its own Adam, or fixed), and a value network. Once the rollout is
 * full: GAE from the value of the last next states; then for each epoch, each minibatch of the
 * rollout's permutation: advantages normalised over the minibatch, the policy's output
 * gradient of the clipped surrogate (and the log-std's, with the entropy bonus), the value
 * network's of vf_coef x MSE to the returns, each applied by the network's optimizer. The
 * gradients are computed here from the networks' outputs, so both networks use the agent's
 * "given gradient" loss.
 *
 * Under mpi (decision 0094) a process steps its own environments and its one device computes
 * its rows of each call: the finished rollout is summed across the processes (each holding its
 * environments' rows, -0 elsewhere), and each minibatch's outputs likewise, so every process
 * holds every array one process of the job's devices holds, and computes from them what it
 * computes: the advantages' normalisation, the gradients, the log-std's.
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/agent.h"
#include "rl/rl.h"

#define HALF_LOG_2PI 0.91893853320467274178f

float strata__ppo_logp(const float *a, const float *mu, const float *logstd, uint32_t dim)
{
        float lp = 0.0f;

        for (uint32_t j = 0; j < dim; j++) {
                float z = (a[j] - mu[j]) / expf(logstd[j]);

                lp += -0.5f * z * z - logstd[j] - HALF_LOG_2PI;
        }
        return lp;
}

/* Advantages of @p n rows to mean 0, standard deviation 1 (unbiased, as torch.std). */
static void normalise(float *adv, uint32_t n)
{
        double m = 0.0, v = 0.0;

        for (uint32_t i = 0; i < n; i++)
                m += adv[i];
        m /= n;
        for (uint32_t i = 0; i < n; i++)
                v += (adv[i] - m) * (adv[i] - m);
        v = n > 1 ? v / (n - 1) : 0.0;
        for (uint32_t i = 0; i < n; i++)
                adv[i] = (float)((adv[i] - m) / (sqrt(v) + 1e-8));
}

/* One Adam step (0.9, 0.999, 1e-8) of the log-std from its gradient in @p grad. */
static void logstd_step(const struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                        const float *grad)
{
        float lr = ag->cfg.actor_lr;
        uint64_t t = ++sc->head->adam_t;
        float c1 = 1.0f - powf(0.9f, (float)t), c2 = 1.0f - powf(0.999f, (float)t);

        for (uint32_t j = 0; j < ag->cfg.action_dim; j++) {
                sc->adam_m[j] = 0.9f * sc->adam_m[j] + 0.1f * grad[j];
                sc->adam_v[j] = 0.999f * sc->adam_v[j] + 0.001f * grad[j] * grad[j];
                sc->logstd[j] -= lr * (sc->adam_m[j] / c1) / (sqrtf(sc->adam_v[j] / c2) + 1e-8f);
        }
}

/* The clipped surrogate's gradient with respect to the mean (sc->g) and the log-std (@p gls):
 * a row's term flows where min() picks the unclipped ratio. */
static void surrogate(const struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                      uint32_t n, float *gls)
{
        uint32_t A = ag->cfg.action_dim;
        float eps = ag->cfg.clip;

        for (uint32_t j = 0; j < A; j++)
                gls[j] = -ag->cfg.ent_coef;
        for (uint32_t i = 0; i < n; i++) {
                const float *a = sc->a + (size_t)i * A, *mu = sc->mu + (size_t)i * A;
                float adv = sc->adv[i];
                float r = expf(strata__ppo_logp(a, mu, sc->logstd, A) - sc->logp[i]);
                int flows = !((r > 1.0f + eps && adv > 0.0f) || (r < 1.0f - eps && adv < 0.0f));
                float k = flows ? -adv * r / (float)n : 0.0f;

                for (uint32_t j = 0; j < A; j++) {
                        float sd = expf(sc->logstd[j]), z = (a[j] - mu[j]) / sd;

                        sc->g[(size_t)i * A + j] = k * z / sd;
                        gls[j] += k * (z * z - 1.0f);
                }
        }
}

/* Under mpi, this process's rows [*@p lo, *@p hi) of a batch of @p rows (its one device's:
 * check() refused more devices a process) and 1; else 0. */
static int mpi_rows(const struct strata_rl_agent *ag, uint32_t rows, uint32_t *lo, uint32_t *hi)
{
        uint64_t l, h;

        if (!strata__agent_mpi_rows(ag, 0, rows, &l, &h))
                return 0;
        *lo = (uint32_t)l;
        *hi = (uint32_t)h;
        return 1;
}

/* Under mpi, the means and values of a minibatch's @p n rows, each process's own rows staged
 * in the scratch's input gradients (n (A + 1) <= R (S + A) floats) with -0 elsewhere, summed
 * across the processes: every process then holds every row's. */
static int gather_outputs(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                          uint32_t n)
{
        uint32_t A = ag->cfg.action_dim, lo, hi;
        float *t = sc->dsa;

        if (!mpi_rows(ag, n, &lo, &hi))
                return STRATA_OK;
        for (uint32_t i = 0; i < n; i++) {
                int own = i >= lo && i < hi;

                for (uint32_t j = 0; j < A; j++)
                        t[(size_t)i * A + j] = own ? sc->mu[(size_t)i * A + j] : -0.0f;
                t[(size_t)n * A + i] = own ? sc->v[i] : -0.0f;
        }
        STRATA_TRY(strata_reduce(ag->rt, (void *const[]){ t }, (size_t)n * (A + 1), STRATA_F32,
                                 STRATA_OP_SUM));
        memcpy(sc->mu, t, (size_t)n * A * sizeof(float));
        memcpy(sc->v, t + (size_t)n * A, n * sizeof(float));
        return STRATA_OK;
}

/* Under mpi, every environment's rows of the finished rollout on every process. */
static int gather_rollout(struct strata_rl_agent *ag)
{
        uint32_t lo, hi;
        size_t count;
        float *rows;

        if (!mpi_rows(ag, ag->cfg.n_envs, &lo, &hi))
                return STRATA_OK;
        STRATA_TRY(strata__rollout_keep_envs(&ag->rollout, lo, hi, &rows, &count));
        return strata_reduce(ag->rt, (void *const[]){ rows }, count, STRATA_F32, STRATA_OP_SUM);
}

/* One minibatch: the policy's and the value network's steps, the log-std's. */
static int minibatch(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                     uint64_t epoch, uint32_t k)
{
        uint32_t S = ag->cfg.state_dim, A = ag->cfg.action_dim, n;
        struct strata_batch b;
        float gls[64];

        STRATA_TRY(strata_rl_rollout_minibatch(&ag->rollout, epoch, k, ag->cfg.minibatch, sc->s,
                                               sc->a, sc->logp, sc->adv, sc->ret, &n));
        normalise(sc->adv, n);
        b = strata__agent_batch(sc->s, (int)n, (int)S, NULL, 0);
        STRATA_TRY(strata__agent_predict(ag, (const int[]){ PPO_ACTOR }, 1, &b,
                                         (float *const[]){ sc->mu }, (size_t)n * A));
        STRATA_TRY(strata__agent_predict(ag, (const int[]){ PPO_VALUE }, 1, &b,
                                         (float *const[]){ sc->v }, n));
        STRATA_TRY(gather_outputs(ag, sc, n));
        surrogate(ag, sc, n, gls);
        for (uint32_t i = 0; i < n; i++)
                sc->dq[i] = ag->cfg.vf_coef * 2.0f * (sc->v[i] - sc->ret[i]) / (float)n;
        b = strata__agent_batch(sc->s, (int)n, (int)S, sc->g, (int)A);
        STRATA_TRY(strata__agent_train(ag, (const int[]){ PPO_ACTOR }, 1, &b));
        b = strata__agent_batch(sc->s, (int)n, (int)S, sc->dq, 1);
        STRATA_TRY(strata__agent_train(ag, (const int[]){ PPO_VALUE }, 1, &b));
        if (!ag->cfg.fixed_std)
                logstd_step(ag, sc, gls);
        sc->head->updates++;
        return STRATA_OK;
}

/*
 * Under mpi only this process's environments have fresh last values: their finiteness agreed
 * across the job first, so a value that is not finite makes every process refuse the rollout
 * (the one that holds it names it), none left waiting in the gather.
 */
static int agree_last_values(struct strata_rl_agent *ag, const float *v)
{
        uint32_t lo, hi;
        int bad = 0;

        if (!mpi_rows(ag, ag->cfg.n_envs, &lo, &hi))
                return STRATA_OK;
        for (uint32_t e = lo; e < hi; e++)
                bad |= !isfinite(v[e]);
        STRATA_TRY(strata_reduce_boolean_decision(ag->rt, &bad, 0, &bad));
        if (!bad)
                return STRATA_OK;
        STRATA_TRY(strata__rl_finite(v + lo, hi - lo, "last value")); /* names its own */
        return strata__fail(STRATA_EINVAL, "rl agent: a last value of another process's "
                            "environments is not finite; the rollout is refused");
}

int strata__ppo_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc)
{
        uint32_t E = ag->cfg.n_envs, rows = ag->cfg.steps * E;
        uint32_t nmb = (rows + ag->cfg.minibatch - 1) / ag->cfg.minibatch;
        struct strata_batch b = strata__agent_batch(sc->next, (int)E, (int)ag->cfg.state_dim,
                                                    NULL, 0);

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ PPO_VALUE }, 1, &b,
                                         (float *const[]){ sc->last_value }, E));
        STRATA_TRY(agree_last_values(ag, sc->last_value));
        STRATA_TRY(strata_rl_rollout_finish(&ag->rollout, sc->last_value));
        STRATA_TRY(gather_rollout(ag));
        for (uint32_t e = 0; e < ag->cfg.epochs; e++, sc->head->epochs++)
                for (uint32_t k = 0; k < nmb; k++)
                        STRATA_TRY(minibatch(ag, sc, sc->head->epochs, k));
        return strata_rl_rollout_clear(&ag->rollout);
}
