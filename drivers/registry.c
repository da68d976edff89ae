/* The registries of device drivers (one const table per accelerator kind) and transports. */
#include <stddef.h>

#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/comm_internal.h"
#include "drivers/drivers.h"

static const struct strata_device_ops *const registry[STRATA_ACCEL_COUNT] = {
        [STRATA_ACCEL_CPU] = &strata__cpu_driver,
        [STRATA_ACCEL_CUDA] = STRATA__CUDA_DRIVER,
};

static const char *const names[STRATA_ACCEL_COUNT] = {
        [STRATA_ACCEL_CPU] = "cpu",
        [STRATA_ACCEL_CUDA] = "cuda",
};

static int complete(const struct strata_device_ops *d)
{
        return d->probe && d->gemm && d->fill_rows && d->relu && d->relu_backward &&
               d->col_sums && d->softmax_xent && d->copy && d->fill && d->mul && d->dropout &&
               d->col_stats && d->div && d->bn_moments && d->bn_normalize && d->bn_eval &&
               d->bn_grad_sums && d->bn_dx && d->update && d->sumsq && d->scale && d->clamp &&
               (d->host_visible || (d->reserve && d->unreserve && d->to_device && d->to_host));
}

int strata_device_driver(enum strata_accelerator kind, const struct strata_device_ops **out)
{
        const struct strata_device_ops *d;

        if (!out || (unsigned)kind >= STRATA_ACCEL_COUNT)
                return strata__fail(STRATA_EINVAL, "device driver: unknown accelerator %d",
                                    (int)kind);
        d = registry[kind];
        if (!d)
                return strata__fail(STRATA_ENODEV,
                                    "device driver %s: not built into this library (it was "
                                    "built without nvcc, or with CUDA=0)",
                                    names[kind]);
        STRATA_TRY(strata_device_check(d));
        *out = d;
        return STRATA_OK;
}

int strata_device_check(const struct strata_device_ops *d)
{
        const char *why = NULL;

        if (!d)
                return strata__fail(STRATA_EINVAL, "device driver is NULL");
        if (!complete(d))
                return strata__fail(STRATA_EINVAL, "device driver %s lacks a mandatory operation",
                                    d->name ? d->name : "(unnamed)");
        if (!d->probe(&why))
                return strata__fail(STRATA_ENODEV, "device driver %s: %s", d->name,
                                    why ? why : "probe failed");
        return STRATA_OK;
}

/* The transports, in order of preference: a communicator runs on the first that accepts. */
extern const struct strata__transport strata__shm_transport;

static const struct strata__transport *const transports[] = {
        &strata__shm_transport,
};

const struct strata__transport *strata__transport_pick(const struct strata_comm_config *cfg,
                                                       const char **why)
{
        for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
                if (transports[i]->probe(cfg, why))
                        return transports[i];
        return NULL;
}
