/*
 * The job as a component (strategy/job.h): the four kinds of job, and the state of one that
 * spans processes. The runtime holds its job beside its strategy; the multi-device parent
 * joins it at setup_environment before the devices start, aborts it on entering ERROR and
 * closes it on entering TORNDOWN after the devices stopped. Joined over several processes, it
 * places this process's workers beside the other processes' on a shared host, opens the
 * devices' communicators over the link (every device of every process, and one among the
 * processes' device 0s for the step's metrics) and refuses processes configured differently
 * (fingerprint.h) before the first step; the step's metrics (a held call's last step: its
 * gradients, 0108) carry each process's stop. Checkpoints cross to process 0 in its buffer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/process.h"
#include "strata/status.h"
#include "kernel/topology.h"
#include "strategy/process/fingerprint.h"
#include "strategy/process/process.h"

struct job {
        struct strata_net net;        /* the link to the other processes */
        struct strata_net mpi;        /* under the shm link: the MPI link beneath (else unused) */
        struct strata_comm *pcomm;    /* the processes' coordinators (device 0 of each) */
        void *pcomm_mem;
        size_t pcomm_bytes;
        double *stats;                /* every device's metrics (common.c), global order */
        int stop;                     /* a stop request seen by any process at the last step */
        unsigned stop_clears;         /* strata__stop_clears() then: a later clear forgets it */
        unsigned char *prints;        /* this process's fingerprint, then every process's */
        unsigned char *chunk;         /* sharded checkpoints: a piece on its way to process 0 */
        int refused_alike;            /* every process refused the configurations: none waits */
        int begun;                    /* begin() set this training step's carried flags */
};

/* Bytes of a checkpoint piece that cross from its process to process 0 in one broadcast. */
#define CHUNK_BYTES ((size_t)64 << 10)

static struct job *procs_of(const struct strata_runtime *rt)
{
        return strata__multi(rt)->job_state;
}

/*
 * The state of a job that may span processes, after the strategy's (whose multi-device state
 * @p priv holds it): the link, and over several processes the coordinators' communicator,
 * the metrics' table, the fingerprints and, with @p pieces, a buffer for checkpoint pieces.
 */
static int layout(const struct strata_config *c, int pieces, struct strata_arena *a, void *priv)
{
        size_t chunk = pieces ? CHUNK_BYTES : 0;
        struct strata_comm_config pc = STRATA_COMM_CONFIG_INIT;
        int devices = c->strategy.devices;
        /* c->process.count: resolved by the runtime's plan (strata__world) */
        int world = devices * (c->process.count > 0 ? c->process.count : 1);
        int width = strata__models_metrics_width(c, world); /* the widest model's */
        struct job *s;
        void *p, *pq = NULL, *st = NULL, *fp = NULL, *ck = NULL;
        size_t pcomm = 0;

        STRATA_TRY(strata_arena_alloc(a, sizeof(*s), 64, &p));
        s = p;
        if (world > devices) {
                pc.world_size = world / devices;
                STRATA_TRY(strata_comm_plan_config(&pc, &pcomm));
                STRATA_TRY(strata_arena_alloc(a, pcomm, 64, &pq));
                STRATA_TRY(strata_arena_alloc(a, sizeof(double) * ((size_t)width * world +
                                                                   (size_t)pc.world_size),
                                              64, &st));
                STRATA_TRY(strata_arena_alloc(a, STRATA__FINGERPRINT_BYTES *
                                                         (size_t)(pc.world_size + 1), 64, &fp));
                if (chunk)
                        STRATA_TRY(strata_arena_alloc(a, chunk, 64, &ck));
        }
        if (s) {
                memset(s, 0, sizeof(*s));
                s->pcomm_mem = pq;
                s->pcomm_bytes = pcomm;
                s->stats = st;
                s->prints = fp;
                s->chunk = ck;
                ((struct strata__multi *)priv)->job_state = s;
        }
        return STRATA_OK;
}

