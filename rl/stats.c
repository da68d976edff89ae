/*
 * Running normalisation of states and rewards (Welford's mean and sum of squared deviations,
 * in double, folded row by row in order) and exploration noise (Gaussian by Box-Muller from
 * Philox at (seed, environment, draw), or an Ornstein-Uhlenbeck process driven by those
 * normals). Their state — the statistics, each environment's draw counter and OU value — is the
 * block, so a checkpoint of it resumes them bitwise. Contract in include/strata/rl.h.
 */
#include <math.h>

#include "strata/rl.h"
#include "base/base.h"
#include "kernel/philox.h"
#include "rl/rl.h"

#define NORM_MAGIC 0x4d524f4e4c524c52ull  /* "RLRLNORM" */
#define NOISE_MAGIC 0x45534f4e4c524c52ull /* "RLRLNOSE" */
#define MAX_DIM (1u << 24)

struct norm_head {
        struct strata__rl_head h;
        double count;
};

static int norm_layout(uint32_t dim, size_t *mean, size_t *m2, size_t *bytes)
{
        struct strata__rl_walk w = { 0, 0 };

        *mean = *m2 = *bytes = 0;
        if (dim == 0 || dim > MAX_DIM)
                return strata__fail(STRATA_EINVAL, "normalizer: dim %u must be in [1, %u]", dim,
                                    MAX_DIM);
        (void)strata__rl_take(&w, 1, sizeof(struct norm_head));
        *mean = strata__rl_take(&w, dim, sizeof(double));
        *m2 = strata__rl_take(&w, dim, sizeof(double));
        *bytes = STRATA__ALIGN_UP(w.off, 64);
        return STRATA_OK;
}

int strata_rl_normalizer_bytes(uint32_t dim, size_t *bytes)
{
        size_t mean, m2;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "normalizer: NULL bytes");
        return norm_layout(dim, &mean, &m2, bytes);
}

int strata_rl_normalizer_init(struct strata_rl_normalizer *nz, struct strata_arena *arena,
                              uint32_t dim, float clip)
{
        size_t mean, m2, bytes;
        uint64_t w[] = { dim, 0 };
        void *block;

        if (!nz)
                return strata__fail(STRATA_EINVAL, "normalizer: NULL normalizer");
        if (!(isfinite(clip) && clip >= 0.0f))
                return strata__fail(STRATA_EINVAL, "normalizer: clip %g must be finite and >= 0",
                                    (double)clip);
        STRATA_TRY(norm_layout(dim, &mean, &m2, &bytes));
        w[1] = (uint64_t)(clip * 1e6f);
        STRATA_TRY(strata__rl_carve(arena, bytes, NORM_MAGIC, strata__rl_digest(w, 2), &block));
        nz->dim = dim;
        nz->clip = clip;
        nz->block = block;
        nz->bytes = bytes;
        return STRATA_OK;
}

int strata_rl_normalizer_update(struct strata_rl_normalizer *nz, const float *x, uint32_t rows)
{
        size_t mo, m2o, bytes;
        struct norm_head *h;
        double *mean, *m2;

        if (!nz || !nz->block)
                return strata__fail(STRATA_EINVAL, "normalizer: not initialised");
        if (rows && !x)
                return strata__fail(STRATA_EINVAL, "normalizer: NULL values");
        STRATA_TRY(strata__rl_finite(x, (size_t)rows * nz->dim, "value"));
        STRATA_TRY(norm_layout(nz->dim, &mo, &m2o, &bytes));
        h = nz->block;
        mean = (double *)((unsigned char *)nz->block + mo);
        m2 = (double *)((unsigned char *)nz->block + m2o);
        for (uint32_t r = 0; r < rows; r++) {
                h->count += 1.0;
                for (uint32_t i = 0; i < nz->dim; i++) {
                        double v = x[(size_t)r * nz->dim + i], d = v - mean[i];

                        mean[i] += d / h->count;
                        m2[i] += d * (v - mean[i]);
                }
        }
        return STRATA_OK;
}

