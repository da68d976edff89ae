/*
 * Interposers for the CUDA runtime's allocation calls: the test binary defines them, so the
 * library's calls land here first, are counted, and go on to libcudart (dlsym RTLD_NEXT).
 */
#include "tests/support/cudacount.h"

#ifdef STRATA_HAVE_CUDA
#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>

static atomic_long calls;

long cudacount_calls(void)
{
        return atomic_load(&calls);
}

/* cudaError_t is an int-sized enum; streams and flags pass through unchanged. */
#define FORWARD(name, params, args)                                                            \
        int name params;                                                                       \
        int name params                                                                        \
        {                                                                                      \
                int(*next) params = (int(*) params)dlsym(RTLD_NEXT, #name);                    \
                atomic_fetch_add(&calls, 1);                                                   \
                return next ? next args : 2 /* cudaErrorMemoryAllocation */;                   \
        }

FORWARD(cudaMalloc, (void **p, size_t n), (p, n))
FORWARD(cudaMallocHost, (void **p, size_t n), (p, n))
FORWARD(cudaHostAlloc, (void **p, size_t n, unsigned f), (p, n, f))
FORWARD(cudaMallocManaged, (void **p, size_t n, unsigned f), (p, n, f))
FORWARD(cudaMallocAsync, (void **p, size_t n, void *s), (p, n, s))
FORWARD(cudaFree, (void *p), (p))
FORWARD(cudaFreeHost, (void *p), (p))
FORWARD(cudaFreeAsync, (void *p, void *s), (p, s))
#else
long cudacount_calls(void)
{
        return 0;
}
#endif