/*
 * Processes of one job on one host, each free to use the same CPU set (spawn, or mpirun
 * --bind-to none): the k-th takes the cores after the first k processes' devices, instead of
 * all pinning their devices to the set's first cores. A set too small for that means the
 * launcher bound each process itself: usual placement (STRATA_ENOTSUP).
 */
static int place_beside(const struct strata_runtime *rt, struct strata__placement *out)
{
        struct strata__placement all[STRATA_MAX_DEVICES];
        struct strata__topology t;
        int first = procs_of(rt)->net.local_rank * rt->nreplicas, n = first + rt->nreplicas;

        if (first == 0 || n > STRATA_MAX_DEVICES || strata__topology_read(&t) != STRATA_OK ||
            t.allowed_cores < n)
                return STRATA_ENOTSUP;
        STRATA_TRY(strata__topology_place(n, all));
        memcpy(out, all + first, sizeof(*out) * (size_t)rt->nreplicas);
        return STRATA_OK;
}

/*
 * Before any collective of a step: every process's configuration fingerprint gathered over
 * the coordinators' communicator and compared, so that processes configured differently are
 * refused at set-up, each with the same message naming the field and the process.
 */
static int agree_config(struct strata_runtime *rt)
{
        struct job *s = procs_of(rt);
        size_t words = STRATA__FINGERPRINT_BYTES / sizeof(int32_t);

        strata__fingerprint_make(rt, s->prints);
        STRATA_TRY(strata_comm_all_gather(s->pcomm, 0, s->prints,
                                          s->prints + STRATA__FINGERPRINT_BYTES, words,
                                          STRATA_I32));
        s->refused_alike = strata__fingerprint_check(s->prints + STRATA__FINGERPRINT_BYTES,
                                                     s->net.size) != STRATA_OK;
        return s->refused_alike ? STRATA_EINVAL : STRATA_OK;
}

/*
 * The communicators of a process in a job of several: the devices' one spans every process's
 * devices (global rank = process x devices + device); the coordinators' one joins device 0 of
 * each process. Both run over the link, and have the worker pool as failure domain.
 */
static int open_comms(struct strata_runtime *rt, struct strata_arena *comm)
{
        struct strata__multi *m = strata__multi(rt);
        struct job *s = procs_of(rt);
        struct strata_comm_config cc = STRATA_COMM_CONFIG_INIT;
        struct strata_arena pa;
        struct strata_group g;

        strata__workers_group(m->workers, &g);
        cc.group = &g;
        cc.net = &s->net;
        cc.local_size = rt->nreplicas;
        cc.world_size = rt->world;
        cc.rank0 = rt->rank0;
        STRATA_TRY(strata_comm_init(&m->comm, comm, &cc));
        m->dcomm = m->comm;
        cc.local_size = 1;
        cc.world_size = s->net.size;
        cc.rank0 = s->net.rank;
        STRATA_TRY(strata_arena_init(&pa, s->pcomm_mem, s->pcomm_bytes, NULL));
        STRATA_TRY(strata_comm_init(&s->pcomm, &pa, &cc));
        STRATA_TRY(agree_config(rt));
        STRATA_TRY(strata__net_warm_up(m->comm, 8));
        return strata__net_warm_up(s->pcomm, 8);
}

/*
 * The step's metrics: every process's devices, gathered and summed in global device order.
 * Each process's block ends with whether it was asked to stop (strata_request_stop()), so the
 * stop is agreed on the exchange every step already makes: when any process was, every
 * process's request is set and each stops at the same step boundary (procs_stop_due()). The
 * same double carries, above the stop's bit, the call's held losses that were not finite on
 * the process (@p a->held, a bit each: decision 0097), so they are the job's after it. A held
 * step exchanges nothing: its metrics are this process's devices'. The last step of a held
 * call exchanges nothing either where its flags crossed on its exchanges (begin(), decision
 * 0108): its metrics are this process's, its loss NaN where another process's is not finite
 * and 0 where this process had no rows.
 */
