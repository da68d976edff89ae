/*
 * The safetensors export of a convolutional model trained under ddp on 2 devices has
 * PyTorch's names and shapes (the Conv2d weight [4, 1, 3, 3]), and the equivalent PyTorch
 * model (Conv2d(1, 4, 3, padding=1, padding_mode='circular'), ReLU, Linear) loaded from it
 * predicts what Strata predicts.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/support/rig.h"

Test(export_conv, pytorch_conv2d_circular_predicts_what_strata_predicts, .timeout = 120)
{
        static float out[RIG_BATCH * RIG_CLASSES];
        char dir[] = "/tmp/strata-export-conv-XXXXXX", st[128];
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_batch b;
        struct rig r;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/model.safetensors", dir);
        rig_init_conv(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&c);
        rig_steps(&r, rt, 8, NULL);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx + 64, 64);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 1);
        cr_assert_eq(strata_predict_step(rt, &b, out, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        rig_pytorch_script("load_conv_safetensors.py", st, b.x, RIG_CONV_HW * RIG_CONV_HW, out,
                           RIG_CLASSES, b.rows);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(st);
        rmdir(dir);
}
