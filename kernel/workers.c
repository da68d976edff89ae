/*
 * The worker pool (contract in kernel/workers.h).
 *
 * Three futex words, each on its own cache line: `cmd` (bumped per command; workers wait on
 * it), `done` (workers finished with the current command; the coordinator waits on it) and
 * `gen` (barrier generation). Every wait on them is kernel/wait.h's: a pause spin, then timed
 * futex sleeps, so that aborts and deadlines are noticed even if a wake is missed; sleepers
 * are counted so that the fast path makes no system call.
 */
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "strata/status.h"
#include "kernel/trace.h"
#include "kernel/workers.h"
#include "base/base.h"
#include "kernel/wait.h"

#define MAX_DEV STRATA_MAX_DEVICES
#define SPINS 20000
#define SLICE_US 100 /* the shortest slice Linux accepts (decision 0081) */

/* The kernel's struct sched_attr in its first version (48 bytes, SCHED_ATTR_SIZE_VER0). */
struct slice_attr {
        uint32_t size;
        uint32_t policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime; /* a fair-class thread's slice, in ns (Linux 6.12 and later) */
        uint64_t deadline;
        uint64_t period;
};

struct strata__workers;

/* What a worker thread is started with. */
struct seat {
        struct strata__workers *w;
        int dev;
};

struct strata__workers {
        _Alignas(64) struct strata__futex cmd;
        _Alignas(64) struct strata__futex done;
        _Alignas(64) struct strata__futex gen;
        _Alignas(64) atomic_uint arrived;
        _Alignas(64) atomic_int abort;
        atomic_int first_error;
        atomic_int stop;
        atomic_int broken;
        atomic_uint epoch; /* runs that failed: a communicator restarts its sequences on change */
        char error[512];   /* the first error's message, written by the device that failed */
        strata__work_fn fn;
        void *arg;
        int n;
        int spins;        /* spin iterations before sleeping: short when oversubscribed */
        int caller0;
        int bind;
        double timeout_s;
        double stall_s;   /* report waits longer than this (0: never) */
        struct strata__track *tracks;
        size_t stack_bytes;
        hwloc_topology_t topo;
        hwloc_cpuset_t caller_saved;
        cpu_set_t caller_set;  /* the caller's own set, between calls */
        cpu_set_t caller_core; /* device 0's core, while the caller computes as device 0 */
        int caller_swaps;      /* both sets known: the caller moves between them */
        uint64_t slice_ns;     /* each device thread's slice while it computes (0: as given) */
        struct slice_attr caller_attr; /* the caller's own, restored between calls */
        int caller_sliced;     /* caller_attr is valid and the short slice is on */
        struct strata__placement pl[MAX_DEV];
        struct seat self[MAX_DEV];
        unsigned char *stacks;
        pthread_t threads[MAX_DEV];
        int started;
};

/*
 * The first failure's message, from the failing thread's last error, with the device and
 * where it was: the caller gets it back from strata__workers_run().
 */
static void keep_message(struct strata__workers *w, int device, int status)
{
        const char *why = strata_last_error();
        char where[128] = "";

        if (device >= 0 && w->tracks) {
                strata__track_where(&w->tracks[device], where + 2, sizeof(where) - 2);
                memcpy(where, ", ", 2);
        }
        if (device < 0)
                snprintf(w->error, sizeof(w->error), "%s", why);
        else if (strncmp(why, strata_strerror(status), strlen(strata_strerror(status))) != 0)
                snprintf(w->error, sizeof(w->error), "device %d%s: %s (no message)", device, where,
                         strata_strerror(status));
        else
                snprintf(w->error, sizeof(w->error), "device %d%s: %s", device, where, why);
}

int strata__workers_fail(struct strata__workers *w, int device, int status)
{
        int zero = 0;

        if (status == STRATA_OK)
                return status;
        if (atomic_compare_exchange_strong(&w->first_error, &zero, status))
                keep_message(w, device, status);
        atomic_store(&w->abort, 1);
        strata__wake(&w->gen);
        strata__wake(&w->done);
        return status;
}

