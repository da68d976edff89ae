/*
 * An FNO block in the model line (lift by a 1x1 Conv2d, SpectralConv2d beside a 1x1 Conv2d
 * on the same input, their sum, GELU; then a Linear head) trained on the conv rig's samples:
 * under ddp and dp runs repeat bitwise, one device is bitwise the single strategy, two within
 * 1e-5 of it; in invariant mode one, two and four devices give bitwise the same parameters;
 * fsdp and zero2 on two devices are bitwise ddp on two; bf16-mixed runs repeat bitwise (the
 * FFTs stay fp32). The weights are named as the export writes them.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

#define LINE "input(1,6,6) conv2d(8,1) spectralconv2d(8,3,2) conv2d(8,1,from=0) add(from=1) " \
             "gelu linear(4)"
/* conv 1->8, spectral 2 x 8 x 8 x 3 x 2 x 2, conv 8->8, linear 8 * 36 -> 4 */
#define NP (8 + 8 + 2 * 8 * 8 * 3 * 2 * 2 + 64 + 8 + 8 * 36 * RIG_CLASSES + RIG_CLASSES)

static void fno_rig(struct rig *r)
{
        rig_init_conv(r);
        cr_assert_eq(strata_model_parse(LINE, r->mods, 6, &r->model), STRATA_OK, "%s",
                     strata_last_error());
        r->cfg.optim.lr = 0.02f;
}

Test(spectral_parallel, ddp_and_dp_match_single, .timeout = 120)
{
        struct rig r;

        fno_rig(&r);
        rig_equivalence(&r, STRATA_STRATEGY_DDP, 2, NP, 4);
        rig_equivalence(&r, STRATA_STRATEGY_DP, 2, NP, 4);
}

/* @p steps of @p c: the flat parameters, every device's part in order. */
static void train_parts(struct rig *r, const struct strata_config *c, int groups, float *out)
{
        struct strata_runtime *rt = rig_open(c);
        size_t at = 0, n;
        const float *p;

        rig_steps(r, rt, 4, NULL);
        for (int g = 0; g < groups; g++) {
                cr_assert_eq(strata_parameters(rt, g, &p, &n), STRATA_OK);
                n = n < NP - at ? n : NP - at;
                memcpy(out + at, p, n * sizeof(float));
                at += n;
        }
        cr_assert_eq(at, (size_t)NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(spectral_parallel, sharded_are_ddp, .timeout = 120)
{
        static float ddp[NP], got[NP];
        struct strata_config c;
        struct rig r;

        fno_rig(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        train_parts(&r, &c, 1, ddp);
        c = rig_cfg(&r, STRATA_STRATEGY_FSDP, 2, 0);
        train_parts(&r, &c, 2, got);
        cr_assert_eq(memcmp(ddp, got, sizeof(ddp)), 0, "fsdp differs from ddp");
        c = rig_cfg(&r, STRATA_STRATEGY_ZERO2, 2, 0);
        train_parts(&r, &c, 1, got);
        cr_assert_eq(memcmp(ddp, got, sizeof(ddp)), 0, "zero2 differs from ddp");
}

Test(spectral_parallel, invariant_on_any_device_count, .timeout = 120)
{
        static float ref[NP], got[NP];
        struct rig r;

        fno_rig(&r);
        r.cfg.strategy.invariant = 1;
        rig_train(&r, 4, ref, NP);
        for (int n = 1; n <= 4; n *= 2) {
                struct strata_config c = rig_cfg(&r, STRATA_STRATEGY_DDP, n, 0);

                rig_train_cfg(&r, &c, 4, got, NP);
                cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0, "%d devices differ", n);
        }
}

Test(spectral_parallel, bf16_mixed_repeats, .timeout = 120)
{
        static float a[NP], b[NP], f32[NP];
        struct strata_config c;
        struct rig r;

        fno_rig(&r);
        rig_train(&r, 4, f32, NP);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        rig_train_cfg(&r, &c, 4, a, NP);
        rig_train_cfg(&r, &c, 4, b, NP);
        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "bf16-mixed runs differ");
        cr_assert_leq(rig_rel_diff(a, f32, NP), 1e-2, "bf16-mixed far from fp32: %g",
                      rig_rel_diff(a, f32, NP));
}

Test(spectral_parallel, the_weights_names)
{
        struct rig r;
        struct strata_runtime *rt;
        struct strata_param p;

        fno_rig(&r);
        rt = rig_open(&r.cfg);
        /* after conv2d's weight and bias */
        cr_assert_eq(strata_parameter(rt, 0, 2, &p), STRATA_OK, "%s", strata_last_error());
        cr_assert_str_eq(p.name, "layers.1.weights1");
        cr_assert_eq(p.group.ndim, 5);
        cr_assert(p.group.shape[0] == 8 && p.group.shape[1] == 8 && p.group.shape[2] == 3 &&
                  p.group.shape[3] == 2 && p.group.shape[4] == 2);
        cr_assert_eq(strata_parameter(rt, 0, 3, &p), STRATA_OK);
        cr_assert_str_eq(p.name, "layers.1.weights2");
        cr_assert_eq(p.group.count, (size_t)8 * 8 * 3 * 2 * 2);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
