/*
 * A model's input gradient from a caller's output gradient (decision 0069), and DDPG's actor
 * trained through its critic with it: the gradient is a Linear's dout W and a deeper model's
 * central differences; it trains nothing (parameters unchanged, the next step as without
 * it); single and ddp agree; refusals change nothing; an actor, a critic and their Polyak
 * targets train together bitwise repeatably with no heap call, the actor's step raising Q.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define B RIG_BATCH
#define NP 4096

static float xs[B * 64], gs[B * 64], dx[B * 64], dx2[B * 64];

/* Deterministic values in [-1, 1). */
static void fill(float *v, size_t n, uint32_t seed)
{
        for (size_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                v[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
        }
}

static struct strata_batch rows(const float *x, int dim, const float *t, int tdim)
{
        return (struct strata_batch){ .x = x, .rows = B, .dim = dim, .t = t, .tdim = tdim };
}

/* The rig made one Linear 20 -> 4, or 20-16-tanh-4 (@p deep). */
static void linear_rig(struct rig *r, int deep)
{
        rig_init(r, 0);
        if (deep) {
                r->mods[1] = (struct strata_module){ .ops = &strata_tanh };
                return;
        }
        r->mods[0] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model.nmodules = 1;
}

static size_t params(struct strata_runtime *rt, float *out)
{
        const float *p;
        size_t n;

        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(out, p, n * sizeof(float));
        return n;
}

static void linear_case(enum strata_strategy_kind kind, int devices, float *got)
{
        static float before[NP], after[NP];
        struct strata_runtime *rt;
        struct strata_param w;
        struct strata_batch b;
        struct rig r;
        size_t n;

        linear_rig(&r, 0);
        r.cfg.strategy.kind = kind;
        r.cfg.strategy.devices = devices;
        rt = rig_open(&r.cfg);
        fill(xs, B * RIG_IN, 1);
        fill(gs, B * RIG_CLASSES, 2);
        b = rows(xs, RIG_IN, NULL, 0);
        n = params(rt, before);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, got, B * RIG_IN), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(params(rt, after), n);
        cr_assert(!memcmp(before, after, n * sizeof(float)), "input_grad trained the model");
        cr_assert_eq(strata_parameter(rt, 0, 0, &w), STRATA_OK);
        cr_assert_str_eq(w.name, "layers.0.weight");
        for (int i = 0; i < B; i++)
                for (int j = 0; j < RIG_IN; j++) {
                        double e = 0.0;

                        for (int k = 0; k < RIG_CLASSES; k++)
                                e += (double)gs[i * RIG_CLASSES + k] *
                                     (double)w.value[k * RIG_IN + j];
                        cr_assert_leq(fabs(got[i * RIG_IN + j] - e), 1e-5 * (1.0 + fabs(e)),
                                      "dx[%d][%d] = %g, dout W = %g", i, j,
                                      (double)got[i * RIG_IN + j], e);
                }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(models_input_grad, linear_is_dout_w_single_and_ddp)
{
        linear_case(STRATA_STRATEGY_SINGLE, 1, dx);
        linear_case(STRATA_STRATEGY_DDP, 2, dx2);
        for (int i = 0; i < B * RIG_IN; i++)
                cr_assert_leq(fabsf(dx[i] - dx2[i]), 1e-6f * (1.0f + fabsf(dx[i])));
}

/* The next training step after an input gradient is the step without it, bit for bit. */
Test(models_input_grad, trains_nothing)
{
        static float a[NP], c[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;
        size_t n;

        linear_rig(&r, 1);
        for (int with = 0; with < 2; with++) {
                rt = rig_open(&r.cfg);
                strata_loader_reset(&r.loader, r.idx, 256);
                cr_assert(strata_loader_next(&r.loader, &b));
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
                cr_assert(strata_loader_next(&r.loader, &b));
                if (with) {
                        fill(gs, B * RIG_CLASSES, 3);
                        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx,
                                                       B * RIG_IN),
                                     STRATA_OK, "%s", strata_last_error());
                }
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
                n = params(rt, with ? c : a);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert(!memcmp(a, c, n * sizeof(float)), "an input gradient changed the next step");
}

/* sum(dout . model(x)) through predict. */
static double f_of(struct strata_runtime *rt, const float *x)
{
        static float out[B * RIG_CLASSES];
        struct strata_batch b = rows(x, RIG_IN, NULL, 0);
        double s = 0.0;

        cr_assert_eq(strata_predict_step(rt, &b, out, B * RIG_CLASSES), STRATA_OK);
        for (int i = 0; i < B * RIG_CLASSES; i++)
                s += (double)gs[i] * out[i];
        return s;
}

Test(models_input_grad, deep_model_central_differences)
{
        static float xp[B * RIG_IN];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;
        const float h = 1e-2f;

        linear_rig(&r, 1);
        rt = rig_open(&r.cfg);
        fill(xs, B * RIG_IN, 4);
        fill(gs, B * RIG_CLASSES, 5);
        b = rows(xs, RIG_IN, NULL, 0);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN), STRATA_OK,
                     "%s", strata_last_error());
        for (int i = 0; i < B; i += 5)
                for (int j = 0; j < RIG_IN; j++) {
                        double up, down, fd;

                        memcpy(xp, xs, sizeof(xp));
                        xp[i * RIG_IN + j] += h;
                        up = f_of(rt, xp);
                        xp[i * RIG_IN + j] -= 2 * h;
                        down = f_of(rt, xp);
                        fd = (up - down) / (2.0 * h);
                        cr_assert_leq(fabs(fd - dx[i * RIG_IN + j]), 2e-3 * (1.0 + fabs(fd)),
                                      "dx[%d][%d] = %g, central difference %g", i, j,
                                      (double)dx[i * RIG_IN + j], fd);
                }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(models_input_grad, refused_and_nothing_written)
{
        static float before[NP], after[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;
        size_t n;

        linear_rig(&r, 1);
        rt = rig_open(&r.cfg);
        fill(xs, B * RIG_IN, 6);
        fill(gs, B * RIG_CLASSES, 7);
        b = rows(xs, RIG_IN, NULL, 0);
        n = params(rt, before);
        for (int i = 0; i < B * RIG_IN; i++)
                dx[i] = 7.0f;
        cr_assert_eq(strata_input_grad(rt, &b, NULL, 0, dx, B * RIG_IN), STRATA_EINVAL);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, NULL, 0), STRATA_EINVAL);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES - 1, dx, B * RIG_IN),
                     STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "dout holds 63 values"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN - 1),
                     STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "dx holds 319 values"), "%s",
                           strata_last_error());
        b.dim = RIG_IN - 1;
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN),
                     STRATA_EINVAL);
        b.dim = RIG_IN;
        cr_assert_eq(strata_model_input_grad(rt, 1, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN),
                     STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "model 1 not in [0, 1)"));
        for (int i = 0; i < B * RIG_IN; i++)
                cr_assert_eq(dx[i], 7.0f, "a refused call wrote dx[%d]", i);
        cr_assert_eq(params(rt, after), n);
        cr_assert(!memcmp(before, after, n * sizeof(float)));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN),
                     STRATA_EINVAL);
        /* dp: refused with the reason */
        linear_rig(&r, 1);
        r.cfg.strategy.kind = STRATA_STRATEGY_DP;
        r.cfg.strategy.devices = 2;
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN),
                     STRATA_ENOTSUP);
        cr_assert_not_null(strstr(strata_last_error(), "single, ddp"));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        /* fsdp (its parameters sharded): refused, nothing written */
        r.cfg.strategy.kind = STRATA_STRATEGY_FSDP;
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_input_grad(rt, &b, gs, B * RIG_CLASSES, dx, B * RIG_IN),
                     STRATA_ENOTSUP);
        cr_assert_not_null(strstr(strata_last_error(), "zero1 and zero2"));
        for (int i = 0; i < B * RIG_IN; i++)
                cr_assert_eq(dx[i], 7.0f, "a refused call wrote dx[%d]", i);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* ---- DDPG's actor through its critic ---- */