static int metrics(struct strata_runtime *rt, const struct strata__step_args *a)
{
        struct job *s = procs_of(rt);
        size_t per = (size_t)strata__metrics_width(&rt->cfg, rt->world) * (size_t)rt->nreplicas;
        double v[STRATA__METRICS_ALL + 1];
        unsigned held = 0, stop = 0;
        int begun = s->begun;
        uint32_t w;

        s->begun = 0;
        if (a->hold) {
                strata__metrics(rt, a->metrics);
                return STRATA_OK;
        }
        if (begun && a->held && a->sync && strata__net_carry_take(strata__multi(rt)->dcomm, &w)) {
                strata__metrics(rt, a->metrics); /* the bit judges: no rows here is 0 / 0 */
                if (!(w & STRATA__CARRY_LOSS) == !isfinite(a->metrics->loss))
                        a->metrics->loss = (w & STRATA__CARRY_LOSS) ? NAN : 0.0;
                stop = w & STRATA__CARRY_STOP;
                held = (w & ~STRATA__CARRY_LOSS) >> STRATA__CARRY_HELD_SHIFT;
        } else {
                strata__metrics_local(rt, v);
                v[per] = (double)(strata_stop_requested() != 0) +
                         2.0 * (a->held ? *a->held : 0u);
                STRATA_TRY(strata_comm_all_gather(s->pcomm, 0, v, s->stats, per + 1,
                                                  STRATA_F64));
                for (int p = 0; p < s->net.size; p++) { /* the blocks' flags out */
                        unsigned f = (unsigned)s->stats[(size_t)p * (per + 1) + per];

                        stop |= f & 1u;
                        held |= f >> 1;
                        memmove(s->stats + (size_t)p * per, s->stats + (size_t)p * (per + 1),
                                per * sizeof(double));
                }
                strata__metrics_sum(rt, s->stats, rt->world, a->metrics);
        }
        s->stop = (int)stop;
        s->stop_clears = strata__stop_clears();
        if (s->stop)
                strata_request_stop();
        if (a->held)
                *a->held = held;
        return STRATA_OK;
}

/*
 * batch_start of a training step: the flags the step's exchanges carry, known now (a stop
 * request, the call's held losses not finite here); each device adds its loss's before its
 * backward (strategy/multi.c). metrics() takes them where they crossed, on the last step of
 * a held call (decision 0108); elsewhere they cross in its all-gather as before.
 */
static void begin(struct strata_runtime *rt, const struct strata__step_args *a)
{
        uint32_t w = strata_stop_requested() ? STRATA__CARRY_STOP : 0u;

        if (a->held)
                w |= *a->held << STRATA__CARRY_HELD_SHIFT;
        strata__net_carry_set(strata__multi(rt)->dcomm, w);
        procs_of(rt)->begun = 1;
}

/* A refusal's message, as it crosses from the process that refused to the others. */
#define AGREE_MSG 256

/*
 * A step's batch, agreed before any collective of the step (a process that refused would
 * otherwise leave the others waiting in it): every process's verdict on its own rows and the
 * batch's rows, gathered over the coordinators' communicator. The lowest process that
 * refused gives every process its status, and its message crosses in one broadcast; batches
 * of different rows are refused everywhere. Between steps the workers are idle: the caller's
 * thread is device 0, the coordinator.
 */