int strata_rl_normalizer_apply(const struct strata_rl_normalizer *nz, const float *x,
                               float *out, uint32_t rows)
{
        size_t mo, m2o, bytes;
        const struct norm_head *h;
        const double *mean, *m2;

        if (!nz || !nz->block)
                return strata__fail(STRATA_EINVAL, "normalizer: not initialised");
        if (rows && (!x || !out))
                return strata__fail(STRATA_EINVAL, "normalizer: NULL values");
        STRATA_TRY(norm_layout(nz->dim, &mo, &m2o, &bytes));
        h = nz->block;
        mean = (const double *)((const unsigned char *)nz->block + mo);
        m2 = (const double *)((const unsigned char *)nz->block + m2o);
        for (uint32_t r = 0; r < rows; r++)
                for (uint32_t i = 0; i < nz->dim; i++) {
                        size_t k = (size_t)r * nz->dim + i;
                        double var = h->count > 0.0 ? m2[i] / h->count : 1.0;
                        double v = ((double)x[k] - mean[i]) / sqrt(var + 1e-8);

                        if (nz->clip > 0.0f)
                                v = v > nz->clip ? nz->clip : v < -nz->clip ? -nz->clip : v;
                        out[k] = (float)v;
                }
        return STRATA_OK;
}

static int noise_layout(uint32_t dim, uint32_t n_envs, size_t *draws, size_t *x, size_t *bytes)
{
        struct strata__rl_walk w = { 0, 0 };

        *draws = *x = *bytes = 0;
        if (dim == 0 || dim > MAX_DIM || n_envs == 0 || n_envs > MAX_DIM)
                return strata__fail(STRATA_EINVAL,
                                    "noise: dim %u and n_envs %u must be in [1, %u]", dim, n_envs,
                                    MAX_DIM);
        (void)strata__rl_take(&w, 1, sizeof(struct strata__rl_head));
        *draws = strata__rl_take(&w, n_envs, sizeof(uint64_t));
        *x = strata__rl_take(&w, (size_t)n_envs * dim, sizeof(float));
        *bytes = STRATA__ALIGN_UP(w.off, 64);
        return w.overflow ? strata__fail(STRATA_EOVERFLOW, "noise: size overflows") : STRATA_OK;
}

int strata_rl_noise_bytes(uint32_t dim, uint32_t n_envs, size_t *bytes)
{
        size_t d, x;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "noise: NULL bytes");
        return noise_layout(dim, n_envs, &d, &x, bytes);
}

int strata_rl_noise_init(struct strata_rl_noise *nn, struct strata_arena *arena, uint32_t dim,
                         uint32_t n_envs, int ou, float sigma, float theta, float mu, float dt,
                         uint64_t seed)
{
        size_t d, x, bytes;
        void *block;
        uint64_t w[7];

        if (!nn)
                return strata__fail(STRATA_EINVAL, "noise: NULL noise");
        if (ou != 0 && ou != 1)
                return strata__fail(STRATA_EINVAL, "noise: ou is 0 or 1, got %d", ou);
        if (!(isfinite(sigma) && sigma >= 0.0f) || !(isfinite(mu)) ||
            (ou && !(isfinite(theta) && theta >= 0.0f && isfinite(dt) && dt > 0.0f)))
                return strata__fail(STRATA_EINVAL,
                                    "noise: sigma %g and theta %g must be finite and >= 0, dt %g "
                                    "finite and > 0, mu %g finite",
                                    (double)sigma, (double)theta, (double)dt, (double)mu);
        STRATA_TRY(noise_layout(dim, n_envs, &d, &x, &bytes));
        w[0] = dim;
        w[1] = n_envs;
        w[2] = (uint64_t)ou;
        w[3] = (uint64_t)(sigma * 1e6f);
        w[4] = (uint64_t)(theta * 1e6f);
        w[5] = (uint64_t)(dt * 1e6f);
        w[6] = seed;
        STRATA_TRY(strata__rl_carve(arena, bytes, NOISE_MAGIC, strata__rl_digest(w, 7), &block));
        *nn = (struct strata_rl_noise){ .dim = dim, .n_envs = n_envs, .ou = ou, .sigma = sigma,
                                        .theta = theta, .mu = mu, .dt = dt, .seed = seed,
                                        .block = block, .bytes = bytes };
        return STRATA_OK;
}

