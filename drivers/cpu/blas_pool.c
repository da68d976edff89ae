/*
 * Making Debian's serial OpenBLAS safe for one caller per device.
 *
 * The serial build (USE_THREAD=0, no USE_LOCKING) picks a buffer slot for every BLAS call in
 * blas_memory_alloc() without a lock: two devices calling sgemm at the same moment can take
 * the same slot and overwrite each other's packed panels (seen as runs that differ from one
 * another). OpenBLAS calls blas_memory_alloc/free through its PLT, so Strata interposes both
 * and serialises the call into the original with a lock: the slot scan becomes atomic,
 * the GEMMs themselves still run in parallel. strata__blas_reserve() makes OpenBLAS map one
 * slot per device at setup, so no mapping happens during training.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "arch/arch.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "kernel/wait.h"

typedef void *(*alloc_fn)(int);
typedef void (*free_fn)(void *);

static atomic_flag pool_lock = ATOMIC_FLAG_INIT;
static alloc_fn real_alloc;
static free_fn real_free;

void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* The lock taken, as a wait's condition. */
static int take(void *arg)
{
        (void)arg;
        return !atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire);
}

/*
 * A short spin, then the library's one wait, which yields: with more devices than cores a
 * holder preempted inside the scan must get a core back from the others waiting for it.
 */
static void lock(void)
{
        struct strata__wait w = { .ready = take, .timeout_s = STRATA__WAIT_FOREVER,
                                  .spins = 64 };

        (void)strata__wait(&w);
}

static void unlock(void)
{
        atomic_flag_clear_explicit(&pool_lock, memory_order_release);
}

/* Resolved under the lock on first use (OpenBLAS's own first call comes from its init). */
static void resolve(void)
{
        if (!real_alloc) {
                real_free = (free_fn)dlsym(RTLD_NEXT, "blas_memory_free");
                real_alloc = (alloc_fn)dlsym(RTLD_NEXT, "blas_memory_alloc");
        }
}

void *blas_memory_alloc(int procpos)
{
        void *p = NULL;

        lock();
        resolve();
        if (real_alloc)
                p = real_alloc(procpos);
        unlock();
        return p;
}

void blas_memory_free(void *buffer)
{
        lock();
        resolve();
        if (real_free)
                real_free(buffer);
        unlock();
}

int strata__blas_reserve(int n)
{
        void *held[STRATA_MAX_DEVICES];
        int got = 0;

        if (n > STRATA_MAX_DEVICES)
                n = STRATA_MAX_DEVICES;
        for (; got < n; got++)
                if (!(held[got] = blas_memory_alloc(0)))
                        break;
        for (int i = 0; i < got; i++)
                blas_memory_free(held[i]);
        return got == n ? 0 : -1;
}
