/*
 * PPO's rollout buffer (contract in include/strata/rl.h): steps x n_envs rows, recorded a step
 * of every environment at a time (row = step * n_envs + env), closed by generalised advantage
 * estimation (Schulman et al. 2016) from each environment's last value, backwards in time, in
 * float as PyTorch implementations compute it. Minibatches walk a permutation of the rows that
 * Philox draws from (seed, epoch), kept in the block for the epoch it was drawn for.
 */
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "kernel/philox.h"
#include "rl/rl.h"

#define ROLLOUT_MAGIC 0x54554f4c4c4f524cull /* "LROLLOUT" */
#define MAX_ROWS (1u << 28)
#define MAX_DIM (1u << 20)

struct rollout_head {
        struct strata__rl_head h;
        uint32_t t;          /* steps recorded */
        uint32_t finished;   /* advantages computed */
        uint64_t perm_epoch; /* the epoch the permutation is drawn for, + 1 (0: none) */
};

struct rollout_layout {
        uint32_t rows;
        size_t state, action, logp, reward, value, done, adv, ret, perm, bytes;
};

static int layout(const struct strata_rl_rollout_config *c, struct rollout_layout *l)
{
        struct strata__rl_walk w = { 0, 0 };
        uint64_t rows;

        *l = (struct rollout_layout){ 0 };
        if (!c)
                return strata__fail(STRATA_EINVAL, "rollout: NULL configuration");
        rows = (uint64_t)c->steps * c->n_envs;
        if (c->steps == 0 || c->n_envs == 0 || rows > MAX_ROWS)
                return strata__fail(STRATA_EINVAL,
                                    "rollout: steps %u x n_envs %u must be between 1 and %u rows",
                                    c->steps, c->n_envs, MAX_ROWS);
        if (c->state_dim == 0 || c->state_dim > MAX_DIM || c->action_dim == 0 ||
            c->action_dim > MAX_DIM)
                return strata__fail(STRATA_EINVAL,
                                    "rollout: state_dim %u and action_dim %u must be in [1, %u]",
                                    c->state_dim, c->action_dim, MAX_DIM);
        if (!(c->gamma >= 0.0f && c->gamma <= 1.0f) || !(c->lambda >= 0.0f && c->lambda <= 1.0f))
                return strata__fail(STRATA_EINVAL,
                                    "rollout: gamma %g and lambda %g must be in [0, 1]",
                                    (double)c->gamma, (double)c->lambda);
        l->rows = (uint32_t)rows;
        (void)strata__rl_take(&w, 1, sizeof(struct rollout_head));
        l->state = strata__rl_take(&w, rows * c->state_dim, sizeof(float));
        l->action = strata__rl_take(&w, rows * c->action_dim, sizeof(float));
        l->logp = strata__rl_take(&w, rows, sizeof(float));
        l->reward = strata__rl_take(&w, rows, sizeof(float));
        l->value = strata__rl_take(&w, rows, sizeof(float));
        l->done = strata__rl_take(&w, rows, sizeof(float));
        l->adv = strata__rl_take(&w, rows, sizeof(float));
        l->ret = strata__rl_take(&w, rows, sizeof(float));
        l->perm = strata__rl_take(&w, rows, sizeof(uint32_t));
        l->bytes = STRATA__ALIGN_UP(w.off, 64);
        if (w.overflow)
                return strata__fail(STRATA_EOVERFLOW, "rollout: the buffer's size overflows");
        return STRATA_OK;
}

static uint64_t digest(const struct strata_rl_rollout_config *c)
{
        uint64_t w[] = { c->steps, c->n_envs, c->state_dim, c->action_dim,
                         (uint64_t)(c->gamma * 1e9f), (uint64_t)(c->lambda * 1e9f), c->seed };

        return strata__rl_digest(w, sizeof(w) / sizeof(w[0]));
}

#define AT(ro, l, field, type) ((type *)((unsigned char *)(ro)->block + (l)->field))

int strata_rl_rollout_bytes(const struct strata_rl_rollout_config *cfg, size_t *bytes)
{
        struct rollout_layout l;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "rollout: NULL bytes");
        STRATA_TRY(layout(cfg, &l));
        *bytes = l.bytes;
        return STRATA_OK;
}

