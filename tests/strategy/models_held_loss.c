/*
 * strata_models_train_step() without metrics judges its models' losses together, after the
 * last model's step, whose exchange of metrics carries them between processes (decision
 * 0097): a loss that is not finite while every gradient is (an error squared past the float
 * range: the step is taken) is STRATA_ENONFINITE naming its model on every device and every
 * process, the call's later models having stepped too. With metrics each model's loss is
 * judged after its own step, as before. A gradient that is not finite ends the call at once
 * either way, nothing changed. Across 2 processes the last step's flags (the held losses, its
 * own loss, a stop request) cross on its gradients' exchanges instead (decision 0108).
 */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "strata/process.h"
#include "strategy/alike.h"
#include "strategy/internal.h"
#include "strategy/job.h"
#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define NP 1024

/* Model @p k's parameters on device 0 into @p out; their count. */
static size_t params(struct strata_runtime *rt, int k, float *out)
{
        const float *p;
        size_t n;

        cr_assert_eq(strata_model_parameters(rt, k, 0, &p, &n), STRATA_OK);
        cr_assert_leq(n, NP);
        memcpy(out, p, n * sizeof(float));
        return n;
}

/* Whether model @p k's parameters on device 0 are @p ref's @p n. */
static int same(struct strata_runtime *rt, int k, const float *ref, size_t n)
{
        static float now[NP];

        return params(rt, k, now) == n && !memcmp(now, ref, n * sizeof(float));
}

/*
 * One call on a batch whose error 1e20 squares past the float range in model 0's loss (its
 * gradients stay finite): without metrics both models step and the call returns
 * STRATA_ENONFINITE naming model 0; with metrics model 0 steps alone, as before; model 0's
 * step is the same bits either way.
 */
static void held(enum strata_strategy_kind kind, int devices)
{
        static const int order[2] = { 0, 1 };
        static float p0[NP], p1[NP], q0[NP];
        struct strata_metrics m[2];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig_two t;
        size_t n0, n1;

        rig_two_init(&t, &strata_mse);
        t.r.cfg.strategy.kind = kind;
        t.r.cfg.strategy.devices = devices;
        b = rig_first_batch(&t.r, 1e20f);
        rt = rig_open(&t.r.cfg);
        n0 = params(rt, 0, p0);
        n1 = params(rt, 1, p1);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, NULL), STRATA_ENONFINITE,
                     "the held loss of model 0 is the call's verdict");
        cr_assert_not_null(strstr(strata_last_error(), "model 0: step 0: the loss is not finite"),
                           "%s", strata_last_error());
        cr_assert_not(same(rt, 0, p0, n0), "model 0 stepped (its gradients are finite)");
        cr_assert_not(same(rt, 1, p1, n1), "model 1 stepped before the verdict");
        params(rt, 0, q0);
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        b = rig_first_batch(&t.r, 1e20f);
        rt = rig_open(&t.r.cfg);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, m), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "the loss is inf"), "%s",
                           strata_last_error());
        cr_assert(same(rt, 0, q0, n0), "model 0's step is the held call's");
        cr_assert(same(rt, 1, p1, n1), "with metrics the call ends after model 0");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(models_held_loss, single_and_ddp_judge_after_the_last_model, .timeout = 60)
{
        held(STRATA_STRATEGY_SINGLE, 1);
        held(STRATA_STRATEGY_DDP, 2);
}

/* An error of 3e38 makes model 0's gradients infinite: the call ends there, nothing changed. */
Test(models_held_loss, a_gradient_ends_the_call_at_once, .timeout = 60)
{
        static const int order[2] = { 0, 1 };
        static float p0[NP], p1[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig_two t;
        size_t n0, n1;

        rig_two_init(&t, &strata_mse);
        t.r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        t.r.cfg.strategy.devices = 2;
        b = rig_first_batch(&t.r, 3e38f); /* twice the error overflows: its gradient is infinite */
        rt = rig_open(&t.r.cfg);
        n0 = params(rt, 0, p0);
        n1 = params(rt, 1, p1);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, NULL), STRATA_ENONFINITE,
                     "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "a gradient is NaN"), "%s",
                           strata_last_error());
        cr_assert(same(rt, 0, p0, n0), "model 0's step refused");
        cr_assert(same(rt, 1, p1, n1), "model 1 not run");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * A held loss that is not finite and the last model's step refused (its gradient counted not
 * finite: accumulate = 2, model 0 inside its window, model 1's window ended): the call says
 * both, model 0's loss first, then model 1's refusal, model 1 unchanged.
 */
