/*
 * A checkpoint of another model or optimizer is refused with what differs named: the
 * optimizer (sgd with or without momentum, adamw), a module more or less (a BatchNorm, a
 * Dropout) or of another kind (an activation), and the first parameter group that differs
 * (its module index in the name, its width in the shape); nothing of the runtime changes. A
 * checkpoint of another loss loads and says which (strata_ckpt_info.loss); one from before
 * the modules were recorded loads as before.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn/checkpoint.h"
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
        refused(&r.cfg, "a batchnorm1d at module 1 (after module 0, linear) in this model",
                "none in the checkpoint");
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

/* issue 45: --dropout on resume, and an activation swapped. */
Test(checkpoint_mismatch, module_added_or_swapped_named)
{
        struct rig r;

        save();
        rig_init(&r, 0); /* linear relu linear -> linear relu dropout linear */
        r.mods[3] = r.mods[2];
        r.mods[2] = (struct strata_module){ .ops = &strata_dropout, .p = 0.3f };
        r.model.nmodules = 4;
        refused(&r.cfg, "a dropout at module 2 (after module 1, relu) in this model",
                "none in the checkpoint");
        rig_init(&r, 0);
        r.mods[1] = (struct strata_module){ .ops = &strata_gelu };
        refused(&r.cfg, "module 1 is relu in the checkpoint", "gelu in this model");
        rig_init(&r, 0); /* linear linear: the checkpoint's relu is missing here */
        r.mods[1] = r.mods[2];
        r.model.nmodules = 2;
        refused(&r.cfg, "a relu at module 1 (after module 0, linear) in the checkpoint",
                "none in this model");
        unlink(path);
}

/* Loading into @p c succeeds; *info says what the file held. */
static void loads(const struct strata_config *c, struct strata_ckpt_info *info)
{
        struct strata_runtime *rt = rig_open(c);

        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(checkpoint_mismatch, another_loss_loads_and_is_reported)
{
        struct strata_ckpt_info info;
        struct strata_runtime *rt;
        struct rig r;

        snprintf(path, sizeof(path), "/tmp/strata-mismatch-%d.ckpt", (int)getpid());
        rig_init_regression(&r, &strata_mse);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 2, NULL);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        r.model.loss = &strata_huber;
        loads(&r.cfg, &info);
        cr_assert_str_eq(info.loss, "mse", "the checkpoint's loss is reported");
        unlink(path);
}

/* A file written before the header recorded modules and loss (zeros there) loads as before. */
Test(checkpoint_mismatch, older_files_without_modules_load)
{
        struct strata__ckpt_header hd;
        struct strata_ckpt_info info;
        struct rig r;
        FILE *f;

        save();
        f = fopen(path, "r+b");
        cr_assert_not_null(f);
        cr_assert_eq(fread(&hd, sizeof(hd), 1, f), 1);
        cr_assert_eq(hd.nmodules, 3, "this library records the modules");
        memset(hd.loss, 0, sizeof(hd.loss));
        memset(hd.modules, 0, sizeof(hd.modules));
        hd.nmodules = 0;
        hd.crc = strata__crc32_header(&hd);
        rewind(f);
        cr_assert_eq(fwrite(&hd, sizeof(hd), 1, f), 1);
        fclose(f);
        rig_init(&r, 0);
        r.mods[1] = (struct strata_module){ .ops = &strata_gelu }; /* unknown: not refused */
        loads(&r.cfg, &info);
        cr_assert_str_eq(info.loss, "", "an older file's loss is unknown");
        unlink(path);
}
