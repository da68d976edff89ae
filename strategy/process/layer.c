/*
 * The process layer: what a job of several processes (spawn, mpi) adds to ddp across the
 * devices of this one. Its parent states sit between ddp's and the strategies over processes:
 * the child joins the processes over its link at setup_environment (strata__procs_join()),
 * then ddp's parents start the workers, which this layer places beside the other processes'
 * on a shared host and whose communicators it opens over the link (every device of every
 * process, and one among the processes' device 0s for the step's metrics), and refuses
 * processes configured differently (strategy/process/fingerprint.h) before the first step.
 * Entering ERROR aborts the job through the link; entering TORNDOWN closes it after the
 * workers stop.
 */
#include <stdio.h>
#include <string.h>

#include "strata/process.h"
#include "strata/status.h"
#include "kernel/topology.h"
#include "strategy/process/fingerprint.h"
#include "strategy/process/process.h"

struct strata__procs {
        struct strata_net net;        /* the link to the other processes */
        struct strata_comm *pcomm;    /* the processes' coordinators (device 0 of each) */
        void *pcomm_mem;
        size_t pcomm_bytes;
        double *stats;                /* every device's metrics (common.c), global order */
        int stop;                     /* a stop request seen by any process at the last step */
        unsigned char *prints;        /* this process's fingerprint, then every process's */
        unsigned char *chunk;         /* sharded checkpoints: a piece on its way to process 0 */
        int refused_alike;            /* every process refused the configurations: none waits */
};

/* Bytes of a checkpoint piece that cross from its process to process 0 in one broadcast. */
#define CHUNK_BYTES ((size_t)64 << 10)

static struct strata__procs *procs_of(const struct strata_runtime *rt)
{
        return strata__multi(rt)->peers_state;
}

/* The layout of a strategy over processes; @p chunk bytes for checkpoint pieces (sharded). */
static int layout(const struct strata_config *c, const struct strata_device_ops *drv,
                  struct strata_arena *a, void **priv, size_t chunk)
{
        struct strata_comm_config pc = STRATA_COMM_CONFIG_INIT;
        int devices = c->strategy.devices;
        /* c->process.count: resolved by the runtime's plan (strata__world) */
        int world = devices * (c->process.count > 0 ? c->process.count : 1);
        int width = strata__metrics_width(c, world);
        struct strata__procs *s;
        void *p, *pq = NULL, *st = NULL, *fp = NULL, *ck = NULL;
        size_t pcomm = 0;

        STRATA_TRY(strata__ddp_layout(c, drv, a, priv));
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
                ((struct strata__multi *)*priv)->peers_state = s;
        }
        return STRATA_OK;
}

/* The layout of a strategy over processes: ddp's, then the process layer's state. */
static int procs_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                        struct strata_arena *a, void **priv)
{
        return layout(c, drv, a, priv, 0);
}

