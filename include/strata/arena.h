/*
 * Arenas: the only source of memory in Strata.
 *
 * An arena is one contiguous region handed out front to back (a bump allocator). It never
 * frees individual blocks; a whole arena is reset or released at once. Each arena records
 * where its memory came from (the caller, a static array, one mapping made at init, or a
 * parent arena it was carved from), what kind of memory it is (host, pinned host, device),
 * the NUMA node it is bound to, and its high-water mark.
 *
 * Planning: an arena initialised with strata_arena_init_plan() has no memory; it performs the
 * same alignment arithmetic as a real arena and only counts, so running the layout code of a
 * configuration against it yields exactly the bytes that configuration needs.
 *
 * Sealing: after setup the runtime seals its arenas. A sealed arena refuses every allocation
 * with STRATA_ESEALED and counts the refusals, so a stray allocation is visible, never a
 * silent fallback.
 *
 * Threading: an arena is not thread-safe. The runtime carves one sub-arena per device and
 * only that device's worker allocates from it; getters may be called from any thread once
 * the owner is quiescent.
 */
#ifndef STRATA_ARENA_H
#define STRATA_ARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Cache-line alignment: the default for every allocation. */
#define STRATA_ALIGN_CACHELINE 64u
/** Page alignment. */
#define STRATA_ALIGN_PAGE 4096u
/** Huge-page (2 MiB) alignment, on request. */
#define STRATA_ALIGN_HUGEPAGE (2u << 20)

/** Sizes in bytes. */
#define STRATA_KIB(n) ((size_t)(n) << 10)
#define STRATA_MIB(n) ((size_t)(n) << 20)
#define STRATA_GIB(n) ((size_t)(n) << 30)

/** What kind of memory an arena holds. */
enum strata_mem_kind {
        STRATA_MEM_HOST = 0,   /**< ordinary host memory */
        STRATA_MEM_PINNED = 1, /**< page-locked host memory (DMA staging) */
        STRATA_MEM_DEVICE = 2, /**< accelerator memory, not dereferenceable on the host */
};

/** Where an arena's memory came from: decides what strata_arena_release() may do. */
enum strata_mem_origin {
        STRATA_ORIGIN_NONE = 0,   /**< uninitialised or released */
        STRATA_ORIGIN_CALLER = 1, /**< memory the caller owns (heap, stack, anything) */
        STRATA_ORIGIN_STATIC = 2, /**< a static array of the application */
        STRATA_ORIGIN_MAPPED = 3, /**< one anonymous mapping made by strata_arena_map() */
        STRATA_ORIGIN_CARVED = 4, /**< a block of a parent arena */
        STRATA_ORIGIN_PLAN = 5,   /**< no memory: a dry run that only counts */
};

/** Options of an arena; zero-initialised fields take the defaults noted. */
struct strata_arena_opts {
        enum strata_mem_kind kind;     /**< default STRATA_MEM_HOST */
        enum strata_mem_origin origin; /**< CALLER or STATIC for strata_arena_init (default CALLER) */
        int numa_node;                 /**< NUMA node of the memory; -1 = unknown/any (use STRATA_NUMA_ANY) */
        size_t align;                  /**< default alignment of allocations; 0 = cache line */
        const char *name;              /**< for messages; a static string */
};

/** NUMA node value meaning "not bound". */
#define STRATA_NUMA_ANY (-1)
/** Default options: host memory, caller origin, any NUMA node, cache-line alignment. */
#define STRATA_ARENA_OPTS_INIT                                                                 \
        { STRATA_MEM_HOST, STRATA_ORIGIN_CALLER, STRATA_NUMA_ANY, 0, "arena" }

/**
 * An arena. The caller may place it anywhere (statically, on its stack, inside another
 * object); its fields are private and read through the getters below.
 */
struct strata_arena {
        /* private */
        unsigned char *base;           /* first usable byte (aligned to base_align) */
        size_t capacity;               /* usable bytes from base */
        size_t used;                   /* bytes handed out, including alignment padding */
        size_t high_water;             /* largest `used` ever seen, survives resets */
        size_t align;                  /* default alignment of allocations */
        size_t base_align;             /* alignment base is known to have */
        size_t max_align;              /* largest alignment ever requested */
        uint64_t refusals;             /* allocations refused after sealing */
        void *map_addr;                /* the mapping to unmap (MAPPED only) */
        size_t map_len;                /* its length */
        const char *name;              /* for messages */
        int numa_node;                 /* bound node, or STRATA_NUMA_ANY */
        enum strata_mem_kind kind;     /* host, pinned or device */
        enum strata_mem_origin origin; /* where the memory came from */
        unsigned sealed;               /* non-zero once sealed */
};

/**
 * @brief Make an arena over memory the caller supplies (heap, stack or a static array).
 *
 * The start is rounded up to the options' alignment; the bytes lost to rounding are not
 * usable. Nothing is written to the region.
 * @param a     The arena to initialise.
 * @param mem   The region; must not be NULL.
 * @param size  Its size in bytes; must be non-zero.
 * @param opts  Options, or NULL for STRATA_ARENA_OPTS_INIT.
 * @retval STRATA_OK      on success.
 * @retval STRATA_EINVAL  on a NULL argument, zero size, a bad alignment or origin.
 * @retval STRATA_ENOMEM  when rounding the start leaves nothing usable.
 */
