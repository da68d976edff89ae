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
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/status.h"
#include "drivers/net.h"
#include "drivers/plugin.h"
#include "kernel/wait.h"

#define TAG 0x5374 /* "St": headers and small messages; TAG + 1: data */

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

/* One link per runtime that runs on MPI at a time; no allocation of our own. */
/*
 * Requests of one step: per message, the header and the data, or one piece (a small message
 * packed after its header in the step's staging).
 */
#define REQS (4 * STRATA__NET_MSGS)

/*
 * A channel: the steps of one communicator (one staging area), on tags of its own, so that
 * Strata's communicators on one link never match each other's messages.
 */
#define CHANNELS 4

struct channel {
        void *stage;
        /* header receives posted ahead for the next step (same peers as the last two) */
        MPI_Request pre[STRATA__NET_MSGS];
        int pre_peer[STRATA__NET_MSGS], npre;
        int last_peer[STRATA__NET_MSGS], nlast;
        int half; /* the staging half this step's pieces land in */
};

/* The affinity mask's words share() ORs together: 4096 CPUs, the buffer sched_getaffinity fills. */
#define CPU_WORDS 64

struct link {
        int used, finalize;
        int host_size;       /* processes of the communicator on this host */
        void *region;        /* the region share() mapped (NULL: none) */
        size_t region_bytes;
        /* share()'s collectives' buffers: a timed-out share leaves them pending, so they live
         * here, not on its stack (and the job then ends: no later share reuses them) */
        long long share_id[5];
        int share_in[2], share_all[2];
        uint64_t cpu_mask[CPU_WORDS], cpu_all[CPU_WORDS]; /* affinity masks, then their union */
        MPI_Comm comm;
        MPI_Request req[REQS];
        MPI_Status st[REQS];
        int peer[REQS];
        struct channel ch[CHANNELS];
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
                /* A block is its data and a 64-byte header: past Open MPI's shared-memory eager
                 * limit (4 KiB) it takes the rendezvous protocol and a single copy through
                 * process_vm_readv (pinned pages, a system call a message): twice as slow at
                 * 4 KiB (decision 0011), 1.2x an RL agent's whole update at its 19 KB gradients
                 * (0099). To vader's fragment size (32 KiB) a message goes eager, copied in and
                 * out. An application that initialises MPI can pass the same. */
                setenv("OMPI_MCA_btl_vader_eager_limit", "32768", 0);
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
                        MPI_Comm_size(host, &l->host_size);
                        MPI_Comm_free(&host);
                }
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
                for (int i = 0; i < l->ch[c].npre; i++) {
                        MPI_Cancel(&l->ch[c].pre[i]);
                        MPI_Wait(&l->ch[c].pre[i], MPI_STATUS_IGNORE);
                }
        if (l->region)
                munmap(l->region, l->region_bytes);
        l->region = NULL;
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
        int named[REQS], nnamed = 0;
        size_t len = 0;

        late[0] = '\0';
        for (int i = 0; i < nreq && len < size - 16; i++) {
                int flag = 0, seen = 0;

                if (l->req[i] == MPI_REQUEST_NULL || peer[i] < 0)
                        continue;
                for (int j = 0; j < nnamed && !seen; j++)
                        seen = named[j] == peer[i];
                MPI_Request_get_status(l->req[i], &flag, MPI_STATUS_IGNORE);
                if (flag || seen)
                        continue;
                named[nnamed++] = peer[i];
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
        if (!late[0]) /* a collective: which process is missing, MPI does not say */
                return fail(STRATA_ETIMEDOUT, "mpi: process %d waited %.3g s in %s at step %llu; "
                            "a process never came (hung, dead, or it refused the job)", n->rank,
                            timeout_s, what, n->step ? (unsigned long long)*n->step : 0ull);
        return fail(STRATA_ETIMEDOUT, "mpi: process %d waited %.3g s in %s at step %llu; nothing "
                    "came from process %s (hung or dead)", n->rank, timeout_s, what,
                    n->step ? (unsigned long long)*n->step : 0ull, late);
}