/* The i-th standard normal of draw @p draw of environment @p env (Box-Muller, in pairs). */
static double normal(uint64_t seed, uint32_t env, uint64_t draw, uint32_t dim, uint32_t i)
{
        uint64_t pairs = (dim + 1) / 2;
        struct strata__philox4 r = strata__philox(seed, env, draw * pairs + i / 2);
        double u1 = ((double)r.v[0] + 1.0) * 0x1p-32, u2 = (double)r.v[1] * 0x1p-32;
        double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;

        return i % 2 ? rad * sin(ang) : rad * cos(ang);
}

/* strata_rl_noise_add(); a NULL @p action (strata__noise_skip(), Ornstein-Uhlenbeck) moves the
 * state only. */
static int noise_draw(struct strata_rl_noise *nn, uint32_t env, float *action)
{
        size_t d, x, bytes;
        uint64_t *draws;
        float *state;

        if (!nn || !nn->block)
                return strata__fail(STRATA_EINVAL, "noise: not initialised");
        if (env >= nn->n_envs)
                return strata__fail(STRATA_EINVAL, "noise: environment %u of %u, or NULL action",
                                    env, nn->n_envs);
        STRATA_TRY(noise_layout(nn->dim, nn->n_envs, &d, &x, &bytes));
        draws = (uint64_t *)((unsigned char *)nn->block + d) + env;
        state = (float *)((unsigned char *)nn->block + x) + (size_t)env * nn->dim;
        for (uint32_t i = 0; i < nn->dim; i++) {
                double z = normal(nn->seed, env, *draws, nn->dim, i);

                if (nn->ou) {
                        state[i] = (float)(state[i] + nn->theta * (nn->mu - state[i]) * nn->dt +
                                           nn->sigma * sqrt((double)nn->dt) * z);
                        if (action)
                                action[i] += state[i];
                } else {
                        action[i] += (float)(nn->sigma * z);
                }
        }
        ++*draws;
        return STRATA_OK;
}

int strata_rl_noise_add(struct strata_rl_noise *nn, uint32_t env, float *action)
{
        if (nn && nn->block && env < nn->n_envs && !action)
                return strata__fail(STRATA_EINVAL, "noise: environment %u of %u, or NULL action",
                                    env, nn->n_envs);
        return noise_draw(nn, env, action);
}

int strata__noise_skip(struct strata_rl_noise *nn, uint32_t from, uint32_t to)
{
        size_t d, x, bytes;

        if (!nn || !nn->block || from > to || to > nn->n_envs)
                return strata__fail(STRATA_EINVAL, "noise: environments [%u, %u) of %u", from,
                                    to, nn ? nn->n_envs : 0);
        STRATA_TRY(noise_layout(nn->dim, nn->n_envs, &d, &x, &bytes));
        for (uint32_t e = from; e < to; e++)
                if (nn->ou)
                        STRATA_TRY(noise_draw(nn, e, NULL));
                else
                        ((uint64_t *)((unsigned char *)nn->block + d))[e]++;
        return STRATA_OK;
}

int strata_rl_noise_reset(struct strata_rl_noise *nn, uint32_t env)
{
        size_t d, x, bytes;
        float *state;

        if (!nn || !nn->block)
                return strata__fail(STRATA_EINVAL, "noise: not initialised");
        if (env >= nn->n_envs)
                return strata__fail(STRATA_EINVAL, "noise: environment %u of %u", env,
                                    nn->n_envs);
        STRATA_TRY(noise_layout(nn->dim, nn->n_envs, &d, &x, &bytes));
        state = (float *)((unsigned char *)nn->block + x) + (size_t)env * nn->dim;
        for (uint32_t i = 0; i < nn->dim; i++)
                state[i] = 0.0f;
        return STRATA_OK;
}
