/*
 * Synchronisation variants (decision 0062): a table of configurations and the variant each
 * plans (strata_plan_sync(): zero2 keeps its shard of the gradients alone only where it is
 * smaller than the whole vector, and with two shards or more) and the one its runtime picks
 * at init (strata_sync_variant()), which differs where ddp's buckets complete invariant
 * mode's tree (a power of two of devices, one batch a window, no BatchNorm): the replicas'
 * layout says so. Bad inputs of both calls are refused with a message.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/rig.h"

/* The models: four hidden linears of 16 (a shard and the largest layer are smaller than the
 * padded vector: zero2 keeps its shard alone), or one wide layer (they are not). */
enum { DEEP, WIDE };

struct row {
        enum strata_strategy_kind kind;
        int devices, accumulate, each, invariant, bn, model;
        float clip_norm;
        const char *plan, *run;
};

static const struct row rows[] = {
        { STRATA_STRATEGY_SINGLE, 1, 1, 0, 0, 0, DEEP, 0.0f, "local", "local" },
        { STRATA_STRATEGY_SINGLE, 1, 2, 1, 0, 0, DEEP, 0.0f, "each", "each" },
        { STRATA_STRATEGY_DP, 2, 1, 0, 0, 0, DEEP, 1.0f, "master", "master" },
        { STRATA_STRATEGY_DP, 2, 2, 1, 0, 0, DEEP, 0.0f, "each", "each" },
        { STRATA_STRATEGY_DDP, 2, 1, 0, 0, 0, DEEP, 1.0f, "buckets", "buckets" },
        { STRATA_STRATEGY_DDP, 2, 3, 1, 0, 0, DEEP, 0.0f, "each", "each" },
        { STRATA_STRATEGY_DDP, 2, 1, 0, 1, 0, DEEP, 0.0f, "invariant", "tree" },
        { STRATA_STRATEGY_DDP, 3, 1, 0, 1, 0, DEEP, 0.0f, "invariant", "invariant" },
        { STRATA_STRATEGY_DDP, 2, 2, 0, 1, 0, DEEP, 0.0f, "invariant", "invariant" },
        { STRATA_STRATEGY_DDP, 2, 1, 0, 1, 1, DEEP, 0.0f, "invariant", "invariant" },
        { STRATA_STRATEGY_ZERO1, 2, 1, 0, 0, 0, DEEP, 1.0f, "buckets", "buckets" },
        { STRATA_STRATEGY_ZERO1, 2, 2, 1, 0, 0, DEEP, 0.0f, "each", "each" },
        { STRATA_STRATEGY_ZERO1, 2, 1, 0, 1, 0, DEEP, 0.0f, "invariant", "tree" },
        { STRATA_STRATEGY_ZERO2, 2, 1, 0, 0, 0, DEEP, 0.0f, "own-grads", "own-grads" },
        { STRATA_STRATEGY_ZERO2, 2, 1, 0, 0, 0, DEEP, 1.0f, "own-grads", "own-grads" },
        { STRATA_STRATEGY_ZERO2, 2, 2, 0, 0, 0, DEEP, 0.0f, "buckets", "buckets" },
        { STRATA_STRATEGY_ZERO2, 2, 2, 0, 0, 0, DEEP, 1.0f, "buckets-gather",
          "buckets-gather" },
        { STRATA_STRATEGY_ZERO2, 2, 2, 1, 0, 0, DEEP, 1.0f, "each", "each" },
        { STRATA_STRATEGY_ZERO2, 2, 1, 0, 0, 0, WIDE, 0.0f, "buckets", "buckets" },
        { STRATA_STRATEGY_ZERO2, 2, 1, 0, 0, 0, WIDE, 1.0f, "buckets-gather", "buckets-gather" },
        { STRATA_STRATEGY_ZERO2, 2, 2, 1, 0, 0, WIDE, 1.0f, "each", "each" },
        { STRATA_STRATEGY_ZERO2, 1, 2, 1, 0, 0, DEEP, 0.0f, "each-whole", "each-whole" },
        { STRATA_STRATEGY_ZERO2, 1, 2, 1, 0, 0, DEEP, 1.0f, "each-gather", "each-gather" },
        { STRATA_STRATEGY_ZERO2, 2, 1, 0, 1, 0, DEEP, 1.0f, "invariant", "tree" },
        { STRATA_STRATEGY_FSDP, 2, 1, 0, 0, 0, DEEP, 0.0f, "layer", "layer" },
        { STRATA_STRATEGY_FSDP, 2, 1, 0, 0, 0, DEEP, 1.0f, "whole", "whole" },
        { STRATA_STRATEGY_FSDP, 2, 2, 0, 0, 0, DEEP, 0.0f, "whole", "whole" },
        { STRATA_STRATEGY_FSDP, 2, 2, 1, 0, 0, DEEP, 1.0f, "each", "each" },
        { STRATA_STRATEGY_FSDP, 2, 1, 0, 1, 0, DEEP, 0.0f, "invariant", "invariant" },
        { STRATA_STRATEGY_FSDP, 2, 1, 0, 1, 0, DEEP, 1.0f, "invariant-whole",
          "invariant-whole" },
};