Test(models_held_loss, the_last_models_refusal_is_said_after_the_held_loss, .timeout = 60)
{
        static const int order[2] = { 0, 1 };
        static float p1[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig_two t;
        size_t n1;

        rig_two_init(&t, &strata_mse);
        t.r.cfg.train.accumulate = 2;
        b = rig_first_batch(&t.r, 1e20f);
        rt = rig_open(&t.r.cfg);
        n1 = params(rt, 1, p1);
        cr_assert_eq(strata_model_end_accumulation_window(rt, 1), STRATA_OK);
        cr_assert_eq(strata__inject_nonfinite_grad(rt, 0), STRATA_OK);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, NULL), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "model 0: step 0: the loss is not finite"),
                           "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "then model 1: step 0: a gradient is NaN"),
                           "%s", strata_last_error());
        cr_assert(same(rt, 1, p1, n1), "model 1's step refused");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* ---- processes: the held loss crosses on the last model's exchange ---- */

static struct rig_two spawn_two; /* set up by the parent: the children inherit it */

/*
 * Rank 1 alone holds the row whose loss is not finite; both must refuse naming model 0. Rank
 * 0 returns its status and whether its message names model 0; exit codes say what failed.
 */
static int spawn_child(int rank, int size, void *arg)
{
        static const int order[2] = { 0, 1 };
        struct strata_runtime *rt;
        struct strata_config c = spawn_two.r.cfg;
        struct strata_batch b = rig_first_batch(&spawn_two.r, 1e20f);
        int got[2];

        (void)size, (void)arg;
        c.strategy.kind = STRATA_STRATEGY_SPAWN;
        c.strategy.devices = 1;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        got[0] = strata_models_train_step(rt, order, 2, &b, NULL);
        got[1] = strstr(strata_last_error(), "model 0: step 0: the loss is not finite") != NULL;
        if (rank == 1 && (got[0] != STRATA_ENONFINITE || !got[1]))
                return 11;
        if (strata_state(rt) != STRATA_STATE_READY)
                return 12;
        if (rank == 0 && strata_spawn_return(got, sizeof(got)))
                return 13;
        return strata_teardown(rt) == STRATA_OK ? 0 : 14;
}

