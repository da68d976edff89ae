/*
 * Replay buffers of off-policy agents (contract in include/strata/rl.h). Each environment owns
 * max_size / n_envs slots, a ring it overwrites oldest first, and a window of its last nstep
 * steps from which n-step transitions are stored. A prioritized buffer keeps two complete
 * binary trees over the slots, of priority^alpha sums and minima (in double precision, summed
 * in one fixed order), and samples stratified: the i-th of B draws falls in the i-th B-th of
 * the total. Draws are Philox values at (seed, sample call, row): the same calls, the same
 * draws, whatever ran before.
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "kernel/philox.h"
#include "rl/rl.h"

#define REPLAY_MAGIC 0x59414c5045524c52ull /* "RLREPLAY" */
#define MAX_SLOTS (1u << 30)
#define MAX_DIM (1u << 20)

/* Counters at the block's start, after the common header. */
struct replay_head {
        struct strata__rl_head h;
        uint64_t draws;  /* sample calls so far: the Philox stream of the next one */
        double max_prio; /* the largest priority set, given to new slots */
};

/* Where each array of the block lives. */
struct replay_layout {
        uint32_t per_env, leaves; /* slots per environment; leaves of the trees (a power of 2) */
        size_t head, count, pend_len, state, action, reward, next, discount, pend, sum, min;
        size_t bytes;
};

static int check(const struct strata_rl_replay_config *c)
{
        if (!c)
                return strata__fail(STRATA_EINVAL, "replay: NULL configuration");
        if (c->n_envs == 0 || c->max_size < c->n_envs || c->max_size > MAX_SLOTS)
                return strata__fail(STRATA_EINVAL,
                                    "replay: max_size %u must hold at least one slot for each of "
                                    "the %u environments and be at most %u",
                                    c->max_size, c->n_envs, MAX_SLOTS);
        if (c->min_size > c->max_size)
                return strata__fail(STRATA_EINVAL, "replay: min_size %u exceeds max_size %u",
                                    c->min_size, c->max_size);
        if (c->state_dim == 0 || c->state_dim > MAX_DIM || c->action_dim == 0 ||
            c->action_dim > MAX_DIM)
                return strata__fail(STRATA_EINVAL,
                                    "replay: state_dim %u and action_dim %u must be in [1, %u]",
                                    c->state_dim, c->action_dim, MAX_DIM);
        if (c->nstep == 0 || c->nstep > 1024)
                return strata__fail(STRATA_EINVAL, "replay: nstep %u must be in [1, 1024]",
                                    c->nstep);
        if (!(c->gamma >= 0.0f && c->gamma <= 1.0f))
                return strata__fail(STRATA_EINVAL, "replay: gamma %g must be in [0, 1]",
                                    (double)c->gamma);
        if (c->prioritized != 0 && c->prioritized != 1)
                return strata__fail(STRATA_EINVAL, "replay: prioritized is 0 or 1, got %d",
                                    c->prioritized);
        if (c->prioritized && (!(c->alpha >= 0.0f && c->alpha <= 1.0f) ||
                               !(c->beta >= 0.0f && c->beta <= 1.0f)))
                return strata__fail(STRATA_EINVAL,
                                    "replay: alpha %g and beta %g must be in [0, 1]",
                                    (double)c->alpha, (double)c->beta);
        return STRATA_OK;
}

static uint64_t digest(const struct strata_rl_replay_config *c)
{
        uint64_t w[] = { c->max_size, c->min_size, c->n_envs, c->state_dim, c->action_dim,
                         c->nstep, (uint64_t)(c->gamma * 1e9f), (uint64_t)c->prioritized,
                         (uint64_t)(c->alpha * 1e9f), (uint64_t)(c->beta * 1e9f),
                         c->beta_steps, c->seed };

        return strata__rl_digest(w, sizeof(w) / sizeof(w[0]));
}

