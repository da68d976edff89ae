/* NUMA binding: real on NUMA machines, a successful no-op with a reason elsewhere. */
#include <criterion/criterion.h>
#include <numa.h>
#include <sys/mman.h>

#include "strata/strata.h"

Test(arena_numa, bind_node0_or_explain)
{
        struct strata_arena a;
        const char *why = "unset";
        void *p;

        cr_assert_eq(strata_arena_map(&a, STRATA_MIB(1), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_bind_numa(&a, 0, &why), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_arena_numa_node(&a), 0);
        if (numa_available() < 0 || numa_max_node() == 0) {
                cr_assert_not_null(why, "a no-op must say why");
        } else {
                cr_assert_null(why);
        }
        cr_assert_eq(strata_arena_alloc(&a, 4096, 0, &p), STRATA_OK);
        ((volatile char *)p)[0] = 1;
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
}

Test(arena_numa, carved_children_inherit_node)
{
        struct strata_arena a, c;
        const char *why;

        cr_assert_eq(strata_arena_map(&a, STRATA_MIB(1), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_bind_numa(&a, 0, &why), STRATA_OK);
        cr_assert_eq(strata_arena_carve(&a, &c, STRATA_KIB(64), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_numa_node(&c), 0);
        cr_assert_eq(strata_arena_origin(&c), STRATA_ORIGIN_CARVED);
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
}