/*
 * One step. A message of at most STRATA__NET_SMALL bytes travels in one piece, packed after
 * its header in the staging (one MPI message, not two, for the latency-bound steps of small
 * collectives); a larger one as a header piece of a size no packed piece has (HEAD + SMALL +
 * 1), then its data, straight from where it lies into where the receiver wants it. The sender
 * alone decides, from its own size, so a receiver that expected another size still reads the
 * header (and the transport refuses the disagreement) instead of failing on a truncation.
 * So: every header piece is received first (with room for a packed one); then the data of the
 * large ones, and every send, are waited for. A peer that is a step ahead may send before
 * this process posts: Open MPI holds the message as unexpected (its own buffers, grown at the
 * warm-up) and matches it when the receive is posted; messages on one tag keep their order.
 */
#define PIECE (STRATA__NET_HEAD + STRATA__NET_SMALL + 1)
#define STRIDE (STRATA__NET_HEAD + STRATA__NET_SMALL + 64) /* in the staging */

static int post_sends(struct link *l, int tag, const void *head, const struct strata__net_msg *send,
                      int nsend, unsigned char *out, int k)
{
        for (int i = 0; i < nsend; i++) {
                unsigned char *b = out + (size_t)i * STRIDE;
                int packed = send[i].bytes <= STRATA__NET_SMALL;

                memcpy(b, head, STRATA__NET_HEAD);
                if (packed && send[i].bytes)
                        memcpy(b + STRATA__NET_HEAD, send[i].data, send[i].bytes);
                l->peer[k] = send[i].peer;
                MPI_Isend(b, (int)(packed ? STRATA__NET_HEAD + send[i].bytes : PIECE), MPI_BYTE,
                          send[i].peer, tag, l->comm, &l->req[k++]);
                if (packed)
                        continue;
                l->peer[k] = send[i].peer;
                MPI_Isend(send[i].data, (int)send[i].bytes, MPI_BYTE, send[i].peer, tag + 1,
                          l->comm, &l->req[k++]);
        }
        return k;
}

/* The header pieces have come: post the receives of the large messages' data. */
static int post_data(struct link *l, int tag, struct strata__net_msg *recv, int nrecv,
                     unsigned char *in, char *big, int k)
{
        for (int i = 0; i < nrecv; i++) {
                unsigned char *b = in + (size_t)i * STRIDE;
                int got = 0;

                MPI_Get_count(&l->st[i], MPI_BYTE, &got);
                recv[i].head = b;
                big[i] = got == (int)PIECE;
                if (!big[i]) {
                        recv[i].data = b + STRATA__NET_HEAD;
                        recv[i].bytes = got > (int)STRATA__NET_HEAD
                                                ? (size_t)got - STRATA__NET_HEAD : 0;
                        continue;
                }
                recv[i].data = recv[i].into;
                l->peer[k] = recv[i].peer;
                MPI_Irecv(recv[i].into, (int)recv[i].bytes, MPI_BYTE, recv[i].peer, tag + 1,
                          l->comm, &l->req[k++]);
        }
        return k;
}

/* Tags of a channel: headers and small messages, then data. */
static int tag_of(const struct link *l, const struct channel *ch)
{
        return TAG + 2 * (int)(ch - l->ch);
}

/*
 * The header receives of a step: those posted ahead when they are for the same peers, in
 * order; otherwise those are cancelled and the step posts its own.
 */
