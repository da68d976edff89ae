/*
 * The strategy registry: every strategy is found by its name and back, unknown names are
 * refused without touching the output, and every registered table is complete once its
 * parents' are taken in (checks, layout, state actions, a collective), with a chain of parents
 * the runtime can walk (no loop, no longer than the engine's bound), so the runtime can
 * dispatch into any of them without a NULL check. Inheritance itself: a member a table leaves
 * NULL is its parent's; caps are the parent's, less the drops, plus its own.
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
                int depth = 0, states = 0;

                cr_assert_not_null(st, "kind %d has no table", k);
                cr_assert(st->name && STRATA__INHERITED(st, ops.validate) &&
                          STRATA__INHERITED(st, ops.layout) && STRATA__INHERITED(st, ops.collective),
                          "%s: incomplete table", st->name);
                for (const struct strata__strategy *p = st; p; p = p->parent) {
                        cr_assert_leq(++depth, STRATA__SM_MAX_DEPTH, "%s: chain too long",
                                      st->name);
                        states += p->states != NULL;
                }
                cr_assert_gt(states, 0, "%s: no state actions in its chain", st->name);
        }
        cr_assert_null(strata__strategy_get(STRATA_STRATEGY_COUNT));
}

/* Hand-built tables: what a child leaves NULL is its parent's, what it sets is its own. */
static int check_a(const struct strata__strategy *st, const struct strata_config *c,
                   const struct strata_device_ops *d)
{
        (void)st, (void)c, (void)d;
        return 1;
}

static int check_b(const struct strata__strategy *st, const struct strata_config *c,
                   const struct strata_device_ops *d)
{
        (void)st, (void)c, (void)d;
        return 2;
}

Test(strategy_registry, children_inherit_what_they_leave_null)
{
        static const struct strata__strategy root = { .ops.validate = check_a,
                                                      .caps = STRATA__CAP_INVARIANT |
                                                              STRATA__CAP_ALL_REDUCE };
        static const struct strata__strategy mid = { .parent = &root,
                                                     .caps = STRATA__CAP_SHARD_STATE };
        static const struct strata__strategy leaf = { .parent = &mid, .ops.validate = check_b,
                                                      .drops = STRATA__CAP_ALL_REDUCE };

        cr_assert_eq(STRATA__INHERITED(&mid, ops.validate)(&mid, NULL, NULL), 1);
        cr_assert_eq(STRATA__INHERITED(&leaf, ops.validate)(&leaf, NULL, NULL), 2);
        cr_assert_null(STRATA__INHERITED(&leaf, ops.layout));
        cr_assert_eq(strata__caps(&mid), STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE |
                                         STRATA__CAP_SHARD_STATE);
        cr_assert_eq(strata__caps(&leaf), STRATA__CAP_INVARIANT | STRATA__CAP_SHARD_STATE);
}

/* The caps each strategy ends with, as its configuration checks and plan read them. */
Test(strategy_registry, caps_of_every_strategy)
{
        static const struct {
                enum strata_strategy_kind k;
                unsigned caps;
        } want[] = {
                { STRATA_STRATEGY_SINGLE, STRATA__CAP_INVARIANT | STRATA__CAP_MODELS },
                { STRATA_STRATEGY_DP, STRATA__CAP_REPLICATE },
                { STRATA_STRATEGY_DDP, STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE |
                                               STRATA__CAP_MODELS },
                { STRATA_STRATEGY_SPAWN, STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE |
                                                 STRATA__CAP_MODELS },
                { STRATA_STRATEGY_MPI, STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE |
                                               STRATA__CAP_MODELS },
                { STRATA_STRATEGY_ZERO1, STRATA__CAP_INVARIANT | STRATA__CAP_ALL_REDUCE |
                                                 STRATA__CAP_MODELS | STRATA__CAP_SHARD_STATE },
                { STRATA_STRATEGY_ZERO2, STRATA__CAP_INVARIANT | STRATA__CAP_MODELS |
                                                 STRATA__CAP_SHARD_STATE |
                                                 STRATA__CAP_SHARD_GRADS },
                { STRATA_STRATEGY_FSDP, STRATA__CAP_INVARIANT | STRATA__CAP_SHARD_STATE |
                                                STRATA__CAP_SHARD_PARAMS },
        };

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                const struct strata__strategy *st = strata__strategy_get(want[i].k);

                cr_assert_eq(strata__caps(st), want[i].caps, "%s: caps %#x, want %#x",
                             st->name, strata__caps(st), want[i].caps);
        }
}
