/*
 * ddp's optimizer step split across its devices (decision 0086: each device checks and updates
 * its slice of the reduced gradient, through the driver's update_range, and writes the slice's
 * parameters into every other replica, decision 0121; its optimizer state kept in its own
 * replica by decision 0100) is bitwise every device stepping
 * alone (a driver without update_range), for SGD with Nesterov momentum and weight decay and
 * for AdamW, on 1-4 devices; the split really runs (each step's ranges come from every device
 * and cover the vector once); after each step every replica holds the same parameters,
 * optimizer state (gathered at the read, decision 0100) and step count; clipping keeps the
 * whole step. (A non-finite gradient
 * seen by one device refusing the step on every device: nonfinite_grad, which runs split.)
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strategy/internal.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

/* the rig with BatchNorm: linear, bn (gamma, beta), linear */
#define NP (RIG_IN * 16 + 16 + 2 * 16 + 16 * RIG_CLASSES + RIG_CLASSES)
#define STEPS 12

static const struct strata_device_ops *cpu;
static atomic_size_t covered; /* elements updated through update_range */
static atomic_int calls;

static void counting_range(const struct strata_update *u, float *p, float *g, float *state,
                           size_t n, size_t lo, size_t hi)
{
        atomic_fetch_add(&calls, 1);
        atomic_fetch_add(&covered, hi - lo);
        cpu->kernels->update_range(u, p, g, state, n, lo, hi);
}

static struct strata_config config(struct rig *r, enum strata_optim_kind kind, int devices)
{
        struct strata_config c = rig_cfg(r, STRATA_STRATEGY_DDP, devices, 1);

        c.optim.kind = kind;
        c.optim.lr = kind == STRATA_OPTIM_ADAMW ? 0.01f : 0.1f;
        c.optim.weight_decay = 0.01f;
        c.optim.nesterov = kind == STRATA_OPTIM_SGD;
        return c;
}

static void run(enum strata_optim_kind kind, int devices)
{
        static float split[NP], alone[NP];
        struct driver_copy counting, whole;
        struct strata_config c;
        struct rig r;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        cr_assert_not_null(cpu->kernels->update_range, "the CPU driver splits ddp's step");
        driver_copy(&counting, cpu);
        counting.k.update_range = counting_range;
        driver_copy(&whole, cpu);
        whole.k.update_range = NULL;

        rig_init(&r, 1);
        c = config(&r, kind, devices);
        atomic_store(&calls, 0);
        atomic_store(&covered, 0);
        c.device.driver = &counting.dev;
        rig_train_cfg(&r, &c, STEPS, split, NP);
        c.device.driver = &whole.dev;
        rig_train_cfg(&r, &c, STEPS, alone, NP);
        cr_assert_eq(memcmp(split, alone, sizeof(split)), 0,
                     "%d devices, optimizer %d: split step differs from every device's own",
                     devices, (int)kind);
        if (devices == 1) {
                cr_assert_eq(atomic_load(&calls), 0, "one device: nothing to split");
                return;
        }
        cr_assert_eq(atomic_load(&calls), devices * STEPS, "every device, every step");
        cr_assert_eq(atomic_load(&covered), (size_t)NP * STEPS,
                     "each step covers every parameter once");
}

Test(ddp_split_step, sgd_bitwise_every_device_alone, .timeout = 120)
{
        for (int n = 1; n <= 4; n++)
                run(STRATA_OPTIM_SGD, n);
}

Test(ddp_split_step, adamw_bitwise_every_device_alone, .timeout = 120)
{
        for (int n = 1; n <= 4; n++)
                run(STRATA_OPTIM_ADAMW, n);
}

