/*
 * The public runtime: configuration checks, the memory plan, init/connect/steps/teardown.
 *
 * One layout function carves everything a configuration needs. Run against a planning arena
 * it yields strata_plan()'s exact byte count; run against the real region it builds the
 * runtime. Both paths are the same code, so the plan cannot drift from what init does.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/lifecycle.h"
#include "strata/status.h"
#include "base/testing.h"
#include "strata/version.h"
#include "base/base.h"
#include "strategy/internal.h"

#define REGION_ALIGN STRATA_ALIGN_PAGE

int strata__world(const struct strata_config *c, int *world)
{
        const struct strata__strategy *st = strata__strategy_get(c->strategy.kind);
        int procs = 1;

        if (st && st->processes)
                STRATA_TRY(st->processes(c, &procs));
        if (procs < 1 || procs > STRATA_MAX_PROCESSES)
                return strata__fail(STRATA_EINVAL, "%d processes not in [1, %d]", procs,
                                    STRATA_MAX_PROCESSES);
        *world = procs * c->strategy.devices;
        return STRATA_OK;
}

static int check_config(const struct strata_config *c, const struct strata__strategy **st,
                        const struct strata_device_ops **dev)
{
        int world;

        if (!c)
                return strata__fail(STRATA_EINVAL, "config is NULL");
        if (c->struct_size != sizeof(*c) || c->version / 100 != STRATA_VERSION_HEX / 100)
                return strata__fail(STRATA_EINVAL,
                                    "config built for another Strata (size %u, version %u); "
                                    "start from STRATA_CONFIG_INIT",
                                    c->struct_size, c->version);
        if (!c->model || !c->model->modules || c->model->nmodules <= 0)
                return strata__fail(STRATA_EINVAL, "config.model is missing or empty");
        if (c->model->in_features <= 0)
                return strata__fail(STRATA_EINVAL, "model input width %d must be > 0",
                                    c->model->in_features);
        if (c->batch <= 0 || c->batch > (1 << 24))
                return strata__fail(STRATA_EINVAL, "batch %d not in [1, 16777216]", c->batch);
        if (c->strategy.devices <= 0 || c->strategy.devices > STRATA_MAX_DEVICES)
                return strata__fail(STRATA_EINVAL, "devices %d not in [1, %d]", c->strategy.devices,
                                    STRATA_MAX_DEVICES);
        *st = strata__strategy_get(c->strategy.kind);
        if (!*st)
                return strata__fail(STRATA_ENOTSUP, "strategy %d is not available",
                                    c->strategy.kind);
        STRATA_TRY(strata__world(c, &world));
        if (world > c->batch)
                return strata__fail(STRATA_EINVAL, "batch %d smaller than %d devices", c->batch,
                                    world);
        STRATA_TRY(strata_optim_check(&c->optim));
        if (c->device.driver) {
                STRATA_TRY(strata_device_check(c->device.driver));
                *dev = c->device.driver;
        } else {
                STRATA_TRY(strata_device_driver(c->device.accelerator, dev));
        }
        if (c->classes < 2)
                return strata__fail(STRATA_EINVAL, "classes %d: need >= 2", c->classes);
        if (c->memory && c->memory_size == 0)
                return strata__fail(STRATA_EINVAL, "config.memory given with memory_size 0");
        if (c->train.accumulate < 0 || c->train.accumulate > 1 << 20)
                return strata__fail(STRATA_EINVAL, "accumulate %d not in [1, 1048576]",
                                    c->train.accumulate);
        if ((unsigned)c->device.bind > STRATA_BIND_NONE)
                return strata__fail(STRATA_EINVAL, "bind %d is not STRATA_BIND_CORES or "
                                                   "STRATA_BIND_NONE", (int)c->device.bind);
        if (c->trace.stall_s != c->trace.stall_s)
                return strata__fail(STRATA_EINVAL, "stall_s is not a number");
        if (!(c->train.clip_norm >= 0.0f) || !(c->train.clip_value >= 0.0f) ||
            !(c->device.timeout_s >= 0.0))
                return strata__fail(STRATA_EINVAL, "clip_norm %g, clip_value %g and timeout %g "
                                                   "must be >= 0", c->train.clip_norm,
                                    c->train.clip_value, c->device.timeout_s);
        if (!strata__precision(c->precision.kind))
                return strata__fail(STRATA_EINVAL, "precision %d is not 32, bf16-mixed or "
                                                   "16-mixed", (int)c->precision.kind);
        if (!(c->precision.loss_scale_init >= 0.0f) || !isfinite(c->precision.loss_scale_init) ||
            c->precision.loss_scale_interval < 0)
                return strata__fail(STRATA_EINVAL, "loss_scale_init %g must be finite and >= 0, "
                                                   "loss_scale_interval %d >= 0",
                                    c->precision.loss_scale_init, c->precision.loss_scale_interval);
        if (c->strategy.grad_allreduce != STRATA_F32 && c->strategy.grad_allreduce != STRATA_BF16)
                return strata__fail(STRATA_EINVAL, "grad_allreduce %d is not STRATA_F32 or "
                                                   "STRATA_BF16", (int)c->strategy.grad_allreduce);
        if (c->strategy.grad_allreduce == STRATA_BF16 && !(*st)->all_reduces_gradients)
                return strata__fail(STRATA_EINVAL, "grad_allreduce bf16 applies where gradients "
                                                   "are all-reduced (ddp, spawn, mpi), not under "
                                                   "%s", (*st)->name);
        if (c->strategy.grad_allreduce == STRATA_BF16 && strata__own_memory(*dev))
                return strata__fail(STRATA_ENOTSUP, "grad_allreduce bf16 rounds gradients in "
                                                   "host memory; the %s driver's are on the "
                                                   "device", (*dev)->name);
        if (c->strategy.replication_callbacks && !(*st)->replication_callbacks)
                return strata__fail(STRATA_EINVAL, "replication callbacks exist only under dp, "
                                                   "not %s", (*st)->name);
        return (*st)->validate(c, *dev);
}

/*
 * The live runtimes. Every call checks its runtime here before touching it, so a runtime that
 * was torn down (its memory unmapped, or the caller's and reused) is refused, not followed.
 * A runtime made later at the same address passes: pointers carry no generation.
 */
