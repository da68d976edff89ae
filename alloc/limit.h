/*
 * What this process can get: the least of physical memory, its cgroup's memory limit (v2 or
 * v1, the cgroup and each of its ancestors) and what RLIMIT_AS and RLIMIT_DATA leave beside
 * what is mapped already. Read with open/read into stack buffers: no heap. Internal to the
 * library and its tools (strata_init() refuses a plan beyond it; strata-train sizes its data
 * by it).
 */
#ifndef STRATA_ALLOC_LIMIT_H
#define STRATA_ALLOC_LIMIT_H

#include <stddef.h>

/* Where the limits are read: NULL fields take the process's own files. Tests point them at
 * copies. */
struct strata__limit_files {
        const char *self_cgroup;        /* "/proc/self/cgroup" */
        const char *cgroup_root;        /* "/sys/fs/cgroup": v2 there or in unified/, v1 in memory/ */
        const char *statm;              /* "/proc/self/statm": what is mapped already */
};

/* The least limit and which one it is. */
struct strata__memory_limit {
        size_t bytes;                   /* SIZE_MAX when none is known */
        char why[224];                  /* "the machine has N bytes of memory", ... */
};

/* Fill @p out from @p files (NULL: the process's own). Never fails: an unreadable source is
 * skipped. */
void strata__memory_limit(const struct strata__limit_files *files,
                          struct strata__memory_limit *out);

/* Whether a mapping of @p bytes, with @p room left beside them by the limits, may start on a
 * huge page's boundary (decision 0112): a huge page or more, and room for the alignment's lead
 * while it is mapped (the bytes rounded up to a page). */
int strata__memory_huge(size_t bytes, size_t room);

#endif /* STRATA_ALLOC_LIMIT_H */
