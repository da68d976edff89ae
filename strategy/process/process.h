/*
 * The process layer (internal to strategy/): what a job of several processes (spawn, mpi, and
 * zero1, zero2 and fsdp over strata_spawn()'s or a launcher's processes) adds to ddp across
 * the devices of this one. Its table (strategy/process/layer.c) is ddp's child and the parent
 * of the strategies over processes; its functions join the job, count its processes, and move
 * checkpoint pieces to process 0. strata_spawn() and launcher detection are launch.c; the
 * configuration fingerprint the processes compare is fingerprint.c.
 */
#ifndef STRATA_STRATEGY_PROCESS_PROCESS_H
#define STRATA_STRATEGY_PROCESS_PROCESS_H

#include "strategy/multi.h"

/**
 * The process layer (strategy/process/layer.c), ddp's child, not a kind of its own:
 * setup_environment joins the processes with the strategy's join operation, ERROR aborts the
 * job through the link, TORNDOWN closes it. The parent of the strategies over processes.
 */
extern const struct strata__strategy strata__procs;

/**
 * The layout of a sharded strategy over processes: the process layer's, and a buffer for the
 * checkpoint pieces that cross to process 0 (strata__procs_to_zero()).
 */
int strata__procs_layout_sharded(const struct strata_config *c,
                                 const struct strata_device_ops *drv, struct strata_arena *a,
                                 void **priv);

/**
 * setup_environment of a strategy over processes: join them over link @p ops at @p where
 * (drivers/net.h), check the job against the plan and set the runtime's global ranks.
 */
int strata__procs_join(struct strata_runtime *rt, const struct strata__net_ops *ops,
                       const void *where);

/**
 * @p bytes held by process @p from (at @p src there; ignored elsewhere) to process 0, through
 * a planned buffer of 64 KiB at a time: take(arg, p, n) runs on process 0 for each part, in
 * order. Every process of a sharded job calls it with the same @p from and @p bytes.
 */
int strata__procs_to_zero(struct strata_runtime *rt, int from, const void *src, size_t bytes,
                          void (*take)(void *arg, const void *p, size_t n), void *arg);

/** Every process of the job gets process 0's *status (a collective of the job). */
int strata__procs_agree(struct strata_runtime *rt, int *status);

/**
 * The processes of a job strata_spawn() started (this process is one of them): their count,
 * which cfg.process.count, when set, must equal.
 */
int strata__procs_spawned(const struct strata_config *c, int *procs);

/** The processes of an MPI job: cfg.process.count, or the launcher's (1 without one). */
int strata__procs_launched(const struct strata_config *c, int *procs);

/**
 * The processes of the job this process belongs to, whatever started it: strata_spawn()'s
 * when it started this process, else the configuration's or the launcher's (1 alone).
 */
int strata__procs_job(const struct strata_config *c, int *procs);

/** setup_environment over the MPI link (cfg.process.mpi_comm, or MPI_COMM_WORLD). */
int strata__procs_join_mpi(struct strata_runtime *rt);

/**
 * setup_environment of a strategy over the job this process belongs to (strata__procs_job()):
 * nothing alone, the spawn link in a process strata_spawn() started, the MPI link otherwise.
 */
int strata__procs_join_job(struct strata_runtime *rt);

/** In a process strata_spawn() started: its region, rank and size (region NULL elsewhere). */
const struct strata__shm_spawn_where *strata__spawned(void);

#endif /* STRATA_STRATEGY_PROCESS_PROCESS_H */
