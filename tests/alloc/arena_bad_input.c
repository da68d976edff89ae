/* Every bad argument to the arena API gets a status and a message and changes nothing. */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"

static unsigned char region[4096];

Test(arena_bad_input, init_rejects_null_zero_and_bad_options)
{
        struct strata_arena a;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        cr_assert_eq(strata_arena_init(NULL, region, 64, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_init(&a, NULL, 64, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "memory is NULL"));
        cr_assert_eq(strata_arena_init(&a, region, 0, NULL), STRATA_EINVAL);
        o.align = 48;
        cr_assert_eq(strata_arena_init(&a, region, 64, &o), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "power of two"));
        o.align = 0;
        o.kind = (enum strata_mem_kind)9;
        cr_assert_eq(strata_arena_init(&a, region, 64, &o), STRATA_EINVAL);
        o.kind = STRATA_MEM_HOST;
        o.origin = STRATA_ORIGIN_MAPPED;
        cr_assert_eq(strata_arena_init(&a, region, 64, &o), STRATA_EINVAL);
        o.origin = STRATA_ORIGIN_CALLER;
        o.numa_node = -5;
        cr_assert_eq(strata_arena_init(&a, region, 64, &o), STRATA_EINVAL);
}

Test(arena_bad_input, init_too_small_after_alignment)
{
        struct strata_arena a;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        o.align = 4096;
        /* region+1 cannot be 4096-aligned within 8 bytes. */
        cr_assert_eq(strata_arena_init(&a, region + 1, 8, &o), STRATA_ENOMEM);
}

Test(arena_bad_input, alloc_rejects_bad_arguments_without_change)
{
        struct strata_arena a, zero;
        void *p = NULL;

        memset(&zero, 0, sizeof(zero));
        cr_assert_eq(strata_arena_init(&a, region, sizeof(region), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(NULL, 8, 0, &p), STRATA_EINVAL);
        cr_assert_eq(strata_arena_alloc(&a, 8, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_alloc(&a, 8, 3, &p), STRATA_EINVAL);
        cr_assert_eq(strata_arena_alloc(&a, 8, STRATA_ALIGN_HUGEPAGE * 2, &p), STRATA_EINVAL);
        cr_assert_eq(strata_arena_alloc(&zero, 8, 0, &p), STRATA_EINVAL);
        cr_assert_eq(strata_arena_used(&a), 0);
        cr_assert_null(p);
}

Test(arena_bad_input, carve_and_map_bad_arguments)
{
        struct strata_arena a, c;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        cr_assert_eq(strata_arena_init(&a, region, sizeof(region), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_carve(NULL, &c, 64, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_carve(&a, NULL, 64, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_carve(&a, &c, 8192, NULL), STRATA_ENOMEM);
        cr_assert_eq(strata_arena_used(&a), 0);
        cr_assert_eq(strata_arena_map(NULL, 64, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_map(&c, 0, NULL), STRATA_EINVAL);
        o.kind = STRATA_MEM_DEVICE;
        cr_assert_eq(strata_arena_map(&c, 4096, &o), STRATA_EINVAL);
        cr_assert_eq(strata_arena_map(&c, SIZE_MAX - 10, NULL), STRATA_EOVERFLOW);
        cr_assert_eq(strata_arena_seal(NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_reset(NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_release(NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_bind_numa(NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_bind_numa(&a, -1, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_arena_bind_numa(&a, 4096, NULL), STRATA_EINVAL);
}
