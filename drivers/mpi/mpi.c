/*
 * The MPI link (drivers/net.h), built as libstrata-mpi.so with Open MPI: the processes of an
 * MPI communicator exchange blocks with point-to-point messages on a duplicate of it (Strata's
 * messages never match the application's).
 *
 * Threads: only the thread that runs local rank 0 calls MPI, which is the thread that called
 * strata_init() (a runtime's device 0 runs on its caller). MPI_THREAD_FUNNELED is enough when
 * that thread initialised MPI; otherwise MPI_THREAD_SERIALIZED is needed. When MPI is not
 * initialised, open() initialises it (FUNNELED) and close() finalises it.
 *
 * Waits poll MPI_Testall through the library's bounded wait (handed over at open, like the
 * error reporter), so a process that hangs is named, not waited for forever; abort() is
 * MPI_Abort on the whole job.
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/status.h"
#include "drivers/net.h"
#include "drivers/plugin.h"
#include "kernel/wait.h"

#define TAG 0x5374 /* "St" */

static int (*host_vfail)(int status, const char *fmt, va_list ap);
static int (*host_wait)(struct strata__wait *w);

static int fail(int status, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        status = host_vfail(status, fmt, ap);
        va_end(ap);
        return status;
}

/*
 * A channel: the exchanges of one communicator (one staging area), on its own tag. When an
 * exchange starts, the receives of the next one are posted into the other half of the
 * staging (the previous exchange's, read by then): a peer that completes this exchange first
 * may send the next one's messages while this process still waits, and they must find their
 * receives, or Open MPI buffers them as unexpected messages (which allocates). A peer is never
 * further ahead: it cannot complete the next exchange without this process's messages.
 */
#define CHANNELS 4

struct channel {
        void *stage;
        int parity, posted;
        MPI_Request recv[2][2 * STRATA__NET_MAX]; /* per half, per process: header, data */
};

/* One link per runtime that runs on MPI at a time; no allocation of our own. */
struct link {
        int used, finalize;
        MPI_Comm comm;
        struct channel ch[CHANNELS];
        MPI_Request req[4 * STRATA__NET_MAX];
        MPI_Status st[4 * STRATA__NET_MAX];
};

static struct link links[4];

/* The application's communicator (docs: struct strata__mpi_where); MPI is initialised. */
static MPI_Comm app_comm(const struct strata__mpi_where *w)
{
        if (!w || !w->comm)
                return MPI_COMM_WORLD;
        if (w->fortran)
                return MPI_Comm_f2c(*(const MPI_Fint *)w->comm);
        return *(const MPI_Comm *)w->comm;
}

static int mpi_open(struct strata_net *n, const void *where)
{
        struct link *l = NULL;
        int init = 0, fin = 0, provided = 0, main_thread = 0;

        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]) && !l; i++)
                if (!links[i].used)
                        l = &links[i];
        if (!l)
                return fail(STRATA_ENOMEM, "mpi: more than %zu runtimes on MPI at once",
                            sizeof(links) / sizeof(links[0]));
        MPI_Finalized(&fin);
        if (fin)
                return fail(STRATA_EINVAL, "mpi: MPI was already finalised");
        MPI_Initialized(&init);
        memset(l, 0, sizeof(*l));
        if (!init) {
                /* A 4 KiB collective is one 4 KiB + 64-byte block: past Open MPI's shared-memory
                 * eager limit (4 KiB) it would take the rendezvous protocol, twice as slow. An
                 * application that initialises MPI can pass the same (docs/decisions/0011). */
                setenv("OMPI_MCA_btl_vader_eager_limit", "8192", 0);
                if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
                        return fail(STRATA_ESYS, "mpi: MPI_Init_thread failed");
                l->finalize = 1;
        }
        MPI_Query_thread(&provided);
        MPI_Is_thread_main(&main_thread);
        if (provided < MPI_THREAD_FUNNELED || (!main_thread && provided < MPI_THREAD_SERIALIZED)) {
                if (l->finalize)
                        MPI_Finalize();
                return fail(STRATA_EINVAL, "mpi: thread level %d: Strata calls MPI from the "
                            "thread that calls strata_init(); initialise MPI with "
                            "MPI_THREAD_FUNNELED from that thread, or MPI_THREAD_SERIALIZED",
                            provided);
        }
        if (MPI_Comm_dup(app_comm(where), &l->comm) !=
            MPI_SUCCESS) {
                if (l->finalize)
                        MPI_Finalize();
                return fail(STRATA_EINVAL, "mpi: the communicator cannot be duplicated");
        }
        MPI_Comm_set_errhandler(l->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(l->comm, &n->rank);
        MPI_Comm_size(l->comm, &n->size);
        {
                MPI_Comm host;

                n->local_rank = 0;
                if (MPI_Comm_split_type(l->comm, MPI_COMM_TYPE_SHARED, n->rank, MPI_INFO_NULL,
                                        &host) == MPI_SUCCESS) {
                        MPI_Comm_rank(host, &n->local_rank);
                        MPI_Comm_free(&host);
                }
        }
        if (n->size > STRATA__NET_MAX) {
                MPI_Comm_free(&l->comm);
                if (l->finalize)
                        MPI_Finalize();
                return fail(STRATA_ENOTSUP, "mpi: %d processes (at most %d)", n->size,
                            STRATA__NET_MAX);
        }
        l->used = 1;
        n->h = l;
        return STRATA_OK;
}

