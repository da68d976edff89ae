/*
 * A checkpoint of another model or optimizer is refused with what differs named: the
 * optimizer (sgd with or without momentum, adamw), BatchNorm present or not, and the first
 * parameter group that differs (its module index in the name, its width in the shape);
 * nothing of the runtime changes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

static char path[64];

/* Train 2 steps of the rig (sgd with momentum, no BatchNorm) and save them to path. */
static void save(void)
{
        struct strata_runtime *rt;
        struct rig r;

        snprintf(path, sizeof(path), "/tmp/strata-mismatch-%d.ckpt", (int)getpid());
        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(&r, rt, 2, NULL);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Loading path into @p c is refused with EINVAL and a message holding each of @p needles. */
static void refused(const struct strata_config *c, const char *n1, const char *n2)
{
        struct strata_runtime *rt;
        const float *p;
        float before[64];
        size_t n;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, sizeof(before));
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_EINVAL,
                     "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), n1), "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), n2), "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(memcmp(before, p, sizeof(before)), 0, "a refused load changed nothing");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(checkpoint_mismatch, optimizer_named)
{
        struct rig r;
        struct strata_config c;

        save();
        rig_init(&r, 0);
        c = r.cfg;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-3f;
        refused(&c, "sgd with momentum (momentum_buffer) in the checkpoint",
                "adamw (exp_avg, exp_avg_sq) in this run");
        c = r.cfg;
        c.optim.momentum = 0.0f;
        refused(&c, "another optimizer", "sgd without momentum (no state) in this run");
        unlink(path);
}

Test(checkpoint_mismatch, batchnorm_named)
{
        struct rig r;

        save();
        rig_init(&r, 1);
        refused(&r.cfg, "BatchNorm is absent in the checkpoint",
                "layers.1.running_mean in this model");
        unlink(path);
}

Test(checkpoint_mismatch, module_and_width_named)
{
        struct rig r;

        save();
        rig_init(&r, 0);
        r.mods[0].out = 17;
        refused(&r.cfg, "group 0 is layers.0.weight (16 x 20) in the checkpoint",
                "layers.0.weight (17 x 20) in this model");
        /* One more hidden layer: the output layer moves to another module index. */
        rig_init(&r, 0);
        r.model.nmodules = 5;
        r.mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        r.mods[3] = (struct strata_module){ .ops = &strata_relu };
        r.mods[4] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        refused(&r.cfg, "group 2 is layers.2.weight (4 x 16) in the checkpoint",
                "layers.2.weight (16 x 16) in this model");
        unlink(path);
}
