/*
 * The multi-device parent (strategy/multi.c) and the state its children share (internal to
 * strategy/): the root of every strategy's chain. Its states post one job per event, a
 * function run for every device by the strategy's executor: the pinned workers (dp, ddp and
 * their children), or the caller's thread inline (single). Children write only the states and
 * hooks where they differ.
 */
#ifndef STRATA_STRATEGY_MULTI_H
#define STRATA_STRATEGY_MULTI_H

#include "drivers/comm_workers.h"
#include "kernel/workers.h"
#include "drivers/net.h"
#include "strategy/internal.h"

struct strata__multi;

/**
 * What a job of several processes adds to the devices of this one (strategy/procs.c): the
 * multi-device parents call these where a job spans processes, and their own otherwise.
 */
struct strata__peers {
        /** Place this process's workers beside the other processes' (STRATA_ENOTSUP: don't). */
        int (*place)(const struct strata_runtime *rt, struct strata__placement *out);
        /** Open the devices' communicators over the link, from arena @p comm. */
        int (*open)(struct strata_runtime *rt, struct strata_arena *comm);
        /** The step's metrics over every device of every process, in global device order. */
        int (*metrics)(struct strata_runtime *rt, struct strata_metrics *out);
};

/**
 * How a job reaches the devices: every device's pinned worker, or the caller's thread alone
 * (one device, inline). Every run is bounded and returns the first device's error.
 */
struct strata__executor {
        /** setup_environment: what the devices' work needs before the first job. */
        int (*start)(struct strata_runtime *rt, struct strata__multi *m);
        /** Run fn(dev, arg) for every device. */
        int (*run)(struct strata__multi *m, int (*fn)(int dev, void *arg), void *arg);
        /** Entering TORNDOWN: release what start took. */
        void (*stop)(struct strata_runtime *rt, struct strata__multi *m);
};

/** The pinned workers and their communicators, and the caller's thread alone. */
extern const struct strata__executor strata__pool_executor, strata__inline_executor;

/**
 * What dp and ddp share; each embeds it as the first member of its own private state, so the
 * runtime's priv pointer is also a pointer to this.
 */
struct strata__multi {
        const struct strata__executor *ex; /* how jobs reach the devices */
        struct strata__workers *workers; /* the pool executor's (NULL inline) */
        struct strata_comm *comm;      /* host buffers (the Strategy API's collectives) */
        struct strata_comm *dcomm;     /* replica tensors: comm, or over device memory */
        void *pool_mem, *comm_mem;     /* reserved at init, used at setup_environment */
        void *dcomm_mem;               /* the device communicator's (memory of its own) */
        size_t pool_bytes, comm_bytes;
        int sum_stats;                 /* SyncBatchNorm sums statistics with the communicator */
        const struct strata__peers *peers; /* a job of several processes, or NULL */
        void *peers_state;             /* the process layer's state (strategy/procs.c) */
        int event;                     /* the lifecycle event of the current job */
        const struct strata__step_args *args; /* its event argument (NULL outside steps) */
        strata__device_fn job;         /* what every device runs now */
        struct strata_coll coll;       /* the Strategy API collective being run */
        void *const *coll_bufs;
        const void *const *coll_send;
};

/** The multi-device state of a runtime run by dp or ddp. */
static inline struct strata__multi *strata__multi(const struct strata_runtime *rt)
{
        return rt->priv;
}

/**
 * The multi-device parent, the root of every strategy's chain (not a kind of its own):
 * setup_environment starts the executor, connect initialises every replica, setup readies and
 * warms every device, every step event runs the strategy's hooks on every device, batch_end
 * and eval events report metrics, entering TORNDOWN stops the executor.
 */
extern const struct strata__strategy strata__multi_parent;

/** ddp (strategy/ddp.c): the parent of the process layer. */
extern const struct strata__strategy strata__ddp;

/**
 * The process layer (strategy/procs.c), ddp's child and not a kind of its own: ERROR aborts
 * the job through the link, TORNDOWN closes it. The parent of the strategies over processes.
 */
extern const struct strata__strategy strata__procs;

/** zero1 (strategy/zero.c): the parent of zero2, itself fsdp's. */
extern const struct strata__strategy strata__zero1, strata__zero2;

