/*
 * Tracks: where each device is and what it recorded (contract in kernel/trace.h).
 *
 * Recording is a store into the track's own buffer: no lock, no system call, no allocation.
 * The position (span and label) is published with release stores, so that a stall report
 * from another device reads it without a lock. The trace writer (trace_write.c) carves the
 * buffers and drains them between steps.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "kernel/trace.h"

uint64_t strata__track_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t strata__track_begin(struct strata__track *t, const struct strata__span *k,
                            const char *label)
{
        if (!t)
                return 0;
        if (t->depth < STRATA__TRACK_DEPTH) {
                t->open[t->depth] = k;
                t->open_label[t->depth] = label;
                atomic_store_explicit(&t->where_label, label, memory_order_relaxed);
                atomic_store_explicit(&t->where, k, memory_order_release);
        }
        t->depth++;
        return t->ev ? strata__track_now() : 0;
}

static void record(struct strata__track *t, const struct strata__trace_event *e)
{
        if (t->n < t->cap)
                t->ev[t->n++] = *e;
        else
                t->dropped++;
}

void strata__track_end(struct strata__track *t, uint64_t t0, int64_t arg)
{
        int d;

        if (!t || t->depth == 0)
                return;
        d = --t->depth;
        if (d >= STRATA__TRACK_DEPTH)
                return;
        if (t->ev) {
                uint64_t now = strata__track_now();
                struct strata__trace_event e = { t->open[d], t->open_label[d], t0 - t->origin,
                                                now - t0, { .arg = arg } };

                record(t, &e);
        }
        atomic_store_explicit(&t->where_label, d ? t->open_label[d - 1] : NULL,
                              memory_order_relaxed);
        atomic_store_explicit(&t->where, d ? t->open[d - 1] : NULL, memory_order_release);
}

void strata__track_counter(struct strata__track *t, const struct strata__span *k, double value)
{
        if (t && t->ev) {
                struct strata__trace_event e = { k, NULL, strata__track_now() - t->origin, 0,
                                                { .value = value } };

                record(t, &e);
        }
}

void strata__track_restart(struct strata__track *t, uint64_t step)
{
        if (!t)
                return;
        t->depth = 0;
        atomic_store_explicit(&t->where, NULL, memory_order_relaxed);
        atomic_store_explicit(&t->step, step, memory_order_relaxed);
}

void strata__track_where(const struct strata__track *t, char *buf, size_t n)
{
        const struct strata__span *k = atomic_load_explicit(&t->where, memory_order_acquire);
        const char *label = atomic_load_explicit(&t->where_label, memory_order_relaxed);
        unsigned long long step = atomic_load_explicit(&t->step, memory_order_relaxed);

        if (!k)
                snprintf(buf, n, "step %llu, between phases", step);
        else
                snprintf(buf, n, "step %llu, in %s%s%s%s", step, k->name, label ? " (" : "",
                         label ? label : "", label ? ")" : "");
}

void strata__track_stall(const struct strata__track *tracks, int self, const char *what,
                        double waited_s, const int *late, int nlate)
{
        char line[1024], where[128];
        size_t len;

        strata__track_where(&tracks[self], where, sizeof(where));
        len = (size_t)snprintf(line, sizeof(line),
                               "strata: stall: device %d has waited %.1f s in %s (%s); "
                               "not arrived:", self, waited_s, what, where);
        for (int i = 0; i < nlate && len < sizeof(line); i++) {
                strata__track_where(&tracks[late[i]], where, sizeof(where));
                len += (size_t)snprintf(line + len, sizeof(line) - len, "%s device %d (%s)",
                                        i ? ";" : "", late[i], where);
        }
        /* One line: not interleaved with another device's. */
        strata__log(STRATA_LOG_WARNING, "%s", line);
}
