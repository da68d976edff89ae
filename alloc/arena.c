/*
 * Bump arenas over one region (see include/strata/arena.h for the contract).
 *
 * Offsets, not addresses, are aligned: base is itself aligned to base_align, so an offset
 * aligned to any power of two up to base_align gives an address aligned to it. A planning
 * arena pretends base_align is a huge page and records the largest alignment asked for, so
 * that the real region can be aligned accordingly and the counted size is exact.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/arena.h"
#include "strata/status.h"
#include "base/base.h"
#include "alloc/floats.h"

static int is_pow2(size_t x)
{
        return x != 0 && (x & (x - 1)) == 0;
}

static int check_opts(const struct strata_arena_opts *o, size_t *align)
{
        size_t al = o->align ? o->align : STRATA_ALIGN_CACHELINE;

        if (!is_pow2(al))
                return strata__fail(STRATA_EINVAL, "arena alignment %zu is not a power of two",
                                    al);
        if (al > STRATA_ALIGN_HUGEPAGE)
                return strata__fail(STRATA_EINVAL, "arena alignment %zu exceeds a huge page", al);
        if ((unsigned)o->kind > STRATA_MEM_DEVICE)
                return strata__fail(STRATA_EINVAL, "unknown memory kind %d", (int)o->kind);
        if (o->numa_node < STRATA_NUMA_ANY)
                return strata__fail(STRATA_EINVAL, "NUMA node %d is negative", o->numa_node);
        *align = al;
        return STRATA_OK;
}

static void fill(struct strata_arena *a, const struct strata_arena_opts *o, size_t align,
                 enum strata_mem_origin origin)
{
        memset(a, 0, sizeof(*a));
        a->align = align;
        a->kind = o->kind;
        a->numa_node = o->numa_node;
        a->name = o->name ? o->name : "arena";
        a->origin = origin;
        a->max_align = align;
}

int strata_arena_init(struct strata_arena *a, void *mem, size_t size,
                      const struct strata_arena_opts *opts)
{
        static const struct strata_arena_opts defaults = STRATA_ARENA_OPTS_INIT;
        const struct strata_arena_opts *o = opts ? opts : &defaults;
        enum strata_mem_origin origin = o->origin ? o->origin : STRATA_ORIGIN_CALLER;
        uintptr_t start, aligned;
        size_t align = 0;

        if (!a || !mem)
                return strata__fail(STRATA_EINVAL, "arena init: %s is NULL",
                                    !a ? "arena" : "memory");
        if (size == 0)
                return strata__fail(STRATA_EINVAL, "arena init: size is 0");
        if (origin != STRATA_ORIGIN_CALLER && origin != STRATA_ORIGIN_STATIC)
                return strata__fail(STRATA_EINVAL,
                                    "arena init: origin must be CALLER or STATIC, got %d",
                                    (int)origin);
        STRATA_TRY(check_opts(o, &align));
        start = (uintptr_t)mem;
        aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
        if (aligned < start || aligned - start >= size)
                return strata__fail(STRATA_ENOMEM,
                                    "arena init: %zu bytes leave nothing after aligning to %zu",
                                    size, align);
        fill(a, o, align, origin);
        a->base = (unsigned char *)aligned;
        a->capacity = size - (size_t)(aligned - start);
        a->base_align = align;
        /* The real alignment of the region may exceed what was asked: use it. */
        while (a->base_align < STRATA_ALIGN_HUGEPAGE && (aligned & (a->base_align * 2 - 1)) == 0)
                a->base_align *= 2;
        return STRATA_OK;
}

int strata_arena_init_plan(struct strata_arena *a, const struct strata_arena_opts *opts)
{
        static const struct strata_arena_opts defaults = STRATA_ARENA_OPTS_INIT;
        const struct strata_arena_opts *o = opts ? opts : &defaults;
        size_t align = 0;

        if (!a)
                return strata__fail(STRATA_EINVAL, "plan arena is NULL");
        STRATA_TRY(check_opts(o, &align));
        fill(a, o, align, STRATA_ORIGIN_PLAN);
        a->capacity = SIZE_MAX;
        a->base_align = STRATA_ALIGN_HUGEPAGE;
        return STRATA_OK;
}

