/*
 * SAC's update (Haarnoja et al., with automatic entropy tuning) on the agent's models
 * (rl/agent.h): twin critics and their Polyak targets, and a squashed Gaussian policy whose
 * network gives each action's mean and log standard deviation (clamped to [-20, 2]). Each
 * update: the critics regress r + discount (min Q'(s', a') - alpha log pi(a'|s')), a' drawn
 * from the policy; the policy descends alpha log pi(a|s) - min Q(s, a) by reparameterisation
 * (its output gradient computed here: the critics' input gradient with respect to the action,
 * each row from the critic that gave the minimum, through tanh and the draw); log alpha
 * descends -(log pi + target entropy), the target -action_dim; then the targets move. The
 * draws are the smoothing noise's (sigma 1), Philox's; every array is the block's. Under mpi a
 * process's host work is on its own rows of the batch only, the rows the runtime reads
 * (decision 0101); the temperature's mean gathers every row's term (decision 0082).
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/agent.h"
#include "rl/rl.h"

#define HALF_LOG_2PI 0.91893853320467274178f
#define LS_MIN -20.0f
#define LS_MAX 2.0f

static float clampf(float x, float lo, float hi)
{
        return fminf(fmaxf(x, lo), hi);
}

void strata__sac_squash(const float *pol, const float *eps, uint32_t rows, uint32_t A, float *a,
                        float *logp)
{
        for (uint32_t i = 0; i < rows; i++) {
                const float *p = pol + (size_t)i * 2 * A;
                float lp = 0.0f;

                for (uint32_t j = 0; j < A; j++) {
                        float ls = clampf(p[A + j], LS_MIN, LS_MAX);
                        float e = eps ? eps[(size_t)i * A + j] : 0.0f;
                        float y = tanhf(p[j] + expf(ls) * e);

                        a[(size_t)i * A + j] = y;
                        lp += -0.5f * e * e - ls - HALF_LOG_2PI - logf(1.0f - y * y + 1e-6f);
                }
                if (logp)
                        logp[i] = lp;
        }
}

/* The policy on states @p x: outputs into sc->pol, draws into sc->eps, actions into @p a and
 * their log-probabilities into sc->logp, on rows [lo, hi) (every row's draw counted). */
static int draw(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                const float *x, float *a, uint32_t lo, uint32_t hi)
{
        uint32_t B = ag->cfg.batch, S = ag->cfg.state_dim, A = ag->cfg.action_dim;
        struct strata_batch b = strata__agent_batch(x, (int)B, (int)S, NULL, 0);

        STRATA_TRY(strata__agent_predict(ag, (const int[]){ SAC_ACTOR }, 1, &b,
                                         (float *const[]){ sc->pol }, (size_t)B * 2 * A));
        STRATA_TRY(strata__noise_skip(&ag->smooth, 0, lo));
        STRATA_TRY(strata__noise_skip(&ag->smooth, hi, B));
        for (uint32_t i = lo; i < hi; i++) {
                memset(sc->eps + (size_t)i * A, 0, A * sizeof(float));
                STRATA_TRY(strata_rl_noise_add(&ag->smooth, i, sc->eps + (size_t)i * A));
        }
        strata__sac_squash(sc->pol + (size_t)lo * 2 * A, sc->eps + (size_t)lo * A, hi - lo, A,
                           a + (size_t)lo * A, sc->logp + lo);
        return STRATA_OK;
}

/* The critics' target into sc->r: r + discount (min Q'(s', a') - alpha log pi(a'|s')). */
static int target(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc, float alpha,
                  uint32_t lo, uint32_t hi)
{
        uint32_t B = ag->cfg.batch, S = ag->cfg.state_dim, A = ag->cfg.action_dim;
        static const int targets[2] = { SAC_C1T, SAC_C2T };
        float *const q[2] = { sc->q1, sc->q2 };
        struct strata_batch b;

        STRATA_TRY(draw(ag, sc, sc->s2, sc->a2, lo, hi));
        strata__agent_join(sc->sa, sc->s2, sc->a2, lo, hi, S, A);
        b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), NULL, 0);
        STRATA_TRY(strata__agent_predict(ag, targets, 2, &b, q, B));
        for (uint32_t i = lo; i < hi; i++)
                sc->r[i] += sc->disc[i] * (fminf(sc->q1[i], sc->q2[i]) - alpha * sc->logp[i]);
        return STRATA_OK;
}

/* d(-mean min Q)/da into sc->g: each row from the critic that gave its minimum. */
static int critic_grad(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                       uint32_t lo, uint32_t hi)
{
        uint32_t B = ag->cfg.batch, S = ag->cfg.state_dim, A = ag->cfg.action_dim;
        struct strata_batch b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), NULL, 0);
        static const int critics[2] = { SAC_C1, SAC_C2 };
        float *const q[2] = { sc->q1, sc->q2 };

        STRATA_TRY(strata__agent_predict(ag, critics, 2, &b, q, B));
        memset(sc->g + (size_t)lo * A, 0, (size_t)(hi - lo) * A * sizeof(float));
        for (int c = 0; c < 2; c++) {
                for (uint32_t i = lo; i < hi; i++)
                        sc->dq[i] = ((sc->q1[i] <= sc->q2[i]) == (c == 0)) ? -1.0f / (float)B
                                                                          : 0.0f;
                STRATA_TRY(strata__agent_input_grad(ag, c == 0 ? SAC_C1 : SAC_C2, &b, sc->dq,
                                                    B, sc->dsa, (size_t)B * (S + A)));
                for (uint32_t i = lo; i < hi; i++)
                        for (uint32_t j = 0; j < A; j++)
                                sc->g[(size_t)i * A + j] += sc->dsa[(size_t)i * (S + A) + S + j];
        }
        return STRATA_OK;
}