static int post_heads(struct link *l, struct channel *ch, const struct strata__net_msg *recv,
                      int nrecv, unsigned char *in)
{
        int same = ch->npre == nrecv, lost = 0;

        for (int i = 0; i < nrecv && same; i++)
                same = ch->pre_peer[i] == recv[i].peer;
        for (int i = 0; i < ch->npre && !same; i++) {
                MPI_Status s;
                int cancelled = 0;

                MPI_Cancel(&ch->pre[i]);
                MPI_Wait(&ch->pre[i], &s);
                MPI_Test_cancelled(&s, &cancelled);
                lost += !cancelled;
        }
        ch->npre = 0;
        if (lost)
                return fail(STRATA_EFORMAT, "mpi: %d message(s) came for a step they were not "
                            "posted for", lost);
        for (int i = 0; i < nrecv; i++) {
                l->peer[i] = recv[i].peer;
                if (same)
                        l->req[i] = ch->pre[i];
                else
                        MPI_Irecv(in + (size_t)i * STRIDE, (int)PIECE, MPI_BYTE, recv[i].peer,
                                  tag_of(l, ch), l->comm, &l->req[i]);
        }
        return STRATA_OK;
}

/*
 * After a step of a direct schedule (at most STRATA__NET_DIRECT processes, every step receives
 * from every peer, drivers/net/net.c) whose peers were the last one's too, the next step's
 * header receives are posted now, into the other half of the staging
 * (this step's pieces are read until the next step): a peer that finishes first then finds
 * them, and Open MPI does not hold its message as unexpected (which allocates).
 */
static void post_ahead(struct link *l, int n_size, struct channel *ch,
                       const struct strata__net_msg *recv, int nrecv, unsigned char *next)
{
        int same = ch->nlast == nrecv;

        for (int i = 0; i < nrecv; i++) {
                same = same && ch->last_peer[i] == recv[i].peer;
                ch->last_peer[i] = recv[i].peer;
        }
        ch->nlast = nrecv;
        if (!same || n_size > STRATA__NET_DIRECT)
                return;
        for (int i = 0; i < nrecv; i++) {
                ch->pre_peer[i] = recv[i].peer;
                MPI_Irecv(next + (size_t)i * STRIDE, (int)PIECE, MPI_BYTE, recv[i].peer,
                          tag_of(l, ch), l->comm, &ch->pre[i]);
        }
        ch->npre = nrecv;
}

/* The channel of the communicator whose staging is @p stage. */
static struct channel *channel(struct link *l, void *stage)
{
        for (int c = 0; c < CHANNELS; c++)
                if (l->ch[c].stage == stage || !l->ch[c].stage) {
                        l->ch[c].stage = stage;
                        return &l->ch[c];
                }
        return NULL;
}

