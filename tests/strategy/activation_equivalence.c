/*
 * Every activation, and a model with none (Linears only), keeps the runtime's promises as
 * ReLU does (parallel_equivalence.c, no_heap_training.c, arena_plan.c): dp and ddp on 1-3
 * devices reach single's parameters (bitwise on one device, relative difference <= 1e-5 on
 * more), repeated runs are bitwise identical, planned bytes are used bytes, and nothing in
 * the process allocates during the steps.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)
#define STEPS 20

static const struct strata_module_ops *const acts[] = {
        &strata_tanh, &strata_sigmoid, &strata_gelu, &strata_gelu_tanh, &strata_silu,
        &strata_leaky_relu, NULL, /* NULL: no activation */
};

/* The rig (linear 16, activation, linear 4) with @p act in the middle, or without one. */
static void rig_with(struct rig *r, const struct strata_module_ops *act)
{
        rig_init(r, 0);
        if (act) {
                r->mods[1] = (struct strata_module){ .ops = act, .slope = -0.2f };
        } else {
                r->mods[1] = r->mods[2];
                r->model.nmodules = 2;
        }
}

/* Train as rig_train_cfg() does, checking planned == used and no heap call in the steps. */
static void train_checked(struct rig *r, const struct strata_config *c, float *out)
{
        struct strata_runtime *rt;
        struct strata_memory_info mem;
        const float *p;
        size_t np;
        long calls;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        strata_heapcount_start();
        rig_steps(r, rt, STEPS, NULL);
        calls = strata_heapcount_stop();
        cr_assert(calls <= 0, "%ld heap calls during the steps", calls); /* -1: sanitizer */
        cr_assert_eq(strata_memory(rt, &mem), STRATA_OK);
        cr_assert_eq(mem.planned, mem.used);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_eq(np, (size_t)NP);
        memcpy(out, p, sizeof(float) * NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void compare(enum strata_strategy_kind kind)
{
        static float ref[NP], a[NP], b[NP];

        for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
                const char *name = acts[i] ? acts[i]->name : "none";
                struct rig r;

                rig_with(&r, acts[i]);
                train_checked(&r, &r.cfg, ref);
                for (int n = 1; n <= 3; n++) {
                        struct strata_config c = rig_cfg(&r, kind, n, 0);
                        double d;

                        train_checked(&r, &c, a);
                        rig_train_cfg(&r, &c, STEPS, b, NP);
                        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "%s, %d devices: runs differ",
                                     name, n);
                        d = rig_rel_diff(a, ref, NP);
                        if (n == 1)
                                cr_assert_eq(memcmp(a, ref, sizeof(a)), 0,
                                             "%s: 1 device must be bitwise single", name);
                        else
                                cr_assert_leq(d, 1e-5, "%s, %d devices: relative difference %g",
                                              name, n, d);
                }
        }
}

Test(activation_equivalence, ddp, .timeout = 240)
{
        compare(STRATA_STRATEGY_DDP);
}

Test(activation_equivalence, dp, .timeout = 240)
{
        compare(STRATA_STRATEGY_DP);
}
