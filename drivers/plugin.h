/*
 * Drivers built as their own shared object (internal): the CUDA driver, libstrata-cuda.so, so
 * that a CPU-only program never loads the CUDA runtime or cuBLAS, and the MPI link,
 * libstrata-mpi.so, so that only a program that runs on MPI loads Open MPI.
 *
 * The library dlopen()s the plugin the first time its accelerator is asked for and calls its
 * one exported function with what the plugin needs from the library (the error reporter, so
 * the plugin's messages reach the caller's strata_last_error(); the bounded wait, so the MPI
 * link waits as every other wait does). The plugin hands back its const ops table. Library and
 * plugin must come from the same build: the ABI stamp says so.
 */
#ifndef STRATA_DRIVERS_PLUGIN_H
#define STRATA_DRIVERS_PLUGIN_H

#include <stdarg.h>

#include "strata/device.h"
#include "strata/version.h"
#include "kernel/wait.h"

/*
 * Same version and the same layout of both ops tables, or the plugin refuses to load: the
 * kernel table grows at its end (optional entries), which the device table's size misses.
 */
#define STRATA__PLUGIN_ABI                                                                     \
        ((unsigned)STRATA_VERSION_HEX * 65536u + (unsigned)sizeof(struct strata_device_ops) + \
         (unsigned)sizeof(struct strata_kernel_ops) * 4096u)

/** What the library gives a plugin. */
struct strata__plugin_host {
        unsigned abi; /* STRATA__PLUGIN_ABI of the library */
        int (*vfail)(int status, const char *fmt, va_list ap);
        int (*wait)(struct strata__wait *w); /* strata__wait(); NULL for the CUDA plugin */
};

/** The CUDA plugin's file and entry point. */
#define STRATA__CUDA_PLUGIN "libstrata-cuda.so"
#define STRATA__CUDA_PLUGIN_ENTRY "strata_cuda_plugin_open"

/** The entry point's type: the driver's table, or NULL when @p host does not match. */
typedef const struct strata_device_ops *(*strata__plugin_open_fn)(
        const struct strata__plugin_host *host);

/** The MPI link's plugin (drivers/net.h): libstrata-mpi.so, linked with Open MPI. */
#define STRATA__MPI_PLUGIN "libstrata-mpi.so"
#define STRATA__MPI_PLUGIN_ENTRY "strata_mpi_plugin_open"
#define STRATA__NET_PLUGIN_ABI                                                                 \
        ((unsigned)STRATA_VERSION_HEX * 65536u + (unsigned)sizeof(struct strata__net_ops) +     \
         (unsigned)sizeof(struct strata_net) * 256u + (unsigned)sizeof(struct strata__wait) * 16u)

struct strata__net_ops;

/** The MPI plugin's entry point: the link's table, or NULL when @p host does not match. */
typedef const struct strata__net_ops *(*strata__net_plugin_open_fn)(
        const struct strata__plugin_host *host);

#endif /* STRATA_DRIVERS_PLUGIN_H */
