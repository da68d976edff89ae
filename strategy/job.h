/*
 * The job (internal to strategy/): where a runtime's ranks live, beside the strategy that says
 * how they synchronise. One `const struct strata__job_ops` per kind of job: `none` (this
 * process alone), `spawn` (the processes strata_spawn() started, over the shared region),
 * `mpi` (an MPI launcher's processes), `auto` (whichever of these this process belongs to:
 * the sharded strategies span it). The registry (strategy/registry.c) pairs each strategy
 * kind with one; the runtime holds it (rt->job) from init. The strategies, the checkpoint
 * writer and the stop request reach the other processes only through it; the tables are
 * strategy/process/job.c's.
 */
#ifndef STRATA_STRATEGY_JOB_H
#define STRATA_STRATEGY_JOB_H

#include "strategy/internal.h"

/** A kind of job: what the runtime calls to count, join, agree with and leave the processes. */
struct strata__job_ops {
        const char *name; /**< none, spawn, mpi or auto */
        /**
         * The checks this job adds to strategy @p strategy's (named in the message) for
         * configuration @p c on driver @p drv: the link moves host buffers.
         */
        int (*validate)(const char *strategy, const struct strata_config *c,
                        const struct strata_device_ops *drv);
        /** How many processes configuration @p c runs in (the plan splits the batch by it). */
        int (*processes)(const struct strata_config *c, int *procs);
        /**
         * Lay out the job's state from arena @p a after the strategy's state @p priv (which
         * holds it: struct strata__multi's job_state; NULL while planning), with a buffer for
         * checkpoint pieces when @p pieces (the optimizer state is sharded).
         */
        int (*layout)(const struct strata_config *c, int pieces, struct strata_arena *a,
                      void *priv);
        /**
         * setup_environment, before the devices start: join the processes over the link, check
         * the job against the plan, set the global ranks and, over several processes, the
         * multi-device parent's peers (placement, communicators over the link with the
         * configuration fingerprint agreed, the step's metrics with the stop flag).
         */
        int (*join)(struct strata_runtime *rt);
        /**
         * Agree on a step's batch before any collective of the step: *@p status (this
         * process's verdict on its rows; @p rows the batch's) becomes the lowest refusing
         * process's, or a refusal when the processes' rows differ. @p hold (NULL: none): in,
         * whether this process's call may hold its losses (decision 0097: it passes no
         * metrics); out, whether every process's may, so that all make the same exchanges.
         * The return is the exchange's own (a process hung or gone).
         */
        int (*agree_batch)(struct strata_runtime *rt, int *status, int rows, int *hold);
        /** Whether a stop request ends the run at this step boundary, as every process agrees. */
        int (*stop_due)(const struct strata_runtime *rt);
        /**
         * @p bytes held by process @p from (at @p src there) to process 0, in order:
         * take(arg, p, n) runs on process 0 for each part. Every process calls it alike.
         */
        int (*to_zero)(struct strata_runtime *rt, int from, const void *src, size_t bytes,
                       void (*take)(void *arg, const void *p, size_t n), void *arg);
        /** Every process gets process 0's *@p status (a collective of the job). */
        int (*agree)(struct strata_runtime *rt, int *status);
        /** Entering ERROR: end the job (the others would wait for this process). */
        void (*abort)(struct strata_runtime *rt);
        /** Entering TORNDOWN, after the devices stopped: leave the job. */
        void (*close)(struct strata_runtime *rt);
};

/** The four jobs (strategy/process/job.c). */
extern const struct strata__job_ops strata__job_none, strata__job_spawn, strata__job_mpi,
        strata__job_auto;

/**
 * strata_clear_stop() calls so far in this process (strategy/runtime/stop.c): a job's copy of
 * the stop its processes agreed on counts only while no clear came after it.
 */
unsigned strata__stop_clears(void);

/**
 * Messages this process has sent over its job's communicator among the processes (the
 * steps' metrics and the batches' agreements; strategy/process/job.c): 0 in one process.
 * What the tests count a call's exchanges with (decision 0108).
 */
uint64_t strata__job_messages(const struct strata_runtime *rt);

/** The job strategy kind @p kind runs in (strategy/registry.c); NULL for an unknown kind. */
const struct strata__job_ops *strata__strategy_job(enum strata_strategy_kind kind);

#endif /* STRATA_STRATEGY_JOB_H */
