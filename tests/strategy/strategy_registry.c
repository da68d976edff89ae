/*
 * The strategy registry: every strategy is found by its name and back, unknown names are
 * refused without touching the output, and every registered table is complete (checks,
 * layout, a state action table, a collective, every property), so the runtime can dispatch
 * into any of them without a NULL check.
 */
#include <criterion/criterion.h>

#include "strata/strata.h"
#include "strategy/internal.h"

Test(strategy_registry, names_round_trip)
{
        static const char *const names[] = { "single", "dp", "ddp", "zero1", "zero2", "fsdp" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                enum strata_strategy_kind k = STRATA_STRATEGY_COUNT;

                cr_assert_eq(strata_strategy_from_name(names[i], &k), STRATA_OK);
                cr_assert_str_eq(strata_strategy_name(k), names[i]);
        }
        cr_assert_str_eq(strata_strategy_name(STRATA_STRATEGY_COUNT), "?");
        cr_assert_str_eq(strata_strategy_name((enum strata_strategy_kind)-1), "?");
}

Test(strategy_registry, unknown_names_refused)
{
        enum strata_strategy_kind k = STRATA_STRATEGY_DDP;

        cr_assert_eq(strata_strategy_from_name("zero3", &k), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "zero3"), "%s", strata_last_error());
        cr_assert_eq(strata_strategy_from_name("DDP", &k), STRATA_EINVAL, "names are exact");
        cr_assert_eq(strata_strategy_from_name(NULL, &k), STRATA_EINVAL);
        cr_assert_eq(strata_strategy_from_name("ddp", NULL), STRATA_EINVAL);
        cr_assert_eq(k, STRATA_STRATEGY_DDP, "a refused lookup wrote its output");
}

Test(strategy_registry, every_table_complete)
{
        for (int k = 0; k < STRATA_STRATEGY_COUNT; k++) {
                const struct strata__strategy *st = strata__strategy_get(k);

                cr_assert_not_null(st, "kind %d has no table", k);
                cr_assert(st->name && st->validate && st->layout && st->states &&
                          st->collective && st->is_global_zero && st->root_device &&
                          st->world_size, "%s: incomplete table", st->name);
                cr_assert(st->handles_gradient_accumulation, "%s", st->name);
        }
        cr_assert_null(strata__strategy_get(STRATA_STRATEGY_COUNT));
}
