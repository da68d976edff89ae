/*
 * The CUDA driver's logical devices (drivers/cuda/gpu.h): their state, which one the calling
 * thread runs (set by the driver's bind), and each one's first error. The bottom of the
 * driver: cuda.c and blas.c both work on these.
 */
#include <cuda_runtime_api.h>

#include "strata/limits.h"
#include "drivers/cuda/gpu.h"

static struct strata__cuda_gpu gpus[STRATA_MAX_DEVICES];
static _Thread_local int cur; /* the calling thread's logical device (bind) */

struct strata__cuda_gpu *strata__cuda_gpu(int dev_id)
{
        return &gpus[dev_id];
}

struct strata__cuda_gpu *strata__cuda_me(void)
{
        return &gpus[cur];
}

int strata__cuda_cur(void)
{
        return cur;
}

void strata__cuda_bind_thread(int dev_id)
{
        cur = dev_id;
}

void strata__cuda_note(cudaError_t e, const char *op)
{
        struct strata__cuda_gpu *g = strata__cuda_me();

        if (e != cudaSuccess && g->err == cudaSuccess) {
                g->err = e;
                g->err_op = op;
        }
}

void strata__cuda_launched(const char *op)
{
        strata__cuda_note(cudaGetLastError(), op);
}
