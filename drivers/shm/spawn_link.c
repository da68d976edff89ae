/*
 * The `spawn` link (drivers/net.h): the processes strata_spawn() forked share one region,
 * mapped (anonymous, MAP_SHARED) before the fork, so nothing is named in /dev/shm and nothing
 * outlives the processes. Each process has two block slots, used by exchange parity, and a
 * sequence flag; an exchange writes this process's slot, publishes the sequence and waits for
 * every other process's. A process reuses a slot two exchanges later, when every peer has
 * published the exchange in between and so finished reading it (the communicator's mailbox
 * argument, across processes). The parent sets the region's abort word when a child dies.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "drivers/net.h"
#include "kernel/wait.h"

struct ctl {
        _Alignas(64) _Atomic int aborted; /* set once culprit and why are written */
        _Atomic int claimed;              /* by the first process that aborts */
        int culprit;
        char why[448];
};

struct proc {
        _Alignas(64) _Atomic uint64_t ready; /* exchanges this process has published */
        uint64_t seq;                        /* ...and started (private to it) */
        /* by parity, for each receiver: where its data starts in this block, and its bytes */
        size_t off[2][STRATA__NET_MAX], len[2][STRATA__NET_MAX];
};

#define CTL_BYTES ((sizeof(struct ctl) + 63) / 64 * 64)
#define PROC_BYTES ((sizeof(struct proc) + 63) / 64 * 64)

size_t strata__procs_bytes(int size)
{
        return CTL_BYTES + (size_t)size * (PROC_BYTES + 2 * STRATA__NET_BLOCK);
}

static struct ctl *ctl(void *region)
{
        return region;
}

static struct proc *proc(const struct strata_net *n, int p)
{
        return (struct proc *)((char *)n->h + CTL_BYTES + (size_t)p * PROC_BYTES);
}

static unsigned char *slot(const struct strata_net *n, int p, int parity)
{
        return (unsigned char *)n->h + CTL_BYTES + (size_t)n->size * PROC_BYTES +
               ((size_t)p * 2 + (size_t)parity) * STRATA__NET_BLOCK;
}

void strata__procs_abort(void *region, int culprit, const char *why)
{
        struct ctl *c = ctl(region);
        int expect = 0;

        if (atomic_compare_exchange_strong(&c->claimed, &expect, 1)) {
                c->culprit = culprit;
                snprintf(c->why, sizeof(c->why), "%s", why);
                atomic_store_explicit(&c->aborted, 1, memory_order_release);
        }
}

int strata__procs_aborted(void *region, char *why, size_t n)
{
        struct ctl *c = ctl(region);

        if (!atomic_load_explicit(&c->aborted, memory_order_acquire))
                return -1;
        if (why && n)
                snprintf(why, n, "%s", c->why);
        return c->culprit;
}

static int procs_open(struct strata_net *n, const void *where)
{
        const struct strata__procs_where *w = where;

        if (!w || !w->region || w->size < 1 || w->size > STRATA__NET_MAX || w->rank < 0 ||
            w->rank >= w->size)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in a process that "
                                                   "strata_spawn() started");
        n->h = w->region;
        n->rank = w->rank;
        n->size = w->size;
        n->local_rank = w->rank; /* one host */
        return STRATA_OK;
}

static void procs_close(struct strata_net *n)
{
        n->h = NULL;
}

/* Process @p p has not arrived in @p timeout_s: the region is aborted naming it. */
static int late(struct strata_net *n, int p, double timeout_s)
{
        char why[256];

        snprintf(why, sizeof(why), "process %d waited %.3g s at step %llu; process %d has not "
                 "arrived (hung or dead)", n->rank, timeout_s,
                 n->step ? (unsigned long long)*n->step : 0ull, p);
        strata__procs_abort(n->h, p, why);
        return strata__fail(STRATA_ETIMEDOUT, "spawn: %s", why);
}

/*
 * Wait for every other process to publish exchange @p seq, and point at its data for this one.
 * A peer that does not arrive in @p timeout_s is named and the region aborted for all.
 */
static int wait_peers(struct strata_net *n, uint64_t seq, int parity, const void **in_head,
                      const void **in, size_t *in_bytes, double timeout_s)
{
        struct strata__wait w = { .target = seq, .abort = &ctl(n->h)->aborted,
                                  .timeout_s = timeout_s, .spins = 1024, .clock_every = 256 };

        for (int p = 0; p < n->size; p++) {
                struct proc *o = proc(n, p);
                int rc;

                if (p == n->rank)
                        continue;
                w.counter = &o->ready;
                rc = strata__wait(&w);
                if (rc == STRATA_EABORTED)
                        return strata__fail(STRATA_EABORTED, "spawn: %s", ctl(n->h)->why);
                if (rc == STRATA_ETIMEDOUT)
                        return late(n, p, timeout_s);
                in_head[p] = slot(n, p, parity);
                in[p] = slot(n, p, parity) + STRATA__NET_HEAD + o->off[parity][n->rank];
                in_bytes[p] = o->len[parity][n->rank];
        }
        return STRATA_OK;
}

static int procs_exchange(struct strata_net *n, const void *head, const void *const *out,
                          const size_t *out_bytes, void *stage, const void **in_head,
                          const void **in, size_t *in_bytes, double timeout_s)
{
        struct proc *me = proc(n, n->rank);
        uint64_t seq = ++me->seq;
        int parity = (int)(seq & 1);
        unsigned char *mine = slot(n, n->rank, parity);
        size_t used = 0;

        (void)stage;
        memcpy(mine, head, STRATA__NET_HEAD);
        /* Each receiver's data once: receivers given the same piece share its copy. */
        for (int p = 0; p < n->size; p++) {
                int same = -1;

                if (p == n->rank)
                        continue;
                for (int q = 0; q < p && same < 0; q++)
                        if (q != n->rank && out[q] == out[p] && out_bytes[q] == out_bytes[p])
                                same = q;
                me->len[parity][p] = out_bytes[p];
                if (same >= 0) {
                        me->off[parity][p] = me->off[parity][same];
                        continue;
                }
                me->off[parity][p] = used;
                if (out_bytes[p])
                        memcpy(mine + STRATA__NET_HEAD + used, out[p], out_bytes[p]);
                used += out_bytes[p];
        }
        atomic_store_explicit(&me->ready, seq, memory_order_release);
        return wait_peers(n, seq, parity, in_head, in, in_bytes, timeout_s);
}

static void procs_abort(struct strata_net *n, int code, const char *why)
{
        (void)code;
        if (n->h)
                strata__procs_abort(n->h, n->rank, why);
}

const struct strata__net_ops strata__procs_net = {
        .name = "spawn",
        .open = procs_open,
        .close = procs_close,
        .exchange = procs_exchange,
        .abort = procs_abort,
};