static int layout(const struct strata_rl_replay_config *c, struct replay_layout *l)
{
        struct strata__rl_walk w = { 0, 0 };
        size_t slots, s, a, pend_row;

        *l = (struct replay_layout){ 0 };
        STRATA_TRY(check(c));
        s = c->state_dim;
        a = c->action_dim;
        pend_row = 2 * s + a + 1;
        l->per_env = c->max_size / c->n_envs;
        slots = (size_t)l->per_env * c->n_envs;
        for (l->leaves = 1; l->leaves < slots; l->leaves *= 2)
                ;
        (void)strata__rl_take(&w, 1, sizeof(struct replay_head));
        l->head = strata__rl_take(&w, c->n_envs, sizeof(uint32_t));
        l->count = strata__rl_take(&w, c->n_envs, sizeof(uint32_t));
        l->pend_len = strata__rl_take(&w, c->n_envs, sizeof(uint32_t));
        l->state = strata__rl_take(&w, slots * s, sizeof(float));
        l->action = strata__rl_take(&w, slots * a, sizeof(float));
        l->reward = strata__rl_take(&w, slots, sizeof(float));
        l->next = strata__rl_take(&w, slots * s, sizeof(float));
        l->discount = strata__rl_take(&w, slots, sizeof(float));
        l->pend = strata__rl_take(&w, (size_t)c->n_envs * c->nstep * pend_row, sizeof(float));
        l->sum = c->prioritized ? strata__rl_take(&w, 2 * (size_t)l->leaves, sizeof(double)) : 0;
        l->min = c->prioritized ? strata__rl_take(&w, 2 * (size_t)l->leaves, sizeof(double)) : 0;
        l->bytes = STRATA__ALIGN_UP(w.off, 64);
        if (w.overflow)
                return strata__fail(STRATA_EOVERFLOW, "replay: the buffer's size overflows");
        return STRATA_OK;
}

#define AT(rb, l, field, type) ((type *)((unsigned char *)(rb)->block + (l)->field))

int strata_rl_replay_bytes(const struct strata_rl_replay_config *cfg, size_t *bytes)
{
        struct replay_layout l;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "replay: NULL bytes");
        STRATA_TRY(layout(cfg, &l));
        *bytes = l.bytes;
        return STRATA_OK;
}

/* Set leaf @p i of the trees to @p v and recompute its ancestors, children in order. */
static void tree_set(const struct strata_rl_replay *rb, const struct replay_layout *l,
                     uint32_t i, double v)
{
        double *sum = AT(rb, l, sum, double), *mn = AT(rb, l, min, double);
        size_t n = (size_t)l->leaves + i;

        sum[n] = v;
        mn[n] = v;
        for (n /= 2; n >= 1; n /= 2) {
                sum[n] = sum[2 * n] + sum[2 * n + 1];
                mn[n] = mn[2 * n] < mn[2 * n + 1] ? mn[2 * n] : mn[2 * n + 1];
        }
}

int strata_rl_replay_init(struct strata_rl_replay *rb, struct strata_arena *arena,
                          const struct strata_rl_replay_config *cfg)
{
        struct replay_layout l;
        void *block;

        if (!rb)
                return strata__fail(STRATA_EINVAL, "replay: NULL buffer");
        STRATA_TRY(layout(cfg, &l));
        STRATA_TRY(strata__rl_carve(arena, l.bytes, REPLAY_MAGIC, digest(cfg), &block));
        rb->cfg = *cfg;
        rb->block = block;
        rb->bytes = l.bytes;
        if (!block)
                return STRATA_OK; /* planned only */
        ((struct replay_head *)block)->max_prio = 1.0;
        if (cfg->prioritized) { /* empty leaves: sum 0, min +inf */
                double *sum = AT(rb, &l, sum, double), *mn = AT(rb, &l, min, double);

                for (size_t n = 0; n < 2 * (size_t)l.leaves; n++) {
                        sum[n] = 0.0;
                        mn[n] = INFINITY;
                }
        }
        return STRATA_OK;
}

static int live(const struct strata_rl_replay *rb, struct replay_layout *l)
{
        *l = (struct replay_layout){ 0 };
        if (!rb || !rb->block)
                return strata__fail(STRATA_EINVAL, "replay: the buffer is not initialised");
        return layout(&rb->cfg, l);
}

/* Store one n-step transition of environment @p env in its next slot. */
static void store(struct strata_rl_replay *rb, const struct replay_layout *l, uint32_t env,
                  const float *state, const float *action, float reward, const float *next,
                  float discount)
{
        const struct strata_rl_replay_config *c = &rb->cfg;
        uint32_t *head = AT(rb, l, head, uint32_t), *count = AT(rb, l, count, uint32_t);
        uint32_t slot = env * l->per_env + head[env];
        size_t s = c->state_dim, a = c->action_dim;

        memcpy(AT(rb, l, state, float) + slot * s, state, s * sizeof(float));
        memcpy(AT(rb, l, action, float) + slot * a, action, a * sizeof(float));
        AT(rb, l, reward, float)[slot] = reward;
        memcpy(AT(rb, l, next, float) + slot * s, next, s * sizeof(float));
        AT(rb, l, discount, float)[slot] = discount;
        head[env] = (head[env] + 1) % l->per_env;
        if (count[env] < l->per_env)
                count[env]++;
        if (c->prioritized)
                tree_set(rb, l, slot,
                         pow(((struct replay_head *)rb->block)->max_prio, (double)c->alpha));
}

