/* The configuration by name (strata_config_set): fields set, bad keys and values refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

Test(config_keys, fields_are_set_by_name)
{
        struct strata_config c;

        strata_config_init(&c);
        cr_assert_eq(strata_config_set(&c, "devices", 3), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "strategy", STRATA_STRATEGY_DDP), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "optim.lr", 0.25), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "optim.warmup", 100), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "timeout_s", 2.5), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "bucket_bytes", 1 << 20), STRATA_OK);
        cr_assert_eq(c.devices, 3);
        cr_assert_eq(c.strategy, STRATA_STRATEGY_DDP);
        cr_assert_eq(c.optim.lr, 0.25f);
        cr_assert_eq(c.optim.warmup, 100);
        cr_assert_eq(c.timeout_s, 2.5);
        cr_assert_eq(c.bucket_bytes, (size_t)1 << 20);
        cr_assert_eq(strata_config_bytes(), sizeof(struct strata_config));
        cr_assert_eq(strata_module_ops_by_name("relu"), &strata_relu);
        cr_assert_null(strata_module_ops_by_name("conv2d"));
        cr_assert_null(strata_module_ops_by_name(NULL));
}

Test(config_keys, bad_keys_and_values_change_nothing)
{
        struct strata_config c, before;

        strata_config_init(&c);
        before = c;
        cr_assert_eq(strata_config_set(&c, "devicez", 2), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "devicez"), "%s", strata_last_error());
        cr_assert_eq(strata_config_set(&c, "devices", 2.5), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "devices", 1e12), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "seed", -1), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "optim.lr", NAN), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "optim.lr", 1e300), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(NULL, "devices", 2), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, NULL, 2), STRATA_EINVAL);
        cr_assert_eq(strata_config_set_model(NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(memcmp(&c, &before, sizeof(c)), 0, "a refused set changed the config");
}
