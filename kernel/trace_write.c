/*
 * The trace writer (contract in kernel/trace.h): it carves the tracks and their event
 * buffers (recording is kernel/track.c) and writes the events as Chrome trace JSON.
 *
 * Writing happens between steps on the caller's thread, through a formatting buffer carved at
 * init, into a safe output (base/output.h): a temporary file beside the target renamed over it
 * when complete (a symlink's target is replaced), or a device or FIFO written in place.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/status.h"
#include "kernel/trace.h"
#include "base/base.h"
#include "base/output.h"

#define OUT_BYTES ((size_t)1 << 16) /* the formatting buffer */
#define MAX_EVENTS ((size_t)1 << 26)

struct strata__trace {
        struct strata__track *tracks;
        int ntracks;
        char *path;         /* the path asked for */
        struct strata__out file; /* the output; fd -1: not recording or abandoned */
        char *out;          /* formatting buffer, OUT_BYTES */
        size_t fill;
        int pid;
        int closed;
        char why[256];      /* the failure that stopped recording, reported again at close */
        uint64_t written, bytes, reported_drops;
};

static int copy_string(struct strata_arena *a, const char *s, char **out)
{
        size_t n = strlen(s) + 1;
        void *p;

        STRATA_TRY(strata_arena_alloc(a, n, 1, &p));
        if (p)
                memcpy(p, s, n);
        *out = p;
        return STRATA_OK;
}

int strata__trace_layout(struct strata_arena *a, int ntracks, size_t events, const char *path,
                        struct strata__trace **out)
{
        struct strata__trace *tr;
        void *p, *q;

        if (!a || !out || ntracks < 1 || ntracks > 4096)
                return strata__fail(STRATA_EINVAL, "trace: %d tracks", ntracks);
        if (path && (events < 16 || events > MAX_EVENTS))
                return strata__fail(STRATA_EINVAL, "trace: %zu events per device not in "
                                                   "[16, %zu]", events, MAX_EVENTS);
        if (path && !*path)
                return strata__fail(STRATA_EINVAL, "trace: empty path");
        STRATA_TRY(strata_arena_alloc(a, sizeof(*tr), 64, &p));
        STRATA_TRY(strata_arena_alloc(a, sizeof(struct strata__track) * (size_t)ntracks, 64, &q));
        tr = p;
        if (tr) {
                memset(tr, 0, sizeof(*tr));
                memset(q, 0, sizeof(struct strata__track) * (size_t)ntracks);
                tr->tracks = q;
                tr->ntracks = ntracks;
                tr->file.fd = -1;
                tr->file.what = "trace";
                for (int d = 0; d < ntracks; d++)
                        tr->tracks[d].id = d;
        }
        if (path) {
                char *unused;

                STRATA_TRY(copy_string(a, path, tr ? &tr->path : &unused));
                STRATA_TRY(strata_arena_alloc(a, 2 * STRATA__OUT_PATH, 1, &p));
                if (tr) {
                        tr->file.path = p;
                        tr->file.tmp = (char *)p + STRATA__OUT_PATH;
                        tr->file.tmp[0] = '\0';
                }
                STRATA_TRY(strata_arena_alloc(a, OUT_BYTES, 64, &p));
                if (tr)
                        tr->out = p;
                for (int d = 0; d < ntracks; d++) {
                        STRATA_TRY(strata_arena_alloc(a, sizeof(struct strata__trace_event) * events,
                                                      64, &p));
                        if (tr) {
                                tr->tracks[d].ev = p;
                                tr->tracks[d].cap = (uint32_t)events;
                        }
                }
        }
        *out = tr;
        return STRATA_OK;
}

struct strata__track *strata__trace_track(struct strata__trace *tr, int dev)
{
        return tr && dev >= 0 && dev < tr->ntracks ? &tr->tracks[dev] : NULL;
}

struct strata__track *strata__trace_tracks(struct strata__trace *tr)
{
        return tr ? tr->tracks : NULL;
}

/* Recording stops after an error: the buffers are detached, the output given up. */
static void detach(struct strata__trace *tr)
{
        const char *e = strata_last_error(), *colon = strstr(e, ": ");

        if (!tr->why[0]) /* without the status's name: close names it again */
                snprintf(tr->why, sizeof(tr->why), "%s", colon ? colon + 2 : e);
        strata__out_abort(&tr->file);
        for (int d = 0; d < tr->ntracks; d++)
                tr->tracks[d].ev = NULL;
}