int strata_rl_rollout_init(struct strata_rl_rollout *ro, struct strata_arena *arena,
                           const struct strata_rl_rollout_config *cfg)
{
        struct rollout_layout l;
        void *block;

        if (!ro)
                return strata__fail(STRATA_EINVAL, "rollout: NULL buffer");
        STRATA_TRY(layout(cfg, &l));
        STRATA_TRY(strata__rl_carve(arena, l.bytes, ROLLOUT_MAGIC, digest(cfg), &block));
        ro->cfg = *cfg;
        ro->block = block;
        ro->bytes = l.bytes;
        return STRATA_OK;
}

static int live(const struct strata_rl_rollout *ro, struct rollout_layout *l)
{
        *l = (struct rollout_layout){ 0 };
        if (!ro || !ro->block)
                return strata__fail(STRATA_EINVAL, "rollout: the buffer is not initialised");
        return layout(&ro->cfg, l);
}

int strata_rl_rollout_add(struct strata_rl_rollout *ro, const float *state, const float *action,
                          const float *logp, const float *reward, const float *value,
                          const int *done)
{
        struct rollout_layout l;
        struct rollout_head *h;
        size_t e, s, a, r0;

        STRATA_TRY(live(ro, &l));
        if (!state || !action || !logp || !reward || !value || !done)
                return strata__fail(STRATA_EINVAL, "rollout: NULL array");
        h = ro->block;
        if (h->finished || h->t == ro->cfg.steps)
                return strata__fail(STRATA_EBADSTATE, "rollout: %s: clear it before recording",
                                    h->finished ? "finished" : "full");
        e = ro->cfg.n_envs;
        s = ro->cfg.state_dim;
        a = ro->cfg.action_dim;
        STRATA_TRY(strata__rl_finite(state, e * s, "state"));
        STRATA_TRY(strata__rl_finite(action, e * a, "action"));
        STRATA_TRY(strata__rl_finite(logp, e, "logp"));
        STRATA_TRY(strata__rl_finite(reward, e, "reward"));
        STRATA_TRY(strata__rl_finite(value, e, "value"));
        r0 = (size_t)h->t * e;
        memcpy(AT(ro, &l, state, float) + r0 * s, state, e * s * sizeof(float));
        memcpy(AT(ro, &l, action, float) + r0 * a, action, e * a * sizeof(float));
        memcpy(AT(ro, &l, logp, float) + r0, logp, e * sizeof(float));
        memcpy(AT(ro, &l, reward, float) + r0, reward, e * sizeof(float));
        memcpy(AT(ro, &l, value, float) + r0, value, e * sizeof(float));
        for (size_t i = 0; i < e; i++)
                AT(ro, &l, done, float)[r0 + i] = done[i] ? 1.0f : 0.0f;
        h->t++;
        return STRATA_OK;
}

int strata_rl_rollout_finish(struct strata_rl_rollout *ro, const float *last_value)
{
        struct rollout_layout l;
        struct rollout_head *h;
        const struct strata_rl_rollout_config *c;

        STRATA_TRY(live(ro, &l));
        h = ro->block;
        c = &ro->cfg;
        if (h->finished || h->t != c->steps)
                return strata__fail(STRATA_EBADSTATE, "rollout: %s (%u of %u steps recorded)",
                                    h->finished ? "finished already" : "not full", h->t,
                                    c->steps);
        if (!last_value)
                return strata__fail(STRATA_EINVAL, "rollout: NULL last values");
        STRATA_TRY(strata__rl_finite(last_value, c->n_envs, "last value"));
        for (uint32_t e = 0; e < c->n_envs; e++) {
                const float *rw = AT(ro, &l, reward, float), *v = AT(ro, &l, value, float);
                const float *d = AT(ro, &l, done, float);
                float *adv = AT(ro, &l, adv, float), *ret = AT(ro, &l, ret, float);
                float next_v = last_value[e], next_a = 0.0f;

                for (uint32_t t = c->steps; t-- > 0;) {
                        size_t r = (size_t)t * c->n_envs + e;
                        float keep = 1.0f - d[r];
                        float delta = rw[r] + c->gamma * next_v * keep - v[r];

                        next_a = delta + c->gamma * c->lambda * keep * next_a;
                        adv[r] = next_a;
                        ret[r] = next_a + v[r];
                        next_v = v[r];
                }
        }
        h->finished = 1;
        return STRATA_OK;
}

