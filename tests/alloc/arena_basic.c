/* Arenas hand out aligned, non-overlapping blocks and keep a high-water mark. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strata/strata.h"

static _Alignas(4096) unsigned char region[8192];

Test(arena_basic, blocks_are_aligned_and_disjoint)
{
        struct strata_arena a;
        void *p, *q, *r;

        cr_assert_eq(strata_arena_init(&a, region + 3, sizeof(region) - 3, NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 10, 0, &p), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 100, 0, &q), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 1, 0, &r), STRATA_OK);
        cr_assert_eq((uintptr_t)p % 64, 0);
        cr_assert_eq((uintptr_t)q % 64, 0);
        cr_assert_eq((uintptr_t)r % 64, 0);
        cr_assert((unsigned char *)q >= (unsigned char *)p + 10);
        cr_assert((unsigned char *)r >= (unsigned char *)q + 100);
        cr_assert((unsigned char *)p >= region + 3);
        memset(p, 1, 10);
        memset(q, 2, 100);
        cr_assert_eq(((unsigned char *)p)[9], 1);
        cr_assert_eq(strata_arena_origin(&a), STRATA_ORIGIN_CALLER);
}

Test(arena_basic, larger_alignment_on_request)
{
        struct strata_arena a;
        void *p, *q;

        cr_assert_eq(strata_arena_init(&a, region, sizeof(region), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 1, 0, &p), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 1, 1024, &q), STRATA_OK);
        cr_assert_eq((uintptr_t)q % 1024, 0);
        cr_assert_eq(strata_arena_max_align(&a), 1024);
}

Test(arena_basic, high_water_survives_reset)
{
        struct strata_arena a;
        void *p;

        cr_assert_eq(strata_arena_init(&a, region, sizeof(region), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 1000, 0, &p), STRATA_OK);
        cr_assert_eq(strata_arena_used(&a), 1000);
        cr_assert_eq(strata_arena_reset(&a), STRATA_OK);
        cr_assert_eq(strata_arena_used(&a), 0);
        cr_assert_eq(strata_arena_alloc(&a, 10, 0, &p), STRATA_OK);
        cr_assert_eq(strata_arena_high_water(&a), 1000);
}

Test(arena_basic, exhaustion_reports_and_changes_nothing)
{
        struct strata_arena a;
        void *p = (void *)0x1, *q;
        size_t used;

        cr_assert_eq(strata_arena_init(&a, region, 4096, NULL), STRATA_OK);
        cr_assert_eq(strata_arena_alloc(&a, 4000, 0, &q), STRATA_OK);
        used = strata_arena_used(&a);
        cr_assert_eq(strata_arena_alloc(&a, 200, 0, &p), STRATA_ENOMEM);
        cr_assert_eq(p, (void *)0x1, "out must be untouched on failure");
        cr_assert_eq(strata_arena_used(&a), used);
        cr_assert_not_null(strstr(strata_last_error(), "200 bytes wanted"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_arena_alloc(&a, SIZE_MAX, 0, &p), STRATA_EOVERFLOW);
        cr_assert_eq(strata_arena_used(&a), used);
}

Test(arena_basic, mapped_region_huge_aligned)
{
        struct strata_arena a;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;
        void *p;

        o.align = STRATA_ALIGN_HUGEPAGE;
        cr_assert_eq(strata_arena_map(&a, STRATA_MIB(3), &o), STRATA_OK);
        cr_assert_eq(strata_arena_origin(&a), STRATA_ORIGIN_MAPPED);
        cr_assert_eq(strata_arena_alloc(&a, 100, 0, &p), STRATA_OK);
        cr_assert_eq((uintptr_t)p % STRATA_ALIGN_HUGEPAGE, 0);
        memset(p, 7, 100);
        cr_assert_eq(strata_arena_alloc(&a, STRATA_MIB(3), 0, &p), STRATA_ENOMEM);
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
        cr_assert_eq(strata_arena_release(&a), STRATA_EINVAL, "second release is refused");
}

/* The process's mapped pages, statm's first field. */
static long mapped_pages(void)
{
        FILE *f = fopen("/proc/self/statm", "r");
        long pages = -1;

        cr_assert_not_null(f);
        cr_assert_eq(fscanf(f, "%ld", &pages), 1);
        fclose(f);
        return pages;
}

/*
 * A mapped arena holds its size rounded to a page of address space, whatever its alignment:
 * the lead the alignment needed and the rest of the mapping go back (what the memory limits
 * counted, RLIMIT_AS included), and its release gives back the rest.
 */
Test(arena_basic, mapped_region_holds_only_its_pages)
{
        long page = 4096, before = mapped_pages(), during;
        struct strata_arena a;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        o.align = STRATA_ALIGN_HUGEPAGE;
        cr_assert_eq(strata_arena_map(&a, STRATA_MIB(3) + 100, &o), STRATA_OK);
        during = mapped_pages();
        cr_assert_eq((size_t)(during - before) * (size_t)page, STRATA_MIB(3) + (size_t)page,
                     "%ld pages mapped for 3 MiB + 100 bytes", during - before);
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
        cr_assert_eq(mapped_pages(), before);
}

Test(arena_basic, static_origin_recorded)
{
        static unsigned char mem[1024];
        struct strata_arena a;
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        o.origin = STRATA_ORIGIN_STATIC;
        o.kind = STRATA_MEM_PINNED;
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), &o), STRATA_OK);
        cr_assert_eq(strata_arena_origin(&a), STRATA_ORIGIN_STATIC);
        cr_assert_eq(strata_arena_kind(&a), STRATA_MEM_PINNED);
        cr_assert_eq(strata_arena_release(&a), STRATA_OK);
}