static int abandon(struct strata__trace *tr, const char *what, int err)
{
        int rc = strata__fail(STRATA_EIO, "trace %s: %s: %s; tracing stopped", tr->path, what,
                              strerror(err));

        detach(tr);
        return rc;
}

/* The output's own failure (its message names the file), recording stopped. */
static int failed(struct strata__trace *tr, int rc)
{
        detach(tr);
        return rc;
}

static int drain(struct strata__trace *tr)
{
        int rc = strata__out_write(&tr->file, tr->out, tr->fill);

        if (rc != STRATA_OK)
                return failed(tr, rc);
        tr->bytes += tr->fill;
        tr->fill = 0;
        return STRATA_OK;
}

/* Append one formatted piece, draining the buffer first when it might not fit. */
__attribute__((format(printf, 2, 3))) static int put(struct strata__trace *tr, const char *fmt,
                                                     ...)
{
        va_list ap;
        int n;

        if (OUT_BYTES - tr->fill < 1024)
                STRATA_TRY(drain(tr));
        va_start(ap, fmt);
        n = vsnprintf(tr->out + tr->fill, OUT_BYTES - tr->fill, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= OUT_BYTES - tr->fill)
                return abandon(tr, "format", EOVERFLOW);
        tr->fill += (size_t)n;
        return STRATA_OK;
}

/* A label as JSON string content: quotes, backslashes and control characters escaped. */
static void escape(const char *s, char *out, size_t n)
{
        size_t j = 0;

        for (; s && *s && j + 7 < n; s++) {
                unsigned char c = (unsigned char)*s;

                if (c == '"' || c == '\\')
                        out[j++] = '\\', out[j++] = (char)c;
                else if (c < 0x20)
                        j += (size_t)snprintf(out + j, n - j, "\\u%04x", c);
                else
                        out[j++] = (char)c;
        }
        out[j] = '\0';
}