/* Draw the permutation of epoch @p epoch (Fisher-Yates from Philox at (seed, epoch, i)). */
static void permute(struct strata_rl_rollout *ro, const struct rollout_layout *l, uint64_t epoch)
{
        struct rollout_head *h = ro->block;
        uint32_t *p = AT(ro, l, perm, uint32_t);

        if (h->perm_epoch == epoch + 1)
                return;
        for (uint32_t i = 0; i < l->rows; i++)
                p[i] = i;
        for (uint32_t i = l->rows - 1; i > 0; i--) {
                uint32_t r = strata__philox(ro->cfg.seed, epoch, i).v[0];
                uint32_t j = (uint32_t)(((uint64_t)r * (i + 1)) >> 32), t = p[i];

                p[i] = p[j];
                p[j] = t;
        }
        h->perm_epoch = epoch + 1;
}

int strata_rl_rollout_minibatch(struct strata_rl_rollout *ro, uint64_t epoch, uint32_t k,
                                uint32_t size, float *state, float *action, float *logp,
                                float *advantage, float *ret, uint32_t *rows)
{
        struct rollout_layout l;
        const uint32_t *p;
        uint32_t first, n;
        size_t s, a;

        STRATA_TRY(live(ro, &l));
        if (!((struct rollout_head *)ro->block)->finished)
                return strata__fail(STRATA_EBADSTATE, "rollout: finish it before minibatches");
        if (size == 0 || (uint64_t)k * size >= l.rows)
                return strata__fail(STRATA_EINVAL,
                                    "rollout: minibatch %u of size %u is past the %u rows", k,
                                    size, l.rows);
        permute(ro, &l, epoch);
        p = AT(ro, &l, perm, uint32_t);
        first = k * size;
        n = l.rows - first < size ? l.rows - first : size;
        s = ro->cfg.state_dim;
        a = ro->cfg.action_dim;
        for (uint32_t j = 0; j < n; j++) {
                uint32_t r = p[first + j];

                if (state)
                        memcpy(state + j * s, AT(ro, &l, state, float) + r * s,
                               s * sizeof(float));
                if (action)
                        memcpy(action + j * a, AT(ro, &l, action, float) + r * a,
                               a * sizeof(float));
                if (logp)
                        logp[j] = AT(ro, &l, logp, float)[r];
                if (advantage)
                        advantage[j] = AT(ro, &l, adv, float)[r];
                if (ret)
                        ret[j] = AT(ro, &l, ret, float)[r];
        }
        if (rows)
                *rows = n;
        return STRATA_OK;
}

int strata__rollout_keep_envs(struct strata_rl_rollout *ro, uint32_t lo, uint32_t hi,
                              float **rows, size_t *count)
{
        struct rollout_layout l;

        STRATA_TRY(live(ro, &l));
        if (!((struct rollout_head *)ro->block)->finished)
                return strata__fail(STRATA_EBADSTATE, "rollout: finish it before gathering");

        uint32_t E = ro->cfg.n_envs;
        size_t s = ro->cfg.state_dim, a = ro->cfg.action_dim;
        const size_t fields[] = { l.logp, l.reward, l.value, l.done, l.adv, l.ret };

        for (uint32_t r = 0; r < l.rows; r++) {
                if (r % E >= lo && r % E < hi)
                        continue;
                for (size_t j = 0; j < s; j++)
                        AT(ro, &l, state, float)[r * s + j] = -0.0f;
                for (size_t j = 0; j < a; j++)
                        AT(ro, &l, action, float)[r * a + j] = -0.0f;
                for (int f = 0; f < 6; f++)
                        ((float *)((unsigned char *)ro->block + fields[f]))[r] = -0.0f;
        }
        *rows = AT(ro, &l, state, float);
        *count = (l.ret - l.state) / sizeof(float) + l.rows;
        return STRATA_OK;
}

int strata_rl_rollout_clear(struct strata_rl_rollout *ro)
{
        struct rollout_layout l;
        struct rollout_head *h;

        STRATA_TRY(live(ro, &l));
        h = ro->block;
        h->t = 0;
        h->finished = 0;
        h->perm_epoch = 0;
        return STRATA_OK;
}

int strata_rl_rollout_full(const struct strata_rl_rollout *ro)
{
        const struct rollout_head *h;

        if (!ro || !ro->block)
                return 0;
        h = ro->block;
        return h->t == ro->cfg.steps;
}