static int mpi_step(struct strata_net *n, const void *head, const struct strata__net_msg *send,
                    int nsend, struct strata__net_msg *recv, int nrecv, void *stage,
                    double timeout_s)
{
        struct link *l = n->h;
        struct channel *ch = channel(l, stage);
        unsigned char *base = stage, *in, *next, *out;
        MPI_Request sends[2 * STRATA__NET_MSGS];
        int speer[2 * STRATA__NET_MSGS], k, ns;
        char big[STRATA__NET_MSGS];

        if (!ch)
                return fail(STRATA_ENOMEM, "mpi: more than %d communicators on one link",
                            CHANNELS);
        if (nsend > STRATA__NET_MSGS || nrecv > STRATA__NET_MSGS)
                return fail(STRATA_EINVAL, "mpi: more than %d messages in a step",
                            STRATA__NET_MSGS);
        in = base + (size_t)ch->half * STRATA__NET_MSGS * STRIDE;
        next = base + (size_t)(ch->half ^ 1) * STRATA__NET_MSGS * STRIDE;
        out = base + (size_t)2 * STRATA__NET_MSGS * STRIDE;
        STRATA_TRY(post_heads(l, ch, recv, nrecv, in));
        ns = post_sends(l, tag_of(l, ch), head, send, nsend, out, nrecv) - nrecv;
        memcpy(sends, l->req + nrecv, (size_t)ns * sizeof(*sends));
        memcpy(speer, l->peer + nrecv, (size_t)ns * sizeof(*speer));
        STRATA_TRY(wait_all(n, nrecv, l->peer, timeout_s, "a step"));
        k = post_data(l, tag_of(l, ch), recv, nrecv, in, big, 0);
        memcpy(l->req + k, sends, (size_t)ns * sizeof(*sends));
        memcpy(l->peer + k, speer, (size_t)ns * sizeof(*speer));
        STRATA_TRY(wait_all(n, k + ns, l->peer, timeout_s, "a step"));
        for (int i = 0, j = 0; i < nrecv; i++) {
                int got = 0;

                if (!big[i])
                        continue;
                MPI_Get_count(&l->st[j++], MPI_BYTE, &got);
                recv[i].bytes = (size_t)got;
        }
        post_ahead(l, n->size, ch, recv, nrecv, next);
        ch->half ^= 1;
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

/*
 * Open MPI holds a message that arrives before its receive (a peer a step ahead) in memory from
 * its bucket allocator, which mallocs the first time each size class is needed and keeps the
 * blocks. Each class a step may need (packed pieces up to the eager limit, and a rendezvous
 * start) is made to arrive unexpected here, a few from every peer at once, so that steps find
 * the blocks cached. Only at set-up: every peer, a barrier, then the receives.
 */
#define WARM_COPIES 4

static int mpi_warm(struct strata_net *n, void *stage, double timeout_s)
{
        static const char from[(size_t)1 << 14]; /* past the eager limit: a rendezvous */
        struct link *l = n->h;
        int peers = n->size - 1 < STRATA__NET_MSGS / WARM_COPIES ? n->size - 1
                                                                  : STRATA__NET_MSGS / WARM_COPIES;

        for (size_t bytes = 64;; bytes *= 2) {
                size_t b = bytes < PIECE ? bytes : bytes < sizeof(from) ? PIECE : sizeof(from);
                int k = 0;

                for (int i = 1; i <= peers; i++)
                        for (int j = 0; j < WARM_COPIES; j++) {
                                l->peer[k] = (n->rank + i) % n->size;
                                MPI_Isend(from, (int)b, MPI_BYTE, l->peer[k], TAG - 1, l->comm,
                                          &l->req[k]);
                                k++;
                        }
                MPI_Barrier(l->comm);
                for (int i = 1, r = 0; i <= peers; i++)
                        for (int j = 0; j < WARM_COPIES; j++, r++) {
                                l->peer[k] = (n->rank - i + n->size) % n->size;
                                MPI_Irecv((char *)stage + (size_t)r * b, (int)b, MPI_BYTE,
                                          l->peer[k], TAG - 1, l->comm, &l->req[k]);
                                k++;
                        }
                STRATA_TRY(wait_all(n, k, l->peer, timeout_s, "the warm-up"));
                if (b == sizeof(from))
                        return STRATA_OK;
        }
}

/*
 * A region every process of the link maps (struct strata__net_ops.share). Where the processes
 * all share this host (the shared-memory split has them all) and each wants it, process 0
 * makes an anonymous memory file of @p bytes; the others open it through /proc/<pid>/fd/<fd>
 * (sent in a broadcast, with the file's device and inode, which they check) and all map it
 * shared; an all-reduce says every process did, then the descriptors close: nothing is named
 * in /dev/shm and nothing outlives the processes. Where some process could not: none keeps a
 * mapping, STRATA_ENOTSUP (no error message: the link steps over MPI as before). The two
 * collectives are waited for like a step's requests, within @p timeout_s: a process that never
 * comes (it refused the job before this) is named, and MPI failing in them is an error too,
 * not a fallback (the processes could end on different links); the job then ends (the
 * pending collectives' buffers are the link's, not this call's). The agreement also carries
 * the lowest rank whose @p bad was set, so every process learns it and refuses alike. Once
 * mapped, a third collective ORs the processes' affinity masks: @p cpus, the CPUs the job may
 * use (for the shm link's spin; each process may be bound to one).
 */
static int mpi_share(struct strata_net *n, size_t bytes, int want, void **region,
                     double timeout_s, int *bad, int *cpus)
{
        struct link *l = n->h;
        long long *id = l->share_id; /* made, pid, fd, device, inode */
        int ok = !*bad && want && n->size > 1 && l->host_size == n->size && !l->region;
        int none[1] = { -1 }, fd = -1, rc;
        void *p = MAP_FAILED;
        struct stat st;
        char path[64];

        memset(id, 0, sizeof(l->share_id));
        if (n->rank == 0 && ok) {
                fd = memfd_create("strata-link", MFD_CLOEXEC);
                ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 && fstat(fd, &st) == 0;
                if (ok) {
                        id[0] = 1;
                        id[1] = (long long)getpid();
                        id[2] = fd;
                        id[3] = (long long)st.st_dev;
                        id[4] = (long long)st.st_ino;
                }
        }
        /* a collective: a process that never comes is not named (not process 0 either) */
        rc = MPI_Ibcast(id, 5, MPI_LONG_LONG, 0, l->comm, &l->req[0]) == MPI_SUCCESS
             ? wait_all(n, 1, none, timeout_s, "the shm link's broadcast")
             : fail(STRATA_ESYS, "mpi: MPI_Ibcast failed");
        ok = ok && id[0];
        if (rc == STRATA_OK && ok && n->rank) {
                snprintf(path, sizeof(path), "/proc/%lld/fd/%lld", id[1], id[2]);
                fd = open(path, O_RDWR | O_CLOEXEC);
                ok = fd >= 0 && fstat(fd, &st) == 0 && (long long)st.st_dev == id[3] &&
                     (long long)st.st_ino == id[4] && (size_t)st.st_size == bytes;
        }
        if (rc == STRATA_OK && ok) {
                p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                ok = p != MAP_FAILED;
        }
        /* whether every process mapped it, and the lowest rank with an invalid choice */
        l->share_in[0] = ok;
        l->share_in[1] = *bad ? n->rank : INT_MAX;
        if (rc == STRATA_OK)
                rc = MPI_Iallreduce(l->share_in, l->share_all, 2, MPI_INT, MPI_MIN, l->comm,
                                    &l->req[0]) == MPI_SUCCESS
                     ? wait_all(n, 1, none, timeout_s, "the shm link's agreement")
                     : fail(STRATA_ESYS, "mpi: MPI_Iallreduce failed");
        if (fd >= 0)
                close(fd);
        if (rc == STRATA_OK)
                *bad = l->share_all[1] == INT_MAX ? -1 : l->share_all[1];
        if (rc != STRATA_OK || !l->share_all[0]) {
                if (p != MAP_FAILED)
                        munmap(p, bytes);
                return rc != STRATA_OK ? rc : STRATA_ENOTSUP;
        }
        /* the CPUs the job may use: the union of the processes' masks (mpirun binds each
         * process to a core by default, so each one's own mask says 1) */
        *cpus = 0;
        memset(l->cpu_mask, 0, sizeof(l->cpu_mask));
        if (sched_getaffinity(0, sizeof(l->cpu_mask), (cpu_set_t *)(void *)l->cpu_mask) != 0)
                memset(l->cpu_mask, 0, sizeof(l->cpu_mask));
        rc = MPI_Iallreduce(l->cpu_mask, l->cpu_all, CPU_WORDS, MPI_UINT64_T, MPI_BOR, l->comm,
                            &l->req[0]) == MPI_SUCCESS
             ? wait_all(n, 1, none, timeout_s, "the shm link's CPU count")
             : fail(STRATA_ESYS, "mpi: MPI_Iallreduce failed");
        if (rc != STRATA_OK) {
                munmap(p, bytes);
                return rc;
        }
        for (int i = 0; i < CPU_WORDS; i++)
                *cpus += __builtin_popcountll(l->cpu_all[i]);
        l->region = p;
        l->region_bytes = bytes;
        *region = p;
        return STRATA_OK;
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
        .step = mpi_step,
        .native_all_reduce = mpi_all_reduce,
        .abort = mpi_abort,
        .warm = mpi_warm,
        .share = mpi_share,
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
