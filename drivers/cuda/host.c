/*
 * What the CUDA plugin takes from the library that loaded it (linked into libstrata-cuda.so
 * only): strata__fail() forwards to the library's reporter, so an error raised in the plugin
 * is the caller's strata_last_error().
 */
#include <stdarg.h>
#include <stddef.h>

#include "base/base.h"
#include "drivers/cuda/host.h"

static int (*host_vfail)(int status, const char *fmt, va_list ap);

void strata__cuda_host(int (*vfail)(int status, const char *fmt, va_list ap))
{
        host_vfail = vfail;
}

int strata__fail(int status, const char *fmt, ...)
{
        va_list ap;

        if (!host_vfail)
                return status;
        va_start(ap, fmt);
        status = host_vfail(status, fmt, ap);
        va_end(ap);
        return status;
}