/* Every replica's parameters, optimizer state and step count after each step are device 0's. */
static void assert_replicas_equal(const struct strata_runtime *rt, int devices, int step)
{
        const float *p0, *s0, *p, *s;
        size_t np0, ns0, np, ns;
        uint64_t t0, t;

        cr_assert_eq(strata_parameters(rt, 0, &p0, &np0), STRATA_OK);
        cr_assert_eq(strata_optimizer_state(rt, 0, &s0, &ns0, &t0), STRATA_OK);
        cr_assert_eq(t0, (uint64_t)step);
        for (int d = 1; d < devices; d++) {
                cr_assert_eq(strata_parameters(rt, d, &p, &np), STRATA_OK);
                cr_assert_eq(strata_optimizer_state(rt, d, &s, &ns, &t), STRATA_OK);
                cr_assert_eq(np, np0);
                cr_assert_eq(ns, ns0);
                cr_assert_eq(t, t0, "device %d: step %llu, device 0: %llu", d,
                             (unsigned long long)t, (unsigned long long)t0);
                cr_assert_eq(memcmp(p, p0, np * sizeof(float)), 0,
                             "%d devices, step %d: parameters of replica %d differ", devices, step,
                             d);
                cr_assert_eq(memcmp(s, s0, ns * sizeof(float)), 0,
                             "%d devices, step %d: optimizer state of replica %d differs",
                             devices, step, d);
        }
}

Test(ddp_split_step, replicas_hold_the_same_state, .timeout = 120)
{
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 1);
        for (int devices = 2; devices <= 4; devices++) {
                c = config(&r, devices == 3 ? STRATA_OPTIM_ADAMW : STRATA_OPTIM_SGD, devices);
                rt = rig_open(&c);
                for (int step = 1; step <= 3; step++) {
                        rig_steps(&r, rt, 1, NULL);
                        assert_replicas_equal(rt, devices, step);
                }
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
}

/* Whether elements [lo, hi) of every slot of replica @p d's optimizer state are all zero. */
static int state_zero(const struct strata_runtime *rt, int d, size_t lo, size_t hi)
{
        const struct strata__replica_view *v = strata__repv(rt, d);

        for (size_t s = 0; s < v->nopt / v->nparam; s++)
                for (size_t i = lo; i < hi; i++)
                        if (v->opt_state[s * v->nparam + i] != 0.0f)
                                return 0;
        return 1;
}

/*
 * Decision 0100: a split step leaves each part's optimizer state in its owner's replica alone
 * (the other replicas' copies of it stay as they were, zeros before the first read), and a
 * read of a whole replica's state (strata_optimizer_state(), then strata_parameter()) first
 * makes every replica whole, once: after it every replica holds device 0's state.
 */
