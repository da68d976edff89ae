/*
 * A non-finite gradient is found before the optimizer applies it, in every precision and
 * strategy: a NaN feature that ReLU drops from the loss but the first layer's weight gradient
 * carries makes the step return STRATA_ENONFINITE naming it, with every device's parameters,
 * optimizer state and step counter bitwise unchanged, and the next finite step is bitwise the
 * step the refused one never was; the devices (and processes) agree, so one device's
 * non-finite gradient refuses the step everywhere. allow_nonfinite keeps the old behaviour;
 * 16-mixed still skips and halves its scale, without an error.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "strategy/internal.h"
#include "strategy/multi.h"
#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

/* Everything a step may change on one device. */
struct snap {
        float p[NP], s[NP];
        uint64_t t;
};

static void snap(struct strata_runtime *rt, int dev, struct snap *o)
{
        const float *p, *s;
        size_t np, ns;

        cr_assert_eq(strata_parameters(rt, dev, &p, &np), STRATA_OK);
        cr_assert_eq(strata_optimizer_state(rt, dev, &s, &ns, &o->t), STRATA_OK);
        cr_assert_eq(np, NP);
        cr_assert_eq(ns, NP, "SGD with momentum: one slot");
        memcpy(o->p, p, sizeof(o->p));
        memcpy(o->s, s, sizeof(o->s));
}

/* The rig's @p i-th batch (from 0), its features copied into @p x (rows x RIG_IN). */
static void batch(struct rig *r, int i, float *x, int32_t *y, struct strata_batch *b)
{
        strata_loader_reset(&r->loader, r->idx, 256);
        for (int k = 0; k <= i; k++)
                cr_assert(strata_loader_next(&r->loader, b));
        memcpy(x, b->x, sizeof(float) * RIG_BATCH * RIG_IN);
        memcpy(y, b->y, sizeof(int32_t) * RIG_BATCH);
        b->x = x;
        b->y = y;
}

static struct strata_runtime *start(const struct strata_config *c)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

/*
 * Two finite steps; a refused step (a NaN in row @p row's first feature); with injection, a
 * step where only device 1 counts its gradients as non-finite; the third finite batch. The
 * parameters of every device must then be those of three finite steps.
 */
