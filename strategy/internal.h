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
#include "base/faults.h"
#include "nn/precision.h"
#include "nn/replica.h"
#include "strategy/alike.h"

struct strata_runtime;
struct strata__multi;

/** Work of one device for one job of the multi-device parents (strategy/multi.h). */
typedef int (*strata__device_fn)(struct strata_runtime *rt, struct strata__multi *m, int dev);

/** What a strategy can do (its caps), for the configuration checks and the plan. */
#define STRATA__CAP_INVARIANT 1u      /* runs invariant mode (cfg.strategy.invariant) */
#define STRATA__CAP_ALL_REDUCE 2u     /* all-reduces gradients: grad_allreduce's type applies */
#define STRATA__CAP_REPLICATE 4u      /* runs modules' replicate() (jactorch's dp) */
#define STRATA__CAP_SHARD_STATE 8u    /* optimizer state sharded over the world's devices */
#define STRATA__CAP_SHARD_PARAMS 16u  /* parameters and reduced gradients sharded too (fsdp) */
/*
 * The reduced gradients alone may be sharded (zero2): one shard and a buffer of the largest
 * layer, when that is smaller than the whole vector, without accumulation or clipping by norm.
 */
#define STRATA__CAP_SHARD_GRADS 32u
/* Trains several models (cfg.models) on its workers: single, ddp (spawn, mpi); decision 0069 */
#define STRATA__CAP_MODELS 64u

struct strata__strategy;
struct strata__job_ops;

/** A strategy's operations: what the runtime calls on it outside the state machine. */
struct strata__strategy_ops {
        /**
         * Checks of the configuration this strategy adds to the common ones, for strategy
         * @p st (the kind being configured: an inherited check names it).
         */
        int (*validate)(const struct strata__strategy *st, const struct strata_config *c,
                        const struct strata_device_ops *drv);
        /**
         * Lay out the strategy's private state after the replicas, from arena @p a. The same
         * code plans (a planning arena: *priv stays NULL) and builds (*priv gets the state).
         */
        int (*layout)(const struct strata_config *c, const struct strata_device_ops *drv,
                      struct strata_arena *a, void **priv);
        /**
         * The Strategy API's collectives (reduce, all_gather, broadcast, barrier, and
         * reduce_boolean_decision through reduce): @p bufs[d] and @p send[d] are device d's.
         */
        int (*collective)(struct strata_runtime *rt, const struct strata_coll *op,
                          void *const *bufs, const void *const *send);
        /** setup (CONNECTED), before the devices warm up: plan what the strategy needs. */
        int (*setup)(struct strata_runtime *rt);
        /**
         * READY: bring the replicas in line before lifecycle @p event (a batch or an
         * evaluation) is split across them (dp: the master's copy; ddp: rank 0's running
         * statistics for an evaluation); NULL: nothing.
         */
        int (*align)(struct strata_runtime *rt, int event);
        /**
         * The synchronisation variant configuration @p c runs on driver @p drv. The layout
         * asks first with @p z and @p rt NULL, for the variant's shard (what the replicas
         * shard), then once more with the sizes @p z the shard made of it (zero2: whether a
         * shard is smaller than the whole vector) and, building a runtime, @p rt (its
         * replicas laid out: whether ddp's buckets can complete invariant mode's tree); a
         * runtime keeps that answer.
         */
        const struct strata__sync *(*pick)(const struct strata_config *c,
                                           const struct strata_device_ops *drv,
                                           const struct strata__shard_sizes *z,
                                           const struct strata_runtime *rt);
        /**
         * Several models (decision 0082): the strategy's state of the active model (ddp's
         * buckets), *@p bytes (at most STRATA__MODEL_STATE_BYTES) at the address returned.
         * setup prepares every model's (strata__models_state()); a call on another model
         * exchanges it with that model's copy, so no setup runs on the step path. NULL: the
         * strategy keeps no per-model state.
         */
        void *(*model_state)(struct strata_runtime *rt, size_t *bytes);
};

