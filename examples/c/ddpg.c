/*
 * Several models on one runtime from C (decision 0069): DDPG's actor and critic, each with its
 * optimizer, and a Polyak target of each, trained together on the same workers.
 *
 * The task is one step long (a contextual bandit): a state s of S values, an action a of A in
 * [-1, 1]; the reward is -|a - tanh(M s)|^2 for a fixed matrix M, so the best action is
 * tanh(M s). Each update: the actor acts (plus a fixed exploration noise), the critic (input
 * [s, a], MSE) learns the reward, then the actor follows the critic up: the critic's input
 * gradient of -mean Q (strata_model_input_grad()), its action columns, is the actor's output
 * gradient, applied by the loss that takes it as given (strata_given_gradient). Both targets
 * then move by Polyak averaging (tau 0.01; a longer task would take its TD targets from them).
 *
 * Every process generates the whole batch (the same values); each computes and reads only the
 * rows its devices own, so one process of D devices (ddp) and D processes of one device
 * (`mpirun -np D`, strategy mpi) train bitwise the same models.
 *
 * Usage: ddpg [STEPS [DEVICES [mpi]]] [--export PREFIX]: PREFIX-critic.safetensors,
 * -actor, -critic-target, -actor-target written by global rank 0. Prints the mean reward of
 * this process's rows before and after, then one JSON line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define S 4      /* state */
#define A 2      /* action */
#define B 64     /* batch */
#define HIDDEN 32

static float s[B * S], act[B * A], sa[B * (S + A)], r[B], dq[B], dsa[B * (S + A)], g[B * A];

