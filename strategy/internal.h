/*
 * The runtime object and the strategy interface (internal to strategy/).
 *
 * A strategy is one `const struct strata__strategy` in its own file: its checks, the private
 * state it lays out in the memory plan, its lifecycle state actions (children of shared
 * parent states where it shares behaviour), its collectives and its properties. Only
 * strategy/registry.c maps a strategy kind to its table; nothing else branches on the kind.
 */
#ifndef STRATA_STRATEGY_INTERNAL_H
#define STRATA_STRATEGY_INTERNAL_H

#include "strata/checkpoint.h"
#include "strata/comm.h"
#include "kernel/lifecycle.h"
#include "strata/runtime.h"
#include "kernel/trace.h"
#include "base/base.h"
#include "nn/precision.h"
#include "nn/replica.h"

struct strata_runtime;

/** A strategy: one constant table (see the file comment). */
struct strata__strategy {
        const char *name;
        /** Checks of the configuration this strategy adds to the common ones. */
        int (*validate)(const struct strata_config *c, const struct strata_device_ops *drv);
        /**
         * Lay out the strategy's private state after the replicas, from arena @p a. The same
         * code plans (a planning arena: *priv stays NULL) and builds (*priv gets the state).
         */
        int (*layout)(const struct strata_config *c, const struct strata_device_ops *drv,
                      struct strata_arena *a, void **priv);
        /** Its lifecycle state actions: STRATA_STATE_COUNT entries. */
        const struct strata__sm_state *states;
        /**
         * The Strategy API's collectives (reduce, all_gather, broadcast, barrier, and
         * reduce_boolean_decision through reduce): @p bufs[d] and @p send[d] are device d's.
         */
        int (*collective)(struct strata_runtime *rt, const struct strata_coll *op,
                          void *const *bufs, const void *const *send);
        int (*is_global_zero)(const struct strata_runtime *rt); /**< holds global rank 0 */
        int (*root_device)(const struct strata_runtime *rt);    /**< where the master lives */
        int (*world_size)(const struct strata_runtime *rt);     /**< devices in the run */
        /**
         * Strategies over several processes: how many the configuration runs in (the memory
         * plan splits the batch over processes x devices). NULL: one.
         */
        int (*processes)(const struct strata_config *c, int *procs);
        /**
         * Whether a stop request (strata_request_stop()) ends the run at this step boundary,
         * as every process agrees. NULL: this process's request, at once.
         */
        int (*stop_due)(const struct strata_runtime *rt);
        int handles_gradient_accumulation; /**< no_sync on accumulation micro-batches */
        int replication_callbacks;         /**< runs modules' replicate() (jactorch's dp) */
        int all_reduces_gradients;         /**< cfg.strategy.grad_allreduce's type applies */
        /**
         * The optimizer state is sharded over the world's devices (zero1, zero2): the plan
         * lays out one shard of it per device and pads the flat vectors to whole shards.
         */
        int sharded;
        /** The parameters and reduced gradients are sharded too (fsdp): one shard each. */
        int shards_params;
        /**
         * The reduced gradients alone may be sharded (zero2): one shard and a buffer of the
         * largest layer, when that is smaller than the whole vector, without accumulation or
         * clipping by norm (which keep the whole vector).
         */
        int shards_grads;
        /**
         * Runs invariant mode (cfg.strategy.invariant): each device's gradients are its
         * replica's chunk tree, summed across devices with the pairwise tree every
         * micro-batch (single, ddp and the strategies over processes).
         */
        int invariant;
};

/** Device memory and pinned staging of each device, reserved from the driver at init. */
struct strata__regions {
        void *dev[STRATA_MAX_DEVICES], *pin[STRATA_MAX_DEVICES];
        size_t dev_bytes, pin_bytes; /* what the runtime carves from each */
};

/**
 * The step events' argument: the public call builds it and dispatches every event of the step
 * with it (the state machine's event argument); run actions hand it to the devices' work.
 */
struct strata__step_args {
        const struct strata_batch *batch;
        struct strata_metrics *metrics; /**< the step's metrics (training, evaluation) */
        float *logits;                  /**< predict: the caller's rows x outputs */
        int sync;                       /**< this backward ends the accumulation window */
        int *nonfinite;                 /**< training: set when a gradient was not finite */
};

