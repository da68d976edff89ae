/* A planning arena counts exactly what the same allocations use in a real region. */
#include <criterion/criterion.h>

#include "strata/strata.h"

/* A layout with mixed sizes and alignments, run against any arena. */
static int layout(struct strata_arena *a)
{
        static const size_t sizes[] = { 1, 63, 64, 65, 1000, 4097, 7, 100000 };
        static const size_t aligns[] = { 0, 8, 64, 4096, 0, 128, 0, 2048 };
        struct strata_arena child;
        void *p;

        for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                STRATA_TRY(strata_arena_alloc(a, sizes[i], aligns[i], &p));
        STRATA_TRY(strata_arena_carve(a, &child, 5000, NULL));
        STRATA_TRY(strata_arena_alloc(&child, 4000, 0, &p));
        return strata_arena_alloc(a, 33, 0, &p);
}

Test(arena_plan, plan_is_exact)
{
        static _Alignas(4096) unsigned char mem[1 << 18];
        struct strata_arena plan, real, tight;
        size_t need;

        cr_assert_eq(strata_arena_init_plan(&plan, NULL), STRATA_OK);
        cr_assert_eq(layout(&plan), STRATA_OK);
        need = strata_arena_used(&plan);
        cr_assert_eq(strata_arena_max_align(&plan), 4096);
        cr_assert_eq(strata_arena_init(&real, mem, need, NULL), STRATA_OK);
        cr_assert_eq(layout(&real), STRATA_OK, "the planned size must suffice");
        cr_assert_eq(strata_arena_used(&real), need);
        cr_assert_eq(strata_arena_init(&tight, mem, need - 1, NULL), STRATA_OK);
        cr_assert_eq(layout(&tight), STRATA_ENOMEM, "one byte less must not suffice");
}
