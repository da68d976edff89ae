/*
 * Tracks: where each device is, and (when a trace is recorded) what it did when.
 *
 * Every device has one track, written only by the thread that runs the device. A track keeps
 * the device's open spans (what it is doing now, readable by any thread: the stall report
 * names it) and, when recording, a buffer of finished spans and counter samples preallocated
 * in the arena. The trace writer turns the buffers into Chrome Trace Event Format JSON (the
 * format chrome://tracing and Perfetto open) between steps, when no device is running: at the
 * caller's request, when a buffer is half full, and at close. A full buffer drops the newest
 * events and counts them; the count is reported, never silent.
 *
 * Spans nest: a span ends before the span that encloses it, so the events of one track nest
 * properly in the file.
 */
#ifndef STRATA_KERNEL_TRACE_H
#define STRATA_KERNEL_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/arena.h"

/** A kind of event (static storage): its name, category and the name of its argument. */
struct strata__span {
        const char *name; /**< shown on the timeline, e.g. "forward" */
        const char *cat;  /**< "compute", "data", "comm", "sync", "step", "counter" */
        const char *arg;  /**< name of the integer argument (NULL: none) */
        int counter;      /**< 1: a counter sample (value), not a span */
};

/** One recorded event. */
struct strata__trace_event {
        const struct strata__span *kind;
        const char *label; /**< appended to the name, e.g. a module's name (may be NULL) */
        uint64_t ts, dur;  /**< ns since the trace's origin */
        union {
                int64_t arg;  /**< span argument */
                double value; /**< counter value */
        } v;
};

/** Nesting depth a track follows (deeper spans are counted, not recorded). */
#define STRATA__TRACK_DEPTH 8

/** One device's track. */
struct strata__track {
        _Alignas(64) struct strata__trace_event *ev; /**< buffer (NULL: not recording) */
        uint32_t cap, n;                         /**< its capacity and fill */
        uint64_t dropped;                        /**< events lost to a full buffer */
        uint64_t origin;                         /**< the trace's time origin (ns) */
        int id;                                  /**< device index (the trace's tid) */
        int depth;                               /**< open spans */
        const struct strata__span *open[STRATA__TRACK_DEPTH];
        const char *open_label[STRATA__TRACK_DEPTH];
        _Atomic(const struct strata__span *) where; /**< innermost open span, for others */
        _Atomic(const char *) where_label;
        _Atomic uint64_t step;                   /**< the step the device works on */
};

/** @brief Monotonic time in nanoseconds (the clock of every track). */
uint64_t strata__track_now(void);

/**
 * @brief Open span @p k (with @p label, may be NULL) on @p t; NULL @p t does nothing.
 * @return the start time to give strata__track_end() (0 when not recording).
 */
uint64_t strata__track_begin(struct strata__track *t, const struct strata__span *k,
                            const char *label);

/** @brief Close the innermost open span, recording it with argument @p arg when recording. */
void strata__track_end(struct strata__track *t, uint64_t t0, int64_t arg);

/** @brief Record a counter sample @p value of @p k (k->counter is 1) when recording. */
void strata__track_counter(struct strata__track *t, const struct strata__span *k, double value);

/** @brief Set the step @p t works on and forget open spans (a new public call starts). */
void strata__track_restart(struct strata__track *t, uint64_t step);

/** @brief "step 12, forward (linear)": where the device of @p t is, for reports. */
void strata__track_where(const struct strata__track *t, char *buf, size_t n);

/**
 * @brief Report a stalled wait on stderr: device @p self has waited @p waited_s seconds in
 *        @p what; @p late lists the devices it waits for, each with where it is.
 */
void strata__track_stall(const struct strata__track *tracks, int self, const char *what,
                        double waited_s, const int *late, int nlate);

/** What a trace wrote: see strata__trace_stats(). */
struct strata__trace_stats {
        uint64_t events;  /**< events written to the file so far */
        uint64_t dropped; /**< events lost to full buffers */
        uint64_t bytes;   /**< bytes written so far */
};

struct strata__trace;

/**
 * @brief Carve the tracks of @p ntracks devices and, when @p path is not NULL, buffers of
 *        @p events events each and the writer's state. With a planning arena *out stays NULL
 *        and only the bytes are counted (the same code sizes and builds).
 * @retval STRATA_OK, STRATA_EINVAL (ntracks or events out of range), STRATA_ENOMEM.
 */
int strata__trace_layout(struct strata_arena *a, int ntracks, size_t events, const char *path,
                        struct strata__trace **out);

/** @brief The track of device @p dev (NULL when out of range or @p tr is NULL). */
struct strata__track *strata__trace_track(struct strata__trace *tr, int dev);

/** @brief The tracks array (one per device), for a failure domain's stall reports. */
struct strata__track *strata__trace_tracks(struct strata__trace *tr);

/**
 * @brief Start recording: open the output (base/output.h: a temporary file beside the path,
 *        or a device or FIFO in place) and write the process and track names
 *        (@p pid: the rank, @p process: its display name) and the kernel set the devices
 *        compute with (@p kernels, strata_kernel_set(); NULL: none named). Does nothing
 *        without a path.
 * @retval STRATA_OK, STRATA_EIO (the message names the file and the reason).
 */
int strata__trace_open(struct strata__trace *tr, int pid, const char *process,
                       const char *kernels);

/** @brief Stop without a file: close and remove the temporary (a failed init keeps nothing). */
void strata__trace_discard(struct strata__trace *tr);

/** @brief 1 when some buffer is at least half full (time to flush between steps). */
int strata__trace_due(const struct strata__trace *tr);

/**
 * @brief Write and empty every buffer. Only while no device records. New drops are reported
 *        on stderr once per flush.
 * @retval STRATA_OK, STRATA_EIO (the file is then abandoned; recording stops).
 */
int strata__trace_flush(struct strata__trace *tr);

/**
 * @brief Flush (unless @p flush is 0: a device may still be writing its buffer), end the JSON
 *        array and rename the temporary over @p path (its link's target when it is a
 *        symlink): the file at @p path is always complete.
 *        Idempotent.
 */
int strata__trace_close(struct strata__trace *tr, int flush);

/** @brief Counts so far (zeros without a trace). */
void strata__trace_get_stats(const struct strata__trace *tr, struct strata__trace_stats *out);

#endif /* STRATA_KERNEL_TRACE_H */