/** Room for one model's strategy state (strata__strategy_ops.model_state). */
#define STRATA__MODEL_STATE_BYTES 64

/** One device's share of a step event, run by the multi-device parent on every device. */
struct strata__strategy_hooks {
        /** connect: initialise the device's replica (and share rank 0's values). */
        strata__device_fn connect;
        /**
         * optimizer_step: the device's found-inf check, clipping and update, where the
         * strategy does not take the generic one (strata__dev_step(); dp's master step).
         */
        strata__device_fn step;
};

/**
 * A synchronisation variant (decision 0062): how one strategy sums gradients across devices
 * and steps, as one named constant table. Each strategy's pick() turns the configuration, the
 * driver and (at init) what the shard made of the plan into one of its variants, once; the
 * multi-device parent keeps the pointer and calls its members, which test no mode of their
 * own (NCCL's algorithm choice: picked once, then a function pointer).
 */
struct strata__sync {
        const char *name;               /* "buckets", "own-grads", "each", "tree", ... */
        /* how the replica calls up into the strategy, given to it at connect: after each
         * layer's backward on the window's last micro-batch (ready) and on the others
         * (micro; NULL: none, no_sync), and before a layer computes (fetch: fsdp's gather) */
        struct strata__replica_hooks hooks;
        /* at the window's end, after the device's pass (NULL: nothing) */
        strata__device_fn after_backward;
        /* clipping by norm: the global sum of squares of the reduced gradients into *ss
         * (NULL: the replica sums the whole vector it holds) */
        int (*sumsq)(struct strata_runtime *rt, struct strata__multi *m, int dev, double *ss);
        /* after the update: every shard's new parameters to every device (NULL: none) */
        strata__device_fn gather;
        unsigned shard;                 /* STRATA__SHARD_* the plan asks of the shard */
        int tree;                       /* the buckets complete invariant mode's tree */
        /* each replica holds (at least) its part of the reduced gradient: where the devices
         * share one address space, each updates its part and writes it into every replica
         * (step.c, decisions 0086 and 0096) */
        int split;
        /* ...the same bits in every replica of every process: each device may find a value
         * that is not finite alone, with no agreement (strata__dev_alone(), step.c) */
        int alone;
};

/**
 * A strategy: one constant table that names its parent and writes only what differs from it.
 * Every member left NULL (a state action, an operation, a hook) falls through to the
 * parent's, and so on up (strategy/inherit.c); caps are the parent's, less @c drops, plus
 * @c caps.
 */
struct strata__strategy {
        const char *name;                       /**< NULL: a parent only, not a kind */
        const struct strata__strategy *parent;  /**< what it inherits; NULL at the root */
        unsigned caps, drops;                   /**< STRATA__CAP_* it adds and removes */
        struct strata__strategy_ops ops;
        /**
         * Its lifecycle state actions, STRATA_STATE_COUNT entries (or NULL: none): a NULL
         * action, or a run action that returns STRATA__SM_PARENT, is the parent's. The
         * states' own parent pointers are unused: the table's parent is the parent.
         */
        const struct strata__sm_state *states;
        struct strata__strategy_hooks hooks;
};

/**
 * @p st's member @p f, or its nearest ancestor's where it is NULL (NULL if none has one). A GNU
 * statement expression (one evaluation of @p st, the member's own type): one of the few
 * extensions the C11 build relies on, listed in docs/decisions/0055-smaller-mends.md.
 */
#define STRATA__INHERITED(st, f)                                                               \
        ({                                                                                     \
                const struct strata__strategy *s__ = (st);                                     \
                while (s__->parent && !s__->f)                                                 \
                        s__ = s__->parent;                                                     \
                s__->f;                                                                        \
        })

/** The caps of strategy @p st: its parent's, less its drops, plus its own. */
unsigned strata__caps(const struct strata__strategy *st);

/**
 * The runtime's lifecycle state actions (strategy/inherit.c): each runs the strategy's action
 * for the state, or its parent's (run: leaf first, until one handles the event; entry: the
 * root's first; exit: the leaf's first), as the engine runs a state's parents.
 */
