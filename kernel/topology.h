/*
 * Machine topology (read with hwloc) and the placement of devices on cores: one core per
 * device, spread across NUMA nodes, never two devices on hyperthread siblings while whole
 * cores are free.
 */
#ifndef STRATA_KERNEL_TOPOLOGY_H
#define STRATA_KERNEL_TOPOLOGY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Counts of the machine's objects. */
struct strata__topology {
        int packages;
        int numa_nodes;
        int cores;
        int pus;
        int allowed_cores; /**< cores with a PU in the calling thread's CPU set (taskset...) */
};

/** Where one device runs. */
struct strata__placement {
        int device;
        int core;        /**< logical core index (hwloc order) */
        int pu;          /**< OS index of the PU the worker is bound to */
        int numa_node;   /**< OS index of the core's NUMA node (0 without NUMA) */
        int shared;      /**< non-zero when another device shares this core (oversubscribed) */
};

/**
 * @brief Read the machine's topology.
 * @retval STRATA_OK, STRATA_ESYS (hwloc could not load the topology).
 */
int strata__topology_read(struct strata__topology *t);

/**
 * @brief Choose a core for each of @p n devices.
 *
 * Cores are taken round-robin over NUMA nodes (node 0's first core, node 1's first core, …),
 * one PU per core. With more devices than cores the list wraps and the extra placements are
 * marked @c shared (the caller warns).
 * @param n    Devices, 1..STRATA_MAX_DEVICES.
 * @param out  @p n placements.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ESYS.
 */
int strata__topology_place(int n, struct strata__placement *out);

/**
 * @brief strata__topology_place(), but device d goes first to a free core holding one of the
 *        PUs @p local(d, pus, max) names (a GPU's local cores), then to the free core the
 *        usual order gives; names the machine does not have are ignored.
 * @param local  NULL: exactly strata__topology_place().
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ESYS.
 */
int strata__topology_place_near(int n, int (*local)(int dev, int *pus, int max),
                               struct strata__placement *out);

/**
 * @brief One line describing a placement ("device 0 -> core 0 (PU 0, NUMA 0)").
 * @return The number of characters snprintf would write.
 */
int strata__placement_describe(const struct strata__placement *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_KERNEL_TOPOLOGY_H */