/*
 * Store the transition of window row @p first of environment @p env: its reward summed with
 * the later rows' (r_k + gamma (r_k+1 + gamma (...)), from the newest back), the newest row's
 * next state, and gamma^rows, or 0 when the episode ended.
 */
static void emit(struct strata_rl_replay *rb, const struct replay_layout *l, uint32_t env,
                 uint32_t first, uint32_t len, int done)
{
        const struct strata_rl_replay_config *c = &rb->cfg;
        size_t s = c->state_dim, a = c->action_dim, row = 2 * s + a + 1;
        const float *pend = AT(rb, l, pend, float) + (size_t)env * c->nstep * row;
        float ret = pend[(size_t)(len - 1) * row + s + a], discount = 1.0f;

        for (uint32_t k = len - 1; k-- > first;)
                ret = pend[(size_t)k * row + s + a] + c->gamma * ret;
        for (uint32_t k = first; k < len; k++)
                discount *= c->gamma;
        store(rb, l, env, pend + (size_t)first * row, pend + (size_t)first * row + s, ret,
              pend + (size_t)(len - 1) * row + s + a + 1, done ? 0.0f : discount);
}

int strata_rl_replay_add(struct strata_rl_replay *rb, uint32_t env, const float *state,
                         const float *action, float reward, const float *next_state, int done)
{
        struct replay_layout l;
        const struct strata_rl_replay_config *c;
        size_t s, a, row;
        uint32_t *len;
        float *pend;

        STRATA_TRY(live(rb, &l));
        c = &rb->cfg;
        if (env >= c->n_envs)
                return strata__fail(STRATA_EINVAL, "replay: environment %u of %u", env,
                                    c->n_envs);
        if (!state || !action || !next_state)
                return strata__fail(STRATA_EINVAL, "replay: NULL state, action or next state");
        s = c->state_dim;
        a = c->action_dim;
        STRATA_TRY(strata__rl_finite(state, s, "state"));
        STRATA_TRY(strata__rl_finite(action, a, "action"));
        STRATA_TRY(strata__rl_finite(&reward, 1, "reward"));
        STRATA_TRY(strata__rl_finite(next_state, s, "next state"));
        row = 2 * s + a + 1;
        len = AT(rb, &l, pend_len, uint32_t) + env;
        pend = AT(rb, &l, pend, float) + ((size_t)env * c->nstep + *len) * row;
        memcpy(pend, state, s * sizeof(float));
        memcpy(pend + s, action, a * sizeof(float));
        pend[s + a] = reward;
        memcpy(pend + s + a + 1, next_state, s * sizeof(float));
        ++*len;
        if (done) { /* the episode ended: every waiting step is stored, truncated */
                for (uint32_t k = 0; k < *len; k++)
                        emit(rb, &l, env, k, *len, 1);
                *len = 0;
        } else if (*len == c->nstep) { /* the oldest step has its n successors */
                float *base = AT(rb, &l, pend, float) + (size_t)env * c->nstep * row;

                emit(rb, &l, env, 0, *len, 0);
                memmove(base, base + row, (size_t)(*len - 1) * row * sizeof(float));
                --*len;
        }
        return STRATA_OK;
}

uint64_t strata_rl_replay_size(const struct strata_rl_replay *rb)
{
        struct replay_layout l;
        uint64_t n = 0;

        if (!rb || !rb->block || layout(&rb->cfg, &l) != STRATA_OK)
                return 0;
        for (uint32_t e = 0; e < rb->cfg.n_envs; e++)
                n += AT(rb, &l, count, uint32_t)[e];
        return n;
}

int strata_rl_replay_ready(const struct strata_rl_replay *rb)
{
        uint64_t n = strata_rl_replay_size(rb);

        return n > 0 && n >= rb->cfg.min_size;
}