extern const struct strata__sm_state strata__strategy_states[STRATA_STATE_COUNT];

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
        const float *dout;              /**< input_grad: the caller's output gradient */
        float *dx;                      /**< input_grad: the input gradient's rows */
        int ran;                        /**< training: backward and optimizer_step already
                                             ran on the devices with training_step's job */
        int hold;                       /**< training: the loss is judged with a later step of
                                             the call (its metrics this process's, exchanged
                                             with nothing) */
        unsigned *held;                 /**< training: the call's held losses not finite here,
                                             a bit each; after this step's exchange, the job's */
};

struct strata_runtime {
        struct strata__sm sm;
        struct strata__sm_table table;
        struct strata_config cfg;
        const struct strata_device_ops *dev;
        const struct strata__strategy *strategy;
        const struct strata__job_ops *job; /* where its ranks live (strategy/job.h) */
        void *priv;                    /* the strategy's state, from its layout */
        struct strata_arena root;
        struct strata__replica *replicas; /* nreplicas of strata__replica_bytes: strata__rep() */
        int nreplicas;                 /* this process's devices */
        int world, rank0;              /* devices of every process; global rank of device 0 */
        /* split steps left each device's part of the optimizer state in its own replica alone
         * (decision 0100): strata__dev_opt_whole() before a read of a whole replica's (in the
         * padding before step: the runtime, and every plan, keeps its size) */
        int opt_parts;
        uint64_t step;                 /* training steps taken */
        struct strata_plan_info plan;
        int region_mapped;             /* root maps its own region: unmap at teardown */
        int abandoned;                 /* teardown left a stuck device running: keep memory */
        /* the models beside model 0 (strategy/runtime/models.c), or NULL: one model */
        struct strata__models *models;
        /* ...and what strata_teardown() then says (488: the job's pointer, cfg.models and
         * models took 8 bytes each, so the runtime, and every plan, keeps its size) */
        char abandoned_why[488];
        struct strata__regions regions; /* driver reservations (memory of its own) */
        int micro;                     /* micro-batch within the accumulation window */
        int end_window;                /* the next step ends the window (a partial one) */
        struct strata__faults *faults; /* a test's injected failures (base/faults.h), or NULL */
        struct strata__trace *trace;    /* every device's track; a timeline when asked */
        struct strata_ckpt_handle ckpt;            /* the checkpoint being written or read */
        uint64_t ckpt_steps[STRATA_MAX_DEVICES];   /* every device's optimizer steps */
        const struct strata__precision *prec;      /* the precision plugin */
        struct strata_grad_scaler scaler;          /* its loss scale (16-mixed) */
};

/** Device @p d's replica (its struct is nn/'s: strategies see its view and functions). */
static inline struct strata__replica *strata__rep(const struct strata_runtime *rt, int d)
{
        return strata__replica_at(rt->replicas, d);
}

/** Device @p d's replica's view (nn/replica.h). */
static inline const struct strata__replica_view *strata__repv(const struct strata_runtime *rt,
                                                              int d)
{
        return strata__replica_view(strata__rep(rt, d));
}

/** Device @p d's shard (nn/shard.h). */
static inline struct strata__shard *strata__rep_shard(const struct strata_runtime *rt, int d)
{
        return strata__replica_shard(strata__rep(rt, d));
}

/**
 * STRATA_OK unless @p rt is inference only (cfg.inference_only): then @p what, a call that
 * trains or carries training state, is refused with STRATA_EBADSTATE and a message.
 */
static inline int strata__training_only(const struct strata_runtime *rt, const char *what)
{
        if (!rt->cfg.inference_only)
                return STRATA_OK;
        return strata__fail(STRATA_EBADSTATE, "%s: this runtime is inference only (it holds no "
                            "gradients nor optimizer state): it predicts and evaluates, takes "
                            "weights (a checkpoint's too) with load_weights and writes them "
                            "with export_safetensors", what);
}

