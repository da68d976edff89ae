/* NUMA binding of host arenas through libnuma; a documented no-op where there is no NUMA. */
#include <errno.h>
#include <numa.h>
#include <stdint.h>
#include <string.h>

#include "strata/arena.h"
#include "strata/status.h"
#include "alloc/numa.h"
#include "base/base.h"

int strata__numa_single(void)
{
        return numa_available() < 0 || numa_max_node() == 0;
}

int strata_arena_bind_numa(struct strata_arena *a, int node, const char **reason)
{
        uintptr_t start, end;
        int max;

        if (!a || a->origin == STRATA_ORIGIN_NONE)
                return strata__fail(STRATA_EINVAL, "bind numa: arena is NULL or uninitialised");
        if (node < 0)
                return strata__fail(STRATA_EINVAL, "bind numa: node %d is negative", node);
        if (reason)
                *reason = NULL;
        if (numa_available() < 0) {
                if (node != 0)
                        return strata__fail(STRATA_EINVAL,
                                            "bind numa: node %d, but NUMA is unavailable", node);
                a->numa_node = node;
                if (reason)
                        *reason = "libnuma reports NUMA unavailable on this machine";
                return STRATA_OK;
        }
        max = numa_max_node();
        if (node > max)
                return strata__fail(STRATA_EINVAL, "bind numa: node %d > highest node %d", node,
                                    max);
        a->numa_node = node;
        if (a->origin == STRATA_ORIGIN_PLAN || a->kind == STRATA_MEM_DEVICE) {
                if (reason)
                        *reason = "planning or device arena: node recorded only";
                return STRATA_OK;
        }
        if (max == 0) {
                if (reason)
                        *reason = "machine has a single NUMA node";
                return STRATA_OK;
        }
        { /* a node outside the memory nodes this process was given (cpuset.mems) is not used */
                struct bitmask *allowed = numa_get_mems_allowed();
                int ok = !allowed || numa_bitmask_isbitset(allowed, (unsigned)node);

                if (allowed)
                        numa_bitmask_free(allowed);
                if (!ok) {
                        if (reason)
                                *reason = "the core's node is not among this process's memory "
                                          "nodes: placement left to the kernel";
                        return STRATA_OK;
                }
        }
        /* mbind works on whole pages: bind the pages wholly inside the arena. */
        start = STRATA__ALIGN_UP((uintptr_t)a->base, STRATA_ALIGN_PAGE);
        end = ((uintptr_t)a->base + a->capacity) & ~(uintptr_t)(STRATA_ALIGN_PAGE - 1);
        if (end <= start) {
                if (reason)
                        *reason = "arena smaller than a page: node recorded only";
                return STRATA_OK;
        }
        errno = 0;
        numa_tonode_memory((void *)start, end - start, node);
        if (errno != 0)
                return strata__fail(STRATA_ESYS, "bind numa: binding to node %d failed: %s", node,
                                    strerror(errno));
        return STRATA_OK;
}