/* Slot of the k-th stored transition, environments in order. */
static uint32_t nth_slot(const struct strata_rl_replay *rb, const struct replay_layout *l,
                         uint64_t k)
{
        const uint32_t *count = AT(rb, l, count, uint32_t);
        uint32_t e = 0;

        while (k >= count[e])
                k -= count[e++];
        return e * l->per_env + (uint32_t)k;
}

/* The leaf where prefix sum @p u falls, never an empty one. */
static uint32_t find_prefix(const struct strata_rl_replay *rb, const struct replay_layout *l,
                            double u)
{
        const double *sum = AT(rb, l, sum, double);
        size_t n = 1;

        while (n < l->leaves) {
                if (u < sum[2 * n] || sum[2 * n + 1] <= 0.0) {
                        n = 2 * n;
                } else {
                        u -= sum[2 * n];
                        n = 2 * n + 1;
                }
        }
        return (uint32_t)(n - l->leaves);
}

static void copy_out(const struct strata_rl_replay *rb, const struct replay_layout *l,
                     uint32_t slot, uint32_t j, const struct strata_rl_sample *o)
{
        size_t s = rb->cfg.state_dim, a = rb->cfg.action_dim;

        memcpy(o->state + j * s, AT(rb, l, state, float) + slot * s, s * sizeof(float));
        memcpy(o->action + j * a, AT(rb, l, action, float) + slot * a, a * sizeof(float));
        o->reward[j] = AT(rb, l, reward, float)[slot];
        memcpy(o->next_state + j * s, AT(rb, l, next, float) + slot * s, s * sizeof(float));
        o->discount[j] = AT(rb, l, discount, float)[slot];
        if (o->index)
                o->index[j] = slot;
}

/*
 * Uniform draws in @p groups: the batch's rows and the environments are split as the runtime
 * splits a batch over its devices (group g: rows [batch g / groups, batch (g + 1) / groups),
 * environments [E g / groups, E (g + 1) / groups)) and each row draws among its group's
 * environments only, so a process of an mpi job, whose rows and environments are its devices'
 * groups, samples only what it recorded itself (decision 0079). Row j's draw is the same
 * Philox value as the ungrouped sampler's; one group is that sampler. Rows outside [@p lo,
 * @p hi) are not written (decision 0101: another process's).
 */
static void sample_groups(struct strata_rl_replay *rb, const struct replay_layout *l,
                          uint32_t batch, uint32_t groups, uint32_t lo, uint32_t hi,
                          const struct strata_rl_sample *out)
{
        const uint32_t *count = AT(rb, l, count, uint32_t);
        const struct replay_head *h = rb->block;
        uint32_t E = rb->cfg.n_envs;

        for (uint32_t g = 0; g < groups; g++) {
                uint32_t e0 = (uint32_t)((uint64_t)E * g / groups);
                uint32_t e1 = (uint32_t)((uint64_t)E * (g + 1) / groups);
                uint32_t j0 = (uint32_t)((uint64_t)batch * g / groups);
                uint32_t j1 = (uint32_t)((uint64_t)batch * (g + 1) / groups);
                uint64_t n = 0;

                for (uint32_t e = e0; e < e1; e++)
                        n += count[e];
                for (uint32_t j = j0 > lo ? j0 : lo; j < j1 && j < hi; j++) {
                        uint64_t k = ((uint64_t)strata__philox(rb->cfg.seed, h->draws, j).v[0] *
                                      n) >> 32;
                        uint32_t e = e0;

                        while (k >= count[e])
                                k -= count[e++];
                        copy_out(rb, l, e * l->per_env + (uint32_t)k, j, out);
                        if (out->weight)
                                out->weight[j] = 1.0f;
                }
        }
}

int strata__replay_sample_groups(struct strata_rl_replay *rb, uint32_t batch, uint32_t groups,
                                 uint32_t lo, uint32_t hi, const struct strata_rl_sample *out)
{
        struct replay_layout l;

        if (groups <= 1)
                return strata_rl_replay_sample(rb, batch, out);
        STRATA_TRY(live(rb, &l));
        if (rb->cfg.prioritized || groups > rb->cfg.n_envs || groups > batch || !out ||
            !out->state || !out->action || !out->reward || !out->next_state || !out->discount)
                return strata__fail(STRATA_EINVAL, "replay: %u groups of a %s buffer of %u "
                                    "environments, a batch of %u rows", groups,
                                    rb->cfg.prioritized ? "prioritized" : "uniform",
                                    rb->cfg.n_envs, batch);
        if (!strata_rl_replay_ready(rb))
                return strata__fail(STRATA_EBADSTATE, "replay: min_size not reached: keep "
                                    "recording before sampling");
        for (uint32_t g = 0; g < groups; g++) {
                uint64_t n = 0;

                for (uint32_t e = (uint32_t)((uint64_t)rb->cfg.n_envs * g / groups);
                     e < (uint32_t)((uint64_t)rb->cfg.n_envs * (g + 1) / groups); e++)
                        n += AT(rb, &l, count, uint32_t)[e];
                if (!n)
                        return strata__fail(STRATA_EBADSTATE, "replay: the environments of "
                                            "group %u hold no transition yet", g);
        }
        sample_groups(rb, &l, batch, groups, lo, hi, out);
        ((struct replay_head *)rb->block)->draws++;
        return STRATA_OK;
}