int strata__trace_open(struct strata__trace *tr, int pid, const char *process,
                       const char *kernels)
{
        char name[128], kern[128];
        int rc;

        if (!tr || !tr->path)
                return STRATA_OK;
        STRATA_TRY(strata__out_open(&tr->file, tr->path));
        tr->pid = pid;
        escape(process, name, sizeof(name));
        escape(kernels ? kernels : "", kern, sizeof(kern));
        rc = put(tr, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                     "\"args\":{\"name\":\"%s\"}}", pid, name);
        if (rc == STRATA_OK && kernels)
                rc = put(tr, ",\n{\"name\":\"strata_kernels\",\"ph\":\"M\",\"pid\":%d,"
                             "\"tid\":0,\"args\":{\"name\":\"%s\"}}", pid, kern);
        for (int d = 0; d < tr->ntracks && rc == STRATA_OK; d++) {
                uint64_t origin = strata__track_now();

                rc = put(tr, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                             "\"args\":{\"name\":\"device %d\"}}", pid, d, d);
                if (rc == STRATA_OK)
                        rc = put(tr, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                                     "\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid, d, d);
                tr->tracks[d].origin = d ? tr->tracks[0].origin : origin;
        }
        return rc == STRATA_OK ? drain(tr) : rc;
}

void strata__trace_discard(struct strata__trace *tr)
{
        if (!tr || tr->file.fd < 0)
                return;
        strata__out_abort(&tr->file);
        tr->closed = 1;
}

int strata__trace_due(const struct strata__trace *tr)
{
        for (int d = 0; tr && tr->file.fd >= 0 && d < tr->ntracks; d++)
                if (tr->tracks[d].n >= tr->tracks[d].cap / 2)
                        return 1;
        return 0;
}

/* Hand-written formatting for the hot path of a flush: vsnprintf per event cost ~1 us. */
static char *put_s(char *p, const char *s)
{
        while (*s)
                *p++ = *s++;
        return p;
}

static char *put_u(char *p, uint64_t v)
{
        char t[20];
        int n = 0;

        do
                t[n++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        while (n)
                *p++ = t[--n];
        return p;
}

/* Nanoseconds as microseconds with three exact decimals. */
static char *put_us(char *p, uint64_t ns)
{
        unsigned f = (unsigned)(ns % 1000);

        p = put_u(p, ns / 1000);
        *p++ = '.';
        *p++ = (char)('0' + f / 100);
        *p++ = (char)('0' + f / 10 % 10);
        *p++ = (char)('0' + f % 10);
        return p;
}

/* One event; the static names of a span are short (checked), a label is escaped to < 96. */
static int put_event(struct strata__trace *tr, int tid, const struct strata__trace_event *e)
{
        const struct strata__span *k = e->kind;
        char label[96], *p, *start;

        if (k->counter)
                return put(tr, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"C\",\"pid\":%d,"
                               "\"tid\":%d,\"ts\":%llu.%03u,\"args\":{\"%s\":%.9g}}",
                           k->name, k->cat, tr->pid, tid,
                           (unsigned long long)(e->ts / 1000), (unsigned)(e->ts % 1000),
                           k->arg ? k->arg : k->name, e->v.value);
        if (strlen(k->name) + strlen(k->cat) + (k->arg ? strlen(k->arg) : 0) > 512)
                return abandon(tr, "span names", ENAMETOOLONG);
        if (OUT_BYTES - tr->fill < 1024)
                STRATA_TRY(drain(tr));
        escape(e->label, label, sizeof(label));
        start = p = tr->out + tr->fill;
        p = put_s(p, ",\n{\"name\":\"");
        p = put_s(p, k->name);
        if (*label) {
                *p++ = ' ';
                p = put_s(p, label);
        }
        p = put_s(p, "\",\"cat\":\"");
        p = put_s(p, k->cat);
        p = put_s(p, "\",\"ph\":\"X\",\"pid\":");
        p = put_u(p, (uint64_t)tr->pid);
        p = put_s(p, ",\"tid\":");
        p = put_u(p, (uint64_t)tid);
        p = put_s(p, ",\"ts\":");
        p = put_us(p, e->ts);
        p = put_s(p, ",\"dur\":");
        p = put_us(p, e->dur);
        if (k->arg) {
                p = put_s(p, ",\"args\":{\"");
                p = put_s(p, k->arg);
                p = put_s(p, "\":");
                if (e->v.arg < 0) {
                        *p++ = '-';
                        p = put_u(p, (uint64_t)0 - (uint64_t)e->v.arg);
                } else {
                        p = put_u(p, (uint64_t)e->v.arg);
                }
                *p++ = '}';
        }
        *p++ = '}';
        tr->fill += (size_t)(p - start);
        return STRATA_OK;
}

int strata__trace_flush(struct strata__trace *tr)
{
        uint64_t dropped = 0;

        if (!tr || tr->file.fd < 0)
                return STRATA_OK;
        for (int d = 0; d < tr->ntracks; d++) {
                struct strata__track *t = &tr->tracks[d];

                for (uint32_t i = 0; i < t->n; i++)
                        STRATA_TRY(put_event(tr, d, &t->ev[i]));
                tr->written += t->n;
                t->n = 0;
                dropped += t->dropped;
        }
        STRATA_TRY(drain(tr));
        if (dropped && !tr->reported_drops) { /* once: the trace's end records the total */
                strata__log(STRATA_LOG_WARNING, "strata: trace: events dropped (buffers of %u "
                            "events per device filled between flushes; the trace's end counts "
                            "them); raise trace_events (--trace-events)",
                            (unsigned)tr->tracks[0].cap);
                tr->reported_drops = dropped;
        }
        return STRATA_OK;
}

int strata__trace_close(struct strata__trace *tr, int flush)
{
        uint64_t dropped = 0, end;
        int rc;

        if (!tr || tr->closed || !tr->path)
                return STRATA_OK;
        tr->closed = 1;
        if (tr->file.fd < 0) /* abandoned earlier: the trace is not at its path, say so again */
                return strata__fail(STRATA_EIO, "trace %s not written: %s", tr->path, tr->why);
        if (flush)
                STRATA_TRY(strata__trace_flush(tr));
        for (int d = 0; d < tr->ntracks; d++)
                dropped += tr->tracks[d].dropped;
        end = strata__track_now() - tr->tracks[0].origin;
        if (dropped)
                STRATA_TRY(put(tr, ",\n{\"name\":\"trace events dropped\",\"cat\":\"trace\","
                                   "\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":0,"
                                   "\"ts\":%llu.%03u,\"args\":{\"dropped\":%llu}}",
                               tr->pid, (unsigned long long)(end / 1000),
                               (unsigned)(end % 1000), (unsigned long long)dropped));
        STRATA_TRY(put(tr, "\n]\n"));
        STRATA_TRY(drain(tr));
        rc = strata__out_commit(&tr->file);
        return rc == STRATA_OK ? STRATA_OK : failed(tr, rc);
}

void strata__trace_get_stats(const struct strata__trace *tr, struct strata__trace_stats *out)
{
        *out = (struct strata__trace_stats){ 0 };
        if (!tr)
                return;
        out->events = tr->written;
        out->bytes = tr->bytes;
        for (int d = 0; d < tr->ntracks; d++)
                out->dropped += tr->tracks[d].dropped;
}
