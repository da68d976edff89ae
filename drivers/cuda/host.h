/* The CUDA plugin's link to its host library (internal to drivers/cuda/). */
#ifndef STRATA_DRIVERS_CUDA_HOST_H
#define STRATA_DRIVERS_CUDA_HOST_H

#include <stdarg.h>

/* Route the plugin's strata__fail() through the loading library's @p vfail. */
void strata__cuda_host(int (*vfail)(int status, const char *fmt, va_list ap));

#endif /* STRATA_DRIVERS_CUDA_HOST_H */