static const struct strata__span span_barrier = { "wait barrier", "sync", NULL, 0 };
static const struct strata__span span_devices = { "wait devices", "sync", NULL, 0 };

/* The devices other than @p self whose track shows them busy: the ones a waiter waits for. */
static int busy_devices(const struct strata__workers *w, int self, int *late)
{
        int n = 0;

        for (int d = 0; d < w->n; d++)
                if (d != self && atomic_load_explicit(&w->tracks[d].where, memory_order_relaxed))
                        late[n++] = d;
        return n;
}

/* Who waits, for a stall report: the devices still busy, and where each one is. */
struct waiter {
        struct strata__workers *w;
        int self;
        const char *what;
};

static void report_stall(void *arg, double waited_s)
{
        struct waiter *r = arg;
        int late[MAX_DEV];

        strata__track_stall(r->w->tracks, r->self, r->what, waited_s, late,
                           busy_devices(r->w, r->self, late));
}

/*
 * A wait of @p r's device for @p l to change from @p old: bounded by the pool's timeout,
 * released by @p abort (when not NULL), reporting a stall once past w->stall_s.
 */
static struct strata__wait pool_wait(struct waiter *r, struct strata__futex *l, unsigned old,
                                     atomic_int *abort)
{
        struct strata__workers *w = r->w;

        return (struct strata__wait){ .word = l, .old = old, .abort = abort,
                                      .timeout_s = w->timeout_s, .spins = (unsigned)w->spins,
                                      .stall_s = w->tracks ? w->stall_s : 0.0,
                                      .stall = report_stall, .stall_arg = r };
}

/* A command that did not finish: which devices are still in it, and where. */
static int late_error(struct strata__workers *w)
{
        char msg[512], where[128];
        int late[MAX_DEV], n = w->tracks ? busy_devices(w, 0, late) : 0;
        size_t len = (size_t)snprintf(msg, sizeof(msg), "workers: ");

        for (int i = 0; i < n && len < sizeof(msg); i++) {
                strata__track_where(&w->tracks[late[i]], where, sizeof(where));
                len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%sdevice %d (%s)",
                                        i ? ", " : "", late[i], where);
        }
        if (len < sizeof(msg))
                snprintf(msg + len, sizeof(msg) - len, "%s did not finish in %.3g s; the pool is "
                                                      "unusable", n ? "" : "a device",
                         w->timeout_s);
        return strata__fail(STRATA_ETIMEDOUT, "%s", msg);
}

int strata__workers_barrier(struct strata__workers *w, int device)
{
        unsigned g = atomic_load_explicit(&w->gen.v, memory_order_acquire);
        struct strata__track *t = w->tracks ? &w->tracks[device] : NULL;
        struct waiter me = { w, device, "a barrier" };
        struct strata__wait wait;
        uint64_t t0;
        int rc;

        if (atomic_load(&w->abort))
                return STRATA_EABORTED;
        if (atomic_fetch_add_explicit(&w->arrived, 1, memory_order_acq_rel) + 1 == (unsigned)w->n) {
                atomic_store_explicit(&w->arrived, 0, memory_order_relaxed);
                atomic_fetch_add_explicit(&w->gen.v, 1, memory_order_release);
                strata__wake(&w->gen);
                return STRATA_OK;
        }
        t0 = strata__track_begin(t, &span_barrier, NULL);
        wait = pool_wait(&me, &w->gen, g, &w->abort);
        rc = strata__wait(&wait);
        strata__track_end(t, t0, 0);
        if (rc == STRATA_ETIMEDOUT)
                return strata__workers_fail(
                        w, device,
                        strata__fail(STRATA_ETIMEDOUT, "device %d: barrier waited %.3g s", device,
                                     w->timeout_s));
        return rc;
}

/*
 * A short scheduler slice for the calling thread (decision 0081): the devices of a step wait
 * for each other at every collective, and a device that shares its core with the host's busy
 * threads would otherwise get the core back only when their slice ends, a few milliseconds per
 * collective. A short slice changes no share of the core (weights stay the nice level's), only
 * how soon a woken or waiting device runs again. Only fair-class threads (SCHED_OTHER, BATCH)
 * change; a real-time or idle policy the host chose is left alone, as is a kernel that refuses.
 * Returns 1 when the slice was set, the thread's previous attributes in @p old.
 */