/* Row @p w's configuration on @p r's data, with its model in @p mods. */
static struct strata_config config_of(struct rig *r, const struct row *w,
                                      struct strata_module *mods, struct strata_model *m)
{
        struct strata_config c = rig_cfg(r, w->kind, w->devices, w->bn);
        int n = 0;

        if (w->model == WIDE) {
                mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = 64 };
        } else {
                for (int i = 0; i < 4; i++)
                        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        }
        if (w->bn)
                mods[n++] = (struct strata_module){ .ops = &strata_batchnorm1d };
        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        *m = *c.model;
        m->modules = mods;
        m->nmodules = n;
        c.model = m;
        c.train.accumulate = w->accumulate;
        if (w->each)
                c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
        c.train.clip_norm = w->clip_norm;
        c.strategy.invariant = w->invariant;
        return c;
}

Test(sync_variants, each_configuration_names_its_variant, .timeout = 120)
{
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const struct row *w = &rows[i];
                struct strata_module mods[8];
                struct strata_model m;
                struct strata_runtime *rt;
                const char *plan = NULL, *run = NULL;
                struct rig r;
                struct strata_config c;

                rig_init(&r, 0);
                c = config_of(&r, w, mods, &m);
                cr_assert_eq(strata_plan_sync(&c, &plan), STRATA_OK, "row %zu: %s", i,
                             strata_last_error());
                cr_assert_str_eq(plan, w->plan, "row %zu (%s): the plan asks for %s", i,
                                 strata_strategy_name(w->kind), plan);
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "row %zu: %s", i,
                             strata_last_error());
                cr_assert_eq(strata_sync_variant(rt, &run), STRATA_OK, "row %zu: %s", i,
                             strata_last_error());
                cr_assert_str_eq(run, w->run, "row %zu (%s): the runtime runs %s", i,
                                 strata_strategy_name(w->kind), run);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
}

Test(sync_variants, bad_inputs_are_refused_with_a_message)
{
        const char *name = "unchanged";
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        cr_assert_eq(strata_plan_sync(NULL, &name), STRATA_EINVAL);
        cr_assert_str_eq(name, "unchanged");
        cr_assert_eq(strata_plan_sync(&c, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "name is NULL"), "%s", strata_last_error());
        c.strategy.devices = 0;
        cr_assert_eq(strata_plan_sync(&c, &name), STRATA_EINVAL);
        cr_assert_str_eq(name, "unchanged");
        c.strategy.devices = 2;
        cr_assert_eq(strata_sync_variant(NULL, &name), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "not a live runtime"), "%s", strata_last_error());
        cr_assert_str_eq(name, "unchanged");
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_sync_variant(rt, NULL), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "name is NULL"), "%s", strata_last_error());
        cr_assert_eq(strata_sync_variant(rt, &name), STRATA_OK);
        cr_assert_str_eq(name, "buckets");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
