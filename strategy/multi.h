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
 * What a job of several processes adds to the devices of this one (strategy/process/job.c,
 * set when it joins them): the multi-device parent calls these where the job spans processes,
 * and its own otherwise.
 */
struct strata__peers {
        /** Place this process's workers beside the other processes' (STRATA_ENOTSUP: don't). */
        int (*place)(const struct strata_runtime *rt, struct strata__placement *out);
        /** Open the devices' communicators over the link, from arena @p comm. */
        int (*open)(struct strata_runtime *rt, struct strata_arena *comm);
        /**
         * The step's metrics over every device of every process, in global device order, into
         * @p a's metrics; a held step's (@p a->hold) this process's, exchanged with nothing.
         */
        int (*metrics)(struct strata_runtime *rt, const struct strata__step_args *a);
        /**
         * batch_start of a training step, the devices idle: the flags of this process that the
         * step's exchanges carry (drivers/net.h's strata__net_carry_set(), decision 0108).
         */
        void (*begin)(struct strata_runtime *rt, const struct strata__step_args *a);
};

/*
 * The flags a training step's exchanges between processes carry (decision 0108): a stop
 * request (bit 0), the call's held losses not finite (a bit a model above it) and a device's
 * loss of this step not finite.
 */
#define STRATA__CARRY_STOP 1u
#define STRATA__CARRY_HELD_SHIFT 1
#define STRATA__CARRY_LOSS (1u << 15)
_Static_assert(STRATA__CARRY_HELD_SHIFT + STRATA_MAX_MODELS <= 15,
               "the held losses' bits lie below the loss's");

/**
 * How a job reaches the devices: every device's pinned worker, or the caller's thread alone
 * (one device, inline). Every run is bounded and returns the first device's error.
 */
struct strata__executor {
        /** setup_environment: what the devices' work needs before the first job. */
        int (*begin)(struct strata_runtime *rt, struct strata__multi *m);
        /** Run fn(dev, arg) for every device. */
        int (*each)(struct strata__multi *m, int (*fn)(int dev, void *arg), void *arg);
        /** Entering TORNDOWN: release what begin took. */
        void (*end)(struct strata_runtime *rt, struct strata__multi *m);
};

/** The pinned workers and their communicators, and the caller's thread alone. */
extern const struct strata__executor strata__pool_executor, strata__inline_executor;

/**
 * What every strategy's state holds first (single's is this alone; dp's and ddp's embed it as
 * their first member), so the runtime's priv pointer is also a pointer to this.
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
        int event;                     /* the lifecycle event of the current job */
        const struct strata__peers *peers; /* a job of several processes, or NULL */
        void *job_state;               /* the job's, laid out after this (strategy/job.h) */
        /* the synchronisation variant, picked once at init (in event's old padding: the
         * struct's size, and so the plan, is what it was) */
        const struct strata__sync *sync;
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

/** ddp (strategy/ddp.c): the parent of zero1 (spawn and mpi are ddp in a job of processes). */
extern const struct strata__strategy strata__ddp;

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

/** The buckets of a runtime whose state is ddp's (ddp, spawn, mpi, zero1, zero2). */
const struct strata__buckets *strata__ddp_buckets(const struct strata_runtime *rt);

/**
 * ddp's layer hooks, which zero1's variants (and zero2's in invariant mode) share: the
 * buckets all-reduced as each one's last layer completes, summed in rank order or (tree) with
 * the pairwise tree over devices that completes invariant mode's chunks; and every
 * micro-batch's layer all-reduced in its layer buffer (accumulate_reduce each).
 */
int strata__ddp_bucket_ready(void *h, struct strata__replica *r, int layer);
int strata__ddp_tree_ready(void *h, struct strata__replica *r, int layer);
int strata__ddp_layer_each(void *h, struct strata__replica *r, int layer);

/** ddp's variants, the index of each in a set of them (ddp's own, zero1's). */
enum strata__ddp_sync {
        STRATA__DDP_BUCKETS,    /* the window's end all-reduces the buckets (no_sync before) */
        STRATA__DDP_EACH,       /* accumulate_reduce each: every micro-batch's layers */
        STRATA__DDP_TREE,       /* invariant mode, the buckets completing the chunks' tree */
        STRATA__DDP_INVARIANT,  /* invariant mode, the replica summing every layer itself */
        STRATA__DDP_SYNCS
};

/**
 * ddp's choice for configuration @p c, from @p set (indexed by enum strata__ddp_sync): with
 * @p rt (setup) the tree where its replicas allow it, else the invariant variant.
 */
const struct strata__sync *strata__ddp_pick_from(const struct strata__sync *const *set,
                                                 const struct strata_config *c,
                                                 const struct strata_runtime *rt);

/** ddp's layout, which zero1, zero2 and fsdp inherit. */
int strata__ddp_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                       struct strata_arena *a, void **priv);


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

/**
 * connect's work on every device for the runtime's active model (another model than model
 * 0, after its own connect: strategy/runtime/models.c): the variant's upcalls given to its
 * replicas, then the strategy's connect hook or the replicas' initial values.
 */
int strata__multi_connect(struct strata_runtime *rt);

/**
 * strata_input_grad()'s work, the batch @p a->batch split over the devices: each loads its
 * rows, runs forward in training mode and backward from its rows of @p a->dout, writing its
 * rows of the input gradient into @p a->dx (no gradient is reduced or kept).
 */
int strata__multi_input_grad(struct strata_runtime *rt, const struct strata__step_args *a);

/** Run @p fn on every device (no lifecycle event: nothing can be injected). */
int strata__multi_run(struct strata_runtime *rt, strata__device_fn fn);

/** Step context of device @p dev. */
struct strata_step_ctx strata__multi_ctx(struct strata_runtime *rt, int dev, int train);

/**
 * The sharded strategies' gradient hooks (zero2's own-grads and each, fsdp's): after layer
 * @p layer's backward, its gradients to the owners of its parts, one reduce-scatter over the
 * shards (ddp's sum in rank order), into each owner's shard of reduced gradients; _each:
 * where every micro-batch is reduced, in place in the layer's gradients, for the replica to
 * add into the window's sum.
 */
int strata__zero_reduce_layer(void *h, struct strata__replica *r, int layer);
int strata__zero_reduce_layer_each(void *h, struct strata__replica *r, int layer);

/**
 * ddp's sum of squares of the whole reduced gradient into *@p ss on every device, from the
 * shards alone (zero2's own_grads, fsdp's own_params): the owners continue one running double
 * shard after shard (the kernels' sumsq_from), each broadcasting it (decision 0036).
 */
int strata__zero_sumsq(struct strata__multi *m, struct strata__replica *r, double *ss);

/** Lay out the workers' and communicators' memory (plan and real alike; @p m NULL planning). */
int strata__multi_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, struct strata__multi *m);

/** zero1 (strategy/zero.c): the parent of zero2, itself fsdp's. */
extern const struct strata__strategy strata__zero1, strata__zero2;

#endif /* STRATA_STRATEGY_MULTI_H */
