/*
 * The `spawn` link (drivers/net.h): the processes strata_spawn() forked share one region,
 * mapped (anonymous, MAP_SHARED) before the fork, so nothing is named in /dev/shm and nothing
 * outlives the processes. Each process has two block slots, used by step parity, a table of
 * the messages in each (receiver, offset, bytes) and two flags: the step it has published and
 * the step it has finished reading. A step writes this process's slot and table, publishes
 * the step and waits for each process it receives from to publish it, then reads the data in
 * place. A process reuses a slot two steps later, once every receiver of that slot has said it
 * finished with it (it does so when it starts its next step): since a step joins only a few
 * processes, a peer's next step says nothing of the others. The parent sets the region's abort
 * word when a child dies.
 *
 * The same code is the `shm` link of an MPI job whose processes share one host: the MPI link
 * maps the region for them (its share()); there no parent watches, so a dead process is named
 * by the waits' timeout, and the MPI link's abort ends the job.
 */
#include <sched.h>
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

/* One message in a slot: its receiver, where its data starts after the header, its bytes. */
struct entry {
        int to;
        size_t off, len;
};

struct proc {
        _Alignas(64) _Atomic uint64_t ready; /* steps this process has published */
        _Alignas(64) _Atomic uint64_t done;  /* steps whose messages to it it has read */
        uint64_t seq;                        /* steps started (private to it) */
        unsigned spins;                      /* its waits' pause rounds (private; set at open) */
        int count[2];                        /* by parity: messages in the slot */
        struct entry msg[2][STRATA__NET_MSGS];
};

#define CTL_BYTES ((sizeof(struct ctl) + 63) / 64 * 64)
#define PROC_BYTES ((sizeof(struct proc) + 63) / 64 * 64)

size_t strata__shm_spawn_bytes(int size)
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

void strata__shm_spawn_abort(void *region, int culprit, const char *why)
{
        struct ctl *c = ctl(region);
        int expect = 0;

        if (atomic_compare_exchange_strong(&c->claimed, &expect, 1)) {
                c->culprit = culprit;
                snprintf(c->why, sizeof(c->why), "%s", why);
                atomic_store_explicit(&c->aborted, 1, memory_order_release);
        }
}

int strata__shm_spawn_aborted(void *region, char *why, size_t n)
{
        struct ctl *c = ctl(region);

        if (!atomic_load_explicit(&c->aborted, memory_order_acquire))
                return -1;
        if (why && n)
                snprintf(why, n, "%s", c->why);
        return c->culprit;
}

/*
 * A wait's pause rounds before it yields. The steps of a small job (the RL agents' exchanges)
 * are latency-bound: a peer publishes a few microseconds after this process, and a wait that
 * yields or naps (kernel/wait.c: 10 us growing to 640 us) after 1024 pauses (~20-50 us) wakes
 * late, where Open MPI's link polls without end. So when each spinning thread of the link can
 * have a CPU of its own (processes x devices, all on this host, no more than the CPUs the job
 * may run on: the union of the processes' affinity masks under MPI, this process's own mask
 * under strata_spawn()), a wait spins 65536 pauses, ~1-3 ms depending on the CPU (a pause is
 * some tens of cycles on AMD's Zen, ~140 on Intel's cores since Skylake). Oversubscribed, a
 * spinning waiter would take the core from the thread it waits for: 1024, as before. CPU
 * quotas (cgroup cpu.max) are not seen (decision 0105).
 */
#define SPINS_OWN_CPU 65536u
#define SPINS_SHARED 1024u

/* The CPUs this process may run on (its affinity mask, up to 4096 CPUs; 1 if unknown). */
static int cpus_allowed(void)
{
        unsigned long mask[4096 / (8 * sizeof(unsigned long))] = { 0 };
        int cpus = 0;

        if (sched_getaffinity(0, sizeof(mask), (cpu_set_t *)(void *)mask) != 0)
                return 1;
        for (size_t i = 0; i < sizeof(mask) / sizeof(mask[0]); i++)
                cpus += __builtin_popcountl(mask[i]);
        return cpus > 0 ? cpus : 1;
}

static int procs_open(struct strata_net *n, const void *where)
{
        const struct strata__shm_spawn_where *w = where;
        long threads;

        if (!w || !w->region || w->size < 1 || w->rank < 0 || w->rank >= w->size)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in a process that "
                                                   "strata_spawn() started");
        n->h = w->region;
        n->rank = w->rank;
        n->size = w->size;
        n->local_rank = w->rank; /* one host */
        threads = (long)w->size * (w->devices > 0 ? w->devices : 1);
        proc(n, n->rank)->spins = threads <= (w->cpus > 0 ? w->cpus : cpus_allowed())
                                  ? SPINS_OWN_CPU : SPINS_SHARED;
        return STRATA_OK;
}

static void procs_close(struct strata_net *n)
{
        n->h = NULL;
}

/* The link's name, for its messages: `spawn`, or `shm` under MPI. */
static const char *name(const struct strata_net *n)
{
        return n->ops ? n->ops->name : "spawn";
}

/* Process @p p has not arrived in @p timeout_s: the region is aborted naming it. */
static int late(struct strata_net *n, int p, double timeout_s)
{
        char why[256];

        snprintf(why, sizeof(why), "process %d waited %.3g s at step %llu; process %d has not "
                 "arrived (hung or dead)", n->rank, timeout_s,
                 n->step ? (unsigned long long)*n->step : 0ull, p);
        strata__shm_spawn_abort(n->h, p, why);
        return strata__fail(STRATA_ETIMEDOUT, "%s: %s", name(n), why);
}

