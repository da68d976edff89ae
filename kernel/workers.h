/*
 * Device workers: one pinned thread per device, stacks carved from an arena.
 *
 * The coordinator posts a command (a function and its argument) to every device; workers spin
 * briefly and then sleep on a futex; completion is a counter. The caller's thread may serve as
 * device 0. Every wait is bounded: when a device fails or a wait passes the timeout, every
 * other device is released, the first error is kept and returned.
 */
#ifndef STRATA_KERNEL_WORKERS_H
#define STRATA_KERNEL_WORKERS_H

#include <stddef.h>

#include "strata/arena.h"
#include "strata/group.h"
#include "kernel/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Work run on every device; returns a status. */
typedef int (*strata__work_fn)(int device, void *arg);

/** Pool configuration; zero fields take the defaults noted. */
struct strata__workers_config {
        int devices;                 /**< 1..STRATA_MAX_DEVICES */
        size_t stack_bytes;          /**< per worker thread, default 256 KiB */
        double timeout_s;            /**< every wait's bound, default 300 s */
        int caller_is_device0;       /**< 1: the caller runs device 0 itself (default via INIT) */
        int bind;                    /**< pin threads to their cores (default via INIT) */
        const struct strata__placement *placement; /**< NULL: strata__topology_place() */
        /** One track per device (kernel/trace.h): waits are recorded there, and a stall
         *  report says where each late device is. NULL: none. */
        struct strata__track *tracks;
        double stall_s; /**< report a wait longer than this on stderr (0: never) */
        /** Other processes' devices wait for this pool's at each collective (mpi, net): the
         *  pool keeps the kernel's scheduler slice (decision 0081: a short one measured 1.7x
         *  slower across processes, whose transports poll). */
        int peers;
};

#define STRATA__WORKERS_CONFIG_INIT { 1, 0, 0.0, 1, 1, NULL, NULL, 0.0, 0 }

struct strata__workers;
struct strata__track;

/** @brief Bytes strata__workers_start() takes from its arena for this configuration. */
int strata__workers_plan(const struct strata__workers_config *cfg, size_t *bytes);

/**
 * @brief Start the pool: place devices, carve stacks, create and pin the threads.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM (arena), STRATA_ESYS (thread creation).
 *         On failure no thread is left running.
 */
int strata__workers_start(struct strata__workers **w, struct strata_arena *a,
                         const struct strata__workers_config *cfg);

/**
 * @brief Run @p fn on every device and wait for all of them.
 * @return STRATA_OK, or the first error any device returned; STRATA_ETIMEDOUT when a device
 *         did not finish within the timeout (the pool is then unusable: STRATA_EABORTED).
 */
int strata__workers_run(struct strata__workers *w, strata__work_fn fn, void *arg);

/**
 * @brief Barrier among all devices, for use inside a work function.
 * @retval STRATA_OK; STRATA_EABORTED when another device failed; STRATA_ETIMEDOUT when the
 *         barrier waited past the timeout (it then aborts the others).
 */
int strata__workers_barrier(struct strata__workers *w, int device);

/**
 * @brief Record a failure of @p device: keeps the first error and releases every waiter.
 * @return @p status, for `return strata__workers_fail(w, dev, rc);`.
 */
int strata__workers_fail(struct strata__workers *w, int device, int status);

/**
 * @brief The failure domain of the pool's devices, for a communicator among them: a device's
 *        failure or timeout aborts the pool's current command, as strata__workers_fail() does.
 */
void strata__workers_group(struct strata__workers *w, struct strata_group *g);

/** @brief Number of devices. */
int strata__workers_count(const struct strata__workers *w);

/**
 * @brief Runs posted to the pool since it started (strata__workers_run()), each a meeting of
 *        every device with the coordinator: what a step's count of them is read from.
 */
unsigned strata__workers_runs(const struct strata__workers *w);

/**
 * @brief Worker pools of this process whose threads run (started, not yet stopped): what a
 *        fork would not copy (strata_spawn() refuses while any runs).
 */
int strata__workers_running(void);

/** @brief Placement of @p device (NULL when out of range). */
const struct strata__placement *strata__workers_placement(const struct strata__workers *w,
                                                        int device);

/**
 * @brief Stop and join every worker; the pool's memory stays in its arena. After a timeout a
 *        device that still has not returned 1 s into the stop is detached, not waited for.
 * @retval STRATA_OK; STRATA_EINVAL (NULL); STRATA_ETIMEDOUT: devices were abandoned (the
 *         message names them and where they were); the memory they may touch, the pool's
 *         included, must stay mapped.
 */
int strata__workers_stop(struct strata__workers *w);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_KERNEL_WORKERS_H */
