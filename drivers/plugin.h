/*
 * Drivers built as their own shared object (internal): today the CUDA driver,
 * libstrata-cuda.so, so that a CPU-only program never loads the CUDA runtime or cuBLAS.
 *
 * The library dlopen()s the plugin the first time its accelerator is asked for and calls its
 * one exported function with what the plugin needs from the library (the error reporter, so
 * the plugin's messages reach the caller's strata_last_error()). The plugin hands back its
 * const ops table. Library and plugin must come from the same build: the ABI stamp says so.
 */
#ifndef STRATA_DRIVERS_PLUGIN_H
#define STRATA_DRIVERS_PLUGIN_H

#include <stdarg.h>

#include "strata/device.h"
#include "strata/version.h"

/* Same version and the same ops table layout, or the plugin refuses to load. */
#define STRATA__PLUGIN_ABI                                                                     \
        ((unsigned)STRATA_VERSION_HEX * 65536u + (unsigned)sizeof(struct strata_device_ops))

/** What the library gives a plugin. */
struct strata__plugin_host {
        unsigned abi; /* STRATA__PLUGIN_ABI of the library */
        int (*vfail)(int status, const char *fmt, va_list ap);
};

/** The CUDA plugin's file and entry point. */
#define STRATA__CUDA_PLUGIN "libstrata-cuda.so"
#define STRATA__CUDA_PLUGIN_ENTRY "strata_cuda_plugin_open"

/** The entry point's type: the driver's table, or NULL when @p host does not match. */
typedef const struct strata_device_ops *(*strata__plugin_open_fn)(
        const struct strata__plugin_host *host);

#endif /* STRATA_DRIVERS_PLUGIN_H */