/**
 * strategy/runtime/runtime.c: STRATA_OK when @p rt is a live runtime (initialised, not torn down);
 * STRATA_EINVAL without dereferencing it otherwise.
 */
int strata__check_rt(const struct strata_runtime *rt);

/*
 * strategy/runtime/api.c: a step in its parts, for the calls on several models at once
 * (models_api.c, decision 0082): every model's checks of one batch, one agreement between the
 * processes, then each model's step.
 */

/** READY (and, for @p train, not inference only): the checks before any agreement. */
int strata__api_ready(const struct strata_runtime *rt, int train);

/**
 * This process's verdict on batch @p b for the active model: a training step's, or with
 * @p predict a prediction's into @p out of @p capacity values. Nothing is exchanged.
 */
int strata__api_check(const struct strata_runtime *rt, const struct strata_batch *b,
                      int predict, const float *out, size_t capacity);

/** A training step's batch's form and sizes (strata__api_check() less its values and index). */
int strata__api_check_sizes(const struct strata_runtime *rt, const struct strata_batch *b);

/**
 * Verdict @p rc agreed with the job's other processes (one exchange; none alone); @p hold
 * (NULL: none) in, whether this process's call may hold its losses, out, whether every
 * process's may (struct strata__job's agree_batch).
 */
int strata__api_agreed(struct strata_runtime *rt, int rc, const struct strata_batch *b,
                       int *hold);

/**
 * strata_train_step() of the active model on batch @p b, once agreed. With @p hold the loss's
 * verdict waits for a later step of the same call (strata_models_train_step() with no metrics;
 * a gradient's is given now, as it is the job's); @p held: the held losses of the call that
 * were not finite on this process, carried on this step's exchange of metrics and replaced by
 * the job's (NULL: none held).
 */
int strata__api_train(struct strata_runtime *rt, const struct strata_batch *b,
                      struct strata_metrics *m, int hold, unsigned *held);

/**
 * Whether the loss of the step just taken was finite on every device of this process, from
 * the devices' own sums (not invariant mode): across processes, the job's loss is finite when
 * every process's is (doubles summing finite floats do not overflow).
 */
int strata__metrics_loss_finite(const struct strata_runtime *rt);

/** strata_predict_step() of the active model on batch @p b into @p out, once agreed. */
int strata__api_predict(struct strata_runtime *rt, const struct strata_batch *b, float *out);

/**
 * strata_input_grad() of the active model; without @p agree the verdict on a batch without
 * an index is this process's alone (its checks then read no value: a caller that passes
 * every process the same sizes gets the same verdict on each,
 * strata__models_input_grad_alike()).
 */
int strata__api_input_grad(struct strata_runtime *rt, const struct strata_batch *b,
                           const float *dout, size_t dout_count, float *dx, size_t capacity,
                           int agree);

/**
 * Processes a job may have. Per process, only the job's own tables grow with it (a
 * 1 KiB fingerprint and the metrics of each process, planned); the collectives' staging does
 * not (decision 0035). 64 until decision 0037: a job of 128 processes was refused.
 */
#define STRATA_MAX_PROCESSES 65536

/** strategy/runtime/config.c: devices of every process of the configuration's job. */
int strata__world(const struct strata_config *c, int *world);

/**
 * strategy/runtime/config.c: the common checks of @p c, then its strategy's; *st gets the
 * strategy's table and *dev the device driver (the configured one, or the accelerator's,
 * probed for a device unless @p planning: strata_plan() needs none).
 */
int strata__check_config(const struct strata_config *c, const struct strata__strategy **st,
                         const struct strata_device_ops **dev, int planning);

/**
 * @brief The kernel set a runtime of configuration @p c computes with on driver @p dev, by
 *        name (the trace's metadata): strata_kernel_set() for the CPU driver's tables, the
 *        driver's name for any other.
 */
const char *strata__kernels_of(const struct strata_config *c, const struct strata_device_ops *dev);

/* strategy/runtime/plan.c: the memory plan, the layout and the memory a runtime is carved from. */

