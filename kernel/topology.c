/*
 * Topology and placement through hwloc. hwloc allocates internally while it loads the
 * topology; that happens at init only, never on the step path.
 */
#include <hwloc.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "kernel/topology.h"
#include "base/base.h"

#define MAX_CORES 4096

static int load(hwloc_topology_t *topo)
{
        if (hwloc_topology_init(topo) != 0)
                return strata__fail(STRATA_ESYS, "hwloc: topology init failed");
        if (hwloc_topology_load(*topo) != 0) {
                hwloc_topology_destroy(*topo);
                return strata__fail(STRATA_ESYS, "hwloc: topology load failed");
        }
        return STRATA_OK;
}

/*
 * The CPUs this thread may run on: its affinity mask, which is what `taskset`, `mpirun
 * --bind-to` or a batch scheduler set (hwloc's own allowed set only reflects cgroups).
 */
static hwloc_bitmap_t allowed_set(hwloc_topology_t topo)
{
        hwloc_bitmap_t set = hwloc_bitmap_alloc();

        if (!set)
                return NULL;
        if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0 || hwloc_bitmap_iszero(set))
                hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(topo));
        hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
        return set;
}

/* Cores with at least one PU in @p set. */
static int cores_in(hwloc_topology_t topo, hwloc_const_bitmap_t set)
{
        int n = 0, total = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);

        for (int c = 0; c < total; c++)
                if (hwloc_bitmap_intersects(
                            hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)c)->cpuset, set))
                        n++;
        return n;
}

int strata__topology_read(struct strata__topology *t)
{
        hwloc_topology_t topo;
        hwloc_bitmap_t set;

        if (!t)
                return strata__fail(STRATA_EINVAL, "topology: out is NULL");
        STRATA_TRY(load(&topo));
        t->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
        t->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        t->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        t->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        if (t->numa_nodes < 1)
                t->numa_nodes = 1;
        set = allowed_set(topo);
        t->allowed_cores = set ? cores_in(topo, set) : t->cores;
        hwloc_bitmap_free(set);
        hwloc_topology_destroy(topo);
        return STRATA_OK;
}

static int numa_of(hwloc_topology_t topo, hwloc_obj_t core)
{
        hwloc_obj_t n = hwloc_get_next_obj_covering_cpuset_by_type(topo, core->cpuset,
                                                                     HWLOC_OBJ_NUMANODE, NULL);

        if (!n) {
                /* NUMA nodes are memory children in hwloc 2: walk up to one that has one. */
                for (hwloc_obj_t a = core; a; a = a->parent)
                        if (a->memory_arity > 0 && a->memory_first_child)
                                return (int)a->memory_first_child->os_index;
                return 0;
        }
        return (int)n->os_index;
}

/* The OS index of the first PU in both @p a and @p b, or -1. */
static int hwloc_bitmap_first_intersects_pu(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
        for (int i = hwloc_bitmap_first(a); i >= 0; i = hwloc_bitmap_next(a, i))
                if (hwloc_bitmap_isset(b, (unsigned)i))
                        return i;
        return -1;
}

/* The first free core of @p order (k entries) that holds one of the PUs, or -1. */
static int free_core_near(hwloc_topology_t topo, const int *order, int k,
                          const unsigned char *used, const int *pus, int npus)
{
        for (int i = 0; i < k; i++) {
                hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)order[i]);

                if (used[order[i]])
                        continue;
                if (npus == 0)
                        return order[i];
                for (int j = 0; j < npus; j++)
                        if (pus[j] >= 0 && hwloc_bitmap_isset(core->cpuset, (unsigned)pus[j]))
                                return order[i];
        }
        return -1;
}

int strata__topology_place(int n, struct strata__placement *out)
{
        return strata__topology_place_near(n, NULL, out);
}

int strata__topology_place_near(int n, int (*local)(int dev, int *pus, int max),
                               struct strata__placement *out)
{
        static int order[MAX_CORES];
        static unsigned char used[MAX_CORES];
        static int warned;
        int pus[256];
        hwloc_topology_t topo;
        hwloc_bitmap_t set;
        int ncores, nnodes, k = 0;

        if (n <= 0 || n > STRATA_MAX_DEVICES || !out)
                return strata__fail(STRATA_EINVAL, "placement: %d devices (1..%d)", n,
                                    STRATA_MAX_DEVICES);
        STRATA_TRY(load(&topo));
        ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        if (ncores <= 0) {
                hwloc_topology_destroy(topo);
                return strata__fail(STRATA_ESYS, "hwloc: no cores found");
        }
        if (ncores > MAX_CORES)
                ncores = MAX_CORES;
        set = allowed_set(topo);
        if (!set || hwloc_bitmap_iszero(set)) {
                hwloc_bitmap_free(set);
                hwloc_topology_destroy(topo);
                return strata__fail(STRATA_ESYS, "placement: the thread's CPU set is empty");
        }
        nnodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        if (nnodes < 1)
                nnodes = 1;
        /* Interleave cores across NUMA nodes: the i-th core of every node, then the next. */
        for (int round = 0; k < ncores && round < ncores; round++)
                for (int node = 0; node < nnodes && k < ncores; node++) {
                        int seen = 0;

                        for (int c = 0; c < ncores; c++) {
                                hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE,
                                                                         (unsigned)c);
                                int cn = nnodes > 1 ? numa_of(topo, core) : 0;
                                hwloc_obj_t nobj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE,
                                                                         (unsigned)node);

                                if (nnodes > 1 && nobj && cn != (int)nobj->os_index)
                                        continue;
                                if (!hwloc_bitmap_intersects(core->cpuset, set))
                                        continue; /* outside the CPU set we were given */
                                if (seen++ == round)
                                        order[k++] = c;
                        }
                }
        memset(used, 0, sizeof(used));
        for (int d = 0; d < n; d++) {
                int c = order[d % k];
                hwloc_obj_t core;

                if (local) {
                        int np = local(d, pus, (int)(sizeof(pus) / sizeof(pus[0])));
                        int near = np > 0 ? free_core_near(topo, order, k, used, pus, np) : -1;

                        c = near >= 0 ? near : free_core_near(topo, order, k, used, NULL, 0);
                        if (c < 0)
                                c = order[d % k]; /* every core taken: oversubscribe */
                        used[c] = 1;
                }
                core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)c);
                int first = hwloc_bitmap_first_intersects_pu(core->cpuset, set);
                hwloc_obj_t pu = first >= 0 ? hwloc_get_pu_obj_by_os_index(topo, (unsigned)first)
                                            : NULL;

                out[d] = (struct strata__placement){ .device = d, .core = c,
                                                    .pu = pu ? (int)pu->os_index : c,
                                                    .numa_node = numa_of(topo, core),
                                                    .shared = n > k };
        }
        if (n > k && !warned++)
                strata__log(STRATA_LOG_WARNING, "strata: warning: %d devices share the %d "
                            "core(s) of this process's CPU set; they will take turns", n, k);
        hwloc_bitmap_free(set);
        hwloc_topology_destroy(topo);
        return STRATA_OK;
}

int strata__placement_describe(const struct strata__placement *p, char *buf, size_t len)
{
        if (!p || !buf)
                return 0;
        return snprintf(buf, len, "device %d -> core %d (PU %d, NUMA node %d)%s", p->device,
                        p->core, p->pu, p->numa_node, p->shared ? " [shared: oversubscribed]" : "");
}