int strata_arena_init(struct strata_arena *a, void *mem, size_t size,
                      const struct strata_arena_opts *opts);

/**
 * @brief Make a planning arena: it has no memory and counts what allocations would use.
 *
 * Its base is treated as aligned to STRATA_ALIGN_HUGEPAGE, so any alignment is honoured;
 * strata_arena_max_align() then tells the alignment the real region must have for the
 * counted size to be exact.
 * @param a    The arena to initialise.
 * @param opts Options (alignment, name), or NULL for defaults.
 * @retval STRATA_OK on success, STRATA_EINVAL on a NULL arena or bad alignment.
 */
int strata_arena_init_plan(struct strata_arena *a, const struct strata_arena_opts *opts);

/**
 * @brief Make an arena over one anonymous mapping of @p size bytes, made now.
 *
 * With an alignment of STRATA_ALIGN_HUGEPAGE or more the mapping is aligned to it and
 * transparent huge pages are requested. This is the only place the library asks the OS for
 * memory, and it happens at init.
 * @retval STRATA_OK, STRATA_EINVAL (bad arguments), STRATA_ESYS (mmap failed; message has errno).
 */
int strata_arena_map(struct strata_arena *a, size_t size, const struct strata_arena_opts *opts);

/**
 * @brief Carve a sub-arena of @p size bytes out of @p parent.
 *
 * The child inherits the parent's kind and NUMA node unless @p opts says otherwise; its
 * memory is one block of the parent, aligned to the child's alignment.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM (parent too small), STRATA_ESEALED.
 */
int strata_arena_carve(struct strata_arena *parent, struct strata_arena *child, size_t size,
                       const struct strata_arena_opts *opts);

/**
 * @brief Hand out @p size bytes aligned to @p align (0 = the arena's default).
 *
 * On failure *out is left unchanged. A planning arena sets *out to NULL and only counts.
 * @param a     The arena.
 * @param size  Bytes wanted; 0 is allowed and returns an aligned, empty block.
 * @param align A power of two, or 0.
 * @param out   Where to store the block's address.
 * @retval STRATA_OK on success.
 * @retval STRATA_EINVAL   on NULL arguments or a bad alignment.
 * @retval STRATA_ESEALED  the arena is sealed (the refusal is counted).
 * @retval STRATA_ENOMEM   not enough room left (message gives bytes wanted and left).
 */
int strata_arena_alloc(struct strata_arena *a, size_t size, size_t align, void **out);

/**
 * @brief Seal the arena: from now on every allocation is refused and counted.
 * @retval STRATA_OK, or STRATA_EINVAL on NULL.
 */
int strata_arena_seal(struct strata_arena *a);

/**
 * @brief Forget every allocation (the high-water mark is kept). Refused once sealed.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ESEALED.
 */
int strata_arena_reset(struct strata_arena *a);

/**
 * @brief Release the arena: unmaps a MAPPED region, does nothing to caller memory.
 * @retval STRATA_OK, or STRATA_EINVAL on NULL / an uninitialised arena.
 */
int strata_arena_release(struct strata_arena *a);

/**
 * @brief Bind the arena's pages to NUMA node @p node with libnuma.
 *
 * On a machine without NUMA (libnuma unavailable, or a single node) this is a no-op that
 * succeeds, and @p reason (if not NULL) is set to a static string saying why nothing was done;
 * after a real binding *reason is NULL. Planning and device arenas only record the node.
 * @retval STRATA_OK, STRATA_EINVAL (bad node), STRATA_ESYS (the kernel refused the binding).
 */
int strata_arena_bind_numa(struct strata_arena *a, int node, const char **reason);

/** @brief Bytes handed out so far (with alignment padding). */
size_t strata_arena_used(const struct strata_arena *a);
/** @brief Largest strata_arena_used() ever reached. */
size_t strata_arena_high_water(const struct strata_arena *a);
/** @brief Usable bytes of the region (SIZE_MAX for a planning arena). */
size_t strata_arena_capacity(const struct strata_arena *a);
/** @brief Allocations refused because the arena was sealed. */
uint64_t strata_arena_refusals(const struct strata_arena *a);
/** @brief Largest alignment ever requested (what a real region must be aligned to). */
size_t strata_arena_max_align(const struct strata_arena *a);
/** @brief Non-zero once sealed. */
int strata_arena_is_sealed(const struct strata_arena *a);
/** @brief The NUMA node recorded for the arena, or STRATA_NUMA_ANY. */
int strata_arena_numa_node(const struct strata_arena *a);
/** @brief The memory kind. */
enum strata_mem_kind strata_arena_kind(const struct strata_arena *a);
/** @brief Where the memory came from. */
enum strata_mem_origin strata_arena_origin(const struct strata_arena *a);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_ARENA_H */