/**
 * The single layout of a runtime, from arena @p a: with a planning arena *out stays NULL,
 * nothing is built and @p pi gets the per-device sizes; on the real region (with the driver's
 * reservations @p rg) *out is the runtime. *@p sync (@p sync may be NULL): the strategy's
 * synchronisation variant, picked from what the layout made (strata__strategy_ops.pick()).
 */
int strata__layout(const struct strata_config *c, const struct strata__strategy *st,
                   const struct strata_device_ops *drv, struct strata_arena *a,
                   const struct strata__regions *rg, struct strata_runtime **out,
                   struct strata_plan_info *pi, const struct strata__sync **sync);

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

/* strategy/runtime/models.c: several models on one runtime (decision 0069). */

struct strata__models;

/** Models of configuration @p c, model 0 included (1 without cfg.models). */
int strata__models_count(const struct strata_config *c);

/**
 * The checks of cfg.models: the strategy (STRATA__CAP_MODELS), the driver and the options
 * several models run with, and every entry (a trained model's loss, outputs and optimizer; a
 * target's source and tau).
 */
int strata__models_check(const struct strata_config *c, const struct strata__strategy *st,
                         const struct strata_device_ops *drv);

/** Replica plan @p p (model 0's, with its device) made model @p i's; *classes its outputs. */
int strata__models_plan(const struct strata_config *c, int i, struct strata__replica_plan *p,
                        int *classes);

/** The most modules of any model of @p c (ddp's buckets are planned for it). */
int strata__models_layers(const struct strata_config *c);

/** The widest metrics of any model of @p c on @p world devices (the job's table). */
int strata__models_metrics_width(const struct strata_config *c, int world);

/**
 * Lay out the models beside model 0 from arena @p a: their state and replica arrays (nothing
 * with one model). Planning, *out is NULL.
 */
int strata__models_layout(const struct strata_config *c, struct strata_arena *a,
                          struct strata__models **out);

/** Model @p i's replicas (i >= 1), laid out by strata__models_layout(). */
struct strata__replica *strata__models_replicas(const struct strata__models *ms, int i);

/** The runtime @p rt keeps @p ms (NULL: one model); cfg.models is then in use by it. */
void strata__models_bind(struct strata_runtime *rt, struct strata__models *ms);

/** connect, after model 0's: every other model initialised, each target copied from its source. */
int strata__models_connect(struct strata_runtime *rt);

/** Make model @p i the runtime's active model (0: nothing to do). */
int strata__models_enter(struct strata_runtime *rt, int i);

/** Model 0 active again. */
void strata__models_leave(struct strata_runtime *rt);

/**
 * Model @p i's (1 <= i < strata__models_n(), model 0 active): its modules *@p m, optimizer
 * *@p o, and a target's *@p source and *@p tau (source -1: trained).
 */
void strata__models_info(const struct strata_runtime *rt, int i, const struct strata_model **m,
                         const struct strata_optim **o, int *source, float *tau);

/** Models of runtime @p rt, model 0 included. */
int strata__models_n(const struct strata_runtime *rt);

/** The model target @p i copies, or -1 (a trained model, model 0, or no such model). */
int strata__models_source(const struct strata_runtime *rt, int i);

/** Polyak averaging of target @p t towards its source on every device (its tau). */
int strata__models_polyak(struct strata_runtime *rt, int t);

/**
 * Model @p i's (1 <= i < strata__models_n()) copy of the strategy's per-model state,
 * STRATA__MODEL_STATE_BYTES, while model 0 is active: setup writes it there (decision 0082).
 */
void *strata__models_state(struct strata_runtime *rt, int i);

/** Model @p i's (i >= 1) parameters on device @p dev, *@p n of them. */
const float *strata__models_params(const struct strata_runtime *rt, int i, int dev, size_t *n);

/* strategy/common.c: what every strategy's actions use. */

/** The registry of strategies, indexed by enum strata_strategy_kind (NULL = not built). */
/** The number of configuration fields every process of a job must set alike (by-name keys
 *  less those that say how one process runs: verbose, bind, kernels, timeouts, tracing). */