#define LIVE_MAX 256
static _Atomic(struct strata_runtime *) live[LIVE_MAX];

static int live_add(struct strata_runtime *rt)
{
        for (int i = 0; i < LIVE_MAX; i++) {
                struct strata_runtime *none = NULL;

                if (atomic_compare_exchange_strong(&live[i], &none, rt))
                        return STRATA_OK;
        }
        return strata__fail(STRATA_EINVAL, "more than %d runtimes alive in this process",
                            LIVE_MAX);
}

static void live_remove(const struct strata_runtime *rt)
{
        for (int i = 0; i < LIVE_MAX; i++) {
                struct strata_runtime *me = (struct strata_runtime *)rt;

                if (atomic_compare_exchange_strong(&live[i], &me, NULL))
                        return;
        }
}

static int live_has(const struct strata_runtime *rt)
{
        for (int i = 0; rt && i < LIVE_MAX; i++)
                if (atomic_load_explicit(&live[i], memory_order_acquire) == rt)
                        return 1;
        return 0;
}

static int region_arena(void *mem, size_t bytes, const char *name, struct strata_arena *out)
{
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        o.name = name;
        o.kind = STRATA_MEM_DEVICE;
        if (!mem)
                return strata_arena_init_plan(out, &o);
        return strata_arena_init(out, mem, bytes, &o);
}

/* The single layout of a runtime; with a planning arena, *out stays NULL and nothing is built. */
static int layout(const struct strata_config *c, const struct strata__strategy *st,
                  const struct strata_device_ops *drv, struct strata_arena *a,
                  const struct strata__regions *rg, struct strata_runtime **out,
                  struct strata_plan_info *pi)
{
        struct strata_arena plan, pdev, ppin, child, dev, pin;
        struct strata__replica_mem mem = { &plan, &plan, NULL, drv };
        struct strata__replica tmp, *reps;
        struct strata_runtime *rt;
        struct strata_trace *tr;
        int world, rows, hv = !strata__own_memory(drv);
        enum strata_dtype compute = strata__precision(c->precision.kind)->compute;
        void *p;

