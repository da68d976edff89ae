/*
 * Links between processes (internal to drivers/ and strategy/): what a communicator whose ranks
 * live in several processes uses to join them. One ops table per kind of link, as NCCL's
 * network plugins: `mpi` (Open MPI point-to-point, drivers/mpi, a plugin: libstrata-mpi.so)
 * and `spawn` (memory shared by the processes strata_spawn() forked, drivers/shm/spawn_link.c).
 *
 * The link offers one primitive, a step: this process sends a few other processes a message
 * each (a 64-byte header, then data) and receives a few messages, and waits for them all. Every
 * process takes part in every step of a collective (with no message, when its schedule has
 * none), so steps are counted alike everywhere. The `net` transport (drivers/net/) builds
 * every collective on steps: schedules of depth log P (recursive halving and doubling) or, for
 * 2 to 4 processes, one step to every peer; its reductions follow the order the world size
 * fixes (bitwise the same as one process's). Nothing in a link grows with the processes: a
 * step carries at most STRATA__NET_MSGS messages each way and STRATA__NET_DATA bytes of data.
 */
#ifndef STRATA_DRIVERS_NET_H
#define STRATA_DRIVERS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "strata/comm.h"

/**
 * A message's header, and the most data one process sends in one step: distinct bytes (data
 * sent to several peers from one place counts once).
 */
#define STRATA__NET_HEAD ((size_t)64)
#define STRATA__NET_DATA ((size_t)1 << 20)
#define STRATA__NET_BLOCK (STRATA__NET_HEAD + STRATA__NET_DATA)

/** Processes up to which the net transport's schedules are direct: every step reaches every
 *  peer, so a link may post the next step's receives ahead. */
#define STRATA__NET_DIRECT 4

/** Processes strata_spawn() forks at most (one host; its watcher keeps their ids). */
#define STRATA__SPAWN_MAX 1024

/** Messages a process sends, and receives, in one step at most. */
#define STRATA__NET_MSGS 64

/** Messages of at most this many bytes travel with their header in one piece (a copy): under
 *  Open MPI's shared-memory eager limit as Strata sets it (8 KiB), so sent eagerly. */
#define STRATA__NET_SMALL ((size_t)7936)

/**
 * Staging a link may use (struct strata__net_ops.step's @p stage): a small message and its
 * header (and a byte) per message sent, and per message received twice (this step's, and the
 * next one's posted ahead).
 */
#define STRATA__NET_STAGE \
        ((size_t)STRATA__NET_MSGS * 3 * (STRATA__NET_HEAD + STRATA__NET_SMALL + 64))

struct strata_net;

/**
 * One message of a step. To send: @c peer, @c data, @c bytes. To receive: @c peer, @c into
 * (where the link may land the data; @c bytes of room), and the link sets @c bytes to what came,
 * @c data to where it lies (@c into, or the link's own memory until the next step) and
 * @c head to the sender's header. Messages between two processes in one step are delivered in
 * the order they are listed.
 */
struct strata__net_msg {
        int peer;
        size_t bytes;
        const void *data;
        void *into;
        const void *head;
};

/** A kind of link. */
struct strata__net_ops {
        const char *name;
        /**
         * Join the processes of @p where (the link's own meaning: a struct strata__mpi_where
         * or NULL for MPI_COMM_WORLD; the shared region of strata_spawn()): sets n->rank,
         * n->size, n->h.
         */
        int (*open)(struct strata_net *n, const void *where);
        /** Leave (the link undoes what open did, MPI_Finalize included if it initialised). */
        void (*close)(struct strata_net *n);
        /**
         * One step: send @p head (STRATA__NET_HEAD bytes) and then each of send[0..nsend) to its
         * peer, receive each of recv[0..nrecv) (at most STRATA__NET_MSGS each way, at most
         * STRATA__NET_DATA distinct bytes of data sent), and wait, at most @p timeout_s, for all.
         * @p stage: STRATA__NET_STAGE bytes the link may use, the same for every step of one
         * communicator. A process that does not arrive in time is named in the error
         * (STRATA_ETIMEDOUT); after a failure elsewhere, STRATA_EABORTED; a message larger than
         * its receive, STRATA_EFORMAT.
         */
        int (*step)(struct strata_net *n, const void *head, const struct strata__net_msg *send,
                    int nsend, struct strata__net_msg *recv, int nrecv, void *stage,
                    double timeout_s);
        /**
         * Optional: an in-place sum/max/min of @p count elements across processes by the
         * library's own algorithm (fast, summation order not fixed). NULL when not offered.
         */
        int (*native_all_reduce)(struct strata_net *n, void *buf, size_t count,
                                 enum strata_dtype dt, enum strata_reduce_op op, double timeout_s);
        /** End the whole job after a local failure (@p why is printed first); may not return. */
        void (*abort)(struct strata_net *n, int code, const char *why);
        /**
         * Optional, at set-up: grow the link's own buffers for messages that arrive before
         * their receive is posted (Open MPI's), so that steps allocate nothing; @p stage as
         * for step. Every process calls it at the same point.
         */
        int (*warm)(struct strata_net *n, void *stage, double timeout_s);
        /**
         * Optional, at set-up, every process at the same point: map @p bytes of memory shared by
         * every process of the link, zeroed, where all are on one host and all @p want it
         * (the processes agree); close() unmaps it. STRATA_ENOTSUP, with nothing mapped on any
         * process and no error message, where not; another status (a process not there within
         * @p timeout_s, the link failing) is an error that ends the job. @p bad: on entry,
         * nonzero where this process's own choice of link is invalid; on return with STRATA_OK
         * or STRATA_ENOTSUP, the lowest rank whose was, or -1 (when one was, none maps the
         * region: STRATA_ENOTSUP), so that every process can refuse the job alike instead of
         * ending it. @p cpus: on success, the CPUs
         * the processes may run on together (the union of their affinity masks; 0: unknown).
         */
        int (*share)(struct strata_net *n, size_t bytes, int want, void **region,
                     double timeout_s, int *bad, int *cpus);
};