int strata__config_shared_count(void);

/**
 * Shared field @p i (0 .. strata__config_shared_count() - 1) of @p cfg: its by-name key
 * ("optim.lr"), its value's bits in *@p bits (equal values, equal bits; 0 when @p cfg is NULL),
 * or NULL past the last.
 */
const char *strata__config_shared(const struct strata_config *cfg, int i, uint64_t *bits);

/** Shared field @p i's value @p bits as the text a message shows, into @p buf of @p n bytes. */
void strata__config_shared_text(int i, uint64_t bits, char *buf, size_t n);

const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind);

/** Step context of a device's replica on the runtime's whole batch of @p rows_global rows. */
struct strata_step_ctx strata__ctx(const struct strata_runtime *rt, int train, int rows_global);

/** A test's failure of device @p dev in lifecycle @p event, or STRATA_OK (production: always). */
#define STRATA__INJECTED(rt, dev, event)                                                       \
        STRATA__FAULT((rt)->faults, (dev), (event), "device", "in ", strata__event_name)

/**
 * setup: let the driver ready its per-thread resources for every device (CPU: one OpenBLAS
 * buffer slot each) and its mixed-precision kernels, so no GEMM maps memory, compiles or
 * looks up a symbol during training.
 */
int strata__prepare(const struct strata_runtime *rt);

/**
 * Whether configuration @p c reduces every micro-batch (train.accumulate_reduce each, with
 * accumulate > 1, outside invariant mode, whose chunks' tree does already): each layer's
 * gradients then go to a layer buffer, are reduced there by the strategy's hook and added
 * into the window's sum (decision 0047).
 */
int strata__accumulate_each(const struct strata_config *c);

/** Invariant mode: the chunks a batch is cut into (0: normal mode). */
int strata__invariant_chunks(const struct strata_config *c);

/**
 * Assign each device its rows of @p b (sizes differ by at most one); in invariant mode the
 * same rows, as whole chunks of the batch.
 */
void strata__split(struct strata_runtime *rt, const struct strata_batch *b);
/**
 * Rows [*lo, *hi) of a batch of @p rows that this process's devices compute (strata__split()
 * over them): every row in one process.
 */
void strata__own_rows(const struct strata_runtime *rt, int rows, int *lo, int *hi);

/** Sum the devices' loss and correct counts in device order into *m (m may be NULL). */
void strata__metrics(const struct strata_runtime *rt, struct strata_metrics *m);

/**
 * Most doubles of every device's metrics together (strata__metrics_width() times the
 * devices): invariant mode's, (2 + labels + (3 + outputs) x blocks) a device, devices x
 * blocks at most twice the chunks; more than the (5 + outputs + labels) a device otherwise.
 */
#define STRATA__METRICS_ALL                                                                    \
        ((2 + STRATA_MAX_OUTPUTS) * STRATA_MAX_DEVICES +                                       \
         (3 + STRATA_MAX_OUTPUTS) * 2 * STRATA__CHUNKS_MAX)

/**
 * Doubles of one device's metrics under configuration @p c with @p world devices: (loss,
 * correct, rows), with float outputs the summed squared and absolute errors after them, then
 * each of the model's outputs' own loss (several outputs) and each label output's rows
 * predicted right; in invariant mode (correct, rows, each label output's correct), then
 * (loss, squared, absolute errors, each output's own loss) of each of the most blocks a
 * device holds, for the chunks' tree across devices.
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


/* ---- one device's work for each step event (strategy/step.c) ---- */

/** batch_to_device: device @p dev loads its rows [row0, row0 + rows) (labels when asked). */
void strata__dev_load(struct strata_runtime *rt, int dev, const struct strata__step_args *a,
                      int labels);

/** training_step: forward through every module and the loss with its gradient. */
int strata__dev_forward(struct strata_runtime *rt, int dev, const struct strata_step_ctx *c);