static void mpi_close(struct strata_net *n)
{
        struct link *l = n->h;

        if (!l)
                return;
        for (int c = 0; c < CHANNELS; c++)
                for (int p = 0; l->ch[c].posted && p < 4 * n->size; p++) {
                        MPI_Request *r = &l->ch[c].recv[p / (2 * n->size)][p % (2 * n->size)];

                        if (*r != MPI_REQUEST_NULL) {
                                MPI_Cancel(r);
                                MPI_Wait(r, MPI_STATUS_IGNORE);
                        }
                }
        MPI_Comm_free(&l->comm);
        if (l->finalize)
                MPI_Finalize();
        l->used = 0;
        n->h = NULL;
}

/* The requests a wait polls, and whether MPI failed on them. */
struct requests {
        struct link *l;
        int nreq, failed;
};

/*
 * One look at the requests is a burst of MPI_Testall calls: MPI progresses only inside them and
 * a peer on its own core answers within microseconds, so the wait yields the core (and reads
 * the clock) only between bursts. A failure ends the wait too.
 */
#define POLLS 4096

static int requests_done(void *arg)
{
        struct requests *q = arg;
        int done = 0;

        for (int i = 0; i < POLLS; i++) {
                if (MPI_Testall(q->nreq, q->l->req, &done, q->l->st) != MPI_SUCCESS)
                        q->failed = 1;
                if (done || q->failed)
                        return 1;
        }
        return 0;
}

/*
 * The processes that requests [0, nreq) still wait for, each once: "1, 3". A receive not
 * complete names its sender; a send not complete its receiver (a stopped process receives
 * nothing, while what it sent before it stopped may all have arrived).
 */
static void late_peers(struct link *l, int nreq, const int *peer, char *late, size_t size)
{
        uint64_t named = 0;
        size_t len = 0;

        late[0] = '\0';
        for (int i = 0; i < nreq && len < size - 16; i++) {
                int flag = 0;

                if (l->req[i] == MPI_REQUEST_NULL || peer[i] < 0 || named >> peer[i] & 1)
                        continue;
                MPI_Request_get_status(l->req[i], &flag, MPI_STATUS_IGNORE);
                if (flag)
                        continue;
                named |= (uint64_t)1 << peer[i];
                len += (size_t)snprintf(late + len, size - len, "%s%d", len ? ", " : "",
                                        peer[i]);
        }
}

/* Wait for requests [0, nreq) until the deadline; names the processes still missing. */
static int wait_all(struct strata_net *n, int nreq, const int *peer, double timeout_s,
                    const char *what)
{
        struct requests q = { n->h, nreq, 0 };
        struct strata__wait w = { .ready = requests_done, .ready_arg = &q,
                                  .timeout_s = timeout_s };
        char late[256];

        if (host_wait(&w) == STRATA_OK) {
                if (q.failed)
                        return fail(STRATA_ESYS, "mpi: %s failed", what);
                return STRATA_OK;
        }
        late_peers(q.l, nreq, peer, late, sizeof(late));
        return fail(STRATA_ETIMEDOUT, "mpi: process %d waited %.3g s in %s at step %llu; nothing "
                    "came from process %s (hung or dead)", n->rank, timeout_s, what,
                    n->step ? (unsigned long long)*n->step : 0ull, late[0] ? late : "?");
}

static char *half(const struct strata_net *n, const struct channel *ch, int parity, int p)
{
        return (char *)ch->stage + ((size_t)parity * (size_t)n->size + (size_t)p) *
                                           STRATA__NET_BLOCK;
}

/* Tags of a channel's two messages: a header, then the data (in order between two peers). */
static int tag(const struct link *l, const struct channel *ch, int data)
{
        return TAG + 2 * (int)(ch - l->ch) + data;
}

/* The receives of an exchange into half @p parity of the staging. */
static void post(struct strata_net *n, struct link *l, struct channel *ch, int parity)
{
        MPI_Request *recv = ch->recv[parity];

        for (int p = 0; p < n->size; p++) {
                char *b = half(n, ch, parity, p);

                if (p == n->rank) {
                        recv[2 * p] = recv[2 * p + 1] = MPI_REQUEST_NULL;
                        continue;
                }
                MPI_Irecv(b, (int)STRATA__NET_HEAD, MPI_BYTE, p, tag(l, ch, 0), l->comm,
                          &recv[2 * p]);
                MPI_Irecv(b + STRATA__NET_HEAD, (int)STRATA__NET_DATA, MPI_BYTE, p,
                          tag(l, ch, 1), l->comm, &recv[2 * p + 1]);
        }
}