Test(ddp_split_step, optimizer_state_stays_with_its_owner, .timeout = 120)
{
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_param p;
        struct rig r;
        size_t lo, hi, block;

        rig_init(&r, 1);
        for (int devices = 2; devices <= 3; devices++) {
                c = config(&r, devices == 3 ? STRATA_OPTIM_ADAMW : STRATA_OPTIM_SGD, devices);
                rt = rig_open(&c);
                rig_steps(&r, rt, 2, NULL);
                cr_assert(rt->opt_parts, "%d devices: the step did not run split", devices);
                for (int d = 0; d < devices; d++) {
                        strata__dev_part(rt, NP, d, &lo, &hi, &block);
                        cr_assert(!state_zero(rt, d, lo, hi), "device %d's part not updated", d);
                        for (int e = 0; e < devices; e++)
                                cr_assert(e == d || state_zero(rt, e, lo, hi),
                                          "%d devices: device %d's state written into %d's",
                                          devices, d, e);
                }
                assert_replicas_equal(rt, devices, 2);
                cr_assert(!rt->opt_parts);
                rig_steps(&r, rt, 1, NULL);
                cr_assert(rt->opt_parts);
                cr_assert_eq(strata_parameter(rt, devices - 1, 0, &p), STRATA_OK);
                cr_assert(!rt->opt_parts, "strata_parameter() gives a whole replica's state");
                assert_replicas_equal(rt, devices, 3);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
}

/*
 * Several models on one runtime: each model's split steps are its own to gather. Model 1
 * steps split, model 0's state is read (nothing of model 1's gathered), then model 1's
 * checkpoint is saved: the save makes model 1's replicas whole (a mark kept by the runtime
 * alone would have been spent on model 0's read).
 */
Test(ddp_split_step, each_model_gathers_its_own_parts, .timeout = 120)
{
        char path[] = "/tmp/strata-split-XXXXXX";
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig_two t;
        const float *s;
        size_t n, lo, hi, block;
        uint64_t steps;
        int fd;

        rig_two_init(&t, &strata_mse);
        t.r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        t.r.cfg.strategy.devices = 2;
        b = rig_first_batch(&t.r, 0.0f);
        rt = rig_open(&t.r.cfg);
        cr_assert_eq(strata_model_train_step(rt, 1, &b, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata__models_enter(rt, 1), STRATA_OK);
        strata__dev_part(rt, strata__repv(rt, 0)->nparam, 0, &lo, &hi, &block);
        cr_assert(state_zero(rt, 1, lo, hi), "model 1 did not step split (its state whole)");
        strata__models_leave(rt);
        cr_assert_eq(strata_optimizer_state(rt, 0, &s, &n, &steps), STRATA_OK);
        cr_assert_eq(steps, 0, "model 0 did not step");
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(strata_model_save_checkpoint(rt, 1, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        unlink(path);
        cr_assert_eq(strata__models_enter(rt, 1), STRATA_OK);
        strata__dev_part(rt, strata__repv(rt, 0)->nparam, 0, &lo, &hi, &block);
        cr_assert(!state_zero(rt, 0, lo, hi), "model 1 stepped split");
        cr_assert(!state_zero(rt, 1, lo, hi), "model 1's save gathered its state");
        strata__models_leave(rt);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Clipping reads the whole vector before the update: the step is not split. */
Test(ddp_split_step, clipping_keeps_the_whole_step, .timeout = 120)
{
        static float out[NP];
        struct driver_copy counting;
        struct strata_config c;
        struct rig r;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        driver_copy(&counting, cpu);
        counting.k.update_range = counting_range;
        rig_init(&r, 1);
        for (int clip = 0; clip < 2; clip++) {
                c = config(&r, STRATA_OPTIM_SGD, 2);
                c.device.driver = &counting.dev;
                if (clip)
                        c.train.clip_value = 0.002f;
                else
                        c.train.clip_norm = 0.05f;
                atomic_store(&calls, 0);
                rig_train_cfg(&r, &c, 3, out, NP);
                cr_assert_eq(atomic_load(&calls), 0, "clip %s: the step ran split",
                             clip ? "by value" : "by norm");
        }
}

/*
 * allow_nonfinite: no agreement meets the devices before the split step writes into the peers'
 * replicas, so the step meets them itself (a peer may still read its parameters: invariant
 * mode's input gradient of a first Linear after a module without parameters). On finite data
 * the run is bitwise the checked one, buckets and invariant, 2 and 3 devices (under TSan the
 * race without the meeting is reported).
 */
Test(ddp_split_step, allow_nonfinite_is_the_checked_step, .timeout = 120)
{
        static float checked[NP], unchecked[NP];
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        memmove(&r.mods[1], &r.mods[0], 3 * sizeof(r.mods[0]));
        r.mods[0] = (struct strata_module){ .ops = &strata_relu };
        r.model.nmodules = 4;
        for (int devices = 2; devices <= 3; devices++)
                for (int inv = 0; inv < 2; inv++) {
                        size_t np = RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES;

                        c = config(&r, STRATA_OPTIM_SGD, devices);
                        c.strategy.invariant = inv;
                        rig_train_cfg(&r, &c, 4, checked, np);
                        c.train.allow_nonfinite = 1;
                        rig_train_cfg(&r, &c, 4, unchecked, np);
                        cr_assert_eq(memcmp(checked, unchecked, np * sizeof(float)), 0,
                                     "%d devices, invariant %d: allow_nonfinite changed the bits",
                                     devices, inv);
                }
}
