/*
 * A malloc interposer for tools and tests: every malloc-family call made by anyone in the
 * process while counting is on is counted, then served by glibc. Sanitizer builds own malloc,
 * so there the counter reports "unavailable" (-1).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * STRATA_HEAPCOUNT_WHO set: the callers of the first WHO_MAX counted calls are kept (return
 * addresses in static memory: nothing allocated) and named on stderr at stop, so a count
 * above zero says which library made it.
 */
#define WHO_MAX 4096
#define WHO_DEPTH 8
static int who_on;
static void *who[WHO_MAX][WHO_DEPTH];
static atomic_int who_n;
static _Thread_local int in_note;

static void note(void)
{
        if (!atomic_load_explicit(&counting, memory_order_relaxed))
                return;
        atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
        if (who_on && !in_note) {
                int i = atomic_fetch_add_explicit(&who_n, 1, memory_order_relaxed);

                if (i < WHO_MAX) {
                        in_note = 1;
                        memset(who[i], 0, sizeof(who[i]));
                        backtrace(who[i], WHO_DEPTH);
                        in_note = 0;
                }
        }
}

/* One frame as "object(symbol+offset)". */
static void name_frame(void *pc, char *buf, size_t n)
{
        Dl_info d;

        if (!pc || !dladdr(pc, &d) || !d.dli_fname) {
                snprintf(buf, n, "?");
                return;
        }
        const char *obj = strrchr(d.dli_fname, '/');

        snprintf(buf, n, "%s(%s+%#lx)", obj ? obj + 1 : d.dli_fname,
                 d.dli_sname ? d.dli_sname : "",
                 (unsigned long)((char *)pc - (char *)(d.dli_sname ? d.dli_saddr : d.dli_fbase)));
}

/*
 * The call chains seen, grouped by their first three callers (frames 1-3: past note, which
 * may or may not be inlined into malloc), each group with its count; at most 24 groups.
 */
static void who_report(void)
{
        int n = atomic_load(&who_n), groups = 0;
        static int done[WHO_MAX];
        char f[256];

        n = n < WHO_MAX ? n : WHO_MAX;
        memset(done, 0, sizeof(done));
        fprintf(stderr, "heapcount: %ld calls; callers of the first %d:\n", atomic_load(&calls), n);
        for (int i = 0; i < n; i++) {
                int same = 0;

                if (done[i] || groups++ >= 24)
                        continue;
                for (int j = i; j < n; j++)
                        if (!done[j] && !memcmp(who[i] + 1, who[j] + 1, sizeof(void *) * 3)) {
                                done[j] = 1;
                                same++;
                        }
                fprintf(stderr, "  %d x", same);
                for (int k = 1; k < WHO_DEPTH; k++) {
                        name_frame(who[i][k], f, sizeof(f));
                        fprintf(stderr, " <- %s", f);
                }
                fputc('\n', stderr);
        }
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
        const char *w = getenv("STRATA_HEAPCOUNT_WHO");

        who_on = w && *w && strcmp(w, "0") != 0;
        if (who_on) { /* the unwinder loads itself on first use: not inside the window */
                void *pc[2];

                backtrace(pc, 2);
        }
        atomic_store(&who_n, 0);
        atomic_store(&calls, 0);
        atomic_store(&counting, 1);
}

long strata_heapcount_stop(void)
{
        atomic_store(&counting, 0);
        if (who_on && atomic_load(&calls) > 0)
                who_report();
        return atomic_load(&calls);
}
#endif