        STRATA_TRY(strata__world(c, &world));
        rows = (c->batch + world - 1) / world; /* each device's share of the global batch */
        STRATA_TRY(strata_arena_init_plan(&plan, NULL));
        STRATA_TRY(strata_arena_init_plan(&pdev, NULL));
        STRATA_TRY(strata_arena_init_plan(&ppin, NULL));
        if (!hv) {
                mem.dev = &pdev;
                mem.pinned = &ppin;
        }
        STRATA_TRY(strata__replica_layout(&tmp, &mem, c->model, &c->optim, rows, 0, compute,
                                          c->strategy.grad_allreduce));
        if (tmp.out != c->classes) /* the logits, the loss and predict's rows x classes */
                return strata__fail(STRATA_EINVAL, "the model outputs %d values per row (its "
                                                   "last module, %s); classes is %d",
                                    tmp.out,
                                    c->model->modules[c->model->nmodules - 1].ops->name,
                                    c->classes);
        pi->per_device = strata_arena_used(&plan);
        pi->device_bytes = hv ? 0 : strata_arena_used(&pdev);
        pi->pinned_bytes = hv ? 0 : strata_arena_used(&ppin);
        pi->params = tmp.nparam;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*rt), 0, &p));
        rt = p;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*reps) * (size_t)c->strategy.devices, 0, &p));
        reps = p;
        for (int d = 0; d < c->strategy.devices; d++) {
                struct strata__replica *r = reps ? &reps[d] : &tmp;
                struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

                o.name = "device";
                STRATA_TRY(strata_arena_carve(a, &child, pi->per_device, &o));
                mem = (struct strata__replica_mem){ &child, &child, NULL, drv };
                if (!hv) {
                        STRATA_TRY(region_arena(rt ? rg->dev[d] : NULL, rt ? rg->dev_bytes : 0,
                                                "device memory", &dev));
                        STRATA_TRY(region_arena(rt ? rg->pin[d] : NULL, rt ? rg->pin_bytes : 0,
                                                "pinned staging", &pin));
                        mem.dev = &dev;
                        mem.pinned = &pin;
                }
                STRATA_TRY(strata__replica_layout(r, &mem, c->model, &c->optim, rows, d,
                                                  compute, c->strategy.grad_allreduce));
                r->arena = child;
        }
        STRATA_TRY(strata_trace_layout(a, c->strategy.devices,
                                       c->trace.events ? c->trace.events : (size_t)1 << 16,
                                       c->trace.path, &tr));
        if (rt) {
                memset(rt, 0, sizeof(*rt));
                rt->trace = tr;
                for (int d = 0; d < c->strategy.devices; d++)
                        reps[d].track = strata_trace_track(tr, d);
                rt->replicas = reps;
                rt->nreplicas = c->strategy.devices;
                rt->world = world; /* rank0 is set when the processes are joined */
                rt->inj_dev = -1;
                rt->prec = strata__precision(c->precision.kind);
                strata__scaler_init(&rt->scaler, c->precision.loss_scale_init,
                                    (uint32_t)c->precision.loss_scale_interval);
                if (!hv)
                        rt->regions = *rg;
        }
        {
                struct strata_config resolved = *c; /* the job's processes, as planned */

                resolved.process.count = world / c->strategy.devices;
                STRATA_TRY(st->layout(&resolved, drv, a, &p));
        }
        if (rt)
                rt->priv = p;
        *out = rt;
        return STRATA_OK;
}

void strata_config_init(struct strata_config *cfg)
{
        const struct strata_config defaults = STRATA_CONFIG_INIT;

        if (cfg)
                *cfg = defaults;
}

int strata_plan(const struct strata_config *cfg, struct strata_plan_info *out)
{
        const struct strata__strategy *st;
        const struct strata_device_ops *dev;
        struct strata_plan_info pi = { 0 };
        struct strata_runtime *rt;
        struct strata_arena a;

        if (!out)
                return strata__fail(STRATA_EINVAL, "plan: out is NULL");
        STRATA_TRY(check_config(cfg, &st, &dev));
        STRATA_TRY(strata_arena_init_plan(&a, NULL));
        STRATA_TRY(layout(cfg, st, dev, &a, NULL, &rt, &pi));
        pi.bytes = strata_arena_used(&a);
        pi.align = strata_arena_max_align(&a) > REGION_ALIGN ? strata_arena_max_align(&a)
                                                             : REGION_ALIGN;
        if (pi.device_bytes)
                pi.device_bytes += dev->device_overhead;
        *out = pi;
        return STRATA_OK;
}

/* Give back the driver's reservations of devices [0, n). */
static void unreserve(const struct strata_device_ops *dev, struct strata__regions *rg, int n)
{
        for (int d = 0; d < n && dev->unreserve; d++)
                dev->unreserve(d, rg->dev[d], rg->pin[d]);
}