/* Wait until @p counter of process @p p reaches @p seq; names @p p when it does not in time. */
static int wait_for(struct strata_net *n, _Atomic uint64_t *counter, int p, uint64_t seq,
                    double timeout_s)
{
        struct strata__wait w = { .counter = counter, .target = seq,
                                  .abort = &ctl(n->h)->aborted, .timeout_s = timeout_s,
                                  .spins = proc(n, n->rank)->spins, .clock_every = 256 };
        int rc = strata__wait(&w);

        if (rc == STRATA_EABORTED)
                return strata__fail(STRATA_EABORTED, "%s: %s", name(n), ctl(n->h)->why);
        if (rc == STRATA_ETIMEDOUT)
                return late(n, p, timeout_s);
        return rc;
}

/*
 * Before writing a slot again: every receiver of what it held two steps ago has finished
 * reading it.
 */
static int slot_free(struct strata_net *n, struct proc *me, uint64_t seq, int parity,
                     double timeout_s)
{
        if (seq <= 2)
                return STRATA_OK;
        for (int i = 0; i < me->count[parity]; i++)
                STRATA_TRY(wait_for(n, &proc(n, me->msg[parity][i].to)->done,
                                    me->msg[parity][i].to, seq - 2, timeout_s));
        return STRATA_OK;
}

/* Write this process's messages of step @p seq into its slot: each distinct piece once. */
static int publish(struct strata_net *n, struct proc *me, const void *head,
                   const struct strata__net_msg *send, int nsend, int parity)
{
        unsigned char *mine = slot(n, n->rank, parity);
        size_t used = 0;

        memcpy(mine, head, STRATA__NET_HEAD);
        for (int i = 0; i < nsend; i++) {
                struct entry *e = &me->msg[parity][i];
                int same = -1;

                for (int j = 0; j < i && same < 0; j++)
                        if (send[j].data == send[i].data && send[j].bytes == send[i].bytes)
                                same = j;
                e->to = send[i].peer;
                e->len = send[i].bytes;
                if (same >= 0) {
                        e->off = me->msg[parity][same].off;
                        continue;
                }
                if (used + send[i].bytes > STRATA__NET_DATA)
                        return strata__fail(STRATA_EINVAL, "%s: more than %zu bytes in a step",
                                            name(n), STRATA__NET_DATA);
                e->off = used;
                if (send[i].bytes)
                        memcpy(mine + STRATA__NET_HEAD + used, send[i].data, send[i].bytes);
                used += send[i].bytes;
        }
        me->count[parity] = nsend;
        return STRATA_OK;
}

/* The @p k-th message of process @p p's slot of step @p parity to this process, in order. */
static int find(struct strata_net *n, int p, int parity, int k, struct strata__net_msg *m)
{
        struct proc *o = proc(n, p);
        unsigned char *b = slot(n, p, parity);

        for (int i = 0; i < o->count[parity]; i++) {
                const struct entry *e = &o->msg[parity][i];

                if (e->to != n->rank || k--)
                        continue;
                if (e->len > m->bytes)
                        return strata__fail(STRATA_EFORMAT, "%s: process %d sent %zu bytes, "
                                            "%zu expected", name(n), p, e->len, m->bytes);
                m->head = b;
                m->data = b + STRATA__NET_HEAD + e->off;
                m->bytes = e->len;
                return STRATA_OK;
        }
        return strata__fail(STRATA_EFORMAT, "%s: process %d sent this one no message", name(n),
                            p);
}

static int procs_step(struct strata_net *n, const void *head, const struct strata__net_msg *send,
                      int nsend, struct strata__net_msg *recv, int nrecv, void *stage,
                      double timeout_s)
{
        struct proc *me = proc(n, n->rank);
        uint64_t seq = ++me->seq;
        int parity = (int)(seq & 1);

        (void)stage;
        if (nsend > STRATA__NET_MSGS || nrecv > STRATA__NET_MSGS)
                return strata__fail(STRATA_EINVAL, "%s: more than %d messages in a step",
                                    name(n), STRATA__NET_MSGS);
        atomic_store_explicit(&me->done, seq - 1, memory_order_release);
        STRATA_TRY(slot_free(n, me, seq, parity, timeout_s));
        STRATA_TRY(publish(n, me, head, send, nsend, parity));
        atomic_store_explicit(&me->ready, seq, memory_order_release);
        for (int i = 0; i < nrecv; i++) {
                int k = 0;

                for (int j = 0; j < i; j++)
                        k += recv[j].peer == recv[i].peer;
                STRATA_TRY(wait_for(n, &proc(n, recv[i].peer)->ready, recv[i].peer, seq,
                                    timeout_s));
                STRATA_TRY(find(n, recv[i].peer, parity, k, &recv[i]));
        }
        return STRATA_OK;
}

static void procs_abort(struct strata_net *n, int code, const char *why)
{
        (void)code;
        if (n->h)
                strata__shm_spawn_abort(n->h, n->rank, why);
}

const struct strata__net_ops strata__shm_spawn_link = {
        .name = "spawn",
        .open = procs_open,
        .close = procs_close,
        .step = procs_step,
        .abort = procs_abort,
};

/* The same link where the MPI link shared the region (strategy/process/job.c opens it). */
const struct strata__net_ops strata__shm_host_link = {
        .name = "shm",
        .open = procs_open,
        .close = procs_close,
        .step = procs_step,
        .abort = procs_abort,
};
