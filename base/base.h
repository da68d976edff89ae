/*
 * The base layer (private, not installed): what every other layer of the library uses and
 * nothing below it provides. Error capture for strata_last_error(), checked size arithmetic,
 * alignment, and the compile-time limits. It depends on nothing but libc.
 */
#ifndef STRATA_BASE_BASE_H
#define STRATA_BASE_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include "strata/limits.h"
#include "strata/status.h"

/**
 * Record a detailed message for strata_last_error() and return @p status, so that a failure
 * reads `return strata__fail(STRATA_EINVAL, "batch must be > 0, got %d", b);`.
 */
int strata__fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* strata__fail() with a va_list: what a driver loaded as a plugin reports its errors with. */
int strata__vfail(int status, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * Set this thread's last error to @p msg verbatim and return @p status: how an error raised on
 * another thread (a device's worker) reaches the caller's strata_last_error().
 */
int strata__set_error(int status, const char *msg);

/*
 * The last error with @p status, without the "text: " strata__fail() put before it: for a
 * caller that refails it with more context (copy it first: the next failure overwrites it).
 */
const char *strata__last_reason(int status);

/*
 * One line of the library's own to the log (strata_set_log(): the host's receiver, or standard
 * error in one write so lines of several threads do not interleave). The text is formatted
 * into a fixed buffer on the stack: no allocation, safe on the step path.
 */
void strata__log(enum strata_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));


/** Checked a * b for sizes: 0 and *out set on success, -1 on overflow. */
/* Seconds on the monotonic clock: every wait's deadline and bound. */
static inline double strata__now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int strata__mul_size(size_t a, size_t b, size_t *out)
{
        return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

/** Checked a + b for sizes. */
static inline int strata__add_size(size_t a, size_t b, size_t *out)
{
        return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

#define STRATA__ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((size_t)(a) - 1))

#endif /* STRATA_BASE_BASE_H */