/**
 * optimizer_step, the one device step of every strategy but dp: the found-inf check
 * (unscaling first with loss scaling; the skip agreed over @p m's host communicator), the sum
 * of squares as variant @p s takes it when clipping by norm, clip, update, then @p s's gather
 * of the parameters; a skipped step leaves the parameters and the optimizer state as they
 * were.
 */
int strata__dev_step(struct strata_runtime *rt, struct strata__multi *m, int dev,
                     struct strata_comm *comm, const struct strata__step_args *a,
                     const struct strata__sync *s);

/**
 * optimizer_step's found-inf check, before replica @p dev's optimizer step, in every precision:
 * with loss scaling, unscale its gradients; then agree with every device of @p comm (NULL: this
 * replica decides alone) whether any gradient was not finite. A loss scaler then grows or backs off
 * its scale (device 0); without one, unless cfg.train.allow_nonfinite (then nothing is checked),
 * device 0 sets *a->nonfinite: the step is refused. *skip: the step is skipped (the replica's
 * parameters, optimizer state and step count stay).
 */
int strata__unscale_step(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                         const struct strata__step_args *a, int *skip);

/**
 * Whether each device of @p m's runtime decides its found-inf check alone at the window's
 * end, with no agreement: the variant leaves the same reduced bits in every replica (its
 * alone), the update is not split (each device would check only its slice), and neither a
 * loss scaler (device 0 changes the scale once every device has read it), allow_nonfinite
 * (nothing is checked) nor MPI_Allreduce (no promise of equal bits on every rank) applies;
 * in host memory. A test's injected overflow then enters the device's gradients before they
 * are summed (ddp.c), so every device finds it.
 */
int strata__dev_alone(const struct strata_runtime *rt, const struct strata__multi *m);

/**
 * Whether @p m's devices split the optimizer step (decision 0086): each checks and updates its
 * part of the reduced gradient (strata__dev_part()) and writes the part's new parameters into
 * every other replica (decision 0121); the part's optimizer state stays in its own (decision
 * 0100). Then
 * nothing reads a replica's gradient outside its part, so ddp's buckets sum each part into its
 * own replica only (decision 0096; a bucket of at most 64 floats into every replica, one
 * meeting).
 */
int strata__dev_split(const struct strata_runtime *rt, const struct strata__multi *m);

/**
 * Device @p dev's part [*lo, *hi) of a split step over @p n parameters: the vector cut in
 * blocks of *@p block elements (a whole number of cache lines, block d device d's), the
 * geometry of the buckets' reduce-scatter (drivers/comm_blocks.h).
 */
void strata__dev_part(const struct strata_runtime *rt, size_t n, int dev, size_t *lo, size_t *hi,
                      size_t *block);

/**
 * Every replica's optimizer state whole again after split steps (rt->opt_parts): each device's
 * part copied from its own replica into every other. Before any read of a whole replica's state
 * (strata_optimizer_state(), strata_parameter(), checkpoints and weights, saved or loaded), on
 * the coordinator between steps; nothing when no split step ran since the last call. The step
 * itself never needs it: whether a runtime splits is fixed at its init.
 */
void strata__dev_opt_whole(const struct strata_runtime *rt);

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

#ifdef STRATA_TESTING
/**
 * Tests only: device @p device fails with @p status when it handles lifecycle @p event
 * (enum strata__event); device -1 disables.
 * @retval STRATA_OK, STRATA_EINVAL (out of range, or a status that is not an error).
 */
int strata__inject_failure(struct strata_runtime *rt, int device, int event, int status);

/**
 * Tests only: device @p device's gradients count as not finite at its next optimizer step,
 * once: every device must then skip the step together.
 * @retval STRATA_OK, STRATA_EINVAL (not a live runtime, or no such device).
 */
int strata__inject_nonfinite_grad(struct strata_runtime *rt, int device);

/**
 * Tests only: shards of a job of several processes from which zero2 and fsdp gather the sum
 * of squares layer by layer instead of chaining it shard by shard (64 in the library).
 */
extern int strata__sumsq_gather_from;
#endif

#endif /* STRATA_STRATEGY_INTERNAL_H */
