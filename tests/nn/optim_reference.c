/* SGD and AdamW follow PyTorch's update rules, checked against scalar references here. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define N 7

static void sgd_ref(float lr, float mu, float damp, float wd, int nesterov, int t, double *p,
                    double g, double *buf)
{
        double d = g + wd * *p;

        if (mu != 0.0f) {
                *buf = t == 1 ? d : mu * *buf + (1.0 - damp) * d;
                d = nesterov ? d + mu * *buf : *buf;
        }
        *p -= lr * d;
}

static void run_sgd(float mu, float damp, float wd, int nesterov)
{
        struct strata_optim o = STRATA_OPTIM_INIT;
        float p[N], g[N], st[N];
        double rp[N], rb[N] = { 0 };

        o.lr = 0.1f;
        o.momentum = mu;
        o.dampening = damp;
        o.weight_decay = wd;
        o.nesterov = nesterov;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        for (int i = 0; i < N; i++) {
                p[i] = (float)(rp[i] = 0.5 * i - 1.0);
                st[i] = 0.0f;
        }
        for (int t = 1; t <= 5; t++) {
                for (int i = 0; i < N; i++) {
                        g[i] = sinf((float)(t * N + i));
                        sgd_ref(o.lr, mu, damp, wd, nesterov, t, &rp[i], g[i], &rb[i]);
                }
                strata_optim_update(&o, (uint64_t)t, p, g, st, N);
        }
        for (int i = 0; i < N; i++)
                cr_assert(fabs(p[i] - rp[i]) < 1e-5, "p[%d] %g vs %g", i, p[i], rp[i]);
}

Test(optim_reference, sgd_plain)
{
        run_sgd(0.0f, 0.0f, 0.0f, 0);
}

Test(optim_reference, sgd_momentum_weight_decay)
{
        run_sgd(0.9f, 0.0f, 1e-2f, 0);
}

Test(optim_reference, sgd_dampening)
{
        run_sgd(0.8f, 0.3f, 0.0f, 0);
}

Test(optim_reference, sgd_nesterov)
{
        run_sgd(0.9f, 0.0f, 1e-3f, 1);
}

Test(optim_reference, adamw)
{
        struct strata_optim o = STRATA_OPTIM_INIT;
        float p[N], g[N], st[2 * N] = { 0 };
        double rp[N], m[N] = { 0 }, v[N] = { 0 };

        o.kind = STRATA_OPTIM_ADAMW;
        o.lr = 1e-2f;
        o.weight_decay = 0.1f;
        o.momentum = 0.0f;
        cr_assert_eq(strata_optim_state_per_param(&o), 2);
        for (int i = 0; i < N; i++)
                p[i] = (float)(rp[i] = 0.3 * i - 1.0);
        for (int t = 1; t <= 6; t++) {
                for (int i = 0; i < N; i++) {
                        double gi = g[i] = cosf((float)(t + 3 * i));

                        rp[i] *= 1.0 - 1e-2 * 0.1;
                        m[i] = 0.9 * m[i] + 0.1 * gi;
                        v[i] = 0.999 * v[i] + 0.001 * gi * gi;
                        rp[i] -= 1e-2 * (m[i] / (1 - pow(0.9, t))) /
                                 (sqrt(v[i] / (1 - pow(0.999, t))) + 1e-8);
                }
                strata_optim_update(&o, (uint64_t)t, p, g, st, N);
        }
        for (int i = 0; i < N; i++)
                cr_assert(fabs(p[i] - rp[i]) < 1e-5, "p[%d] %g vs %g", i, p[i], rp[i]);
}

Test(optim_reference, bad_hyperparameters)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        o.lr = 0.1f;
        o.momentum = 1.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        o.momentum = 0.0f;
        o.nesterov = 1;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        o.nesterov = 0;
        o.weight_decay = -1.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        o.weight_decay = 0.0f;
        o.kind = (enum strata_optim_kind)7;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        cr_assert_eq(strata_optim_check(NULL), STRATA_EINVAL);
}

/*
 * Ranges that cover [0, n) update bitwise what one whole update does (dp splits the master's
 * step with them); an empty range and the part of a range past n change nothing.
 */
static void ranges_match_whole(struct strata_optim o)
{
        enum { M = 101 };
        static float p[2][M], g[2][M], st[2][2 * M];
        const size_t cut[] = { 0, 16, 17, 64, 100, M };

        for (int i = 0; i < M; i++) {
                p[0][i] = p[1][i] = 0.01f * (float)i - 0.3f;
                st[0][i] = st[1][i] = st[0][M + i] = st[1][M + i] = 0.0f;
        }
        for (uint64_t t = 1; t <= 4; t++) {
                for (int i = 0; i < M; i++)
                        g[0][i] = g[1][i] = cosf((float)(t * M + (uint64_t)i));
                strata_optim_update(&o, t, p[0], g[0], st[0], M);
                for (size_t k = 0; k + 1 < sizeof(cut) / sizeof(cut[0]); k++)
                        strata_optim_update_range(&o, t, p[1], g[1], st[1], M, cut[k],
                                                  cut[k + 1] + (k == 4 ? 50 : 0));
                strata_optim_update_range(&o, t, p[1], g[1], st[1], M, 40, 40);
                strata_optim_update_range(&o, t, p[1], g[1], st[1], M, 90, 10);
                cr_assert_eq(memcmp(p[0], p[1], sizeof(p[0])), 0, "step %d: parameters", (int)t);
                cr_assert_eq(memcmp(st[0], st[1], sizeof(st[0])), 0, "step %d: state", (int)t);
        }
}

Test(optim_reference, ranges_match_whole_update)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.momentum = 0.9f;
        o.weight_decay = 0.01f;
        o.nesterov = 1;
        ranges_match_whole(o);
        o = (struct strata_optim)STRATA_OPTIM_INIT;
        o.kind = STRATA_OPTIM_ADAMW;
        o.lr = 0.01f;
        o.weight_decay = 0.1f;
        ranges_match_whole(o);
}