/*
 * Every process sends its header and its data for each peer (straight from where they lie: no
 * staging copy); this exchange's receives were posted when the previous one started, and the
 * next one's are posted now.
 */
static int mpi_exchange(struct strata_net *n, const void *head, const void *const *out,
                        const size_t *out_bytes, void *stage, const void **in_head,
                        const void **in, size_t *in_bytes, double timeout_s)
{
        struct link *l = n->h;
        struct channel *ch = NULL;
        int peer[4 * STRATA__NET_MAX], k = 0;

        for (int c = 0; c < CHANNELS && !ch; c++)
                if (l->ch[c].stage == stage || !l->ch[c].stage) {
                        ch = &l->ch[c];
                        ch->stage = stage;
                }
        if (!ch)
                return fail(STRATA_ENOMEM, "mpi: more than %d communicators on one link",
                            CHANNELS);
        if (!ch->posted)
                post(n, l, ch, ch->parity);
        ch->posted = 1;
        post(n, l, ch, ch->parity ^ 1);
        for (int p = 0; p < n->size; p++) {
                if (p == n->rank)
                        continue;
                peer[k] = p;
                l->req[k++] = ch->recv[ch->parity][2 * p];
                peer[k] = p;
                l->req[k++] = ch->recv[ch->parity][2 * p + 1];
        }
        for (int p = 0; p < n->size; p++) {
                if (p == n->rank)
                        continue;
                peer[k] = p;
                MPI_Isend(head, (int)STRATA__NET_HEAD, MPI_BYTE, p, tag(l, ch, 0), l->comm,
                          &l->req[k++]);
                peer[k] = p;
                MPI_Isend(out_bytes[p] ? out[p] : head, (int)out_bytes[p], MPI_BYTE, p,
                          tag(l, ch, 1), l->comm, &l->req[k++]);
        }
        STRATA_TRY(wait_all(n, k, peer, timeout_s, "an exchange"));
        for (int i = 0, p = 0; p < n->size; p++) {
                int got = 0;

                if (p == n->rank)
                        continue;
                MPI_Get_count(&l->st[i + 1], MPI_BYTE, &got);
                i += 2;
                in_head[p] = half(n, ch, ch->parity, p);
                in[p] = half(n, ch, ch->parity, p) + STRATA__NET_HEAD;
                in_bytes[p] = (size_t)got;
                ch->recv[ch->parity][2 * p] = ch->recv[ch->parity][2 * p + 1] = MPI_REQUEST_NULL;
        }
        ch->parity ^= 1; /* the next exchange lands in the other half, while these are read */
        return STRATA_OK;
}

static int mpi_all_reduce(struct strata_net *n, void *buf, size_t count, enum strata_dtype dt,
                          enum strata_reduce_op op, double timeout_s)
{
        struct link *l = n->h;
        MPI_Datatype t = dt == STRATA_F32 ? MPI_FLOAT : dt == STRATA_F64 ? MPI_DOUBLE
                         : dt == STRATA_I32 ? MPI_INT32_T : MPI_INT64_T;
        MPI_Op o = op == STRATA_OP_MAX ? MPI_MAX : op == STRATA_OP_MIN ? MPI_MIN : MPI_SUM;
        int peer[1] = { -1 };

        if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, t, o, l->comm, &l->req[0]) !=
            MPI_SUCCESS)
                return fail(STRATA_ESYS, "mpi: MPI_Iallreduce failed");
        return wait_all(n, 1, peer, timeout_s, "MPI_Allreduce");
}

static void mpi_abort(struct strata_net *n, int code, const char *why)
{
        struct link *l = n->h;

        fprintf(stderr, "strata: process %d: %s; ending the job (MPI_Abort)\n", n->rank, why);
        fflush(stderr);
        MPI_Abort(l ? l->comm : MPI_COMM_WORLD, code);
}

static const struct strata__net_ops mpi_ops = {
        .name = "mpi",
        .open = mpi_open,
        .close = mpi_close,
        .exchange = mpi_exchange,
        .native_all_reduce = mpi_all_reduce,
        .abort = mpi_abort,
};

__attribute__((visibility("default"))) const struct strata__net_ops *
strata_mpi_plugin_open(const struct strata__plugin_host *host);

const struct strata__net_ops *strata_mpi_plugin_open(const struct strata__plugin_host *host)
{
        if (!host || host->abi != STRATA__NET_PLUGIN_ABI || !host->vfail || !host->wait)
                return NULL;
        host_vfail = host->vfail;
        host_wait = host->wait;
        return &mpi_ops;
}