static int agree_batch(struct strata_runtime *rt, int *status, int rows, int *hold)
{
        int32_t mine[3] = { *status, rows, hold ? *hold : 0 }, *all;
        struct job *s = procs_of(rt);
        char msg[AGREE_MSG] = "", line[AGREE_MSG + 96];
        int first = -1, me;

        if (!strata__multi(rt)->peers)
                return STRATA_OK; /* one process: its own verdict */
        me = s->net.rank;
        /* Every process's triple lands in the metrics' table, free between steps: it holds at
         * least 3 doubles per process (a stack array of 64 pairs did not hold 65 processes). */
        all = (int32_t *)(void *)s->stats;
        STRATA_TRY(strata_comm_all_gather(s->pcomm, 0, mine, all, 3, STRATA_I32));
        for (int p = 0; p < s->net.size; p++) /* a call holds where every process's may */
                if (hold && !all[3 * p + 2])
                        *hold = 0;
        for (int p = 0; p < s->net.size && first < 0; p++)
                if (all[3 * p] != STRATA_OK)
                        first = p;
        if (first < 0) {
                for (int p = 1; p < s->net.size; p++)
                        if (all[3 * p + 1] != all[1]) {
                                *status = strata__fail(STRATA_EINVAL, "the processes' batches "
                                                       "differ: process %d has %d rows, "
                                                       "process 0 %d (every process passes "
                                                       "the job's whole batch)", p,
                                                       all[3 * p + 1], all[1]);
                                break;
                        }
                return STRATA_OK;
        }
        if (me == first)
                snprintf(msg, sizeof(msg), "%s", strata_last_error());
        STRATA_TRY(strata_comm_broadcast(s->pcomm, 0, msg, sizeof(msg), STRATA_U8, first));
        if (me == first)
                return STRATA_OK;
        msg[sizeof(msg) - 1] = '\0';
        snprintf(line, sizeof(line), "%s (in process %d's rows; every process refused the step)",
                 msg, first);
        *status = strata__set_error(all[3 * first], line);
        return STRATA_OK;
}

/*
 * A stop request counts once every process has seen it, at the last step's exchange (the
 * step's metrics), so all stop at the same step boundary; strata_clear_stop() on every process
 * forgets it, the exchange's agreement included: a request made after the clear counts at the
 * next exchange, not on the one before the clear (which would stop this process alone).
 */
static int procs_stop_due(const struct strata_runtime *rt)
{
        const struct job *s = procs_of(rt);

        if (!strata__multi(rt)->peers)
                return strata_stop_requested(); /* one process */
        return s->stop && s->stop_clears == strata__stop_clears() && strata_stop_requested();
}

uint64_t strata__job_messages(const struct strata_runtime *rt)
{
        uint64_t msgs = 0, bytes;

        if (strata__multi(rt)->peers)
                strata__net_counts(procs_of(rt)->pcomm, &msgs, &bytes);
        return msgs;
}

static const struct strata__peers peers = {
        .place = place_beside,
        .open = open_comms,
        .metrics = metrics,
        .begin = begin,
};

/*
 * setup_environment of a job over link @p ops at @p where (drivers/net.h): join the processes,
 * check the job against the plan and set the runtime's global ranks.
 */
static int join(struct strata_runtime *rt, const struct strata__net_ops *ops, const void *where)
{
        struct job *s = procs_of(rt);
        int procs = rt->world / rt->nreplicas;

        s->net = (struct strata_net){ .ops = ops, .step = &rt->step,
                                      .native = rt->cfg.process.mpi_allreduce };
        STRATA_TRY(ops->open(&s->net, where));
        if (s->net.size != procs) {
                int size = s->net.size;

                ops->close(&s->net);
                s->net.ops = NULL;
                return strata__fail(STRATA_EINVAL, "strategy %s: the job has %d processes; the "
                                                   "configuration was planned for %d (set "
                                                   "processes, or launch with as many)",
                                    rt->strategy->name, size, procs);
        }
        rt->rank0 = s->net.rank * rt->nreplicas;
        if (s->net.size > 1) /* one process: the strategy's own placement and communicators */
                strata__multi(rt)->peers = &peers;
        return STRATA_OK;
}

/* Through a planned buffer of 64 KiB at a time (one broadcast each over the coordinators). */
static int to_zero(struct strata_runtime *rt, int from, const void *src, size_t bytes,
                   void (*take)(void *arg, const void *p, size_t n), void *arg)
{
        struct job *s = procs_of(rt);
        int me = s->net.rank;

        if (from == 0) {
                if (me == 0)
                        take(arg, src, bytes);
                return STRATA_OK;
        }
        for (size_t off = 0; off < bytes; off += CHUNK_BYTES) {
                size_t n = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
                void *buf = me == from ? (unsigned char *)src + off : s->chunk;

                STRATA_TRY(strata_comm_broadcast(s->pcomm, 0, buf, n, STRATA_U8, from));
                if (me == 0)
                        take(arg, buf, n);
        }
        return STRATA_OK;
}

