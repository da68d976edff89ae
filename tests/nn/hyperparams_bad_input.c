/*
 * NaN and infinite hyper-parameters are refused with a message, wherever they are: the
 * optimizer's (lr, weight decay, momentum, dampening, AdamW betas and eps) and the modules'
 * (BatchNorm eps and momentum, dropout p, LeakyReLU slope). Each was accepted silently by some
 * check before.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/rig.h"

static void refused(const struct strata_config *c, const char *what, const char *needle)
{
        struct strata_plan_info pl;

        cr_assert_eq(strata_plan(c, &pl), STRATA_EINVAL, "%s was accepted", what);
        cr_assert_not_null(strstr(strata_last_error(), needle), "%s: %s", what,
                           strata_last_error());
}

Test(hyperparams_bad_input, optimizer_nan_and_inf_refused)
{
        const float bad[] = { NAN, INFINITY, -INFINITY };
        struct strata_config c;
        struct rig r;

        rig_init(&r, 1);
        for (int i = 0; i < 3; i++) {
                c = r.cfg;
                c.optim.lr = bad[i];
                refused(&c, "lr", "learning rate");
                c = r.cfg;
                c.optim.weight_decay = bad[i];
                refused(&c, "weight decay", "weight decay");
                c = r.cfg;
                c.optim.momentum = bad[i];
                refused(&c, "momentum", "momentum");
                c = r.cfg;
                c.optim.dampening = bad[i];
                refused(&c, "dampening", "dampening");
                c = r.cfg;
                c.optim.kind = STRATA_OPTIM_ADAMW;
                c.optim.momentum = 0.0f;
                c.optim.eps = bad[i];
                refused(&c, "adamw eps", "eps");
                c.optim.eps = 1e-8f;
                c.optim.beta1 = bad[i];
                refused(&c, "adamw beta1", "betas");
        }
        c = r.cfg;
        c.optim.dampening = 1.5f;
        refused(&c, "dampening 1.5", "dampening");
}

Test(hyperparams_bad_input, module_nan_and_inf_refused)
{
        const float bad[] = { NAN, INFINITY, -1.0f };
        struct strata_config c;
        struct rig r;

        rig_init(&r, 1); /* linear, batchnorm, relu, linear */
        for (int i = 0; i < 3; i++) {
                rig_init(&r, 1);
                r.mods[1].eps = bad[i];
                refused(&r.cfg, "batchnorm eps", "batchnorm");
                rig_init(&r, 1);
                r.mods[1].decay = bad[i];
                refused(&r.cfg, "batchnorm momentum", "batchnorm");
                rig_init_full(&r); /* with dropout at module 3 */
                r.mods[3].p = bad[i];
                refused(&r.cfg, "dropout p", "dropout");
        }
        rig_init(&r, 1);
        c = r.cfg;
        cr_assert_eq(strata_plan(&c, &(struct strata_plan_info){ 0 }), STRATA_OK,
                     "the rig itself is valid: %s", strata_last_error());
}

/* LeakyReLU's slope may be any finite number (negative too, as PyTorch allows); not NaN or inf. */
Test(hyperparams_bad_input, leaky_relu_slope_nan_and_inf_refused)
{
        const float bad[] = { NAN, INFINITY, -INFINITY };
        struct rig r;

        for (int i = 0; i < 3; i++) {
                rig_init(&r, 0); /* linear, relu, linear */
                r.mods[1] = (struct strata_module){ .ops = &strata_leaky_relu, .slope = bad[i] };
                refused(&r.cfg, "leaky-relu slope", "leaky-relu (module 1): negative slope");
        }
        r.mods[1].slope = -0.5f;
        cr_assert_eq(strata_plan(&r.cfg, &(struct strata_plan_info){ 0 }), STRATA_OK, "%s",
                     strata_last_error());
}
