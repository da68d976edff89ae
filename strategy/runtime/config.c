/*
 * The checks of a configuration before anything is planned or built: the common ones here,
 * then the strategy's own (its validate). The by-name keys are strategy/runtime/config_keys.c.
 */
#include <math.h>
#include <stdio.h>

#include "strata/status.h"
#include "strata/version.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "nn/registry.h"
#include "strategy/job.h"

int strata__world(const struct strata_config *c, int *world)
{
        const struct strata__job_ops *job = strata__strategy_job(c->strategy.kind);
        int procs = 1;

        if (job)
                STRATA_TRY(job->processes(c, &procs));
        if (procs < 1 || procs > STRATA_MAX_PROCESSES)
                return strata__fail(STRATA_EINVAL, "%d processes not in [1, %d]", procs,
                                    STRATA_MAX_PROCESSES);
        *world = procs * c->strategy.devices;
        return STRATA_OK;
}

/* The model's loss settings, and the output width it needs (labels: two classes at least). */
static int check_loss(const struct strata_config *c)
{
        const struct strata_model *m = c->model;
        int least = strata__float_row(m) ? 1 : 2;

        if ((unsigned)m->reduction >= STRATA_REDUCTION_COUNT)
                return strata__fail(STRATA_EINVAL, "model reduction %d: mean (0) or sum (1)",
                                    (int)m->reduction);
        if (!(m->loss_beta >= 0.0f) || !isfinite(m->loss_beta))
                return strata__fail(STRATA_EINVAL, "model loss_beta %g: finite, >= 0 (0: 1.0)",
                                    (double)m->loss_beta);
        if (c->classes < least)
                return strata__fail(STRATA_EINVAL, "classes %d: need >= %d", c->classes, least);
        return STRATA_OK;
}

/* Invariant mode: what it needs of the strategy, the device count, the driver, the options. */
static int check_invariant(const struct strata_config *c, const struct strata__strategy *st,
                           const struct strata_device_ops *dev, int world)
{
        int chunks = c->strategy.chunks ? c->strategy.chunks : STRATA__CHUNKS_DEFAULT;

        if (c->strategy.chunks < 0 || c->strategy.chunks > STRATA__CHUNKS_MAX ||
            (chunks & (chunks - 1)))
                return strata__fail(STRATA_EINVAL, "chunks %d: a power of two in [1, %d] "
                                    "(0: %d)", c->strategy.chunks, STRATA__CHUNKS_MAX,
                                    STRATA__CHUNKS_DEFAULT);
        if (c->strategy.invariant != 0 && c->strategy.invariant != 1)
                return strata__fail(STRATA_EINVAL, "invariant %d: 0 or 1", c->strategy.invariant);
        if (!c->strategy.invariant)
                return STRATA_OK;
        if (!(strata__caps(st) & STRATA__CAP_INVARIANT))
                return strata__fail(STRATA_ENOTSUP, "invariant mode runs under single, ddp, "
                                    "spawn, mpi, zero1, zero2 and fsdp, not %s", st->name);
        if (world > chunks)
                return strata__fail(STRATA_EINVAL, "invariant mode: %d devices for %d chunks "
                                    "would leave a device without rows; use at most %d "
                                    "devices or more chunks (chunks)", world, chunks, chunks);
        if (strata__own_memory(dev))
                return strata__fail(STRATA_ENOTSUP, "invariant mode combines chunks in host "
                                    "memory; the %s driver's gradients are on the device",
                                    dev->name);
        if (c->strategy.grad_allreduce != STRATA_F32 || c->process.mpi_allreduce)
                return strata__fail(STRATA_EINVAL, "invariant mode sums gradients in f32 with "
                                    "its own tree: not with grad_allreduce bf16 or "
                                    "mpi_allreduce");
        /* a BatchNorm without synchronised statistics normalises each device's rows alone */
        if (!c->strategy.sync_bn && strata__model_batch_norm(c->model))
                return strata__fail(STRATA_EINVAL, "invariant mode needs synchronised "
                                    "BatchNorm (sync_bn): statistics over the global batch");
        return STRATA_OK;
}

/*
 * An inference-only runtime: one device that holds parameters and the forward's buffers, so
 * strategy single (the others plan training's buffers, or shard), precision 32 (mixed
 * precision's parameters are fp32 masters beside bf16 or fp16 copies), not invariant mode.
 */
static int check_inference(const struct strata_config *c)
{
        if (c->inference_only != 0 && c->inference_only != 1)
                return strata__fail(STRATA_EINVAL, "inference_only %d: 0 or 1",
                                    c->inference_only);
        if (!c->inference_only)
                return STRATA_OK;
        if (c->strategy.kind != STRATA_STRATEGY_SINGLE)
                return strata__fail(STRATA_ENOTSUP, "inference_only runs under strategy single "
                                    "(one device), not %s",
                                    strata_strategy_name(c->strategy.kind));
        if (c->precision.kind != STRATA_PRECISION_32)
                return strata__fail(STRATA_ENOTSUP, "inference_only runs in precision 32, not "
                                    "%s: mixed precision keeps fp32 master weights",
                                    strata_precision_name(c->precision.kind));
        if (c->strategy.invariant)
                return strata__fail(STRATA_ENOTSUP, "inference_only: invariant mode shapes "
                                    "training's sums; predictions need none of it");
        if (c->models && c->models->count)
                return strata__fail(STRATA_ENOTSUP, "inference_only runs one model; cfg.models "
                                    "declares %d more", c->models->count);
        return STRATA_OK;
}