int strata__procs_layout_sharded(const struct strata_config *c,
                                 const struct strata_device_ops *drv, struct strata_arena *a,
                                 void **priv)
{
        return layout(c, drv, a, priv, CHUNK_BYTES);
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
        struct strata__procs *s = procs_of(rt);
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
        struct strata__procs *s = procs_of(rt);
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
 * process's request is set and each stops at the same step boundary (procs_stop_due()).
 */
static int metrics(struct strata_runtime *rt, struct strata_metrics *out)
{
        struct strata__procs *s = procs_of(rt);
        size_t per = (size_t)strata__metrics_width(&rt->cfg, rt->world) * (size_t)rt->nreplicas;
        double v[STRATA__METRICS_ALL + 1];

        strata__metrics_local(rt, v);
        v[per] = strata_stop_requested();
        STRATA_TRY(strata_comm_all_gather(s->pcomm, 0, v, s->stats, per + 1, STRATA_F64));
        s->stop = 0;
        for (int p = 0; p < s->net.size; p++) { /* the blocks' stop flags out: metrics only */
                s->stop |= s->stats[(size_t)p * (per + 1) + per] != 0.0;
                memmove(s->stats + (size_t)p * per, s->stats + (size_t)p * (per + 1),
                        per * sizeof(double));
        }
        if (s->stop)
                strata_request_stop();
        strata__metrics_sum(rt, s->stats, rt->world, out);
        return STRATA_OK;
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
static int agree_batch(struct strata_runtime *rt, int *status, int rows)
{
        int32_t mine[2] = { *status, rows }, *all;
        struct strata__procs *s = procs_of(rt);
        char msg[AGREE_MSG] = "", line[AGREE_MSG + 96];
        int first = -1, me;

        if (!strata__multi(rt)->peers)
                return STRATA_OK; /* one process: its own verdict */
        me = s->net.rank;
        /* Every process's pair lands in the metrics' table, free between steps: it holds at
         * least 3 doubles per process (a stack array of 64 pairs did not hold 65 processes). */
        all = (int32_t *)(void *)s->stats;
        STRATA_TRY(strata_comm_all_gather(s->pcomm, 0, mine, all, 2, STRATA_I32));
        for (int p = 0; p < s->net.size && first < 0; p++)
                if (all[2 * p] != STRATA_OK)
                        first = p;
        if (first < 0) {
                for (int p = 1; p < s->net.size; p++)
                        if (all[2 * p + 1] != all[1]) {
                                *status = strata__fail(STRATA_EINVAL, "the processes' batches "
                                                       "differ: process %d has %d rows, "
                                                       "process 0 %d (every process passes "
                                                       "the job's whole batch)", p,
                                                       all[2 * p + 1], all[1]);
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
        *status = strata__set_error(all[2 * first], line);
        return STRATA_OK;
}

/*
 * A stop request counts once every process has seen it, at the last step's exchange (the
 * step's metrics), so all stop at the same step boundary; strata_clear_stop() on every process
 * forgets it.
 */
static int procs_stop_due(const struct strata_runtime *rt)
{
        if (!strata__multi(rt)->peers)
                return strata_stop_requested(); /* one process */
        return procs_of(rt)->stop && strata_stop_requested();
}

static const struct strata__peers peers = {
        .place = place_beside,
        .open = open_comms,
        .metrics = metrics,
};

int strata__procs_join(struct strata_runtime *rt, const struct strata__net_ops *ops,
                       const void *where)
{
        struct strata__procs *s = procs_of(rt);
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
        if (s->net.size > 1) /* one process: ddp's own placement and communicators */
                strata__multi(rt)->peers = &peers;
        return STRATA_OK;
}

int strata__procs_to_zero(struct strata_runtime *rt, int from, const void *src, size_t bytes,
                          void (*take)(void *arg, const void *p, size_t n), void *arg)
{
        struct strata__procs *s = procs_of(rt);
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

int strata__procs_agree(struct strata_runtime *rt, int *status)
{
        struct strata__procs *s = procs_of(rt);
        int32_t v = *status;

        STRATA_TRY(strata_comm_broadcast(s->pcomm, 0, &v, 1, STRATA_I32, 0));
        *status = v;
        return STRATA_OK;
}

int strata__procs_spawned(const struct strata_config *c, int *procs)
{
        const struct strata__shm_spawn_where *w = strata__spawned();

        if (c->process.count > 0 && c->process.count != w->size)
                return strata__fail(STRATA_EINVAL, "processes %d, but strata_spawn() started %d",
                                    c->process.count, w->size);
        *procs = w->size;
        return STRATA_OK;
}

int strata__procs_launched(const struct strata_config *c, int *procs)
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

int strata__procs_job(const struct strata_config *c, int *procs)
{
        if (strata__spawned()->region)
                return strata__procs_spawned(c, procs);
        return strata__procs_launched(c, procs);
}

int strata__procs_join_mpi(struct strata_runtime *rt)
{
        const struct strata__net_ops *ops;
        struct strata__mpi_where where = { rt->cfg.process.mpi_comm,
                                           rt->cfg.process.mpi_comm_fortran };

        STRATA_TRY(strata__link_mpi(&ops));
        return strata__procs_join(rt, ops, &where);
}

int strata__procs_join_job(struct strata_runtime *rt)
{
        if (rt->world == rt->nreplicas)
                return STRATA_OK; /* one process: ddp's own placement and communicators */
        if (strata__spawned()->region)
                return strata__procs_join(rt, &strata__shm_spawn_link, strata__spawned());
        return strata__procs_join_mpi(rt);
}

/*
 * A failure in a job of several processes ends the job: the others would wait for this one.
 * Not a refusal every process made from the same fingerprints: each returns its status to its
 * caller (an embedding simulation goes on), and no one is left waiting.
 */
static int on_error(void *obj, int state)
{
        struct strata__procs *s = procs_of(obj);

        (void)state;
        if (s->net.ops && s->net.ops->abort && !s->refused_alike)
                s->net.ops->abort(&s->net, 1, strata_last_error());
        return STRATA_OK;
}

/* After ddp's parents stopped the workers (their entry runs first): the link closes. */
static int on_torndown(void *obj, int state)
{
        struct strata__procs *s = procs_of(obj);

        (void)state;
        if (s->net.ops)
                s->net.ops->close(&s->net);
        s->net.ops = NULL;
        return STRATA_OK;
}

/* Across processes the link moves host buffers: a driver with memory of its own is refused. */
static int procs_validate(const struct strata__strategy *st, const struct strata_config *c,
                          const struct strata_device_ops *drv)
{
        if (strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy %s on %s: device memory across "
                                                    "processes is not supported",
                                    st->name, drv->name);
        return strata__multi_validate(st, c, drv);
}

/* setup_environment: join the job's processes over the strategy's link, then ddp's. */
static int on_environment(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        int (*join)(struct strata_runtime *) = STRATA__INHERITED(rt->strategy, ops.join);

        (void)state, (void)event, (void)arg;
        if (join)
                STRATA_TRY(join(rt));
        return STRATA__SM_PARENT;
}

static const struct strata__sm_state procs_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = { .run = on_environment },
        [STRATA_STATE_ERROR] = { .entry = on_error },
        [STRATA_STATE_TORNDOWN] = { .entry = on_torndown },
};

const struct strata__strategy strata__procs = {
        .parent = &strata__ddp,
        .ops = { .validate = procs_validate, .layout = procs_layout,
                 .stop_due = procs_stop_due, .agree = agree_batch },
        .states = procs_states,
};