static void refused_then_resumed(const struct strata_config *c, int row, const char *what)
{
        static struct snap before[4], after[4];
        static float x[RIG_BATCH * RIG_IN], ref[NP];
        static int32_t y[RIG_BATCH];
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;
        int n = c->strategy.devices;

        rig_init(&r, 0);
        rig_train_cfg(&r, c, 3, ref, NP);
        rt = start(c);
        rig_steps(&r, rt, 2, NULL);
        for (int d = 0; d < n; d++)
                snap(rt, d, &before[d]);
        batch(&r, 2, x, y, &b);
        x[row * RIG_IN] = NAN;
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_ENONFINITE, "%s", what);
        cr_assert(isfinite(m.loss), "%s: ReLU drops the NaN row from the loss (%g)", what,
                  m.loss);
        cr_assert_not_null(strstr(strata_last_error(), "step 2: a gradient is NaN"), "%s: %s",
                           what, strata_last_error());
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY, "%s", what);
        batch(&r, 2, x, y, &b); /* the same batch, finite */
        if (n > 1) {
                cr_assert_eq(strata__inject_nonfinite_grad(rt, 1), STRATA_OK);
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_ENONFINITE,
                             "%s: device 1 alone saw it; every device must refuse", what);
        }
        for (int d = 0; d < n; d++) {
                snap(rt, d, &after[d]);
                cr_assert_eq(memcmp(&before[d], &after[d], sizeof(after[d])), 0,
                             "%s: device %d changed", what, d);
        }
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s: %s", what,
                     strata_last_error());
        for (int d = 0; d < n; d++) {
                snap(rt, d, &after[d]);
                cr_assert_eq(memcmp(after[d].p, ref, sizeof(ref)), 0,
                             "%s: device %d is not three finite steps", what, d);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(nonfinite_grad, single_dp_ddp_refuse_and_resume, .timeout = 120)
{
        static const int devices[] = { 2, 3 };
        struct rig r;

        rig_init(&r, 0);
        refused_then_resumed(&r.cfg, 0, "single");
        for (int i = 0; i < 2; i++) {
                struct strata_config c;

                c = rig_cfg(&r, STRATA_STRATEGY_DP, devices[i], 0);
                refused_then_resumed(&c, RIG_BATCH - 1, "dp"); /* the last device's rows */
                c = rig_cfg(&r, STRATA_STRATEGY_DDP, devices[i], 0);
                refused_then_resumed(&c, RIG_BATCH - 1, "ddp");
        }
}

/* Whether @p c's devices decide the found-inf check alone (no agreement), on a live runtime. */
static int decides_alone(const struct strata_config *c)
{
        struct strata_runtime *rt = start(c);
        int alone = strata__dev_alone(rt, strata__multi(rt));

        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return alone;
}

/*
 * ddp whose update is not split (clipping by value reads the whole vector): every device holds
 * the same reduced bits and decides alone, nothing exchanged (decision 0091); device 1's
 * injected overflow enters its gradients before the sum, so every device still refuses the
 * step, and the finite steps around it are bitwise those of an unrefused run. A loss scaler
 * (device 0 changes the scale once every device has read it) and the split step (each device
 * checks only its slice) keep the agreement.
 */
Test(nonfinite_grad, ddp_devices_decide_alone, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        cr_assert_not(decides_alone(&c), "the split step agrees over its slices");
        c.train.clip_value = 4.0f;
        cr_assert(decides_alone(&c), "not split, unscaled: alone");
        refused_then_resumed(&c, RIG_BATCH - 1, "ddp, each device alone");
        c.precision.kind = STRATA_PRECISION_16_MIXED;
        cr_assert_not(decides_alone(&c), "the loss scaler keeps the agreement");
        c = rig_cfg(&r, STRATA_STRATEGY_ZERO1, 2, 0);
        c.train.clip_value = 4.0f;
        cr_assert_not(decides_alone(&c), "zero1: each device steps its shard");
}

/* bf16-mixed has no loss scaler: the same refusal. */
Test(nonfinite_grad, bf16_mixed_refuses, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        refused_then_resumed(&c, 3, "ddp bf16-mixed");
}

/* One test's runtime, its batch and what a step may change on its device 0 or 1. */
static struct {
        float x[RIG_BATCH * RIG_IN];
        int32_t y[RIG_BATCH];
        struct snap before, after;
        struct rig r;
        struct strata_runtime *rt;
        struct strata_batch b;
} t;

/* A runtime of @p kind on 2 devices, as @p tweak sets it, after @p steps finite steps. */
static void begin(enum strata_strategy_kind kind, void (*tweak)(struct strata_config *),
                  int steps)
{
        struct strata_config c;

        rig_init(&t.r, 0);
        c = rig_cfg(&t.r, kind, 2, 0);
        tweak(&c);
        t.rt = start(&c);
        if (steps)
                rig_steps(&t.r, t.rt, steps, NULL);
}

static void accumulate2(struct strata_config *c)
{
        c->train.accumulate = 2;
}

/* Accumulation: the window's last micro-batch finds it; the window's gradients are dropped. */
Test(nonfinite_grad, accumulation_window_refused, .timeout = 60)
{
        begin(STRATA_STRATEGY_DDP, accumulate2, 2);
        snap(t.rt, 0, &t.before);
        batch(&t.r, 2, t.x, t.y, &t.b);
        t.x[5 * RIG_IN + 3] = NAN;
        cr_assert_eq(strata_train_step(t.rt, &t.b, NULL), STRATA_OK, "a micro-batch steps nothing");
        batch(&t.r, 3, t.x, t.y, &t.b);
        cr_assert_eq(strata_train_step(t.rt, &t.b, NULL), STRATA_ENONFINITE);
        snap(t.rt, 0, &t.after);
        cr_assert_eq(memcmp(&t.before, &t.after, sizeof(t.after)), 0, "the window changed it");
        rig_steps(&t.r, t.rt, 2, NULL);
        cr_assert_eq(strata_teardown(t.rt), STRATA_OK);
}

static void allow(struct strata_config *c)
{
        c->train.allow_nonfinite = 1;
}

/* allow_nonfinite: the update takes the NaN, as before. */
Test(nonfinite_grad, allow_nonfinite_keeps_the_old_behaviour, .timeout = 60)
{
        int nan = 0;

        begin(STRATA_STRATEGY_DP, allow, 0);
        batch(&t.r, 0, t.x, t.y, &t.b);
        t.x[2] = NAN;
        cr_assert_eq(strata_train_step(t.rt, &t.b, NULL), STRATA_OK);
        snap(t.rt, 0, &t.after);
        for (int i = 0; i < NP; i++)
                nan += isnan(t.after.p[i]);
        cr_assert_gt(nan, 0, "the NaN reached the parameters");
        cr_assert_eq(t.after.t, 1);
        cr_assert_eq(strata_teardown(t.rt), STRATA_OK);
}

static void fp16(struct strata_config *c)
{
        c->precision.kind = STRATA_PRECISION_16_MIXED;
}

/* 16-mixed: a skip and a halved scale, not an error; the next step goes on. */
Test(nonfinite_grad, fp16_mixed_skips_without_error, .timeout = 60)
{
        struct strata_grad_scaler s0, s1;

        begin(STRATA_STRATEGY_DDP, fp16, 2);
        snap(t.rt, 1, &t.before);
        cr_assert_eq(strata_grad_scaler_state(t.rt, &s0), STRATA_OK);
        batch(&t.r, 2, t.x, t.y, &t.b);
        t.x[11 * RIG_IN] = NAN;
        cr_assert_eq(strata_train_step(t.rt, &t.b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_grad_scaler_state(t.rt, &s1), STRATA_OK);
        cr_assert_eq(s1.skipped, s0.skipped + 1);
        cr_assert_eq(s1.scale, s0.scale / 2.0f);
        snap(t.rt, 1, &t.after);
        cr_assert_eq(memcmp(&t.before, &t.after, sizeof(t.after)), 0, "a skip changed device 1");
        rig_steps(&t.r, t.rt, 1, NULL);
        cr_assert_eq(strata_teardown(t.rt), STRATA_OK);
}

/* ---- processes: spawn's processes agree as the threads do ---- */

static struct rig spawn_rig; /* set up by the parent: the children inherit it */

/* Train, refuse, resume as refused_then_resumed(), in a spawned process; no assertion here. */
static int spawn_child(int rank, int size, void *arg)
{
        static float x[RIG_BATCH * RIG_IN];
        static int32_t y[RIG_BATCH];
        struct strata_config c = rig_cfg(&spawn_rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t np;

        (void)size, (void)arg;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&spawn_rig.loader, spawn_rig.idx, 256);
        for (int s = 0; s < 3; s++) {
                if (!strata_loader_next(&spawn_rig.loader, &b))
                        return 11;
                memcpy(x, b.x, sizeof(x));
                memcpy(y, b.y, sizeof(y));
                b.x = x;
                b.y = y;
                if (s < 2 && strata_train_step(rt, &b, NULL) != STRATA_OK)
                        return 12;
        }
        x[(RIG_BATCH - 2) * RIG_IN] = NAN; /* a row of rank 1's half */
        if (strata_train_step(rt, &b, NULL) != STRATA_ENONFINITE)
                return 13;
        memcpy(x, spawn_rig.loader.x, sizeof(x)); /* finite again (the loader's staging) */
        if (rank == 1 && strata__inject_nonfinite_grad(rt, 0))
                return 14;
        if (strata_train_step(rt, &b, NULL) != STRATA_ENONFINITE)
                return 15; /* rank 1 alone saw it: both refuse */
        if (strata_train_step(rt, &b, NULL) != STRATA_OK)
                return 16;
        if (strata_parameters(rt, 0, &p, &np) || strata_spawn_return(p, np * sizeof(*p)))
                return 17;
        return strata_teardown(rt) == STRATA_OK ? 0 : 18;
}

Test(nonfinite_grad, spawn_processes_agree, .timeout = 120)
{
        static float ref[NP], got[NP];
        struct strata_spawn_result res;
        struct strata_config c;
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        /* One job at a time with tests/strategy/processes.c, which watches /dev/shm. */
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
        rig_init(&spawn_rig, 0);
        cr_assert_eq(strata_spawn(2, spawn_child, NULL, 30.0, got, sizeof(got), &res),
                     STRATA_OK, "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
        c = rig_cfg(&spawn_rig, STRATA_STRATEGY_DDP, 2, 0);
        rig_train_cfg(&spawn_rig, &c, 3, ref, NP);
        cr_assert_eq(memcmp(ref, got, sizeof(ref)), 0, "spawn 2 after two refusals != 3 steps");
}
