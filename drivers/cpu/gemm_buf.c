/*
 * The f32 GEMM's packing buffers (drivers/cpu/gemm.c): one fixed-size buffer per device,
 * carved from the runtime's plan and registered by the device's thread at warm-up; nothing is
 * mapped here. A registration is valid until the runtime forgets the buffer at teardown (a
 * generation number per registration, checked at each call), so a thread never packs into a
 * torn-down runtime's memory.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "drivers/cpu/gemm.h"

#define MAX_BUFS 256 /* buffers registered at once, all runtimes together */

/* A registered buffer: its address and the generation its threads hold (0: free). */
static struct {
        void *buf;
        _Atomic uint64_t gen;
} bufs[MAX_BUFS];
static uint64_t last_gen; /* under reg_lock */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local float *mine;
static _Thread_local int mine_i;
static _Thread_local uint64_t mine_gen;

float *strata__sgemm_claim(void)
{
        if (mine && atomic_load_explicit(&bufs[mine_i].gen, memory_order_acquire) == mine_gen)
                return mine;
        return NULL;
}

void strata__sgemm_use(void *buf)
{
        int i, fresh = -1;

        mine = NULL;
        if (!buf)
                return;
        pthread_mutex_lock(&reg_lock);
        for (i = 0; i < MAX_BUFS && bufs[i].buf != buf; i++)
                if (fresh < 0 && !bufs[i].buf)
                        fresh = i;
        if (i == MAX_BUFS && fresh >= 0) { /* a new buffer: a new generation */
                i = fresh;
                bufs[i].buf = buf;
                atomic_store_explicit(&bufs[i].gen, ++last_gen, memory_order_release);
        }
        if (i < MAX_BUFS) { /* else none free: this thread runs the scalar set */
                mine = buf;
                mine_i = i;
                mine_gen = atomic_load_explicit(&bufs[i].gen, memory_order_relaxed);
        }
        pthread_mutex_unlock(&reg_lock);
}

void strata__sgemm_forget(void *buf)
{
        if (!buf)
                return;
        pthread_mutex_lock(&reg_lock);
        for (int i = 0; i < MAX_BUFS; i++)
                if (bufs[i].buf == buf) {
                        atomic_store_explicit(&bufs[i].gen, 0, memory_order_release);
                        bufs[i].buf = NULL;
                }
        pthread_mutex_unlock(&reg_lock);
}
