/*
 * MultiStepLR and OneCycleLR (cosine, two phases, cycle_momentum=False) with PyTorch's
 * semantics: the rate of each optimizer step against the values PyTorch 1.13's schedulers give
 * for the same settings (an SGD optimizer reading param_groups[0]["lr"] before each step, then
 * stepping the scheduler; the values are written here); bad settings refused by name.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

static void expect_lrs(const struct strata_optim *o, const double *want, int n)
{
        for (int t = 1; t <= n; t++) {
                double got = strata_optim_lr(o, (uint64_t)t), w = want[t - 1];

                cr_expect(fabs(got - w) <= 2e-7 * fabs(w) + 1e-12,
                          "step %d: lr %.12g, PyTorch %.12g", t, got, w);
        }
}

/* MultiStepLR(milestones=[3, 5, 9], gamma=0.5), lr 0.1 */
Test(lr_schedule_torch, multistep_matches_pytorch)
{
        static const double want[] = { 0.1,   0.1,   0.1,   0.05,   0.05,   0.025,
                                       0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125 };
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.schedule = STRATA_LR_MULTISTEP;
        o.gamma = 0.5f;
        o.milestones[0] = 3;
        o.milestones[1] = 5;
        o.milestones[2] = 9;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        expect_lrs(&o, want, 12);
        o.warmup = 2; /* the milestones count schedule steps, after the warm-up */
        cr_expect_float_eq(strata_optim_lr(&o, 1), 0.05f, 1e-9);
        cr_expect_float_eq(strata_optim_lr(&o, 5), 0.1f, 1e-9);
        cr_expect_float_eq(strata_optim_lr(&o, 6), 0.05f, 1e-9);
}

/* OneCycleLR(max_lr=0.1, total_steps=20): PyTorch's defaults pct 0.3, div 25, final 1e4 */
Test(lr_schedule_torch, onecycle_defaults_match_pytorch)
{
        static const double want[] = {
                0.004,           0.01316718427,   0.03716718427,   0.06683281573,
                0.09083281573,   0.1,             0.0987464006235, 0.0950484632013,
                0.0890916177571, 0.081174565395,  0.0716943001791, 0.0611262021936,
                0.0500002,       0.0388741978064, 0.0283060998209, 0.018825834605,
                0.0109087822429, 0.00495193679865, 0.00125399937649, 4e-07
        };
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.1f;
        o.schedule = STRATA_LR_ONECYCLE;
        o.t_max = 20;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        expect_lrs(&o, want, 20);
        cr_expect_float_eq(strata_optim_lr(&o, 25), strata_optim_lr(&o, 20), 0.0,
                           "past t_max the rate stays at its floor");
}

/* OneCycleLR(max_lr=0.2, total_steps=10, pct_start=0.5, div_factor=10, final_div_factor=100) */
Test(lr_schedule_torch, onecycle_settings_match_pytorch)
{
        static const double want[] = { 0.02,           0.0463603896932, 0.11,
                                       0.173639610307, 0.2,             0.180920797738,
                                       0.130970797738, 0.0692292022619, 0.0192792022619,
                                       0.0002 };
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.lr = 0.2f;
        o.schedule = STRATA_LR_ONECYCLE;
        o.t_max = 10;
        o.pct_start = 0.5f;
        o.div_factor = 10.0f;
        o.final_div_factor = 100.0f;
        cr_assert_eq(strata_optim_check(&o), STRATA_OK, "%s", strata_last_error());
        expect_lrs(&o, want, 10);
}

static void refused(const struct strata_optim *o, const char *needle)
{
        cr_expect_eq(strata_optim_check(o), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), needle), "'%s' lacks '%s'",
                           strata_last_error(), needle);
}

Test(lr_schedule_torch, bad_settings_refused_by_name)
{
        struct strata_optim o = STRATA_OPTIM_INIT;

        o.schedule = STRATA_LR_MULTISTEP;
        o.gamma = 0.0f;
        refused(&o, "multistep schedule: gamma 0");
        o.gamma = 0.5f;
        o.milestones[0] = 5;
        o.milestones[1] = 5;
        refused(&o, "milestone 1 (5) is not after milestone 0 (5)");
        o = (struct strata_optim)STRATA_OPTIM_INIT;
        o.schedule = STRATA_LR_ONECYCLE;
        o.t_max = 100;
        o.pct_start = 1.5f;
        refused(&o, "pct_start 1.5");
        o.pct_start = 0.0f;
        o.div_factor = 0.5f;
        refused(&o, "div_factor 0.5");
        o.div_factor = 0.0f;
        o.t_max = 3;
        refused(&o, "t_max 3 steps");
        o.t_max = 0;
        refused(&o, "t_max 0 steps");
}
