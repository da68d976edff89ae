/* A sealed arena refuses every allocation with a distinct status and counts refusals. */
#include <criterion/criterion.h>

#include "strata/strata.h"

static unsigned char region[4096];

Test(arena_seal, refuses_and_counts)
{
        struct strata_arena a, c;
        void *p = NULL;

        cr_assert_eq(strata_arena_init(&a, region, sizeof(region), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 64, 0, &p), STRATA_OK);
        cr_assert_eq(strata_arena_seal(&a), STRATA_OK);
        cr_assert(strata_arena_is_sealed(&a));
        p = NULL;
        cr_assert_eq(strata_arena_alloc(&a, 64, 0, &p), STRATA_ESEALED);
        cr_assert_eq(strata_arena_alloc(&a, 1, 0, &p), STRATA_ESEALED);
        cr_assert_eq(strata_arena_carve(&a, &c, 64, NULL), STRATA_ESEALED);
        cr_assert_eq(strata_arena_reset(&a), STRATA_ESEALED);
        cr_assert_null(p);
        cr_assert_eq(strata_arena_refusals(&a), 4);
        cr_assert_eq(strata_arena_used(&a), 64);
}
