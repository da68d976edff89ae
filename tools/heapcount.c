/*
 * A malloc interposer for tools and tests: every malloc-family call made by anyone in the
 * process while counting is on is counted, then served by glibc. Sanitizer builds own malloc,
 * so there the counter reports "unavailable" (-1).
 */
#include <stdatomic.h>
#include <stddef.h>

#include "tools/heapcount.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(STRATA_SANITIZED)
void strata_heapcount_start(void)
{
}

long strata_heapcount_stop(void)
{
        return -1;
}
#else
static atomic_int counting;
static atomic_long calls;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static void note(void)
{
        if (atomic_load_explicit(&counting, memory_order_relaxed))
                atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
}

void *malloc(size_t n);
void *calloc(size_t n, size_t m);
void *realloc(void *p, size_t n);
void free(void *p);
int posix_memalign(void **out, size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);

void *malloc(size_t n)
{
        note();
        return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
        note();
        return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
        note();
        return __libc_realloc(p, n);
}

void free(void *p)
{
        if (p)
                note();
        __libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
        void *p;

        note();
        p = __libc_memalign(align, n);
        if (!p)
                return 12; /* ENOMEM */
        *out = p;
        return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
        note();
        return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
        note();
        return __libc_memalign(align, n);
}

void strata_heapcount_start(void)
{
        atomic_store(&calls, 0);
        atomic_store(&counting, 1);
}

long strata_heapcount_stop(void)
{
        atomic_store(&counting, 0);
        return atomic_load(&calls);
}
#endif