static int agree(struct strata_runtime *rt, int *status)
{
        struct job *s = procs_of(rt);
        int32_t v = *status;

        STRATA_TRY(strata_comm_broadcast(s->pcomm, 0, &v, 1, STRATA_I32, 0));
        *status = v;
        return STRATA_OK;
}

/* The processes strata_spawn() started (this is one): cfg.process.count, when set, agrees. */
static int spawned(const struct strata_config *c, int *procs)
{
        const struct strata__shm_spawn_where *w = strata__spawned();

        if (c->process.count > 0 && c->process.count != w->size)
                return strata__fail(STRATA_EINVAL, "processes %d, but strata_spawn() started %d",
                                    c->process.count, w->size);
        *procs = w->size;
        return STRATA_OK;
}

/* spawn: only in a process strata_spawn() started. */
static int spawn_processes(const struct strata_config *c, int *procs)
{
        if (!strata__spawned()->region)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in the processes "
                                                   "strata_spawn() starts");
        return spawned(c, procs);
}

/* An MPI job's: cfg.process.count, or the launcher's (1 without one). */
static int launched(const struct strata_config *c, int *procs)
{
        struct strata_launch l;

        if (c->process.count < 0)
                return strata__fail(STRATA_EINVAL, "processes %d < 0", c->process.count);
        if (c->process.count > 0) {
                *procs = c->process.count;
                return STRATA_OK;
        }
        STRATA_TRY(strata_launch_detect(&l));
        *procs = l.size;
        return STRATA_OK;
}

/* The job this process belongs to: strata_spawn()'s, else the configuration's or launcher's. */
static int belongs_to(const struct strata_config *c, int *procs)
{
        if (strata__spawned()->region)
                return spawned(c, procs);
        return launched(c, procs);
}

/* With cfg.verbose: the link this process joined the others over. */
static void say_link(const struct strata_runtime *rt)
{
        const struct job *s = procs_of(rt);

        if (rt->cfg.verbose && s->net.size > 1)
                strata__log(STRATA_LOG_INFO, "strata: process %d of %d joined over the %s link",
                            s->net.rank, s->net.size, s->net.ops->name);
}

static int join_spawn(struct strata_runtime *rt)
{
        struct strata__shm_spawn_where w = *strata__spawned();

        w.devices = rt->nreplicas; /* the spinning threads of each process */
        STRATA_TRY(join(rt, &strata__shm_spawn_link, &w));
        say_link(rt);
        return STRATA_OK;
}

/*
 * STRATA_MPI_LINK: `mpi` keeps Open MPI's point-to-point between the processes of one host;
 * unset, `auto` or `shm`: the shm link where every process can map its region. Anything
 * else: *@p bad (the job is refused on every process, share_host()).
 */
static void link_wanted(int *shm, int *bad)
{
        const char *v = getenv("STRATA_MPI_LINK");

        *shm = !v || !*v || !strcmp(v, "auto") || !strcmp(v, "shm");
        *bad = !*shm && strcmp(v, "mpi") != 0;
}

/*
 * An MPI job whose processes all share this host steps over the shm link (decision 0105): the
 * spawn link's code on a region the MPI link maps for them, without the copies into and out
 * of Open MPI's buffers and the polling of its requests. The MPI link stays open beneath it,
 * for the job's abort (MPI_Abort) and its end. Where any process cannot map the region, or
 * asked for the MPI link (STRATA_MPI_LINK=mpi) or for MPI's own reductions, every process
 * keeps it; a process that does not come in the timeout, or MPI failing, fails the join.
 * Where some process's STRATA_MPI_LINK is invalid, every process learns the lowest such one
 * in the same collectives and returns STRATA_EINVAL naming it, none waiting, no MPI_Abort
 * (issue 58: a refused configuration is a status, refused_alike).
 */