static int slice_on(uint64_t ns, struct slice_attr *old)
{
        struct slice_attr a;

        if (!ns)
                return 0;
        memset(old, 0, sizeof(*old));
        if (syscall(SYS_sched_getattr, 0, old, sizeof(*old), 0) != 0 ||
            (old->policy != SCHED_OTHER && old->policy != SCHED_BATCH))
                return 0;
        a = *old;
        a.size = sizeof(a);
        a.flags &= 0x01; /* SCHED_FLAG_RESET_ON_FORK; the others need a newer attr */
        a.runtime = ns;
        return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

/* The thread's attributes back as slice_on() found them. */
static void slice_off(struct slice_attr *old)
{
        old->size = sizeof(*old);
        old->flags &= 0x01;
        (void)syscall(SYS_sched_setattr, 0, old, 0);
}

/*
 * STRATA_SCHED_SLICE_US: the device threads' slice in microseconds, 0 for the kernel's own;
 * default SLICE_US. A pool of one device waits for nobody and keeps the kernel's slice, as
 * does a pool with peer processes (decision 0081: their transports poll across processes,
 * where the short slice measured slower).
 */
static int slice_config(const struct strata__workers_config *c, uint64_t *ns)
{
        const char *v = getenv("STRATA_SCHED_SLICE_US");
        char *end;
        long us = SLICE_US;

        if (v) {
                us = strtol(v, &end, 10);
                if (end == v || *end || us < 0 || (us && (us < 100 || us > 100000)))
                        return strata__fail(STRATA_EINVAL,
                                            "STRATA_SCHED_SLICE_US=%.32s: want 0 (the kernel's "
                                            "slice) or 100..100000 microseconds",
                                            v);
        }
        *ns = c->devices > 1 && !c->peers ? (uint64_t)us * 1000u : 0;
        return STRATA_OK;
}

/* The calling thread onto device @p dev's core. */
static void bind_core(struct strata__workers *w, int dev)
{
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(w->topo, (unsigned)w->pl[dev].pu);

        if (pu)
                (void)hwloc_set_cpubind(w->topo, pu->cpuset, HWLOC_CPUBIND_THREAD);
}

static void bind_self(struct strata__workers *w, int dev)
{
        if (!w->bind)
                return;
        bind_core(w, dev);
        if (numa_available() >= 0 && numa_max_node() > 0)
                numa_set_preferred(w->pl[dev].numa_node);
}

/*
 * The caller's thread as device 0 is on device 0's core only while it computes (a run), and
 * back in the CPU set it was given between calls: the threads a host creates then (an OpenMP
 * pool) inherit the host's set, not one core (issue 58, item 13). Both sets are glibc's,
 * made at start: hwloc's own call would allocate on every step.
 */
static void caller_enter(struct strata__workers *w)
{
        w->caller_sliced = slice_on(w->slice_ns, &w->caller_attr);
        if (w->caller_swaps)
                (void)pthread_setaffinity_np(pthread_self(), sizeof(w->caller_core),
                                             &w->caller_core);
}

static void caller_leave(struct strata__workers *w)
{
        if (w->caller_sliced)
                slice_off(&w->caller_attr);
        w->caller_sliced = 0;
        if (w->caller_swaps)
                (void)pthread_setaffinity_np(pthread_self(), sizeof(w->caller_set),
                                             &w->caller_set);
}

/* The caller's thread gets back the CPU set it had before it became device 0, for good. */
static void restore_caller(struct strata__workers *w)
{
        if (!w->caller_saved)
                return;
        (void)hwloc_set_cpubind(w->topo, w->caller_saved, HWLOC_CPUBIND_THREAD);
        w->caller_swaps = 0;
        hwloc_bitmap_free(w->caller_saved);
        w->caller_saved = NULL;
}

static void *worker_main(void *p)
{
        struct strata__workers *w = ((struct seat *)p)->w;
        int dev = ((struct seat *)p)->dev;
        unsigned seen = 0;
        struct slice_attr given;

        bind_self(w, dev);
        (void)slice_on(w->slice_ns, &given); /* its own thread: kept until it ends */
        for (;;) {
                struct strata__wait idle = { .word = &w->cmd, .old = seen,
                                             .timeout_s = STRATA__WAIT_FOREVER,
                                             .spins = (unsigned)w->spins };
                int rc;

                (void)strata__wait(&idle);
                seen = atomic_load_explicit(&w->cmd.v, memory_order_acquire);
                if (atomic_load(&w->stop))
                        break;
                rc = w->fn(dev, w->arg);
                if (rc != STRATA_OK)
                        strata__workers_fail(w, dev, rc);
                atomic_fetch_add_explicit(&w->done.v, 1, memory_order_release);
                strata__wake(&w->done);
        }
        return NULL;
}

int strata__workers_plan(const struct strata__workers_config *c, size_t *bytes)
{
        size_t stack, total;

        if (!c || !bytes)
                return strata__fail(STRATA_EINVAL, "workers plan: NULL argument");
        if (c->devices < 1 || c->devices > MAX_DEV)
                return strata__fail(STRATA_EINVAL, "workers: %d devices (1..%d)", c->devices,
                                    MAX_DEV);
        stack = c->stack_bytes ? c->stack_bytes : STRATA_KIB(256);
        if (stack < STRATA_KIB(64) || stack > STRATA_MIB(256))
                return strata__fail(STRATA_EINVAL, "workers: stack %zu bytes (64 KiB..256 MiB)",
                                    stack);
        stack = STRATA__ALIGN_UP(stack, STRATA_ALIGN_PAGE);
        /* The pool object (page-aligned, so it starts the block) then one stack per thread. */
        total = STRATA__ALIGN_UP(sizeof(struct strata__workers), STRATA_ALIGN_PAGE) +
                stack * (size_t)c->devices;
        *bytes = total + STRATA_ALIGN_PAGE; /* room to align the block to a page */
        return STRATA_OK;
}

/*
 * Stop and join the workers. After a timeout (the pool is broken) a device may never return:
 * each join then waits at most until STOP_GRACE_S after the first, and a thread still inside
 * its work is detached and listed in @p abandoned (NULL: join without bound). Returns how
 * many were abandoned.
 */
#define STOP_GRACE_S 1

static int stop_threads(struct strata__workers *w, int *abandoned)
{
        struct timespec until;
        int n = 0;

        atomic_store(&w->stop, 1);
        atomic_fetch_add(&w->cmd.v, 1);
        strata__wake(&w->cmd);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += STOP_GRACE_S;
        for (int d = w->caller0; d < w->caller0 + w->started; d++) {
                if (!abandoned || !atomic_load(&w->broken)) {
                        pthread_join(w->threads[d], NULL);
                } else if (pthread_timedjoin_np(w->threads[d], NULL, &until) != 0) {
                        pthread_detach(w->threads[d]);
                        abandoned[n++] = d;
                }
        }
        w->started = 0;
        return n;
}

static _Atomic int running; /* pools started and not stopped (or with abandoned threads) */

int strata__workers_running(void)
{
        return atomic_load(&running);
}

int strata__workers_start(struct strata__workers **out, struct strata_arena *a,
                         const struct strata__workers_config *c)
{
        struct strata__workers *w;
        size_t bytes, stack;
        uint64_t slice_ns = 0;
        void *p;
        int rc = STRATA_OK;

        if (!out || !a)
                return strata__fail(STRATA_EINVAL, "workers start: NULL argument");
        STRATA_TRY(strata__workers_plan(c, &bytes));
        if (!(c->timeout_s >= 0.0))
                return strata__fail(STRATA_EINVAL, "workers: timeout %g s", c->timeout_s);
        STRATA_TRY(slice_config(c, &slice_ns));
        STRATA_TRY(strata_arena_alloc(a, bytes - STRATA_ALIGN_PAGE, STRATA_ALIGN_PAGE, &p));
        w = p;
        memset(w, 0, sizeof(*w));
        w->n = c->devices;
        w->caller0 = c->caller_is_device0 ? 1 : 0;
        w->bind = c->bind;
        w->timeout_s = c->timeout_s > 0.0 ? c->timeout_s : 300.0;
        w->stall_s = c->stall_s > 0.0 ? c->stall_s : 0.0;
        w->tracks = c->tracks;
        w->slice_ns = slice_ns;
        stack = STRATA__ALIGN_UP(c->stack_bytes ? c->stack_bytes : STRATA_KIB(256),
                                 STRATA_ALIGN_PAGE);
        w->stack_bytes = stack;
        w->stacks = (unsigned char *)w +
                    STRATA__ALIGN_UP(sizeof(struct strata__workers), STRATA_ALIGN_PAGE);
        if (c->placement)
                memcpy(w->pl, c->placement, sizeof(w->pl[0]) * (size_t)w->n);
        else
                STRATA_TRY(strata__topology_place(w->n, w->pl));
        w->spins = SPINS;
        for (int d = 0; d < w->n; d++)
                if (w->pl[d].shared)
                        w->spins = 64; /* a spinning waiter would steal its peer's core */
        if (hwloc_topology_init(&w->topo) != 0 || hwloc_topology_load(w->topo) != 0)
                return strata__fail(STRATA_ESYS, "hwloc: topology load failed");
        if (w->bind && w->caller0) {
                w->caller_saved = hwloc_bitmap_alloc();
                if (w->caller_saved)
                        (void)hwloc_get_cpubind(w->topo, w->caller_saved, HWLOC_CPUBIND_THREAD);
                bind_self(w, 0);
                w->caller_swaps =
                        w->caller_saved &&
                        pthread_getaffinity_np(pthread_self(), sizeof(w->caller_core),
                                               &w->caller_core) == 0 &&
                        hwloc_cpuset_to_glibc_sched_affinity(w->topo, w->caller_saved,
                                                             &w->caller_set,
                                                             sizeof(w->caller_set)) == 0;
        }
        for (int d = w->caller0; d < w->n; d++) {
                pthread_attr_t attr;
                int e;

                w->self[d].w = w;
                w->self[d].dev = d;
                pthread_attr_init(&attr);
                pthread_attr_setstack(&attr, w->stacks + stack * (size_t)d, stack);
                e = pthread_create(&w->threads[d], &attr, worker_main, &w->self[d]);
                pthread_attr_destroy(&attr);
                if (e != 0) {
                        rc = strata__fail(STRATA_ESYS, "workers: thread for device %d: %s", d,
                                          strerror(e));
                        break;
                }
                w->started++;
        }
        if (rc != STRATA_OK) {
                stop_threads(w, NULL);
                restore_caller(w);
                hwloc_topology_destroy(w->topo);
                return rc;
        }
        caller_leave(w); /* its threads are started: they bound themselves */
        atomic_fetch_add(&running, 1);
        *out = w;
        return STRATA_OK;
}

/*
 * The caller's wait for @p expect completions past @p d0: one deadline for the whole wait. A
 * timeout leaves the pool broken (a device may never return) and names the devices still busy.
 */
static int wait_devices(struct strata__workers *w, unsigned d0, unsigned expect)
{
        struct strata__track *t = w->tracks && w->caller0 ? &w->tracks[0] : NULL;
        struct waiter me = { w, 0, "waiting for the devices to finish" };
        struct strata__wait wait = pool_wait(&me, &w->done, 0, NULL);
        uint64_t t0 = 0;
        int waiting = 0;

        while ((wait.old = atomic_load_explicit(&w->done.v, memory_order_acquire)) - d0 <
               expect) {
                if (!waiting++)
                        t0 = strata__track_begin(t, &span_devices, NULL);
                if (strata__wait(&wait) == STRATA_ETIMEDOUT) {
                        strata__track_end(t, t0, 0);
                        atomic_store(&w->broken, 1);
                        strata__workers_fail(w, -1, STRATA_ETIMEDOUT);
                        return late_error(w);
                }
        }
        if (waiting)
                strata__track_end(t, t0, 0);
        return STRATA_OK;
}

int strata__workers_run(struct strata__workers *w, strata__work_fn fn, void *arg)
{
        unsigned expect, d0;
        int rc = STRATA_OK;

        if (!w || !fn)
                return strata__fail(STRATA_EINVAL, "workers run: NULL argument");
        if (atomic_load(&w->broken))
                return strata__fail(STRATA_EABORTED,
                                    "workers: a device timed out earlier; the pool is unusable");
        w->fn = fn;
        w->arg = arg;
        if (atomic_load(&w->abort) || atomic_load(&w->first_error))
                atomic_fetch_add(&w->epoch, 1); /* ranks may have left the last run out of step */
        atomic_store(&w->abort, 0);
        atomic_store(&w->first_error, 0);
        atomic_store(&w->arrived, 0);
        expect = (unsigned)(w->n - w->caller0);
        d0 = atomic_load(&w->done.v);
        atomic_fetch_add_explicit(&w->cmd.v, 1, memory_order_release);
        strata__wake(&w->cmd);
        if (w->caller0) {
                caller_enter(w);
                rc = fn(0, arg);
                caller_leave(w);
                if (rc != STRATA_OK)
                        strata__workers_fail(w, 0, rc);
        }
        rc = wait_devices(w, d0, expect);
        if (rc != STRATA_OK)
                return rc;
        rc = atomic_load(&w->first_error);
        if (rc != STRATA_OK)
                return strata__set_error(rc, w->error); /* on the caller's thread */
        return rc;
}

static int group_aborted(void *h)
{
        struct strata__workers *w = h;

        return atomic_load_explicit(&w->abort, memory_order_relaxed);
}

static int group_fail(void *h, int member, int status)
{
        return strata__workers_fail(h, member, status);
}

/* A failed run can leave ranks at different points of a collective: see the epoch field. */
static unsigned group_epoch(void *h)
{
        struct strata__workers *w = h;

        return atomic_load_explicit(&w->epoch, memory_order_relaxed);
}

void strata__workers_group(struct strata__workers *w, struct strata_group *g)
{
        *g = (struct strata_group){ .h = w, .aborted = group_aborted, .fail = group_fail,
                                    .epoch = group_epoch, .timeout_s = w->timeout_s,
                                    .oversubscribed = w->spins < SPINS, .tracks = w->tracks,
                                    .stall_s = w->stall_s };
}

int strata__workers_count(const struct strata__workers *w)
{
        return w ? w->n : 0;
}

unsigned strata__workers_runs(const struct strata__workers *w)
{
        return w ? atomic_load_explicit(&w->cmd.v, memory_order_relaxed) : 0u; /* one a run */
}

const struct strata__placement *strata__workers_placement(const struct strata__workers *w,
                                                        int device)
{
        return w && device >= 0 && device < w->n ? &w->pl[device] : NULL;
}

int strata__workers_stop(struct strata__workers *w)
{
        int abandoned[MAX_DEV], n;

        if (!w)
                return strata__fail(STRATA_EINVAL, "workers stop: NULL");
        n = stop_threads(w, abandoned);
        restore_caller(w);
        if (n) { /* the topology stays: an abandoned thread may still be placed by it */
                char msg[512], where[128];
                size_t len = (size_t)snprintf(msg, sizeof(msg), "workers stop: abandoned ");

                for (int i = 0; i < n && len < sizeof(msg); i++) {
                        where[0] = '\0';
                        if (w->tracks)
                                strata__track_where(&w->tracks[abandoned[i]], where,
                                                   sizeof(where));
                        len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%sdevice %d%s%s%s",
                                                i ? ", " : "", abandoned[i], *where ? " (" : "",
                                                where, *where ? ")" : "");
                }
                if (len < sizeof(msg))
                        snprintf(msg + len, sizeof(msg) - len, ": still inside its work %d s "
                                 "after teardown began; its thread was detached and the "
                                 "memory it may touch stays mapped", STOP_GRACE_S);
                return strata__fail(STRATA_ETIMEDOUT, "%s", msg);
        }
        hwloc_topology_destroy(w->topo);
        atomic_fetch_sub(&running, 1);
        return STRATA_OK;
}
