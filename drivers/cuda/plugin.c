/*
 * The CUDA plugin's entry point (linked into libstrata-cuda.so only; drivers/plugin.h): it
 * checks that the loading library comes from the same build, connects the error reporter and
 * hands back the driver's table.
 */
#include <stddef.h>

#include "drivers/cuda/host.h"
#include "drivers/drivers.h"
#include "drivers/plugin.h"

__attribute__((visibility("default"))) const struct strata_device_ops *
strata_cuda_plugin_open(const struct strata__plugin_host *host);

const struct strata_device_ops *strata_cuda_plugin_open(const struct strata__plugin_host *host)
{
        if (!host || host->abi != STRATA__PLUGIN_ABI || !host->vfail)
                return NULL;
        strata__cuda_host(host->vfail);
        return &strata__cuda_driver;
}