/** A link between processes, as a communicator sees it. */
struct strata_net {
        const struct strata__net_ops *ops;
        void *h;          /* the link's own state */
        int rank, size;   /* this process and the processes joined */
        int local_rank;   /* this process among those of the job on its host */
        int native;       /* reductions through native_all_reduce (not bitwise reproducible) */
        const uint64_t *step; /* the runtime's step counter, for messages (may be NULL) */
};

struct strata_comm;

/**
 * drivers/net/net.c: run every step of the schedules with full messages @p rounds times on the
 * coordinating thread (local rank 0's, outside any collective), so that the link's own buffers
 * (Open MPI's free lists) are grown at set-up and steps allocate nothing.
 */
int strata__net_warm_up(struct strata_comm *c, int rounds);

/*
 * drivers/net/net.c: flags that ride on a communicator's exchanges between processes, in the
 * top 16 bits of each step's header (decision 0108). A direct exchange (2 to 4 processes)
 * reaches every peer, so after one every process holds the OR of every process's flags at
 * that step; the butterfly's steps (5 processes or more), Open MPI's own reductions and a
 * communicator within one process carry nothing. All three are no-ops, and take returns 0,
 * where @p c does not span processes.
 */

/** Outside any collective of @p c: this process's flags become @p bits; nothing carried yet. */
void strata__net_carry_set(struct strata_comm *c, uint32_t bits);

/**
 * A local rank, outside any collective: OR @p bits into this process's flags; the exchanges
 * before this call no longer count as having carried them (every local rank calls it before
 * the collectives that must carry its bits: local rank 0 exchanges for all only once every
 * local rank entered the collective).
 */
void strata__net_carry(struct strata_comm *c, uint32_t bits);

/**
 * Outside any collective: whether every local rank called strata__net_carry() since
 * strata__net_carry_set() and a direct exchange followed the last call, with *@p bits the OR
 * of every process's flags then; the flags are cleared. Every process that ran the same
 * collectives gets the same answer and bits.
 */
int strata__net_carry_take(struct strata_comm *c, uint32_t *bits);

/** drivers/net/net.c: the messages and data bytes this process's link has sent so far. */
void strata__net_counts(const struct strata_comm *c, uint64_t *msgs, uint64_t *bytes);

/** drivers/registry.c: the MPI link (loads libstrata-mpi.so the first time). */
int strata__link_mpi(const struct strata__net_ops **out);

/** What the MPI link's open() takes: the application's communicator (NULL: MPI_COMM_WORLD), a
 *  C `MPI_Comm *` or, with @c fortran, a Fortran handle (`MPI_Fint *`). */
struct strata__mpi_where {
        const void *comm;
        int fortran;
};

/** drivers/shm/spawn_link.c: the link among the processes of strata_spawn(), over a shared region
 *  of strata__shm_spawn_bytes(size) bytes mapped before the fork. */
extern const struct strata__net_ops strata__shm_spawn_link;

/** drivers/shm/spawn_link.c: the same link over a region the processes of an MPI job on one host
 *  share (struct strata__net_ops.share of the MPI link), named `shm`. */
extern const struct strata__net_ops strata__shm_host_link;

/** What the spawn link's open() takes: the region, this process, the processes; for its waits'
 *  spin, each process's devices (its spinning threads; 0: 1) and the CPUs the whole job may
 *  use (0: this process's own affinity mask, which strata_spawn()'s processes share). */
struct strata__shm_spawn_where {
        void *region;
        int rank, size;
        int devices, cpus;
};

/** Bytes of the region strata__shm_spawn_link joins @p size processes over. */
size_t strata__shm_spawn_bytes(int size);

/** The region's abort word: set by whoever sees process @p culprit fail (the first wins). */
void strata__shm_spawn_abort(void *region, int culprit, const char *why);

/** Whether the region was aborted: the culprit (-1: not aborted) and the message. */
int strata__shm_spawn_aborted(void *region, char *why, size_t n);

#endif /* STRATA_DRIVERS_NET_H */