/**
 * The states of a strategy over processes that joins them at setup_environment with
 * @p created_run (which then hands up: STRATA__SM_PARENT), and inherits every other state.
 */
#define STRATA__JOIN_STATES(created_run) { [STRATA_STATE_CREATED] = { .run = (created_run) } }

/**
 * ddp's gradient buckets, planned at setup: bucket k is elements [lo[k], hi[k]) of the flat
 * vector, complete once layer close[k]'s backward is done; bucket 0 holds the last layers.
 */
struct strata__buckets {
        size_t *lo, *hi;
        int *close;
        int n;
};

/** ddp's bucket cap: cfg.strategy.bucket_bytes, 25 MB when 0. */
size_t strata__ddp_bucket_cap(const struct strata_config *c);

/**
 * ddp's bucket rule for replica @p r and cap @p cap, bucket by bucket in bucket order (the
 * last layers first): fn(arg, lo, hi, close) for elements [lo, hi), complete after layer
 * close's backward. The buckets ddp plans at setup and the schedule every process agrees on.
 */
void strata__ddp_bucket_walk(const struct strata__replica *r, size_t cap,
                             void (*fn)(void *arg, size_t lo, size_t hi, int close), void *arg);

/** The buckets of a runtime whose state is ddp's (ddp, the process layer, zero1, zero2). */
const struct strata__buckets *strata__ddp_buckets(const struct strata_runtime *rt);

/** ddp's layout, the process layer's first part. */
int strata__ddp_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                       struct strata_arena *a, void **priv);

/** The layout of a strategy over processes: ddp's, then the process layer's state. */
int strata__procs_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, void **priv);

/**
 * The layout of a sharded strategy over processes: the process layer's, and a buffer for the
 * checkpoint pieces that cross to process 0 (strata__procs_to_zero()).
 */
int strata__procs_layout_sharded(const struct strata_config *c,
                                 const struct strata_device_ops *drv, struct strata_arena *a,
                                 void **priv);

/** Lay out the workers' and communicators' memory (plan and real alike; @p m NULL planning). */
int strata__multi_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, struct strata__multi *m);

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

/**
 * The CREATED state's run action of a strategy over its job (zero1, fsdp): at
 * setup_environment, strata__procs_join_job(), then the parents' (STRATA__SM_PARENT).
 */
int strata__procs_job_created(void *obj, int state, int event, void *arg);

/**
 * A strategy over processes' stop_due: a stop request counts once every process has seen it,
 * at the last step's exchange (the step's metrics), so all stop at the same step boundary;
 * strata_clear_stop() on every process forgets it.
 */
int strata__procs_stop_due(const struct strata_runtime *rt);

/** In a process strata_spawn() started: its region, rank and size (region NULL elsewhere). */
const struct strata__procs_where *strata__spawned(void);

/**
 * The checks of every strategy with several devices (ddp's validate, which its children
 * inherit): a driver that cannot reduce its memory is refused, naming strategy @p st.
 */
int strata__multi_validate(const struct strata__strategy *st, const struct strata_config *c,
                           const struct strata_device_ops *drv);

/**
 * Run @p fn for lifecycle @p event, with the event's argument @p arg (the step's, or NULL), on
 * every device and return the first error. With @p idle (no device but 0 has work) it runs on
 * device 0 alone.
 */
int strata__multi_post(struct strata_runtime *rt, int event, const void *arg,
                       strata__device_fn fn, int idle);

/** Run @p fn on every device (no lifecycle event: nothing can be injected). */
int strata__multi_run(struct strata_runtime *rt, strata__device_fn fn);

/** Step context of device @p dev. */
struct strata_step_ctx strata__multi_ctx(struct strata_runtime *rt, int dev, int train);

/**
 * The sharded strategies' gradient hook (zero2's own_grads, fsdp): after layer @p layer's
 * backward, its gradients to the owners of its parts, one reduce per shard in shard order
 * (ddp's sum in rank order), into each owner's shard of reduced gradients.
 */
int strata__reduce_layer(void *h, struct strata__replica *r, int layer);

/** The Strategy API's collectives on every device's thread (inline on one device). */
int strata__multi_collective(struct strata_runtime *rt, const struct strata_coll *op,
                             void *const *bufs, const void *const *send);

#endif /* STRATA_STRATEGY_MULTI_H */