/* Reserve each device's memory and staging from the driver, all or nothing. */
static int reserve(const struct strata_config *c, const struct strata_device_ops *dev,
                   const struct strata_plan_info *pl, struct strata__regions *rg)
{
        memset(rg, 0, sizeof(*rg));
        if (!strata__own_memory(dev)) /* it computes in host memory from the region */
                return STRATA_OK;
        rg->dev_bytes = pl->device_bytes - dev->device_overhead;
        rg->pin_bytes = pl->pinned_bytes;
        for (int d = 0; d < c->strategy.devices; d++) {
                int rc = dev->reserve(d, pl->device_bytes, rg->pin_bytes,
                                      c->precision.allow_tf32 ? STRATA_DEV_TF32 : 0u, &rg->dev[d],
                                      &rg->pin[d]);

                if (rc != STRATA_OK) {
                        unreserve(dev, rg, d);
                        return rc;
                }
        }
        return STRATA_OK;
}

static int open_region(const struct strata_config *c, const struct strata_plan_info *pl,
                       struct strata_arena *a)
{
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;
        uintptr_t start, pad;

        o.name = "runtime";
        if (!c->memory) {
                o.align = pl->align;
                STRATA_TRY(strata_arena_map(a, pl->bytes, &o));
                o.align = 0;
                a->align = STRATA_ALIGN_CACHELINE;
                return STRATA_OK;
        }
        start = (uintptr_t)c->memory;
        pad = STRATA__ALIGN_UP(start, pl->align) - start;
        if (c->memory_size < pad || c->memory_size - pad < pl->bytes)
                return strata__fail(STRATA_ENOMEM,
                                    "memory region is %zu bytes; this configuration needs %zu "
                                    "(%zu + %zu to align the region to %zu)",
                                    c->memory_size, pl->bytes + (size_t)pad, pl->bytes,
                                    (size_t)pad, pl->align);
        o.align = pl->align;
        STRATA_TRY(strata_arena_init(a, c->memory, c->memory_size, &o));
        a->align = STRATA_ALIGN_CACHELINE;
        return STRATA_OK;
}

int strata_init(struct strata_runtime **out, const struct strata_config *cfg)
{
        const struct strata__strategy *st;
        const struct strata_device_ops *dev;
        struct strata_plan_info pl, pi = { 0 };
        struct strata_runtime *rt = NULL;
        struct strata_arena root;
        struct strata__regions rg;
        int rc;

        if (!out)
                return strata__fail(STRATA_EINVAL, "init: runtime pointer is NULL");
        STRATA_TRY(check_config(cfg, &st, &dev));
        STRATA_TRY(strata_plan(cfg, &pl));
        STRATA_TRY(open_region(cfg, &pl, &root));
        STRATA_TRY_GOTO(rc, reserve(cfg, dev, &pl, &rg), fail_region);
        STRATA_TRY_GOTO(rc, layout(cfg, st, dev, &root, &rg, &rt, &pi), fail);
        rt->cfg = *cfg;
        rt->dev = dev;
        rt->strategy = st;
        rt->plan = pl;
        rt->region_mapped = !cfg->memory;
        rt->root = root;
        STRATA_TRY_GOTO(rc, strata_lifecycle_table(&rt->table, st->states), fail);
        STRATA_TRY_GOTO(rc, strata_sm_init(&rt->sm, &rt->table, rt), fail);
        {
                char name[64];

                snprintf(name, sizeof(name), "strata %s, rank 0 (pid %ld)", st->name,
                         (long)getpid());
                STRATA_TRY_GOTO(rc, strata_trace_open(rt->trace, 0, name), fail);
        }
        STRATA_TRY_GOTO(rc, strata_sm_dispatch(&rt->sm, STRATA_EV_SETUP_ENVIRONMENT, NULL), fail);
        STRATA_TRY_GOTO(rc, live_add(rt), fail);
        if (cfg->verbose) {
                fprintf(stderr, "strata: %s on %d %s device(s), %zu parameters, %zu bytes planned "
                                "(%zu per device)\n",
                        st->name, cfg->strategy.devices, dev->name, pi.params, pl.bytes,
                        pl.per_device);
                if (pl.device_bytes)
                        fprintf(stderr, "strata: per device %zu bytes of device memory (%zu for "
                                        "the driver), %zu pinned staging\n",
                                pl.device_bytes, dev->device_overhead, pl.pinned_bytes);
                for (int d = 0; d < cfg->strategy.devices && dev->describe; d++) {
                        char line[512];

                        dev->describe(d, line, sizeof(line));
                        fprintf(stderr, "strata: %s\n", line);
                }
        }
        *out = rt;
        return STRATA_OK;
fail:
        if (rt && rt->sm.table)
                (void)strata_sm_dispatch(&rt->sm, STRATA_EV_TEARDOWN, NULL);
        if (rt)
                strata_trace_discard(rt->trace);
        unreserve(dev, &rg, cfg->strategy.devices);
fail_region:
        if (!cfg->memory)
                (void)strata_arena_release(&root);
        return rc;
}