static int share_host(struct strata_runtime *rt)
{
        struct job *s = procs_of(rt);
        struct strata__shm_spawn_where w = { NULL, s->net.rank, s->net.size, rt->nreplicas, 0 };
        int local = s->net.local_rank, want, bad, mine, rc = STRATA_ENOTSUP;
        double timeout_s = rt->cfg.device.timeout_s > 0.0 ? rt->cfg.device.timeout_s : 300.0;

        link_wanted(&want, &mine);
        bad = mine;
        if (s->net.size >= 2 && s->net.ops->share)
                rc = s->net.ops->share(&s->net, strata__shm_spawn_bytes(s->net.size),
                                       want && !s->net.native, &w.region, timeout_s, &bad,
                                       &w.cpus);
        else
                bad = mine ? s->net.rank : -1;
        if (rc == STRATA_ENOTSUP && bad >= 0) {
                s->refused_alike = 1;
                if (mine)
                        return strata__fail(STRATA_EINVAL, "STRATA_MPI_LINK=%s: auto, shm or "
                                            "mpi (process %d; every process refuses the job)",
                                            getenv("STRATA_MPI_LINK"), s->net.rank);
                return strata__fail(STRATA_EINVAL, "process %d's STRATA_MPI_LINK is not auto, "
                                    "shm or mpi (every process refuses the job)", bad);
        }
        if (rc == STRATA_ENOTSUP) /* agreed by every process: the MPI link */
                return STRATA_OK;
        STRATA_TRY(rc); /* a process missing, MPI failing: the job ends (abort_job) */
        s->mpi = s->net;
        s->net = (struct strata_net){ .ops = &strata__shm_host_link, .step = &rt->step };
        STRATA_TRY(s->net.ops->open(&s->net, &w));
        s->net.local_rank = local;
        return STRATA_OK;
}

/* Over the MPI link (cfg.process.mpi_comm, or MPI_COMM_WORLD), or the shm link on one host. */
static int join_mpi(struct strata_runtime *rt)
{
        const struct strata__net_ops *ops;
        struct strata__mpi_where where = { rt->cfg.process.mpi_comm,
                                           rt->cfg.process.mpi_comm_fortran };

        STRATA_TRY(strata__link_mpi(&ops));
        STRATA_TRY(join(rt, ops, &where));
        /* after the join: STRATA_MPI_LINK is checked in the region's collectives, so a bad
         * value on any process is refused by every one (a refusal before the join would leave
         * the processes with a good value waiting for this one) */
        STRATA_TRY(share_host(rt));
        say_link(rt);
        return STRATA_OK;
}

/* Nothing alone; the spawn link in a process strata_spawn() started; the MPI link otherwise. */
static int join_auto(struct strata_runtime *rt)
{
        if (rt->world == rt->nreplicas)
                return STRATA_OK; /* one process: the strategy's own placement and communicators */
        if (strata__spawned()->region)
                return join_spawn(rt);
        return join_mpi(rt);
}

/*
 * A failure in a job of several processes ends the job: the others would wait for this one.
 * Not a refusal every process made from the same fingerprints: each returns its status to its
 * caller (an embedding simulation goes on), and no one is left waiting.
 */
static void abort_job(struct strata_runtime *rt)
{
        struct job *s = procs_of(rt);

        if (s->refused_alike)
                return;
        if (s->net.ops && s->net.ops->abort)
                s->net.ops->abort(&s->net, 1, strata_last_error());
        if (s->mpi.ops) /* under the shm link: its abort word, then MPI_Abort */
                s->mpi.ops->abort(&s->mpi, 1, strata_last_error());
}

/* After the devices stopped: the link closes (the shm link, then the MPI link beneath). */
static void close_job(struct strata_runtime *rt)
{
        struct job *s = procs_of(rt);

        if (s->net.ops)
                s->net.ops->close(&s->net);
        s->net.ops = NULL;
        if (s->mpi.ops) /* under the shm link: the MPI link unmaps the region and closes */
                s->mpi.ops->close(&s->mpi);
        s->mpi.ops = NULL;
}