struct strata_runtime {
        struct strata__sm sm;
        struct strata__sm_table table;
        struct strata_config cfg;
        const struct strata_device_ops *dev;
        const struct strata__strategy *strategy;
        void *priv;                    /* the strategy's state, from its layout */
        struct strata_arena root;
        struct strata__replica *replicas;
        int nreplicas;                 /* this process's devices */
        int world, rank0;              /* devices of every process; global rank of device 0 */
        uint64_t step;                 /* training steps taken */
        struct strata_plan_info plan;
        int region_mapped;             /* root maps its own region: unmap at teardown */
        int abandoned;                 /* teardown left a stuck device running: keep memory */
        char abandoned_why[512];       /* ...and what strata_teardown() then says */
        struct strata__regions regions; /* driver reservations (memory of its own) */
        int micro;                     /* micro-batch within the accumulation window */
        int end_window;                /* the next step ends the window (a partial one) */
        int inj_dev, inj_event, inj_status;
        int inj_inf[STRATA_MAX_DEVICES]; /* each device's gradients count as non-finite once */
        struct strata__trace *trace;    /* every device's track; a timeline when asked */
        struct strata_ckpt_handle ckpt;            /* the checkpoint being written or read */
        uint64_t ckpt_steps[STRATA_MAX_DEVICES];   /* every device's optimizer steps */
        const struct strata__precision *prec;      /* the precision plugin */
        struct strata_grad_scaler scaler;          /* its loss scale (16-mixed) */
};

/**
 * strategy/runtime.c: STRATA_OK when @p rt is a live runtime (initialised, not torn down);
 * STRATA_EINVAL without dereferencing it otherwise.
 */
int strata__check_rt(const struct strata_runtime *rt);

/** Processes a job may have. */
#define STRATA_MAX_PROCESSES 64

/** strategy/config.c: devices of every process of the configuration's job. */
int strata__world(const struct strata_config *c, int *world);

/**
 * strategy/config.c: the common checks of @p c, then its strategy's; *st gets the strategy's
 * table and *dev the device driver (the configured one, or the accelerator's).
 */
int strata__check_config(const struct strata_config *c, const struct strata__strategy **st,
                         const struct strata_device_ops **dev);

/* strategy/plan.c: the memory plan, the layout and the memory a runtime is carved from. */

/**
 * The single layout of a runtime, from arena @p a: with a planning arena *out stays NULL,
 * nothing is built and @p pi gets the per-device sizes; on the real region (with the driver's
 * reservations @p rg) *out is the runtime.
 */
int strata__layout(const struct strata_config *c, const struct strata__strategy *st,
                   const struct strata_device_ops *drv, struct strata_arena *a,
                   const struct strata__regions *rg, struct strata_runtime **out,
                   struct strata_plan_info *pi);

/** Reserve each device's memory and staging from the driver, all or nothing. */
int strata__reserve(const struct strata_config *c, const struct strata_device_ops *dev,
                    const struct strata_plan_info *pl, struct strata__regions *rg);

/** Give back the driver's reservations of devices [0, n). */
void strata__unreserve(const struct strata_device_ops *dev, struct strata__regions *rg, int n);

/**
 * Open the runtime's root arena on the configured region (it must hold the plan once aligned)
 * or on a mapping of the planned size.
 */
int strata__open_region(const struct strata_config *c, const struct strata_plan_info *pl,
                        struct strata_arena *a);

/* strategy/common.c: what every strategy's actions use. */

/** The registry of strategies, indexed by enum strata_strategy_kind (NULL = not built). */
const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind);

/** Step context of a device's replica on the runtime's whole batch of @p rows_global rows. */
struct strata_step_ctx strata__ctx(const struct strata_runtime *rt, int train, int rows_global);

/** The failure a test injected for device @p dev in @p event, or STRATA_OK. */
int strata__injected(const struct strata_runtime *rt, int dev, int event);

/**
 * setup: let the driver ready its per-thread resources for every device (CPU: one OpenBLAS
 * buffer slot each) and its mixed-precision kernels, so no GEMM maps memory, compiles or
 * looks up a symbol during training.
 */
int strata__prepare(const struct strata_runtime *rt);

