/*
 * The trace an application records (cfg.trace.path): a timeline of every device in Chrome
 * Trace Event Format JSON, for Perfetto or chrome://tracing. It is written to a temporary file
 * beside the path between steps and renamed over it at teardown, so the file at the path is
 * always complete (a symlink's target is replaced; a device or FIFO is written in place).
 */
#ifndef STRATA_TRACE_H
#define STRATA_TRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct strata_runtime;

/**
 * @brief Write the trace's buffered events to its file now (e.g. at an epoch end); between
 *        steps. Buffers are also flushed when half full (at the start of a step) and at
 *        teardown. Without a trace it does nothing.
 * @retval STRATA_OK; STRATA_EINVAL (NULL); STRATA_EIO (the message says why; tracing stops
 *         and the partial file is removed, training goes on).
 */
int strata_flush_trace(struct strata_runtime *rt);

/**
 * @brief Trace counts so far: events written to the file and events dropped because a
 *        device's buffer was full (also reported on stderr and in the file).
 * @retval STRATA_OK, STRATA_EINVAL (NULL argument).
 */
int strata_trace_counts(const struct strata_runtime *rt, uint64_t *written, uint64_t *dropped);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_TRACE_H */