/* The policy's output gradient of mean(alpha log pi - min Q), in place of its outputs. */
static void policy_grad(const struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                        float alpha, uint32_t lo, uint32_t hi)
{
        uint32_t B = ag->cfg.batch, A = ag->cfg.action_dim;

        for (uint32_t i = lo; i < hi; i++)
                for (uint32_t j = 0; j < A; j++) {
                        float *p = sc->pol + (size_t)i * 2 * A;
                        float y = sc->a2[(size_t)i * A + j], e = sc->eps[(size_t)i * A + j];
                        float d = 1.0f - y * y, t = 2.0f * y * d / (d + 1e-6f);
                        float ls = p[A + j], sd = expf(clampf(ls, LS_MIN, LS_MAX));
                        float ga = sc->g[(size_t)i * A + j] * d;
                        int live = ls >= LS_MIN && ls <= LS_MAX;

                        p[j] = alpha * t / (float)B + ga;
                        p[A + j] = live ? alpha * (t * sd * e - 1.0f) / (float)B + ga * sd * e
                                        : 0.0f;
                }
}

/*
 * Under mpi, each row's term logp - action_dim of the temperature's gradient into *@p terms:
 * a process computed only its devices' rows (decision 0079), so each local device holds its
 * rows' terms and zeros elsewhere (sc->dsa, B floats a device: check() saw the room),
 * summed across the job (x + 0 is x): every process then has every row's term, which the
 * mean adds in row order as one process does (decision 0082). Elsewhere *@p terms is NULL.
 */
static int gather_terms(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                        const float **terms)
{
        uint64_t B = ag->cfg.batch, lo, hi;
        void *bufs[STRATA_MAX_DEVICES];
        int d;

        *terms = NULL;
        /* this process's devices, each with its rows as the runtime splits them */
        for (d = 0; d < STRATA_MAX_DEVICES && strata__agent_mpi_rows(ag, d, B, &lo, &hi); d++) {
                float *t = sc->dsa + (size_t)d * B;

                memset(t, 0, B * sizeof(float));
                for (uint64_t i = lo; i < hi; i++)
                        t[i] = sc->logp[i] - (float)ag->cfg.action_dim;
                bufs[d] = t;
        }
        if (d == 0)
                return STRATA_OK; /* not under mpi */
        STRATA_TRY(strata_reduce(ag->rt, bufs, B, STRATA_F32, STRATA_OP_SUM));
        *terms = sc->dsa;
        return STRATA_OK;
}

/* One Adam step (0.9, 0.999, 1e-8) of log alpha towards entropy -action_dim. */
static int alpha_step(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc)
{
        uint32_t B = ag->cfg.batch;
        const float *terms;
        double m = 0.0;
        uint64_t t;
        float g, c1, c2;

        STRATA_TRY(gather_terms(ag, sc, &terms));
        t = ++sc->head->adam_t;
        c1 = 1.0f - powf(0.9f, (float)t);
        c2 = 1.0f - powf(0.999f, (float)t);
        for (uint32_t i = 0; i < B; i++)
                m += terms ? terms[i] : sc->logp[i] - (float)ag->cfg.action_dim;
        g = (float)(-m / B);
        sc->adam_m[0] = 0.9f * sc->adam_m[0] + 0.1f * g;
        sc->adam_v[0] = 0.999f * sc->adam_v[0] + 0.001f * g * g;
        sc->logstd[0] -= ag->cfg.alpha_lr * (sc->adam_m[0] / c1) /
                         (sqrtf(sc->adam_v[0] / c2) + 1e-8f);
        return STRATA_OK;
}

static int update(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc)
{
        uint32_t B = ag->cfg.batch, S = ag->cfg.state_dim, A = ag->cfg.action_dim;
        struct strata_rl_sample out = { sc->s, sc->a, sc->r, sc->s2, sc->disc, NULL, NULL };
        static const int critics[2] = { SAC_C1, SAC_C2 };
        float alpha = expf(sc->logstd[0]);
        struct strata_batch b;
        uint32_t lo, hi;

        strata__agent_own_rows(ag, B, &lo, &hi);
        STRATA_TRY(strata__replay_sample_groups(&ag->replay, B, strata__agent_groups(ag), lo, hi,
                                                &out));
        STRATA_TRY(target(ag, sc, alpha, lo, hi));
        strata__agent_join(sc->sa, sc->s, sc->a, lo, hi, S, A);
        b = strata__agent_batch(sc->sa, (int)B, (int)(S + A), sc->r, 1);
        STRATA_TRY(strata__agent_train(ag, critics, 2, &b));
        STRATA_TRY(draw(ag, sc, sc->s, sc->a2, lo, hi));
        strata__agent_join(sc->sa, sc->s, sc->a2, lo, hi, S, A);
        STRATA_TRY(critic_grad(ag, sc, lo, hi));
        policy_grad(ag, sc, alpha, lo, hi);
        b = strata__agent_batch(sc->s, (int)B, (int)S, sc->pol, (int)(2 * A));
        STRATA_TRY(strata__agent_train(ag, (const int[]){ SAC_ACTOR }, 1, &b));
        if (!ag->cfg.fixed_alpha)
                STRATA_TRY(alpha_step(ag, sc));
        STRATA_TRY(strata_model_polyak_update(ag->rt, SAC_C1T));
        STRATA_TRY(strata_model_polyak_update(ag->rt, SAC_C2T));
        sc->head->updates++;
        return STRATA_OK;
}

int strata__sac_train(struct strata_rl_agent *ag, const struct strata__agent_scratch *sc,
                      uint32_t n)
{
        for (uint32_t k = 0; k < n; k++)
                STRATA_TRY(update(ag, sc));
        return STRATA_OK;
}