/* spawn, mpi: the link moves host buffers, so a driver with memory of its own is refused. */
static int link_validate(const char *strategy, const struct strata_config *c,
                         const struct strata_device_ops *drv)
{
        (void)c;
        if (strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy %s on %s: device memory across "
                                                    "processes is not supported",
                                    strategy, drv->name);
        return STRATA_OK;
}

/* auto: the same, where the job this process belongs to has several processes. */
static int auto_validate(const char *strategy, const struct strata_config *c,
                         const struct strata_device_ops *drv)
{
        int procs = 1;

        STRATA_TRY(belongs_to(c, &procs));
        if (procs > 1 && strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy %s across %d processes on %s: "
                                                    "device memory across processes is not "
                                                    "supported", strategy, procs, drv->name);
        return STRATA_OK;
}

const struct strata__job_ops strata__job_spawn = {
        .name = "spawn",
        .validate = link_validate,
        .processes = spawn_processes,
        .layout = layout,
        .join = join_spawn,
        .agree_batch = agree_batch,
        .stop_due = procs_stop_due,
        .to_zero = to_zero,
        .agree = agree,
        .abort = abort_job,
        .close = close_job,
};

/* The plan needs the processes before MPI is initialised: the launcher's count. */
const struct strata__job_ops strata__job_mpi = {
        .name = "mpi",
        .validate = link_validate,
        .processes = launched,
        .layout = layout,
        .join = join_mpi,
        .agree_batch = agree_batch,
        .stop_due = procs_stop_due,
        .to_zero = to_zero,
        .agree = agree,
        .abort = abort_job,
        .close = close_job,
};

const struct strata__job_ops strata__job_auto = {
        .name = "auto",
        .validate = auto_validate,
        .processes = belongs_to,
        .layout = layout,
        .join = join_auto,
        .agree_batch = agree_batch,
        .stop_due = procs_stop_due,
        .to_zero = to_zero,
        .agree = agree,
        .abort = abort_job,
        .close = close_job,
};

/* ---- none: this process alone, no state ---- */

static int none_validate(const char *strategy, const struct strata_config *c,
                         const struct strata_device_ops *drv)
{
        (void)strategy, (void)c, (void)drv;
        return STRATA_OK;
}

static int none_processes(const struct strata_config *c, int *procs)
{
        (void)c;
        *procs = 1;
        return STRATA_OK;
}

static int none_layout(const struct strata_config *c, int pieces, struct strata_arena *a,
                       void *priv)
{
        (void)c, (void)pieces, (void)a, (void)priv;
        return STRATA_OK;
}

static int none_join(struct strata_runtime *rt)
{
        (void)rt;
        return STRATA_OK;
}

static int none_agree_batch(struct strata_runtime *rt, int *status, int rows, int *hold)
{
        (void)rt, (void)status, (void)rows, (void)hold;
        return STRATA_OK; /* one process: its own verdict */
}

static int none_stop_due(const struct strata_runtime *rt)
{
        (void)rt;
        return strata_stop_requested();
}

static int none_to_zero(struct strata_runtime *rt, int from, const void *src, size_t bytes,
                        void (*take)(void *arg, const void *p, size_t n), void *arg)
{
        (void)rt, (void)from;
        take(arg, src, bytes);
        return STRATA_OK;
}

static int none_agree(struct strata_runtime *rt, int *status)
{
        (void)rt, (void)status;
        return STRATA_OK;
}

static void none_leave(struct strata_runtime *rt)
{
        (void)rt;
}

const struct strata__job_ops strata__job_none = {
        .name = "none",
        .validate = none_validate,
        .processes = none_processes,
        .layout = none_layout,
        .join = none_join,
        .agree_batch = none_agree_batch,
        .stop_due = none_stop_due,
        .to_zero = none_to_zero,
        .agree = none_agree,
        .abort = none_leave,
        .close = none_leave,
};
