/*
 * Jobs of several processes: what the launcher says about this process, and strata_spawn(),
 * which forks the processes of the `spawn` strategy (Lightning's DDPSpawn).
 *
 * The `mpi` strategy runs in processes started by mpirun or srun (one per node is best: each
 * runs its devices as pinned threads); `spawn` in processes strata_spawn() forked. Both are
 * ddp across every device of every process, with results bitwise equal to one process's ddp
 * with as many devices.
 */
#ifndef STRATA_PROCESS_H
#define STRATA_PROCESS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What the launcher told this process. */
struct strata_launch {
        int rank;             /**< this process in the job */
        int size;             /**< processes in the job */
        int local_rank;       /**< this process among those on its host */
        int local_size;       /**< processes on this host */
        const char *launcher; /**< "openmpi", "slurm", "pmi", "torchrun" or "none" */
};

/**
 * @brief Read the launcher's environment: Open MPI (OMPI_COMM_WORLD_RANK, _SIZE,
 *        _LOCAL_RANK, _LOCAL_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 *        SLURM_NTASKS_PER_NODE), PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS),
 *        torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), first found wins. No
 *        launcher: rank 0 of 1, launcher "none".
 * @retval STRATA_OK; STRATA_EINVAL (NULL, or a variable that is not a number in range: the
 *         message names it; *out unchanged).
 */
int strata_launch_detect(struct strata_launch *out);

/** A spawned process's work: return 0 on success (its exit status otherwise, 1..255). */
typedef int (*strata_spawn_fn)(int rank, int size, void *arg);

/** How a strata_spawn() job ended. */
struct strata_spawn_result {
        int failed_rank;  /**< the first process that failed, or -1 */
        int status;       /**< its exit status, or 128 + signal */
        char why[256];    /**< what happened, for the user */
        size_t bytes;     /**< bytes rank 0 returned with strata_spawn_return() */
};

/**
 * @brief Fork @p nprocs processes (2..64) that each run fn(rank, nprocs, arg) and exit; runtimes
 *        made in them with strategy STRATA_STRATEGY_SPAWN, ZERO1 or ZERO2 join each other. Call it before
 *        strata_init() (no runtime may be running: fork copies only the calling thread, so
 *        the children must not need the parent's other threads either). The parent waits: when a
 *        process exits non-zero or is killed, the others are told (they stop at their next
 *        collective) and killed after @p timeout_s + 1 s (0 = 300 s) if still running. Nothing
 *        is left in /dev/shm or /tmp: the shared region is anonymous memory. While it waits,
 *        SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 sent to the caller are forwarded to every
 *        process (as mpirun does; the caller's own actions for them are restored on return),
 *        so a job whose processes call strata_request_stop() on them stops as one process would.
 * @param ret, ret_bytes where rank 0's strata_spawn_return() bytes go (may be NULL, 0).
 * @retval STRATA_OK (every process exited 0); STRATA_EABORTED (one failed: @p res says which
 *         and how); STRATA_EINVAL (bad argument, or a runtime running); STRATA_ESYS.
 */
int strata_spawn(int nprocs, strata_spawn_fn fn, void *arg, double timeout_s, void *ret,
                 size_t ret_bytes, struct strata_spawn_result *res);

/**
 * @brief In a spawned process: hand @p bytes of @p data to the parent's strata_spawn()
 *        (rank 0's are kept; up to 64 KiB).
 * @retval STRATA_OK; STRATA_EINVAL (not in a spawned process, or too large).
 */
int strata_spawn_return(const void *data, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_PROCESS_H */
