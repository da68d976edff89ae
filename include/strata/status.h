/*
 * Status codes. Every public function that can fail returns one of these: STRATA_OK (0) or a
 * negative code. A failing call also leaves a one-line explanation, retrievable with
 * strata_last_error() on the same thread, that names the argument or the number at fault.
 */
#ifndef STRATA_STATUS_H
#define STRATA_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description): the one list both the enum and strata_strerror() come from. */
#define STRATA_STATUS_LIST(X)                                                                  \
        X(STRATA_OK, 0, "success")                                                             \
        X(STRATA_EINVAL, -1, "invalid argument")                                               \
        X(STRATA_ENOMEM, -2, "memory region too small")                                        \
        X(STRATA_ESEALED, -3, "arena is sealed")                                               \
        X(STRATA_EBADSTATE, -4, "event not allowed in the current state")                     \
        X(STRATA_ENOTSUP, -5, "operation not supported")                                       \
        X(STRATA_EIO, -6, "input/output error")                                                \
        X(STRATA_EFORMAT, -7, "malformed or corrupt data")                                     \
        X(STRATA_ETIMEDOUT, -8, "timed out")                                                   \
        X(STRATA_EABORTED, -9, "aborted after another device failed")                          \
        X(STRATA_EOVERFLOW, -10, "size or count overflow")                                     \
        X(STRATA_ESYS, -11, "system call failed")                                              \
        X(STRATA_EDEVICE, -12, "device failure")                                               \
        X(STRATA_ENODEV, -13, "no such device")                                                \
        X(STRATA_EINJECTED, -14, "injected failure (tests)")                                   \
        X(STRATA_ENONFINITE, -15, "non-finite value")                                          \
        X(STRATA_ESTOPPED, -16, "stop requested")

/** Result of every fallible Strata call. */
typedef enum strata_status {
#define STRATA__STATUS_ENUM(name, value, text) name = (value),
        STRATA_STATUS_LIST(STRATA__STATUS_ENUM)
#undef STRATA__STATUS_ENUM
} strata_status;

/**
 * @brief Fixed description of a status code.
 * @param status Any value; unknown codes get "unknown status".
 * @return A static string, never NULL.
 */
const char *strata_strerror(int status);

/**
 * @brief Name of a status code's enumerator ("STRATA_EINVAL"), for logs and JSON.
 * @param status Any value; unknown codes get "STRATA_EUNKNOWN".
 * @return A static string, never NULL.
 */
const char *strata_status_name(int status);

/**
 * @brief Detailed message of the last failing Strata call on this thread.
 *
 * The message names the argument, file or size at fault ("memory region is 1024 bytes, the
 * configuration needs 5242880"). It stays until the next failing call on the same thread.
 * @return A thread-local string, empty when nothing has failed yet; never NULL.
 */
const char *strata_last_error(void);

/**
 * @brief Record a refusal of the caller's own as this thread's last error: what a binding (the
 *        Fortran module) or an application reports through strata_last_error() when it
 *        refuses a call before reaching the library.
 * @param status  The status it returns (its description prefixes the message, as the
 *                library's own).
 * @param message The reason (NULL: nothing recorded).
 * @return @p status.
 */
int strata_set_error(int status, const char *message);

/** How much a line the library writes matters (strata_set_log()). */
enum strata_log_level {
        STRATA_LOG_WARNING = 1, /**< something the user should know: oversubscribed cores, a
                                 *   trace that drops events, a stalled device */
        STRATA_LOG_INFO = 2,    /**< what cfg.verbose asks for: placement, memory, kernels */
};

/**
 * A receiver of the library's own lines: @p line is one whole line without its newline
 * ("strata: warning: 4 devices share the 2 core(s) ..."). It may be called from any of the
 * runtime's threads, also while a step runs: it must be thread-safe, must not block for long
 * and must not call back into the library.
 */
typedef void (*strata_log_fn)(enum strata_log_level level, const char *line, void *user);

/**
 * @brief Send the library's warnings and verbose lines to @p fn instead of the process's
 *        standard error (a host with its own logger, a GUI, a Python binding).
 *
 * Process-wide; takes effect for lines written after it returns. The library writes nothing
 * else to any stream (errors are returned, with strata_last_error()).
 * @param fn   The receiver, or NULL to write to standard error again (the default).
 * @param user Passed to @p fn unchanged.
 * @return STRATA_OK.
 */
int strata_set_log(strata_log_fn fn, void *user);

/** Evaluate @p expr; return its status from the enclosing function if it is not STRATA_OK. */
#define STRATA_TRY(expr)                                                                       \
        do {                                                                                   \
                int strata__rc = (expr);                                                       \
                if (strata__rc != STRATA_OK)                                                   \
                        return strata__rc;                                                     \
        } while (0)

/** Evaluate @p expr; on failure store its status in @p rc and jump to @p label. */
#define STRATA_TRY_GOTO(rc, expr, label)                                                       \
        do {                                                                                   \
                (rc) = (expr);                                                                 \
                if ((rc) != STRATA_OK)                                                         \
                        goto label;                                                            \
        } while (0)

/**
 * Cleanup form: evaluate @p expr and keep its status in @p rc only if @p rc is still
 * STRATA_OK, so that the first error wins and cleanup never overwrites it.
 */
#define STRATA_KEEP_FIRST(rc, expr)                                                            \
        do {                                                                                   \
                int strata__rc2 = (expr);                                                      \
                if ((rc) == STRATA_OK)                                                         \
                        (rc) = strata__rc2;                                                    \
        } while (0)

#ifdef __cplusplus
}
#endif

#endif /* STRATA_STATUS_H */
