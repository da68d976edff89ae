/*
 * With BatchNorm under ddp (no SyncBatchNorm) the model Strata evaluates is the one it
 * exports: every device predicts with rank 0's running statistics (PyTorch DDP's
 * broadcast_buffers), so PyTorch, loading the safetensors export in eval mode, predicts the
 * same outputs for every row, those of device 1 included (they used device 1's own statistics
 * before, and a test MSE of 0.2762 in Strata was 0.2793 in PyTorch). Training is unchanged:
 * the parameters are those of a run that never evaluated.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

Test(export_batchnorm_ddp, pytorch_predicts_what_strata_predicts, .timeout = 120)
{
        static float logits[RIG_BATCH * RIG_CLASSES], before[4096];
        char dir[] = "/tmp/strata-export-bn-XXXXXX", st[128];
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_batch b;
        const float *p;
        struct rig r;
        size_t np;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/model.safetensors", dir);
        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&c);
        rig_steps(&r, rt, 8, NULL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        memcpy(before, p, np * sizeof(float));
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx + 64, 64);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 1);
        cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        rig_pytorch_matches(st, b.x, logits, b.rows);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_eq(memcmp(before, p, np * sizeof(float)), 0, "evaluation changed parameters");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(st);
        rmdir(dir);
}
