/*
 * The library's own lines (warnings, verbose placement and memory): to the receiver the host
 * set with strata_set_log(), or to standard error. The receiver and its argument are one
 * pair behind an atomic pointer, so a device thread never sees a function with another's
 * argument.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "strata/status.h"
#include "base/base.h"

struct receiver {
        strata_log_fn fn;
        void *user;
};

/* Two slots: strata_set_log() fills the one not in use, then publishes it. */
static struct receiver slots[2];
static _Atomic(struct receiver *) current;
static atomic_int next_slot;

int strata_set_log(strata_log_fn fn, void *user)
{
        struct receiver *r;

        if (!fn) {
                atomic_store(&current, NULL);
                return STRATA_OK;
        }
        r = &slots[atomic_fetch_add(&next_slot, 1) & 1];
        r->fn = fn;
        r->user = user;
        atomic_store(&current, r);
        return STRATA_OK;
}

void strata__log(enum strata_log_level level, const char *fmt, ...)
{
        struct receiver *r = atomic_load(&current);
        char line[1024];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(line) - 2)
                n = (int)sizeof(line) - 2;
        if (r) {
                r->fn(level, line, r->user);
                return;
        }
        line[n++] = '\n';
        (void)!write(2, line, (size_t)n);
}
