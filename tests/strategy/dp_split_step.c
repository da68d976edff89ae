/*
 * dp's optimizer step split across devices (every device updates its range of the master,
 * through the driver's update_range) is bitwise the master stepping alone (a driver without
 * update_range), with clipping by global norm and by value, for SGD and AdamW, on 1-4 devices;
 * the split really runs: each step's ranges come from every device and cover the master once;
 * and when the step is over every replica already holds the master's new parameters.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"

/* the rig with BatchNorm: linear, bn (gamma, beta), linear */
#define NP (RIG_IN * 16 + 16 + 2 * 16 + 16 * RIG_CLASSES + RIG_CLASSES)
#define STEPS 12

static const struct strata_device_ops *cpu;
static atomic_size_t covered;  /* elements updated through update_range */
static atomic_int calls;

static void counting_range(const struct strata_update *u, float *p, float *g, float *state,
                           size_t n, size_t lo, size_t hi)
{
        atomic_fetch_add(&calls, 1);
        atomic_fetch_add(&covered, hi - lo);
        cpu->kernels->update_range(u, p, g, state, n, lo, hi);
}

static void run(enum strata_optim_kind kind, int devices)
{
        static float split[NP], alone[NP];
        struct driver_copy counting, whole;
        struct strata_config c;
        struct rig r;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &cpu), STRATA_OK);
        cr_assert_not_null(cpu->kernels->update_range, "the CPU driver splits dp's step");
        driver_copy(&counting, cpu);
        counting.k.update_range = counting_range;
        driver_copy(&whole, cpu);
        whole.k.update_range = NULL;

        rig_init(&r, 1);
        c = rig_cfg(&r, STRATA_STRATEGY_DP, devices, 1);
        c.optim.kind = kind;
        c.optim.lr = kind == STRATA_OPTIM_ADAMW ? 0.01f : 0.1f;
        c.optim.weight_decay = 0.01f;
        c.optim.nesterov = kind == STRATA_OPTIM_SGD;
        c.train.clip_norm = 0.05f;
        c.train.clip_value = 0.002f;

        atomic_store(&calls, 0);
        atomic_store(&covered, 0);
        c.device.driver = &counting.dev;
        rig_train_cfg(&r, &c, STEPS, split, NP);
        c.device.driver = &whole.dev;
        rig_train_cfg(&r, &c, STEPS, alone, NP);
        cr_assert_eq(memcmp(split, alone, sizeof(split)), 0,
                     "%d devices, optimizer %d: split step differs from the master's alone",
                     devices, (int)kind);
        if (devices == 1) {
                cr_assert_eq(atomic_load(&calls), 0, "one device: nothing to split");
                return;
        }
        cr_assert_eq(atomic_load(&calls), devices * STEPS, "every device, every step");
        cr_assert_gt(atomic_load(&covered), 0);
        cr_assert_eq(atomic_load(&covered) % STEPS, 0);
        cr_assert_eq(atomic_load(&covered) / STEPS, (size_t)NP,
                     "each step covers every master parameter once");
}

Test(dp_split_step, sgd_bitwise_master_alone, .timeout = 120)
{
        for (int n = 1; n <= 4; n++)
                run(STRATA_OPTIM_SGD, n);
}

Test(dp_split_step, adamw_bitwise_master_alone, .timeout = 120)
{
        for (int n = 1; n <= 4; n++)
                run(STRATA_OPTIM_ADAMW, n);
}

/* After a split step each device has written its range into every replica: every replica
 * equals the master before any replication, bitwise. */
Test(dp_split_step, replicas_hold_the_new_master, .timeout = 120)
{
        struct strata_runtime *rt;
        struct strata_config c;
        const float *m, *p;
        size_t nm, np;
        struct rig r;

        rig_init(&r, 1);
        for (int devices = 2; devices <= 4; devices++) {
                c = rig_cfg(&r, STRATA_STRATEGY_DP, devices, 1);
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
                for (int step = 1; step <= 3; step++) {
                        rig_steps(&r, rt, 1, NULL);
                        cr_assert_eq(strata_parameters(rt, 0, &m, &nm), STRATA_OK);
                        for (int d = 1; d < devices; d++) {
                                cr_assert_eq(strata_parameters(rt, d, &p, &np), STRATA_OK);
                                cr_assert_eq(np, nm);
                                cr_assert_eq(memcmp(p, m, nm * sizeof(float)), 0,
                                             "%d devices, step %d: replica %d is not the master",
                                             devices, step, d);
                        }
                }
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
}
