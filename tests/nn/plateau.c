/*
 * ReduceLROnPlateau (struct strata_plateau): the rate after each metric against PyTorch
 * 1.13's for the same settings (min mode with cooldown and floor, a NaN that never improves;
 * max mode with patience 0), written here; bad configurations refused with the struct
 * unchanged.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

static void expect_rates(struct strata_plateau *p, const double *metric, const double *want,
                         int n)
{
        float lr;

        for (int i = 0; i < n; i++) {
                cr_assert_eq(strata_plateau_step(p, metric[i], &lr), STRATA_OK);
                cr_expect(fabs((double)lr - want[i]) <= 1e-7 * want[i],
                          "evaluation %d (metric %g): lr %.9g, PyTorch %.9g", i + 1, metric[i],
                          (double)lr, want[i]);
        }
}

/* mode min, factor 0.5, patience 1, threshold 1e-4, cooldown 1, min_lr 0.01; lr 0.1 */
Test(plateau, min_mode_matches_pytorch)
{
        static const double metric[] = { 1.0,  0.9,  0.95, 0.95, 0.95, 0.8, 0.85,
                                         0.85, 0.85, 0.85, 0.85, 0.85, NAN, 0.1 };
        static const double want[] = { 0.1,   0.1,   0.1,    0.05,   0.05,   0.05,   0.05,
                                       0.025, 0.025, 0.025,  0.0125, 0.0125, 0.0125, 0.0125 };
        struct strata_plateau p = STRATA_PLATEAU_INIT;

        p.factor = 0.5f;
        p.patience = 1;
        p.cooldown = 1;
        p.min_lr = 0.01f;
        cr_assert_eq(strata_plateau_start(&p, 0.1f), STRATA_OK, "%s", strata_last_error());
        expect_rates(&p, metric, want, 14);
        cr_expect_eq(p.reductions, 3);
}

/* mode max, factor 0.1, patience 0 (PyTorch's other defaults); lr 0.1 */
Test(plateau, max_mode_matches_pytorch)
{
        static const double metric[] = { 0.5, 0.6, 0.6, 0.7, 0.69 };
        static const double want[] = { 0.1, 0.1, 0.01, 0.01, 0.001 };
        struct strata_plateau p = STRATA_PLATEAU_INIT;

        p.mode_max = 1;
        p.patience = 0;
        cr_assert_eq(strata_plateau_start(&p, 0.1f), STRATA_OK, "%s", strata_last_error());
        expect_rates(&p, metric, want, 5);
}

static void refused(struct strata_plateau *p, float lr, const char *needle)
{
        struct strata_plateau before = *p;

        cr_expect_eq(strata_plateau_start(p, lr), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), needle), "'%s' lacks '%s'",
                           strata_last_error(), needle);
        cr_expect_eq(memcmp(&before, p, sizeof(before)), 0, "a refusal changed the struct");
}

Test(plateau, bad_configurations_refused)
{
        struct strata_plateau p = STRATA_PLATEAU_INIT;
        float lr = 1.0f;

        cr_expect_eq(strata_plateau_start(NULL, 0.1f), STRATA_EINVAL);
        refused(&p, 0.0f, "learning rate 0");
        refused(&p, NAN, "learning rate nan");
        p.factor = 1.0f;
        refused(&p, 0.1f, "factor 1 not in (0, 1)");
        p.factor = 0.5f;
        p.patience = -1;
        refused(&p, 0.1f, "patience -1");
        p.patience = 2;
        p.threshold = -1.0f;
        refused(&p, 0.1f, "threshold -1");
        p.threshold = 0.0f;
        p.min_lr = 0.5f;
        refused(&p, 0.1f, "min_lr 0.5 not in [0, lr 0.1]");
        p.min_lr = 0.0f;
        p.mode_max = 2;
        refused(&p, 0.1f, "mode_max 2");
        p.mode_max = 0;
        /* a step before the start, or without somewhere to put the rate */
        cr_expect_eq(strata_plateau_step(&p, 1.0, &lr), STRATA_EINVAL);
        cr_expect_not_null(strstr(strata_last_error(), "not started"));
        cr_expect_eq(lr, 1.0f, "a refused step wrote the rate");
        cr_assert_eq(strata_plateau_start(&p, 0.1f), STRATA_OK);
        cr_expect_eq(strata_plateau_step(&p, 1.0, NULL), STRATA_EINVAL);
        cr_expect_eq(strata_plateau_step(NULL, 1.0, &lr), STRATA_EINVAL);
        cr_expect(isinf(p.best), "a refused step changed the state");
}