Test(models_held_loss, processes_all_refuse, .timeout = 120)
{
        struct strata_spawn_result res;
        int got[2] = { 0, 0 };

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        cli_serial_jobs(); /* one job at a time: processes.c watches /dev/shm */
        rig_two_init(&spawn_two, &strata_mse);
        cr_assert_eq(strata_spawn(2, spawn_child, NULL, 30.0, got, sizeof(got), &res),
                     STRATA_OK, "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
        cr_assert_eq(got[0], STRATA_ENONFINITE, "rank 0 learnt rank 1's loss (%d)", got[0]);
        cr_assert(got[1], "and names model 0");
}

/* ---- processes: what a process passes alone does not change the exchanges ---- */

struct alone {
        int rc[2];      /* rank 0's two calls */
        int named[2];   /* and whether their messages say the expected */
        float p[2][NP]; /* rank 0's models' parameters after the first call */
};

/*
 * Rank 0 alone passes metrics (@p arg NULL) or records a trace (@p arg its path): the call's
 * exchanges must be every process's. With metrics on one process no process holds: the error
 * 1e20 in rank 1's rows ends the call at model 0 on both, model 1 not run. With a trace on one
 * process each holds as the others: a clean batch trains (its bits returned), then the error
 * is STRATA_ENONFINITE naming model 0 on both.
 */
static int alone_child(int rank, int size, void *arg)
{
        static const int order[2] = { 0, 1 };
        static struct alone g;
        static float p1[NP];
        struct strata_config c = spawn_two.r.cfg;
        struct strata_metrics m[2];
        struct strata_runtime *rt;
        struct strata_batch b = rig_first_batch(&spawn_two.r, 0.0f);
        const char *trace = arg;
        size_t n1;

        (void)size;
        c.strategy.kind = STRATA_STRATEGY_SPAWN;
        c.strategy.devices = 1;
        if (rank == 0)
                c.trace.path = trace;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        if (trace) {
                g.rc[0] = strata_models_train_step(rt, order, 2, &b, NULL);
                g.named[0] = 1;
                params(rt, 0, g.p[0]);
                params(rt, 1, g.p[1]);
                b = rig_first_batch(&spawn_two.r, 1e20f);
                g.rc[1] = strata_models_train_step(rt, order, 2, &b, NULL);
                g.named[1] = strstr(strata_last_error(), "model 0: step 1: the loss is not "
                                                         "finite") != NULL;
        } else {
                n1 = params(rt, 1, p1);
                b = rig_first_batch(&spawn_two.r, 1e20f);
                g.rc[0] = g.rc[1] = strata_models_train_step(rt, order, 2, &b,
                                                             rank == 0 ? m : NULL);
                g.named[0] = strstr(strata_last_error(), "the loss is inf") != NULL;
                g.named[1] = same(rt, 1, p1, n1);
        }
        if (rank == 1 && (g.rc[0] != (trace ? STRATA_OK : STRATA_ENONFINITE) ||
                          g.rc[1] != STRATA_ENONFINITE || !g.named[0] || !g.named[1]))
                return 11;
        if (strata_state(rt) != STRATA_STATE_READY)
                return 12;
        if (rank == 0 && strata_spawn_return(&g, sizeof(g)))
                return 13;
        return strata_teardown(rt) == STRATA_OK ? 0 : 14;
}

/* Two processes of spawn_two's model running @p child on @p arg; rank 0's report in @p out. */
static void spawn_pair(int (*child)(int, int, void *), const char *arg, void *out, size_t size)
{
        struct strata_spawn_result res;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        cli_serial_jobs(); /* one job at a time: processes.c watches /dev/shm */
        rig_two_init(&spawn_two, &strata_mse);
        spawn_two.r.cfg.device.timeout_s = 10.0; /* a mismatch or a missed flag ends, not hangs */
        cr_assert_eq(strata_spawn(2, child, (void *)arg, 30.0, out, size, &res), STRATA_OK,
                     "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
}

static void alone(const char *trace, struct alone *g)
{
        spawn_pair(alone_child, trace, g, sizeof(*g));
}

Test(models_held_loss, metrics_on_one_process_hold_nowhere, .timeout = 120)
{
        static struct alone g;

        alone(NULL, &g);
        cr_assert_eq(g.rc[0], STRATA_ENONFINITE, "rank 0 learnt rank 1's loss (%d)", g.rc[0]);
        cr_assert(g.named[0], "at model 0's own exchange");
        cr_assert(g.named[1], "model 1 not run");
}

Test(models_held_loss, a_trace_on_one_process_holds_as_the_others, .timeout = 120)
{
        static const int order[2] = { 0, 1 };
        static struct alone g;
        static float q[NP];
        char path[] = "/tmp/strata-held-trace-XXXXXX";
        struct strata_runtime *rt;
        struct strata_batch b;
        size_t n;
        int fd;

        if (!strcmp(STRATA_SAN, "tsan")) /* alone() skips there: no file left behind */
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        alone(path, &g);
        unlink(path);
        cr_assert_eq(g.rc[0], STRATA_OK);
        cr_assert_eq(g.rc[1], STRATA_ENONFINITE, "rank 0 learnt rank 1's loss (%d)", g.rc[1]);
        cr_assert(g.named[1], "and names model 0");
        /* the same bits as the public call on one process of 2 devices, no trace */
        spawn_two.r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        spawn_two.r.cfg.strategy.devices = 2;
        rt = rig_open(&spawn_two.r.cfg);
        b = rig_first_batch(&spawn_two.r, 0.0f);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, NULL), STRATA_OK);
        for (int k = 0; k < 2; k++) {
                n = params(rt, k, q);
                cr_assert(!memcmp(q, g.p[k], n * sizeof(float)), "model %d's bits", k);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* ---- processes: the flags cross on the gradients' exchanges (decision 0108) ---- */

struct carried {
        int rc[3];         /* rank 0's calls */
        uint64_t msgs[3];  /* and the messages each sent over the coordinators' communicator */
};

/*
 * Rank 0 calls, then reports. @p arg "loss": one model whose loss is not finite in rank 1's
 * rows alone (its gradients finite): both return STRATA_ENONFINITE ("loss2": on 2 devices a
 * process, the row in its second device's rows, whose bit must cross too). "stop": rank 1
 * alone asks to stop before a clean call of two models: the call trains on both, and the next is
 * STRATA_ESTOPPED on both, at the same step. "onerow": a batch of one row, so that one
 * process has none: its mean loss is 0 / 0, and both must still return STRATA_OK (the loss's
 * bit, not that mean, is the verdict). Neither call exchanges metrics: the alike call
 * sends nothing over the coordinators' communicator, the public call its batch's agreement.
 */
static int carried_child(int rank, int size, void *arg)
{
        static const int order[2] = { 0, 1 };
        static struct carried g;
        struct strata_config c = spawn_two.r.cfg;
        struct strata_runtime *rt;
        struct strata_batch b;
        int loss = strncmp(arg, "loss", 4) == 0, one = !strcmp(arg, "onerow");

        (void)size;
        c.strategy.kind = STRATA_STRATEGY_SPAWN;
        c.strategy.devices = !strcmp(arg, "loss2") ? 2 : 1;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        b = rig_first_batch(&spawn_two.r, loss ? 1e20f : 0.0f);
        if (one)
                b.rows = 1; /* one process has no row: its own mean is 0 / 0 */
        if (!loss && !one && rank == 1)
                strata_request_stop();
        for (int k = 0; k < (loss || one ? 2 : 3); k++) {
                uint64_t m0 = strata__job_messages(rt);

                g.rc[k] = k == 1 ? strata__models_train_alike(rt, order, loss ? 1 : 2, &b)
                                 : strata_models_train_step(rt, order, loss ? 1 : 2, &b, NULL);
                g.msgs[k] = strata__job_messages(rt) - m0;
        }
        if (rank == 1 && (one    ? g.rc[0] != STRATA_OK || g.rc[1] != STRATA_OK
                          : loss ? g.rc[0] != STRATA_ENONFINITE || g.rc[1] != STRATA_ENONFINITE
                                 : g.rc[0] != STRATA_OK || g.rc[1] != STRATA_ESTOPPED ||
                                           g.rc[2] != STRATA_ESTOPPED))
                return 11;
        if (rank == 0 && strata_spawn_return(&g, sizeof(g)))
                return 13;
        strata_clear_stop();
        return strata_teardown(rt) == STRATA_OK ? 0 : 14;
}

static void carried(const char *what, struct carried *g)
{
        spawn_pair(carried_child, what, g, sizeof(*g));
}

/* Both processes refuse the step whose loss is not finite in rank 1's rows (@p what). */
static void loss_crosses(const char *what)
{
        static struct carried g;

        carried(what, &g);
        cr_assert_eq(g.rc[0], STRATA_ENONFINITE, "rank 0 learnt rank 1's loss (%d)", g.rc[0]);
        cr_assert_eq(g.rc[1], STRATA_ENONFINITE, "and again unagreed (%d)", g.rc[1]);
        cr_assert_eq(g.msgs[0], 1, "the batch's agreement alone (%llu messages)",
                     (unsigned long long)g.msgs[0]);
        cr_assert_eq(g.msgs[1], 0, "no metrics exchanged (%llu messages)",
                     (unsigned long long)g.msgs[1]);
}

Test(models_held_loss, the_last_loss_crosses_on_the_gradients, .timeout = 120)
{
        loss_crosses("loss");
}

Test(models_held_loss, the_last_loss_crosses_from_a_second_device, .timeout = 120)
{
        loss_crosses("loss2");
}

Test(models_held_loss, a_stop_on_one_process_crosses_on_the_gradients, .timeout = 120)
{
        static struct carried g;

        carried("stop", &g);
        cr_assert_eq(g.rc[0], STRATA_OK, "the step was taken (%d)", g.rc[0]);
        cr_assert_eq(g.rc[1], STRATA_ESTOPPED, "rank 0 stops with rank 1 (%d)", g.rc[1]);
        cr_assert_eq(g.rc[2], STRATA_ESTOPPED, "%d", g.rc[2]);
        cr_assert_eq(g.msgs[0], 1, "the batch's agreement alone (%llu messages)",
                     (unsigned long long)g.msgs[0]);
}

/* A batch of one row over two processes: the one without rows judges by the bit, not 0 / 0. */
Test(models_held_loss, a_process_without_rows_agrees, .timeout = 120)
{
        static struct carried g;

        carried("onerow", &g);
        cr_assert_eq(g.rc[0], STRATA_OK, "rank 0 (%d): %s", g.rc[0], strata_last_error());
        cr_assert_eq(g.rc[1], STRATA_OK, "rank 0's held call (%d)", g.rc[1]);
        cr_assert_eq(g.msgs[1], 0, "no metrics exchanged (%llu messages)",
                     (unsigned long long)g.msgs[1]);
}
