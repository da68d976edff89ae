/*
 * dp's replication callback (jactorch's __data_parallel_replicate__): after every replication,
 * for every module that has one, copy 0 first and then the others, each once, all with the
 * same context. Off unless patched in.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

static struct {
        int copy[256];
        void *ctx[256];
        int n;
} calls;

static int id_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .ctx_per_copy = 64 };
        return STRATA_OK;
}

static void id_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                       float *y, int rows)
{
        c->k->copy(y, x, (size_t)rows * l->out);
}

static void id_backward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        const float *y, const float *dy, float *dx, int rows)
{
        (void)x;
        (void)y;
        if (dx)
                c->k->copy(dx, dy, (size_t)rows * l->out);
}

static int id_replicate(struct strata_layer *copy, void *ctx, int copy_id, int copies)
{
        (void)copy;
        (void)copies;
        if (calls.n < 256) {
                calls.copy[calls.n] = copy_id;
                calls.ctx[calls.n] = ctx;
        }
        calls.n++;
        return STRATA_OK;
}

static const struct strata_module_ops recorder = {
        .name = "recorder",
        .shape = id_shape,
        .forward = id_forward,
        .backward = id_backward,
        .replicate = id_replicate,
};

static int run(struct rig *r, int n, int patch, int steps)
{
        struct strata_config c = r->cfg;
        struct strata_runtime *rt;

        r->mods[3] = r->mods[2]; /* linear 4 moves one down */
        r->mods[2] = (struct strata_module){ .ops = &recorder };
        r->model.nmodules = 4;
        c.strategy.kind = STRATA_STRATEGY_DP;
        c.strategy.devices = n;
        if (patch)
                cr_assert_eq(strata_patch_replication_callback(&c), STRATA_OK);
        memset(&calls, 0, sizeof(calls));
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(r, rt, steps, NULL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return calls.n;
}

Test(replication_callback, copy_zero_first_shared_context_once_per_replication)
{
        for (int n = 1; n <= 3; n++) {
                struct rig r;

                rig_init(&r, 0); /* linear, relu, linear */
                cr_assert_eq(run(&r, n, 1, 4), 4 * n, "%d copies x 4 replications", n);
                for (int step = 0; step < 4; step++)
                        for (int k = 0; k < n; k++) {
                                cr_assert_eq(calls.copy[step * n + k], k, "order at step %d", step);
                                cr_assert_eq(calls.ctx[step * n + k], calls.ctx[0], "one context");
                        }
                cr_assert_not_null(calls.ctx[0]);
        }
}

Test(replication_callback, off_without_the_patch)
{
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(run(&r, 2, 0, 3), 0);
}