int strata__check_rt(const struct strata_runtime *rt)
{
        if (!live_has(rt))
                return strata__fail(STRATA_EINVAL, "runtime %p is not live (NULL, never "
                                                   "initialised, or torn down)", (const void *)rt);
        return STRATA_OK;
}

int strata_connect(struct strata_runtime *rt)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(strata_sm_dispatch(&rt->sm, STRATA_EV_CONNECT, NULL));
        STRATA_TRY(strata_sm_dispatch(&rt->sm, STRATA_EV_SETUP, NULL));
        strata_arena_seal(&rt->root);
        for (int d = 0; d < rt->nreplicas; d++)
                strata_arena_seal(&rt->replicas[d].arena);
        return STRATA_OK;
}

static int check_batch(const struct strata_runtime *rt, const struct strata_batch *b,
                       int with_labels)
{
        if (!b || (!b->x && !(b->images && b->index)) || (with_labels && !b->y))
                return strata__fail(STRATA_EINVAL, "batch or its %s is NULL",
                                    !b ? "pointer" : !b->y && with_labels ? "labels" : "features");
        if (b->rows < rt->world || b->rows > rt->cfg.batch)
                return strata__fail(STRATA_EINVAL, "batch has %d rows; allowed %d..%d", b->rows,
                                    rt->world, rt->cfg.batch);
        if (b->dim != rt->cfg.model->in_features)
                return strata__fail(STRATA_EINVAL, "batch rows are %d wide; the model takes %d",
                                    b->dim, rt->cfg.model->in_features);
        for (int i = 0; !b->x && i < b->rows; i++) /* indexed rows: inside their image set */
                if (b->index[i] >= b->nimages)
                        return strata__fail(STRATA_EINVAL, "row %d indexes image %u of %u (set "
                                                           "nimages to the image count)",
                                            i, b->index[i], b->nimages);
        return with_labels ? strata__loss_of(rt->cfg.model)->check(b, rt->cfg.classes)
                           : STRATA_OK;
}

static int need_ready(const struct strata_runtime *rt)
{
        int s = strata_sm_state(&rt->sm);

        if (s != STRATA_STATE_READY)
                return strata__fail(STRATA_EBADSTATE, "runtime is %s, not READY",
                                    strata_state_name(s));
        return STRATA_OK;
}

/* strata_request_stop(): one flag for the process, set from signal handlers. */
static atomic_int stop_flag;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop flag must be lock-free (signal handlers)");

void strata_request_stop(void)
{
        atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
}