int strata_rl_replay_sample(struct strata_rl_replay *rb, uint32_t batch,
                            const struct strata_rl_sample *out)
{
        struct replay_layout l;
        struct replay_head *h;
        const struct strata_rl_replay_config *c;
        uint64_t n;

        STRATA_TRY(live(rb, &l));
        c = &rb->cfg;
        if (batch == 0 || !out || !out->state || !out->action || !out->reward ||
            !out->next_state || !out->discount)
                return strata__fail(STRATA_EINVAL,
                                    "replay: a batch of at least one row and its arrays");
        n = strata_rl_replay_size(rb);
        if (!strata_rl_replay_ready(rb))
                return strata__fail(STRATA_EBADSTATE,
                                    "replay: %llu transitions stored, min_size is %u: keep "
                                    "recording before sampling",
                                    (unsigned long long)n, c->min_size);
        h = rb->block;
        if (!c->prioritized) {
                for (uint32_t j = 0; j < batch; j++) {
                        uint32_t r = strata__philox(c->seed, h->draws, j).v[0];

                        copy_out(rb, &l, nth_slot(rb, &l, ((uint64_t)r * n) >> 32), j, out);
                        if (out->weight)
                                out->weight[j] = 1.0f;
                }
        } else {
                const double *sum = AT(rb, &l, sum, double), *mn = AT(rb, &l, min, double);
                double total = sum[1], seg = total / batch, beta = c->beta;

                if (c->beta_steps)
                        beta += (1.0 - beta) *
                                (h->draws >= c->beta_steps ? 1.0
                                                           : (double)h->draws / c->beta_steps);
                for (uint32_t j = 0; j < batch; j++) {
                        struct strata__philox4 r = strata__philox(c->seed, h->draws, j);
                        double u = ((double)j + (double)(r.v[0] >> 5) * 0x1p-27) * seg;
                        uint32_t slot = find_prefix(rb, &l, u < total ? u : total * 0.999999);

                        copy_out(rb, &l, slot, j, out);
                        if (out->weight)
                                out->weight[j] = (float)pow(sum[l.leaves + slot] / mn[1], -beta);
                }
        }
        h->draws++;
        return STRATA_OK;
}

int strata_rl_replay_set_priorities(struct strata_rl_replay *rb, const uint32_t *index,
                                    const float *priority, uint32_t n)
{
        struct replay_layout l;
        struct replay_head *h;

        STRATA_TRY(live(rb, &l));
        if (!rb->cfg.prioritized)
                return strata__fail(STRATA_EINVAL, "replay: priorities of a uniform buffer");
        if (n && (!index || !priority))
                return strata__fail(STRATA_EINVAL, "replay: NULL index or priority");
        for (uint32_t j = 0; j < n; j++) {
                uint32_t e = index[j] / l.per_env;

                if (e >= rb->cfg.n_envs ||
                    index[j] % l.per_env >= AT(rb, &l, count, uint32_t)[e])
                        return strata__fail(STRATA_EINVAL, "replay: slot %u (row %u) holds no "
                                            "transition", index[j], j);
                if (!(isfinite(priority[j]) && priority[j] > 0.0f))
                        return strata__fail(STRATA_EINVAL, "replay: priority[%u] is %g: it must "
                                            "be finite and > 0", j, (double)priority[j]);
        }
        h = rb->block;
        for (uint32_t j = 0; j < n; j++) {
                if (priority[j] > h->max_prio)
                        h->max_prio = priority[j];
                tree_set(rb, &l, index[j], pow(priority[j], (double)rb->cfg.alpha));
        }
        return STRATA_OK;
}
