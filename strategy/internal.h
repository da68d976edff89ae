/* The runtime object and the strategy interface (internal to strategy/). */
#ifndef STRATA_STRATEGY_INTERNAL_H
#define STRATA_STRATEGY_INTERNAL_H

#include "strata/lifecycle.h"
#include "strata/runtime.h"
#include "strata/workers.h"
#include "base/base.h"
#include "nn/replica.h"


struct strata_runtime;

/** What a multi-device strategy adds to the shared event handling (NULL = nothing). */
struct strata__multi_hooks {
        int (*setup)(struct strata_runtime *rt);        /* at setup, before the warm-up */
        int (*before_batch)(struct strata_runtime *rt); /* after the split, before the event */
};

/** A strategy: its name, its state actions under the shared lifecycle, its hooks. */
struct strata__strategy {
        const char *name;
        const struct strata_sm_state *states; /* STRATA_STATE_COUNT entries */
        const struct strata__multi_hooks *hooks; /* multi-device strategies */
};

/** Device memory and pinned staging of each device, reserved from the driver at init. */
struct strata__regions {
        void *dev[STRATA_MAX_DEVICES], *pin[STRATA_MAX_DEVICES];
        size_t dev_bytes, pin_bytes; /* what the runtime carves from each */
};

/** Arguments of the step events, set by the public calls before dispatching. */
struct strata__step_args {
        const struct strata_batch *batch;
        struct strata_metrics *metrics;
        float *logits;
};

/* What the device functions of the multi-device strategies are asked to do. */
enum strata__job {
        STRATA__JOB_EVENT = 0, /* handle rt->event */
        STRATA__JOB_INIT,      /* connect: root initialises, everyone receives its parameters */
        STRATA__JOB_REPLICATE, /* dp: copy the master's parameters and state */
        STRATA__JOB_WARMUP,    /* setup: first GEMM on every device */
        STRATA__JOB_COLL,      /* a Strategy-level collective (rt->coll) */
};

struct strata_runtime {
        struct strata_sm sm;
        struct strata_sm_table table;
        struct strata_config cfg;
        const struct strata_device_ops *dev;
        const struct strata__strategy *strategy;
        struct strata_arena root;
        struct strata__replica *replicas;
        int nreplicas;
        uint64_t step;                 /* training steps taken */
        struct strata_plan_info plan;
        struct strata__step_args args;
        int region_mapped;             /* root maps its own region: unmap at teardown */
        struct strata__regions regions; /* driver reservations (not host-visible) */
        /* multi-device strategies */
        struct strata_workers *workers;
        struct strata_comm *comm;      /* host buffers (the Strategy API's collectives) */
        struct strata_comm *dcomm;     /* replica tensors: comm, or over device memory */
        void *pool_mem, *comm_mem;     /* reserved at init, used at setup_environment */
        void *dcomm_mem;               /* the device communicator's (not host-visible) */
        size_t pool_bytes, comm_bytes;
        void **layer_ctx;              /* dp: per layer, the context its copies share */
        size_t *bucket_lo, *bucket_hi; /* ddp: gradient buckets, bucket 0 = last layers */
        int *bucket_close;             /* layer whose gradients complete each bucket */
        int nbuckets;
        int micro;                     /* micro-batch within the accumulation window */
        int sync_grads;                /* this backward reduces gradients (last micro-batch) */
        int replicas_current;          /* dp: every replica holds the master's parameters */
        int event;                     /* the event the device functions handle */
        enum strata__job job;
        struct strata_coll coll;       /* for STRATA__JOB_COLL */
        void *const *coll_bufs;
        const void *const *coll_send;
        int inj_dev, inj_event, inj_status;
};

/* strategy/multi.c: the plumbing dp and ddp share. */

/**
 * The state actions dp and ddp share: every state runs one lifecycle event on every device,
 * with the strategy's hooks; entering TORNDOWN stops the workers.
 */
extern const struct strata_sm_state strata__multi_states[];

/** Lay out what a multi-device run needs beyond the replicas (plan and real alike). */
int strata__multi_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, struct strata_runtime *rt);
/** setup_environment: start the pinned workers and the communicator. */
int strata__multi_start(struct strata_runtime *rt);
/** teardown: stop the workers. */
void strata__multi_stop(struct strata_runtime *rt);
/** Run @p job (for events: rt->event) on every device; returns the first error. */
int strata__multi_run(struct strata_runtime *rt, enum strata__job job);
/** setup: reserve one GEMM buffer per device, warm every device up. */
int strata__multi_setup(struct strata_runtime *rt);
/** Handle lifecycle @p event on every device that has work for it; the first error. */
int strata__multi_event(struct strata_runtime *rt, int event);
/** Assign each device its rows of the current batch (sizes differ by at most one). */
void strata__multi_split(struct strata_runtime *rt, const struct strata_batch *b);
/** Sum the devices' loss and correct counts in device order into *m. */
void strata__multi_metrics(struct strata_runtime *rt, struct strata_metrics *m);
/** ddp: compute the gradient buckets from the layer sizes. */
void strata__multi_buckets(struct strata_runtime *rt);
/** dp: run every module's replication callback, copy 0 first, then the others. */
int strata__multi_callbacks(struct strata_runtime *rt);
/** Step context of device @p dev. */
struct strata_step_ctx strata__multi_ctx(struct strata_runtime *rt, int dev, int train);

/** The registry of strategies, indexed by enum strata_strategy_kind (NULL = not built). */
const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind);

/**
 * setup, CPU only: make OpenBLAS map one buffer slot per device and resolve its allocator now,
 * so that no GEMM maps memory or looks up a symbol (which allocates) during training. The
 * first GEMM cannot be relied on for this: small shapes take kernels without buffers.
 */
int strata__reserve_blas(const struct strata_runtime *rt);

/** Step context for replica @p r of the runtime. */
struct strata_step_ctx strata__ctx(const struct strata_runtime *rt, int train, int rows_global);

#endif /* STRATA_STRATEGY_INTERNAL_H */