int strata_stop_requested(void)
{
        return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

void strata_clear_stop(void)
{
        atomic_store_explicit(&stop_flag, 0, memory_order_relaxed);
}

static int stopped(void)
{
        return strata__fail(STRATA_ESTOPPED, "stop requested (strata_request_stop): nothing "
                                             "was run; the runtime is ready to save or tear "
                                             "down");
}

static const struct strata_span span_train = { "train_step", "step", "step", 0 };
static const struct strata_span span_eval = { "eval_step", "step", "step", 0 };
static const struct strata_span span_predict = { "predict_step", "step", "step", 0 };
static const struct strata_span span_loss = { "train_loss", "counter", "loss", 1 };
static const struct strata_span span_arena = { "arena", "counter", "high_water_bytes", 1 };

/*
 * Start of a public step: every track is at this step with nothing open; buffers that are
 * half full are written out first (a write error is reported and stops tracing, not the
 * run); the step's span opens on device 0's track (*t), which is the caller's.
 */
static uint64_t step_begin(struct strata_runtime *rt, const struct strata_span *k,
                           struct strata_track **t)
{
        for (int d = 0; d < rt->nreplicas; d++)
                strata_track_restart(rt->replicas[d].track, rt->step);
        if (strata_trace_due(rt->trace) && strata_trace_flush(rt->trace) != STRATA_OK)
                fprintf(stderr, "strata: %s\n", strata_last_error());
        *t = rt->replicas[0].track;
        return strata_track_begin(*t, k, NULL);
}

/*
 * One micro-batch. With accumulate = k, the first k-1 micro-batches end after backward
 * (BACKWARD_DONE -> batch_end: gradients accumulate locally, nothing is communicated); the
 * k-th reduces the gradients and steps the optimizer.
 */
int strata_train_step(struct strata_runtime *rt, const struct strata_batch *b,
                      struct strata_metrics *m)
{
        static const int events[] = { STRATA_EV_BATCH_START, STRATA_EV_TRAINING_STEP,
                                      STRATA_EV_BACKWARD, STRATA_EV_OPTIMIZER_STEP,
                                      STRATA_EV_BATCH_END };
        struct strata_metrics own;
        struct strata_track *t;
        uint64_t t0;
        int k;

        STRATA_TRY(strata__check_rt(rt));
        k = rt->cfg.train.accumulate > 1 ? rt->cfg.train.accumulate : 1;
        STRATA_TRY(need_ready(rt));
        STRATA_TRY(check_batch(rt, b, 1));
        if (rt->micro == 0 && strata_stop_requested())
                return stopped(); /* at an optimizer-step boundary only */
        t0 = step_begin(rt, &span_train, &t);
        rt->args = (struct strata__step_args){ .batch = b, .metrics = m ? m : &own };
        rt->sync_grads = rt->micro == k - 1;
        for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
                if (events[i] == STRATA_EV_OPTIMIZER_STEP && !rt->sync_grads)
                        continue;
                STRATA_TRY(strata_sm_dispatch(&rt->sm, events[i], NULL));
        }
        strata_track_end(t, t0, (int64_t)rt->step);
        if (t && t->ev) {
                strata_track_counter(t, &span_loss, rt->args.metrics->loss);
                strata_track_counter(t, &span_arena, (double)strata_arena_high_water(&rt->root));
        }
        rt->micro = (rt->micro + 1) % k;
        rt->step++;
        if (!isfinite(rt->args.metrics->loss) && !rt->cfg.train.allow_nonfinite)
                return strata__fail(STRATA_ENONFINITE,
                                    "step %llu: the loss is %g; training diverged (lower the "
                                    "learning rate or clip gradients; allow_nonfinite goes on)",
                                    (unsigned long long)(rt->step - 1),
                                    rt->args.metrics->loss);
        return STRATA_OK;
}

int strata_eval_step(struct strata_runtime *rt, const struct strata_batch *b,
                     struct strata_metrics *m)
{
        struct strata_track *t;
        uint64_t t0;
        int rc;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        STRATA_TRY(check_batch(rt, b, 1));
        if (strata_stop_requested())
                return stopped();
        t0 = step_begin(rt, &span_eval, &t);
        rt->args = (struct strata__step_args){ .batch = b, .metrics = m };
        rc = strata_sm_dispatch(&rt->sm, STRATA_EV_VALIDATION_STEP, NULL);
        strata_track_end(t, t0, (int64_t)rt->step);
        return rc;
}

int strata_predict_step(struct strata_runtime *rt, const struct strata_batch *b, float *logits)
{
        struct strata_track *t;
        uint64_t t0;
        int rc;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        if (!logits)
                return strata__fail(STRATA_EINVAL, "predict: logits is NULL");
        STRATA_TRY(check_batch(rt, b, 0));
        if (strata_stop_requested())
                return stopped();
        t0 = step_begin(rt, &span_predict, &t);
        rt->args = (struct strata__step_args){ .batch = b, .logits = logits };
        rc = strata_sm_dispatch(&rt->sm, STRATA_EV_PREDICT_STEP, NULL);
        strata_track_end(t, t0, (int64_t)rt->step);
        return rc;
}

int strata_teardown(struct strata_runtime *rt)
{
        struct strata_arena root;
        int rc, mapped;

        STRATA_TRY(strata__check_rt(rt));
        rc = strata_sm_dispatch(&rt->sm, STRATA_EV_TEARDOWN, NULL);
        if (rc != STRATA_OK)
                return rc;
        live_remove(rt); /* from here on every call on rt is refused */
        /* The devices have stopped recording, unless one was abandoned. */
        rc = strata_trace_close(rt->trace, !rt->abandoned);
        if (rt->abandoned) /* a stuck device may still touch all of it: nothing is released */
                return strata__set_error(STRATA_ETIMEDOUT, rt->abandoned_why);
        if (strata__own_memory(rt->dev)) {
                unreserve(rt->dev, &rt->regions, rt->nreplicas);
                memset(&rt->regions, 0, sizeof(rt->regions));
        }
        root = rt->root;
        mapped = rt->region_mapped;
        if (mapped) { /* rt lived in this region */
                int rel = strata_arena_release(&root);

                return rc != STRATA_OK ? rc : rel;
        }
        return rc;
}