/* Deterministic values in [-1, 1): the same on every process. */
static void fill(float *v, int n, unsigned seed)
{
        for (int i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                v[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
        }
}

/* The reward of action row @p a in state row @p x: -|a - tanh(M x)|^2, M fixed. */
static float reward(const float *x, const float *a)
{
        static const float m[A][S] = { { 1.0f, -0.5f, 0.25f, 0.0f },
                                       { 0.0f, 0.75f, -1.0f, 0.5f } };
        float d = 0.0f;

        for (int j = 0; j < A; j++) {
                float best = 0.0f;

                for (int k = 0; k < S; k++)
                        best += m[j][k] * x[k];
                best = tanhf(best) - a[j];
                d += best * best;
        }
        return -d;
}

static struct strata_batch rows(const float *x, int dim, const float *t, int tdim)
{
        struct strata_batch b;

        memset(&b, 0, sizeof(b));
        b.x = x;
        b.rows = B;
        b.dim = dim;
        b.t = t;
        b.tdim = tdim;
        return b;
}

/* The actor's actions on s (this process's rows), into act. */
static int actions(struct strata_runtime *rt)
{
        struct strata_batch bs = rows(s, S, NULL, 0);

        return strata_model_predict_step(rt, 1, &bs, act, B * A);
}

/* [s, act] rows of the critic, the actions moved by @p noise. */
static void join(const float *noise)
{
        for (int i = 0; i < B; i++) {
                memcpy(sa + i * (S + A), s + i * S, S * sizeof(float));
                for (int j = 0; j < A; j++)
                        sa[i * (S + A) + S + j] = act[i * A + j] +
                                                  (noise ? noise[i * A + j] : 0.0f);
        }
}

/* One update on states of seed @p k. */
static int update(struct strata_runtime *rt, unsigned k)
{
        static float noise[B * A];
        struct strata_batch bsa, ba;
        int rc;

        fill(s, B * S, 2 * k + 1);
        fill(noise, B * A, 2 * k + 2);
        for (int i = 0; i < B * A; i++)
                noise[i] *= 0.3f;
        if ((rc = actions(rt)) != STRATA_OK)
                return rc;
        join(noise);
        for (int i = 0; i < B; i++)
                r[i] = reward(s + i * S, sa + i * (S + A) + S);
        bsa = rows(sa, S + A, r, 1);
        if ((rc = strata_train_step(rt, &bsa, NULL)) != STRATA_OK) /* the critic */
                return rc;
        join(NULL);
        for (int i = 0; i < B; i++)
                dq[i] = -1.0f / B; /* the actor's loss: -mean Q */
        bsa = rows(sa, S + A, NULL, 0);
        if ((rc = strata_model_input_grad(rt, 0, &bsa, dq, B, dsa, B * (S + A))) != STRATA_OK)
                return rc;
        for (int i = 0; i < B; i++)
                memcpy(g + i * A, dsa + i * (S + A) + S, A * sizeof(float));
        ba = rows(s, S, g, A);
        if ((rc = strata_model_train_step(rt, 1, &ba, NULL)) != STRATA_OK)
                return rc;
        if ((rc = strata_model_polyak_update(rt, 2)) != STRATA_OK)
                return rc;
        return strata_model_polyak_update(rt, 3);
}

/* The mean reward of the actor's actions over this process's rows, on fixed test states. */
static double mean_reward(struct strata_runtime *rt, int lo, int hi)
{
        double sum = 0.0;

        fill(s, B * S, 12345u);
        if (actions(rt) != STRATA_OK)
                return NAN;
        for (int i = lo; i < hi; i++)
                sum += reward(s + i * S, act + i * A);
        return sum / (hi - lo);
}

static int fail(const char *what, int rc)
{
        fprintf(stderr, "ddpg: %s: %s (%s)\n", what, strata_strerror(rc), strata_last_error());
        return 1;
}

int main(int argc, char **argv)
{
        static struct strata_module cm[3], am[3];
        static struct strata_model critic, actor;
        static struct strata_models set = STRATA_MODELS_INIT;
        static const char *names[4] = { "critic", "actor", "critic-target", "actor-target" };
        struct strata_optim ao = STRATA_OPTIM_INIT;
        struct strata_config cfg;
        struct strata_runtime *rt;
        const char *prefix = NULL;
        int steps = 300, devices = 2, mpi = 0, n = 0, lo, hi, world, rank0, rc;
        double before, after;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--export") && i + 1 < argc)
                        prefix = argv[++i];
                else if (!strcmp(argv[i], "mpi"))
                        mpi = 1;
                else if (n++ == 0)
                        steps = atoi(argv[i]);
                else
                        devices = atoi(argv[i]);
        }
        cm[0] = (struct strata_module){ .ops = &strata_linear, .out = HIDDEN };
        cm[1] = (struct strata_module){ .ops = &strata_relu };
        cm[2] = (struct strata_module){ .ops = &strata_linear, .out = 1 };
        critic = (struct strata_model){ .in_features = S + A, .nmodules = 3, .modules = cm,
                                        .loss = &strata_mse };
        am[0] = (struct strata_module){ .ops = &strata_linear, .out = HIDDEN };
        am[1] = (struct strata_module){ .ops = &strata_tanh };
        am[2] = (struct strata_module){ .ops = &strata_linear, .out = A };
        actor = (struct strata_model){ .in_features = S, .nmodules = 3, .modules = am,
                                       .loss = &strata_given_gradient,
                                       .reduction = STRATA_REDUCTION_SUM };
        ao.kind = STRATA_OPTIM_ADAMW;
        ao.lr = 1e-3f;
        if ((rc = strata_models_add(&set, &actor, A, &ao, NULL)) != STRATA_OK ||
            (rc = strata_models_add_target(&set, 0, 0.01f, NULL)) != STRATA_OK ||
            (rc = strata_models_add_target(&set, 1, 0.01f, NULL)) != STRATA_OK)
                return fail("models", rc);
        strata_config_init(&cfg);
        cfg.model = &critic;
        cfg.classes = 1;
        cfg.batch = B;
        cfg.seed = 7;
        cfg.optim.kind = STRATA_OPTIM_ADAMW;
        cfg.optim.lr = 3e-3f;
        cfg.strategy.kind = mpi ? STRATA_STRATEGY_MPI : devices > 1 ? STRATA_STRATEGY_DDP
                                                                    : STRATA_STRATEGY_SINGLE;
        cfg.strategy.devices = devices;
        cfg.device.bind = STRATA_BIND_NONE;
        cfg.models = &set;
        if ((rc = strata_init(&rt, &cfg)) != STRATA_OK || (rc = strata_connect(rt)) != STRATA_OK)
                return fail("init", rc);
        world = strata_world_size(rt);
        rank0 = strata_is_global_zero(rt) ? 0 : -1; /* process 0 reports */
        lo = 0;
        hi = B * devices / world; /* process 0's rows: its devices' share of the batch */
        before = mean_reward(rt, lo, hi);
        for (int k = 0; k < steps; k++)
                if ((rc = update(rt, (unsigned)k)) != STRATA_OK)
                        return fail("update", rc);
        after = mean_reward(rt, lo, hi);
        for (int k = 0; prefix && rank0 == 0 && k < 4; k++) {
                char path[512];

                snprintf(path, sizeof(path), "%s-%s.safetensors", prefix, names[k]);
                if ((rc = strata_model_export_safetensors(rt, k, path)) != STRATA_OK)
                        return fail("export", rc);
        }
        if (rank0 == 0) {
                printf("ddpg: %d updates on %d device(s) of %d: mean reward %.4f -> %.4f\n",
                       steps, devices, world, before, after);
                printf("{\"steps\": %d, \"world\": %d, \"reward_before\": %.6f, "
                       "\"reward_after\": %.6f}\n", steps, world, before, after);
        }
        rc = strata_teardown(rt);
        return rc == STRATA_OK ? 0 : fail("teardown", rc);
}