int strata__check_config(const struct strata_config *c, const struct strata__strategy **st,
                         const struct strata_device_ops **dev, int planning)
{
        int (*validate)(const struct strata__strategy *, const struct strata_config *,
                        const struct strata_device_ops *);
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
        } else if (c->device.accelerator == STRATA_ACCEL_CPU) {
                STRATA_TRY(strata__cpu_driver_for(c->device.kernels, dev));
        } else if (planning) {
                STRATA_TRY(strata__device_driver_unprobed(c->device.accelerator, dev));
        } else {
                STRATA_TRY(strata_device_driver(c->device.accelerator, dev));
        }
        STRATA_TRY(check_loss(c));
        if (c->memory && c->memory_size == 0)
                return strata__fail(STRATA_EINVAL, "config.memory given with memory_size 0");
        if (c->train.accumulate < 0 || c->train.accumulate > 1 << 20)
                return strata__fail(STRATA_EINVAL, "accumulate %d not in [1, 1048576]",
                                    c->train.accumulate);
        if ((unsigned)c->train.accumulate_reduce > STRATA_ACCUMULATE_REDUCE_EACH)
                return strata__fail(STRATA_EINVAL, "accumulate_reduce %d is not "
                                    "STRATA_ACCUMULATE_REDUCE_WINDOW (0) or "
                                    "STRATA_ACCUMULATE_REDUCE_EACH (1)",
                                    (int)c->train.accumulate_reduce);
        if (strata__accumulate_each(c) && !(*dev)->kernels->add)
                return strata__fail(STRATA_ENOTSUP, "accumulate_reduce each adds every "
                                    "micro-batch's reduced gradients on the device: the %s "
                                    "driver has no add kernel (use window)", (*dev)->name);
        if ((unsigned)c->device.bind > STRATA_BIND_NONE)
                return strata__fail(STRATA_EINVAL, "bind %d is not STRATA_BIND_CORES or "
                                                   "STRATA_BIND_NONE", (int)c->device.bind);
        if ((unsigned)c->device.no_fusion > 1)
                return strata__fail(STRATA_EINVAL, "no_fusion %d is not 0 or 1",
                                    c->device.no_fusion);
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
        if (c->strategy.grad_allreduce == STRATA_BF16 &&
            !(strata__caps(*st) & STRATA__CAP_ALL_REDUCE))
                return strata__fail(STRATA_EINVAL, "grad_allreduce bf16 applies where gradients "
                                                   "are all-reduced (ddp, zero1, spawn, mpi), not "
                                                   "under %s", (*st)->name);
        if (c->strategy.grad_allreduce == STRATA_BF16 && strata__own_memory(*dev))
                return strata__fail(STRATA_ENOTSUP, "grad_allreduce bf16 rounds gradients in "
                                                   "host memory; the %s driver's are on the "
                                                   "device", (*dev)->name);
        if (c->strategy.replication_callbacks && !(strata__caps(*st) & STRATA__CAP_REPLICATE))
                return strata__fail(STRATA_EINVAL, "replication callbacks exist only under dp, "
                                                   "not %s", (*st)->name);
        STRATA_TRY(check_invariant(c, *st, *dev, world));
        STRATA_TRY(check_inference(c));
        STRATA_TRY(strata__models_check(c, *st, *dev));
        STRATA_TRY(strata__strategy_job(c->strategy.kind)->validate((*st)->name, c, *dev));
        validate = STRATA__INHERITED(*st, ops.validate);
        return validate ? validate(*st, c, *dev) : STRATA_OK;
}

void strata_config_init(struct strata_config *cfg)
{
        const struct strata_config defaults = STRATA_CONFIG_INIT;

        if (cfg)
                *cfg = defaults;
}

int strata_patch_replication_callback(struct strata_config *cfg)
{
        const struct strata__strategy *st = cfg ? strata__strategy_get(cfg->strategy.kind) : NULL;

        if (!st || !(strata__caps(st) & STRATA__CAP_REPLICATE))
                return strata__fail(STRATA_EINVAL,
                                    "patch_replication_callback: needs a dp configuration");
        cfg->strategy.replication_callbacks = 1;
        return STRATA_OK;
}

const char *strata__kernels_of(const struct strata_config *c, const struct strata_device_ops *dev)
{
        const char *k;

        if (!strata__cpu_is(dev))
                return dev->name;
        k = strata_kernel_set(c->device.kernels, c->precision.kind == STRATA_PRECISION_BF16_MIXED
                                                         ? STRATA_BF16 : STRATA_F32);
        return k ? k : dev->name;
}