#define S RIG_IN /* state width */
#define A 2      /* action width */

struct agent {
        struct strata_module cm[3], am[3];
        struct strata_model critic, actor;
        struct strata_models set;
        struct strata_config cfg;
};

/* Model 0 the critic (S + A -> 16 -> relu -> 1, MSE), 1 the actor (S -> 8 -> tanh -> A),
 * 2 and 3 their targets. */
static void agent_init(struct agent *g, enum strata_strategy_kind kind, int devices)
{
        struct strata_optim ao = STRATA_OPTIM_INIT;

        memset(g, 0, sizeof(*g));
        g->cm[0] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        g->cm[1] = (struct strata_module){ .ops = &strata_relu };
        g->cm[2] = (struct strata_module){ .ops = &strata_linear, .out = 1 };
        g->critic = (struct strata_model){ .in_features = S + A, .nmodules = 3,
                                           .modules = g->cm, .loss = &strata_mse };
        g->am[0] = (struct strata_module){ .ops = &strata_linear, .out = 8 };
        g->am[1] = (struct strata_module){ .ops = &strata_tanh };
        g->am[2] = (struct strata_module){ .ops = &strata_linear, .out = A };
        g->actor = (struct strata_model){ .in_features = S, .nmodules = 3, .modules = g->am,
                                          .loss = &strata_given_gradient,
                                          .reduction = STRATA_REDUCTION_SUM };
        ao.momentum = 0.0f;
        ao.lr = 1e-3f;
        g->set = (struct strata_models)STRATA_MODELS_INIT;
        cr_assert_eq(strata_models_add(&g->set, &g->actor, A, &ao, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_models_add_target(&g->set, 0, 0.01f, NULL), STRATA_OK);
        cr_assert_eq(strata_models_add_target(&g->set, 1, 0.01f, NULL), STRATA_OK);
        g->cfg = (struct strata_config)STRATA_CONFIG_INIT;
        g->cfg.model = &g->critic;
        g->cfg.classes = 1;
        g->cfg.batch = B;
        g->cfg.seed = 3;
        g->cfg.optim.lr = 0.01f;
        g->cfg.strategy.kind = kind;
        g->cfg.strategy.devices = devices;
        g->cfg.models = &g->set;
}

static float sa[B * (S + A)], act[B * A], q[B], dq[B], dsa[B * (S + A)], ga[B * A], tq[B];

/* [s, a] rows of the critic from states @p s and actions act. */
static void join_rows(const float *s)
{
        for (int i = 0; i < B; i++) {
                memcpy(sa + i * (S + A), s + i * S, S * sizeof(float));
                memcpy(sa + i * (S + A) + S, act + i * A, A * sizeof(float));
        }
}

/* The critic's mean Q of the actor's actions on states @p s. */
static double mean_q(struct strata_runtime *rt, const float *s)
{
        struct strata_batch bs = rows(s, S, NULL, 0), bsa;
        double m = 0.0;

        cr_assert_eq(strata_model_predict_step(rt, 1, &bs, act, B * A), STRATA_OK);
        join_rows(s);
        bsa = rows(sa, S + A, NULL, 0);
        cr_assert_eq(strata_predict_step(rt, &bsa, q, B), STRATA_OK);
        for (int i = 0; i < B; i++)
                m += q[i];
        return m / B;
}

/* One DDPG update on states @p s: the critic towards targets, the actor up the critic's Q. */
static void ddpg_step(struct strata_runtime *rt, const float *s)
{
        struct strata_batch bs = rows(s, S, NULL, 0), bsa, ba;

        cr_assert_eq(strata_model_predict_step(rt, 1, &bs, act, B * A), STRATA_OK);
        join_rows(s);
        for (int i = 0; i < B; i++)
                tq[i] = s[i * S] - 0.5f * s[i * S + 1]; /* a fixed reward-like target */
        bsa = rows(sa, S + A, tq, 1);
        cr_assert_eq(strata_train_step(rt, &bsa, NULL), STRATA_OK, "%s", strata_last_error());
        for (int i = 0; i < B; i++)
                dq[i] = -1.0f / B; /* the actor's loss: -mean Q */
        bsa = rows(sa, S + A, NULL, 0);
        cr_assert_eq(strata_model_input_grad(rt, 0, &bsa, dq, B, dsa, B * (S + A)), STRATA_OK,
                     "%s", strata_last_error());
        for (int i = 0; i < B; i++)
                memcpy(ga + i * A, dsa + i * (S + A) + S, A * sizeof(float));
        ba = rows(s, S, ga, A);
        cr_assert_eq(strata_model_train_step(rt, 1, &ba, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_model_polyak_update(rt, 2), STRATA_OK);
        cr_assert_eq(strata_model_polyak_update(rt, 3), STRATA_OK);
}

static void ddpg(enum strata_strategy_kind kind, int devices, float *out, size_t *n)
{
        static float s[B * S];
        struct strata_memory_info mi;
        struct strata_runtime *rt;
        struct agent g;
        const float *p;
        double q0, q1;
        long calls;

        agent_init(&g, kind, devices);
        rt = rig_open(&g.cfg);
        strata_heapcount_start();
        for (int k = 0; k < 20; k++) {
                fill(s, B * S, 100 + (uint32_t)k);
                ddpg_step(rt, s);
        }
        calls = strata_heapcount_stop();
        if (calls != -1) /* -1: a sanitizer owns malloc in this build, nothing counted */
                cr_assert_eq(calls, 0, "%ld heap calls during DDPG's steps", calls);
        /* the critic held still, one more actor step raises its Q */
        fill(s, B * S, 7);
        q0 = mean_q(rt, s);
        {
                struct strata_batch bsa = rows(sa, S + A, NULL, 0), ba = rows(s, S, ga, A);

                for (int i = 0; i < B; i++)
                        dq[i] = -1.0f / B;
                cr_assert_eq(strata_model_input_grad(rt, 0, &bsa, dq, B, dsa, B * (S + A)),
                             STRATA_OK);
                for (int i = 0; i < B; i++)
                        memcpy(ga + i * A, dsa + i * (S + A) + S, A * sizeof(float));
                cr_assert_eq(strata_model_train_step(rt, 1, &ba, NULL), STRATA_OK);
        }
        q1 = mean_q(rt, s);
        cr_assert_gt(q1, q0, "the actor's step did not raise Q: %g -> %g", q0, q1);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned);
        cr_assert_eq(strata_model_parameters(rt, 1, 0, &p, n), STRATA_OK);
        memcpy(out, p, *n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void ddpg_twice(enum strata_strategy_kind kind, int devices)
{
        static float a[NP], b[NP];
        size_t na, nb;

        ddpg(kind, devices, a, &na);
        ddpg(kind, devices, b, &nb);
        cr_assert_eq(na, nb);
        cr_assert(!memcmp(a, b, na * sizeof(float)), "the actor does not repeat bitwise");
}

Test(models_input_grad, ddpg_single)
{
        ddpg_twice(STRATA_STRATEGY_SINGLE, 1);
}

Test(models_input_grad, ddpg_ddp)
{
        ddpg_twice(STRATA_STRATEGY_DDP, 2);
}

/* zero2 (decision 0116): the critic's input gradient and both models' steps, bitwise ddp's. */
Test(models_input_grad, ddpg_zero2_is_ddp)
{
        static float z[NP], d[NP];
        size_t nz, nd;

        ddpg_twice(STRATA_STRATEGY_ZERO2, 2);
        ddpg(STRATA_STRATEGY_ZERO2, 2, z, &nz);
        ddpg(STRATA_STRATEGY_DDP, 2, d, &nd);
        cr_assert_eq(nz, nd);
        cr_assert(!memcmp(z, d, nz * sizeof(float)), "zero2's actor differs from ddp's");
}