int strata_flush_trace(struct strata_runtime *rt)
{
        STRATA_TRY(strata__check_rt(rt));
        return strata_trace_flush(rt->trace);
}

int strata_trace_counts(const struct strata_runtime *rt, uint64_t *written, uint64_t *dropped)
{
        struct strata_trace_stats st;

        STRATA_TRY(strata__check_rt(rt));
        if (!written || !dropped)
                return strata__fail(STRATA_EINVAL, "trace counts: NULL output");
        strata_trace_get_stats(rt->trace, &st);
        *written = st.events;
        *dropped = st.dropped;
        return STRATA_OK;
}

int strata_state(const struct strata_runtime *rt)
{
        return live_has(rt) ? strata_sm_state(&rt->sm) : -1;
}

static int connected(const struct strata_runtime *rt, int dev)
{
        int s;

        STRATA_TRY(strata__check_rt(rt));
        if (dev < 0 || dev >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "device %d not in [0, %d)", dev,
                                    rt->nreplicas);
        s = strata_sm_state(&rt->sm);
        if (s < STRATA_STATE_READY || s == STRATA_STATE_TORNDOWN)
                return strata__fail(STRATA_EBADSTATE, "runtime is %s: parameters not ready",
                                    strata_state_name(s));
        return STRATA_OK;
}

/* A host pointer to n floats of device memory: itself, or a copy in the pinned staging. */
static const float *host_view(const struct strata_runtime *rt, int dev, const float *src,
                              size_t n)
{
        if (!n)
                return src;
        return rt->dev->host_view(rt->replicas[dev].p_host, src, n * sizeof(float));
}

int strata_parameters(const struct strata_runtime *rt, int dev, const float **p, size_t *n)
{
        STRATA_TRY(connected(rt, dev));
        if (!p || !n)
                return strata__fail(STRATA_EINVAL, "parameters: NULL output");
        *p = host_view(rt, dev, rt->replicas[dev].params, rt->replicas[dev].nparam);
        *n = rt->replicas[dev].nparam;
        return STRATA_OK;
}

int strata_optimizer_state(const struct strata_runtime *rt, int dev, const float **state,
                           size_t *n, uint64_t *step)
{
        STRATA_TRY(connected(rt, dev));
        if (!state || !n || !step)
                return strata__fail(STRATA_EINVAL, "optimizer state: NULL output");
        *state = host_view(rt, dev, rt->replicas[dev].opt_state, rt->replicas[dev].nopt);
        *n = rt->replicas[dev].nopt;
        *step = rt->replicas[dev].opt_t;
        return STRATA_OK;
}

int strata_parameter_count(const struct strata_runtime *rt, int *n)
{
        STRATA_TRY(connected(rt, 0));
        if (!n)
                return strata__fail(STRATA_EINVAL, "parameter count: NULL output");
        *n = strata__replica_nparams(&rt->replicas[0]);
        return STRATA_OK;
}

int strata_parameter(const struct strata_runtime *rt, int dev, int index,
                     struct strata_param *out)
{
        struct strata_param p;

        STRATA_TRY(connected(rt, dev));
        if (!out)
                return strata__fail(STRATA_EINVAL, "parameter: NULL output");
        if (index < 0 || strata__replica_param(&rt->replicas[dev], index, &p) != 0)
                return strata__fail(STRATA_EINVAL, "parameter %d not in [0, %d)", index,
                                    strata__replica_nparams(&rt->replicas[dev]));
        *out = p;
        return STRATA_OK;
}

int strata_memory(const struct strata_runtime *rt, struct strata_memory_info *out)
{
        uint64_t refused;

        STRATA_TRY(strata__check_rt(rt));
        if (!out)
                return strata__fail(STRATA_EINVAL, "memory: out is NULL");
        refused = strata_arena_refusals(&rt->root);
        for (int d = 0; d < rt->nreplicas; d++)
                refused += strata_arena_refusals(&rt->replicas[d].arena);
        *out = (struct strata_memory_info){ .planned = rt->plan.bytes,
                                            .used = strata_arena_high_water(&rt->root),
                                            .refusals = refused };
        return STRATA_OK;
}

