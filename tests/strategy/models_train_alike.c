/*
 * The agents' training steps across processes exchange no batch agreement (decision 0097):
 * strata__models_train_alike() checks only the batch's sizes where every value a check would
 * refuse makes a gradient that is not finite instead. Under spawn x 2 it trains bitwise what
 * the public call trains on one process of 2 devices; a target that is NaN in process 1's
 * rows is STRATA_ENONFINITE on both processes with nothing changed (the public call refuses
 * that batch with STRATA_EINVAL on both); in one process and for a loss whose gradient can
 * drop such a value (L1), the public call decides.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "strata/process.h"
#include "strategy/alike.h"
#include "strategy/internal.h"
#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define NP 1024

static const int order[2] = { 1, 0 };

/* Both models' parameters on device 0, model 0's first, into @p out (NP floats). */
static void params(struct strata_runtime *rt, float *out)
{
        size_t at = 0;

        memset(out, 0, NP * sizeof(float));
        for (int k = 0; k < 2; k++) {
                const float *p;
                size_t n;

                cr_assert_eq(strata_model_parameters(rt, k, 0, &p, &n), STRATA_OK);
                cr_assert_leq(at + n, NP);
                memcpy(out + at, p, n * sizeof(float));
                at += n;
        }
}

/* ---- across processes ---- */

static struct rig_two spawn_two; /* set up by the parent: the children inherit it */

struct got {
        float p[NP];   /* both models after a finite step */
        int alike_rc;  /* the NaN target's step */
        int named;     /* its message names the gradient */
        int unchanged; /* and nothing changed */
        int public_rc; /* the public call on it */
};

/* Rank 0 returns what it saw; rank 1 exits non-zero where its own verdicts differ. */
static int spawn_child(int rank, int size, void *arg)
{
        static struct got g;
        static float before[NP], after[NP];
        struct strata_config c = spawn_two.r.cfg;
        struct strata_runtime *rt;
        struct strata_batch b = rig_first_batch(&spawn_two.r, 0.0f);

        (void)size, (void)arg;
        c.strategy.kind = STRATA_STRATEGY_SPAWN;
        c.strategy.devices = 1;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        if (strata__models_train_alike(rt, order, 2, &b) != STRATA_OK)
                return 11;
        params(rt, g.p);
        b = rig_first_batch(&spawn_two.r, NAN);
        params(rt, before);
        g.alike_rc = strata__models_train_alike(rt, order, 2, &b);
        g.named = strstr(strata_last_error(), "a gradient is NaN") != NULL;
        params(rt, after);
        g.unchanged = !memcmp(before, after, sizeof(before));
        g.public_rc = strata_models_train_step(rt, order, 2, &b, NULL);
        if (rank == 1 && (g.alike_rc != STRATA_ENONFINITE || !g.unchanged ||
                          g.public_rc != STRATA_EINVAL))
                return 12;
        if (rank == 0 && strata_spawn_return(&g, sizeof(g)))
                return 13;
        return strata_teardown(rt) == STRATA_OK ? 0 : 14;
}

Test(models_train_alike, processes_train_the_public_bits_and_refuse_together, .timeout = 120)
{
        static struct got g;
        static float ref[NP];
        struct strata_spawn_result res;
        struct strata_runtime *rt;
        struct strata_batch b;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        cli_serial_jobs(); /* one job at a time: processes.c watches /dev/shm */
        rig_two_init(&spawn_two, &strata_mse);
        cr_assert_eq(strata_spawn(2, spawn_child, NULL, 30.0, &g, sizeof(g), &res), STRATA_OK,
                     "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
        cr_assert_eq(g.alike_rc, STRATA_ENONFINITE, "process 0 refused process 1's NaN (%d)",
                     g.alike_rc);
        cr_assert(g.named, "as a gradient that is not finite");
        cr_assert(g.unchanged, "nothing changed");
        cr_assert_eq(g.public_rc, STRATA_EINVAL, "the public call refuses the batch");
        spawn_two.r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        spawn_two.r.cfg.strategy.devices = 2;
        rt = rig_open(&spawn_two.r.cfg);
        b = rig_first_batch(&spawn_two.r, 0.0f);
        cr_assert_eq(strata_models_train_step(rt, order, 2, &b, NULL), STRATA_OK);
        params(rt, ref);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert(!memcmp(ref, g.p, sizeof(ref)), "spawn x 2 != the public call on 2 devices");
}

/* ---- where the public call decides ---- */

static void public_decides(const struct strata_loss_ops *loss, int allow)
{
        static float before[NP], after[NP];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig_two t;

        rig_two_init(&t, loss);
        t.r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        t.r.cfg.strategy.devices = 2;
        t.r.cfg.train.allow_nonfinite = allow;
        rt = rig_open(&t.r.cfg);
        b = rig_first_batch(&t.r, NAN);
        params(rt, before);
        cr_assert_eq(strata__models_train_alike(rt, order, 2, &b), STRATA_EINVAL, "%s",
                     strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "is nan"), "%s", strata_last_error());
        params(rt, after);
        cr_assert(!memcmp(before, after, sizeof(before)), "refused: nothing changed");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(models_train_alike, one_process_is_the_public_call, .timeout = 60)
{
        public_decides(&strata_mse, 0);
        public_decides(&strata_l1, 0);
        public_decides(&strata_mse, 1);
}

/*
 * Across processes, a loss whose gradient drops a NaN (L1's sign is 0 there) is agreed; this
 * child expects STRATA_EINVAL on both processes (also for a model ending in a ReLU, below).
 */
static int l1_child(int rank, int size, void *arg)
{
        struct strata_config c = spawn_two.r.cfg;
        struct strata_runtime *rt;
        struct strata_batch b = rig_first_batch(&spawn_two.r, NAN);
        int rc;

        (void)rank, (void)size, (void)arg;
        c.strategy.kind = STRATA_STRATEGY_SPAWN;
        c.strategy.devices = 1;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        rc = strata__models_train_alike(rt, order, 2, &b);
        if (rc != STRATA_EINVAL)
                return 11; /* both processes refuse, process 1's row named to process 0 */
        return strata_teardown(rt) == STRATA_OK ? 0 : 12;
}

Test(models_train_alike, processes_agree_where_a_value_could_be_dropped, .timeout = 120)
{
        struct strata_spawn_result res;
        int none = 0;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        cli_serial_jobs(); /* one job at a time: processes.c watches /dev/shm */
        rig_two_init(&spawn_two, &strata_l1);
        cr_assert_eq(strata_spawn(2, l1_child, NULL, 30.0, &none, sizeof(none), &res), STRATA_OK,
                     "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
}

/*
 * Across processes, a model whose last module selects its gradient (a ReLU's backward turns a
 * NaN into 0) is agreed: the public call refuses process 1's NaN target on both with
 * STRATA_EINVAL.
 */
Test(models_train_alike, processes_agree_where_a_relu_ends_the_model, .timeout = 120)
{
        struct strata_spawn_result res;
        int none = 0;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        cli_serial_jobs(); /* one job at a time: processes.c watches /dev/shm */
        rig_two_init(&spawn_two, &strata_mse);
        spawn_two.mods1[1] = (struct strata_module){ .ops = &strata_linear, .out = RIG_OUT };
        spawn_two.mods1[2] = (struct strata_module){ .ops = &strata_relu };
        cr_assert_eq(strata_spawn(2, l1_child, NULL, 30.0, &none, sizeof(none), &res), STRATA_OK,
                     "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
}