/**
 * The found-inf check, before replica @p dev's optimizer step, in every precision: with loss
 * scaling, unscale its gradients; then agree with every device of @p comm (NULL: this replica
 * decides alone) whether any gradient was not finite. A loss scaler then grows or backs off
 * its scale (device 0); without one, unless cfg.train.allow_nonfinite (then nothing is
 * checked), device 0 sets *a->nonfinite: the step is refused. *skip: the step is skipped (the
 * replica's parameters, optimizer state and step count stay).
 */
int strata__unscale_step(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                         const struct strata__step_args *a, int *skip);

/** Invariant mode: the chunks a batch is cut into (0: normal mode). */
int strata__chunks(const struct strata_config *c);

/**
 * Assign each device its rows of @p b (sizes differ by at most one); in invariant mode the
 * same rows, as whole chunks of the batch.
 */
void strata__split(struct strata_runtime *rt, const struct strata_batch *b);

/** Sum the devices' loss and correct counts in device order into *m (m may be NULL). */
void strata__metrics(const struct strata_runtime *rt, struct strata_metrics *m);

/** Most doubles of one device's metrics (strata__metrics_width()). */
#define STRATA__METRICS_MAX (2 + 3 * STRATA__BLOCKS_MAX)

/**
 * Doubles of one device's metrics under configuration @p c with @p world devices: (loss,
 * correct, rows), and with float targets the summed squared and absolute errors after them;
 * in invariant mode (correct, rows), then (loss, squared, absolute errors) of each of the
 * most blocks a device holds, for the chunks' tree across devices.
 */
int strata__metrics_width(const struct strata_config *c, int world);

/** This process's devices' metrics, strata__metrics_width() doubles each, into @p v. */
void strata__metrics_local(const struct strata_runtime *rt, double *v);

/** *m from @p n devices' metrics @p v, summed in device order or by the chunks' tree. */
void strata__metrics_sum(const struct strata_runtime *rt, const double *v, int n,
                         struct strata_metrics *m);

/** A collective among the runtime's one device: checks its arguments, copies for all_gather. */
int strata__local_collective(struct strata_runtime *rt, const struct strata_coll *op,
                             void *const *bufs, const void *const *send);

/** The stall report's bound from the configuration (0 = 60 s, negative = never -> 0). */
double strata__stall_s(const struct strata_config *c);

/** Properties every in-process strategy shares: rank 0 is here, root 0, world = devices. */
int strata__is_global_zero(const struct strata_runtime *rt);
int strata__root_device(const struct strata_runtime *rt);
int strata__world_size(const struct strata_runtime *rt);

/* ---- one device's work for each step event (strategy/step.c) ---- */

/** batch_to_device: device @p dev loads its rows [row0, row0 + rows) (labels when asked). */
void strata__dev_load(struct strata_runtime *rt, int dev, const struct strata__step_args *a,
                      int labels);

/** training_step: forward through every module and the loss with its gradient. */
int strata__dev_forward(struct strata_runtime *rt, int dev, const struct strata_step_ctx *c);

/** backward: every module, last to first; @p ready is called as each layer completes. */
int strata__dev_backward(struct strata_runtime *rt, int dev, const struct strata_step_ctx *c,
                         strata__grad_ready_fn ready);

/**
 * optimizer_step: the found-inf check (unscaling first with loss scaling; the skip agreed over
 * @p comm, or decided alone when NULL), clip, update; a skipped step leaves the parameters
 * and the optimizer state as they were.
 */
int strata__dev_step(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                     const struct strata__step_args *a);

/**
 * validation, test and predict steps: load, forward in evaluation mode, then the loss or (for
 * predict) the device's rows of the output copied into the caller's logits.
 */
int strata__dev_eval(struct strata_runtime *rt, int dev, const struct strata__step_args *a,
                     const struct strata_step_ctx *c, int predict);

/*
 * Whether @p d's devices compute in memory of their own, reserved at init and reached through
 * staging and the driver's collectives (reduce_many, copy_many), rather than in host memory
 * from the runtime's region. Where memory is planned and which communicator carries device
 * data follow from it; copies go through the driver's copy and view operations either way.
 */
static inline int strata__own_memory(const struct strata_device_ops *d)
{
        return d->reserve != NULL;
}

#endif /* STRATA_STRATEGY_INTERNAL_H */
