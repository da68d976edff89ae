/*
 * What the library asks of the machine's NUMA layout beside strata_arena_bind_numa() (public,
 * include/strata/arena.h): internal to the library.
 */
#ifndef STRATA_ALLOC_NUMA_H
#define STRATA_ALLOC_NUMA_H

/* 1 where binding memory to a node changes nothing: libnuma reports NUMA unavailable, or the
 * machine has one node; else 0. */
int strata__numa_single(void);

#endif /* STRATA_ALLOC_NUMA_H */