int strata_arena_map(struct strata_arena *a, size_t size, const struct strata_arena_opts *opts)
{
        static const struct strata_arena_opts defaults = STRATA_ARENA_OPTS_INIT;
        const struct strata_arena_opts *o = opts ? opts : &defaults;
        size_t align = 0, len, lead, keep;
        unsigned char *p = NULL;

        if (!a)
                return strata__fail(STRATA_EINVAL, "arena map: arena is NULL");
        if (size == 0)
                return strata__fail(STRATA_EINVAL, "arena map: size is 0");
        STRATA_TRY(check_opts(o, &align));
        if (o->kind == STRATA_MEM_DEVICE)
                return strata__fail(STRATA_EINVAL, "arena map: device memory comes from its driver");
        if (strata__add_size(size, align < STRATA_ALIGN_PAGE ? 0 : align, &len) ||
            len > SIZE_MAX - STRATA_ALIGN_PAGE)
                return strata__fail(STRATA_EOVERFLOW, "arena map: %zu bytes overflow", size);
        len = STRATA__ALIGN_UP(len, STRATA_ALIGN_PAGE);
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
        if (p == MAP_FAILED)
                return strata__fail(STRATA_ESYS, "arena map: mmap of %zu bytes failed: %s", len,
                                    strerror(errno));
        lead = STRATA__ALIGN_UP((uintptr_t)p, align < STRATA_ALIGN_PAGE ? STRATA_ALIGN_PAGE : align) -
               (uintptr_t)p;
        /* the alignment's lead and what is left past the last page go back: the arena
         * holds its size rounded to a page of address space, what the limits counted (the
         * ends of one mapping: unmapping them splits nothing, and cannot fail) */
        keep = STRATA__ALIGN_UP(size, STRATA_ALIGN_PAGE);
        if (lead)
                (void)munmap(p, lead);
        if (len - lead > keep)
                (void)munmap(p + lead + keep, len - lead - keep);
        if (align >= STRATA_ALIGN_HUGEPAGE)
                (void)madvise(p + lead, keep, MADV_HUGEPAGE); /* a hint: failure is fine */
        fill(a, o, align, STRATA_ORIGIN_MAPPED);
        a->base = p + lead;
        a->capacity = size;
        a->base_align = align < STRATA_ALIGN_PAGE ? STRATA_ALIGN_PAGE : align;
        a->map_addr = p + lead;
        a->map_len = keep;
        return STRATA_OK;
}

/* The one place offsets are advanced: shared by allocation and carving. */
static int bump(struct strata_arena *a, size_t size, size_t align, unsigned char **out)
{
        size_t off, end;

        if (align == 0)
                align = a->align;
        if (!is_pow2(align))
                return strata__fail(STRATA_EINVAL, "%s: alignment %zu is not a power of two",
                                    a->name, align);
        if (align > a->base_align)
                return strata__fail(STRATA_EINVAL,
                                    "%s: alignment %zu exceeds the region's alignment %zu",
                                    a->name, align, a->base_align);
        if (a->sealed) {
                a->refusals++;
                return strata__fail(STRATA_ESEALED, "%s: allocation of %zu bytes after sealing",
                                    a->name, size);
        }
        off = STRATA__ALIGN_UP(a->used, align);
        if (off < a->used || strata__add_size(off, size, &end))
                return strata__fail(STRATA_EOVERFLOW, "%s: allocation of %zu bytes overflows",
                                    a->name, size);
        if (end > a->capacity)
                return strata__fail(STRATA_ENOMEM, "%s: %zu bytes wanted, %zu of %zu left",
                                    a->name, size, a->capacity - a->used, a->capacity);
        a->used = end;
        if (end > a->high_water)
                a->high_water = end;
        if (align > a->max_align)
                a->max_align = align;
        *out = a->origin == STRATA_ORIGIN_PLAN ? NULL : a->base + off;
        return STRATA_OK;
}

