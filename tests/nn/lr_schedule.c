/*
 * Learning-rate schedules: linear warm-up, StepLR and CosineAnnealingLR with PyTorch's
 * semantics (one scheduler step per optimizer step), values written here from those
 * formulas; a constant schedule is the configured lr bit for bit; bad schedules are refused;
 * and a schedule acts on training (the step an optimizer takes scales with it).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "strata/strata.h"

static void expect_lr(const struct strata_optim *o, uint64_t t, double want)
{
        float got = strata_optim_lr(o, t);

        cr_expect(fabs((double)got - want) <= 1e-7 * (1.0 + fabs(want)),
                  "step %llu: lr %.9g, expected %.9g", (unsigned long long)t, (double)got, want);
}

Test(lr_schedule, constant_is_the_configured_lr)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.123f;
        for (uint64_t t = 1; t < 1000; t += 97)
                cr_assert_eq(strata_optim_lr(&o, t), 0.123f);
}

Test(lr_schedule, warmup_then_constant)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.warmup = 4;
        expect_lr(&o, 1, 0.1f * 0.25);
        expect_lr(&o, 2, 0.1f * 0.5);
        expect_lr(&o, 4, 0.1f);
        expect_lr(&o, 5, 0.1f);
}

Test(lr_schedule, step_decays_every_step_size)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.schedule = STRATA_LR_STEP;
        o.step_size = 3;
        o.gamma = 0.5f;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        for (uint64_t t = 1; t <= 3; t++)
                expect_lr(&o, t, 0.1f);
        for (uint64_t t = 4; t <= 6; t++)
                expect_lr(&o, t, 0.1f * 0.5);
        expect_lr(&o, 7, 0.1f * 0.25);
        o.warmup = 2; /* the schedule starts counting after the warm-up */
        expect_lr(&o, 1, 0.1f * 0.5);
        expect_lr(&o, 5, 0.1f);
        expect_lr(&o, 6, 0.1f * 0.5);
}

Test(lr_schedule, cosine_anneals_to_its_minimum)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.schedule = STRATA_LR_COSINE;
        o.t_max = 4;
        o.lr_min = 0.01f;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        expect_lr(&o, 1, 0.1f);
        expect_lr(&o, 2, 0.01f + (0.1f - 0.01f) * (1.0 + cos(M_PI / 4.0)) / 2.0);
        expect_lr(&o, 3, 0.01f + (0.1f - 0.01f) * 0.5);
        expect_lr(&o, 5, 0.01f);
        expect_lr(&o, 50, 0.01f);
}

Test(lr_schedule, bad_schedules_refused)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.schedule = (enum strata_lr_schedule)9;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL);
        o.schedule = STRATA_LR_STEP;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL, "step_size 0");
        o.step_size = 2;
        o.gamma = 1.5f;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL, "gamma > 1");
        o.gamma = NAN;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL, "gamma NaN");
        o.schedule = STRATA_LR_COSINE;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL, "t_max 0");
        o.t_max = 10;
        o.lr_min = o.lr * 2.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_EINVAL, "lr_min above lr");
        o.lr_min = 0.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK);
        cr_assert_eq(strata_optim_lr(NULL, 1), 0.0f);
}

/* Plain SGD moves a parameter by lr * g: the schedule's lr is the one the update uses. */
Test(lr_schedule, update_uses_the_scheduled_lr)
{
        struct strata_optim o = STRATA_OPTIM_INIT;
        float p[4] = { 1, 1, 1, 1 }, g[4] = { 1, 1, 1, 1 };

        o.momentum = 0.0f;
        o.lr = 0.1f;
        o.schedule = STRATA_LR_STEP;
        o.step_size = 1;
        o.gamma = 0.5f;
        strata_optim_update(&o, 1, p, g, NULL, 4);
        cr_assert_float_eq(p[0], 1.0f - 0.1f, 1e-7);
        strata_optim_update(&o, 2, p, g, NULL, 4);
        cr_assert_float_eq(p[0], 1.0f - 0.1f - 0.05f, 1e-7);
}