int strata_grad_scaler_state(const struct strata_runtime *rt, struct strata_grad_scaler *out)
{
        STRATA_TRY(strata__check_rt(rt));
        if (!out)
                return strata__fail(STRATA_EINVAL, "grad_scaler_state: out is NULL");
        *out = rt->scaler;
        return STRATA_OK;
}

int strata_patch_replication_callback(struct strata_config *cfg)
{
        const struct strata__strategy *st = cfg ? strata__strategy_get(cfg->strategy.kind) : NULL;

        if (!st || !st->replication_callbacks)
                return strata__fail(STRATA_EINVAL,
                                    "patch_replication_callback: needs a dp configuration");
        cfg->strategy.replication_callbacks = 1;
        return STRATA_OK;
}

int strata_is_global_zero(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->strategy->is_global_zero(rt) : 0;
}

int strata_root_device(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->strategy->root_device(rt) : 0;
}

int strata_handles_gradient_accumulation(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->strategy->handles_gradient_accumulation : 0;
}

int strata_world_size(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->strategy->world_size(rt) : 0;
}

int strata_inject_failure(struct strata_runtime *rt, int device, int event, int status)
{
        STRATA_TRY(strata__check_rt(rt));
        if (device < -1 || device >= rt->nreplicas || event < 0 || event >= STRATA_EV_COUNT ||
            status >= 0)
                return strata__fail(STRATA_EINVAL, "inject: device %d, event %d, status %d",
                                    device, event, status);
        rt->inj_dev = device;
        rt->inj_event = event;
        rt->inj_status = status;
        return STRATA_OK;
}

int strata_inject_nonfinite_grad(struct strata_runtime *rt, int device)
{
        STRATA_TRY(strata__check_rt(rt));
        if (device < 0 || device >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "inject_nonfinite_grad: device %d of %d",
                                    device, rt->nreplicas);
        rt->inj_inf[device] = 1;
        return STRATA_OK;
}

/* A Strategy-level collective: every device runs it on its thread (or inline on one device). */
static int collective(struct strata_runtime *rt, const struct strata_coll *op, void *const *bufs,
                      const void *const *send)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        if ((op->count && !bufs) || (op->kind == STRATA_COLL_ALL_GATHER && op->count && !send))
                return strata__fail(STRATA_EINVAL, "collective: buffer list is NULL");
        return rt->strategy->collective(rt, op, bufs, send);
}

int strata_reduce(struct strata_runtime *rt, void *const *bufs, size_t count,
                  enum strata_dtype dt, enum strata_reduce_op op)
{
        struct strata_coll c = { .kind = STRATA_COLL_ALL_REDUCE, .count = count, .dtype = dt,
                                 .op = op };

        return collective(rt, &c, bufs, NULL);
}

int strata_all_gather(struct strata_runtime *rt, const void *const *send, void *const *recv,
                      size_t count, enum strata_dtype dt)
{
        struct strata_coll c = { .kind = STRATA_COLL_ALL_GATHER, .count = count, .dtype = dt };

        return collective(rt, &c, recv, send);
}

int strata_broadcast(struct strata_runtime *rt, void *const *bufs, size_t count,
                     enum strata_dtype dt, int src)
{
        struct strata_coll c = { .kind = STRATA_COLL_BROADCAST, .count = count, .dtype = dt,
                                 .root = src };

        STRATA_TRY(strata__check_rt(rt));
        if (src < 0 || src >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "broadcast: source %d not in [0, %d)", src,
                                    rt->nreplicas);
        return collective(rt, &c, bufs, NULL);
}

int strata_barrier(struct strata_runtime *rt)
{
        struct strata_coll c = { .kind = STRATA_COLL_BARRIER };

        return collective(rt, &c, NULL, NULL);
}

int strata_reduce_boolean_decision(struct strata_runtime *rt, const int *flags, int all,
                                   int *out)
{
        int32_t v[STRATA_MAX_DEVICES];
        void *bufs[STRATA_MAX_DEVICES];

        STRATA_TRY(strata__check_rt(rt));
        if (!flags || !out)
                return strata__fail(STRATA_EINVAL, "reduce_boolean_decision: NULL argument");
        for (int d = 0; d < rt->nreplicas; d++) {
                v[d] = flags[d] != 0;
                bufs[d] = &v[d];
        }
        STRATA_TRY(strata_reduce(rt, bufs, 1, STRATA_I32, all ? STRATA_OP_MIN : STRATA_OP_MAX));
        *out = v[0] != 0;
        return STRATA_OK;
}