int strata_arena_alloc(struct strata_arena *a, size_t size, size_t align, void **out)
{
        unsigned char *p = NULL;

        if (!a || !out)
                return strata__fail(STRATA_EINVAL, "arena alloc: %s is NULL",
                                    !a ? "arena" : "out");
        if (a->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL, "arena alloc: arena is not initialised");
        STRATA_TRY(bump(a, size, align, &p));
        *out = p;
        return STRATA_OK;
}

int strata__arena_floats(struct strata_arena *a, size_t n, float **out)
{
        size_t bytes;
        void *p;

        if (strata__mul_size(n, sizeof(float), &bytes))
                return strata__fail(STRATA_EOVERFLOW, "arena %s: %zu floats overflow",
                                    a && a->name ? a->name : "", n);
        STRATA_TRY(strata_arena_alloc(a, bytes, 0, &p));
        *out = p;
        return STRATA_OK;
}

int strata_arena_carve(struct strata_arena *parent, struct strata_arena *child, size_t size,
                       const struct strata_arena_opts *opts)
{
        struct strata_arena_opts o;
        unsigned char *p = NULL;
        size_t align = 0;

        if (!parent || !child)
                return strata__fail(STRATA_EINVAL, "arena carve: %s is NULL",
                                    !parent ? "parent" : "child");
        if (parent->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL, "arena carve: parent is not initialised");
        if (opts) {
                o = *opts;
        } else {
                o = (struct strata_arena_opts)STRATA_ARENA_OPTS_INIT;
                o.kind = parent->kind;
                o.numa_node = parent->numa_node;
                o.align = parent->align;
        }
        STRATA_TRY(check_opts(&o, &align));
        STRATA_TRY(bump(parent, size, align, &p));
        fill(child, &o, align, parent->origin == STRATA_ORIGIN_PLAN ? STRATA_ORIGIN_PLAN
                                                                    : STRATA_ORIGIN_CARVED);
        child->base = p;
        child->capacity = size;
        child->base_align = parent->origin == STRATA_ORIGIN_PLAN ? STRATA_ALIGN_HUGEPAGE : align;
        return STRATA_OK;
}

int strata_arena_seal(struct strata_arena *a)
{
        if (!a || a->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL, "arena seal: arena is NULL or uninitialised");
        a->sealed = 1;
        return STRATA_OK;
}

int strata_arena_reset(struct strata_arena *a)
{
        if (!a || a->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL, "arena reset: arena is NULL or uninitialised");
        if (a->sealed) {
                a->refusals++;
                return strata__fail(STRATA_ESEALED, "%s: reset after sealing", a->name);
        }
        a->used = 0;
        return STRATA_OK;
}

int strata_arena_release(struct strata_arena *a)
{
        if (!a || a->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL,
                                    "arena release: arena is NULL or already released");
        if (a->origin == STRATA_ORIGIN_MAPPED && munmap(a->map_addr, a->map_len) != 0)
                return strata__fail(STRATA_ESYS, "arena release: munmap failed: %s",
                                    strerror(errno));
        memset(a, 0, sizeof(*a));
        return STRATA_OK;
}

size_t strata_arena_used(const struct strata_arena *a)
{
        return a ? a->used : 0;
}

size_t strata_arena_high_water(const struct strata_arena *a)
{
        return a ? a->high_water : 0;
}

size_t strata_arena_capacity(const struct strata_arena *a)
{
        return a ? a->capacity : 0;
}

uint64_t strata_arena_refusals(const struct strata_arena *a)
{
        return a ? a->refusals : 0;
}

size_t strata_arena_max_align(const struct strata_arena *a)
{
        return a ? a->max_align : 0;
}

int strata_arena_is_sealed(const struct strata_arena *a)
{
        return a ? (int)a->sealed : 0;
}

int strata_arena_numa_node(const struct strata_arena *a)
{
        return a ? a->numa_node : STRATA_NUMA_ANY;
}

enum strata_mem_kind strata_arena_kind(const struct strata_arena *a)
{
        return a ? a->kind : STRATA_MEM_HOST;
}

enum strata_mem_origin strata_arena_origin(const struct strata_arena *a)
{
        return a ? a->origin : STRATA_ORIGIN_NONE;
}
