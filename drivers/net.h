/*
 * Links between processes (internal to drivers/ and strategy/): what a communicator whose ranks
 * live in several processes uses to join them. One ops table per kind of link, as NCCL's
 * network plugins: `mpi` (Open MPI point-to-point, drivers/mpi, a plugin: libstrata-mpi.so)
 * and `spawn` (memory shared by the processes strata_spawn() forked, drivers/shm/spawn_link.c).
 *
 * The link offers one primitive, an exchange: every process sends every other a header and up
 * to 1 MiB of data (the same data to all, or a piece of its own to each) and gets what every
 * other sent it. The `net` transport (drivers/net/net.c) builds every collective on it, so
 * that reductions combine the ranks of all processes in global rank order (bitwise the same as
 * one process's).
 */
#ifndef STRATA_DRIVERS_NET_H
#define STRATA_DRIVERS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "strata/comm.h"

/** Largest block a process contributes to one exchange: a header and up to 1 MiB of data. */
#define STRATA__NET_HEAD ((size_t)64)
#define STRATA__NET_DATA ((size_t)1 << 20)
#define STRATA__NET_BLOCK (STRATA__NET_HEAD + STRATA__NET_DATA)

/** Processes a link joins at most. */
#define STRATA__NET_MAX 64

struct strata_net;

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
         * Send every other process p a block: @p head (STRATA__NET_HEAD bytes) then
         * out_bytes[p] bytes of out[p] (<= STRATA__NET_DATA in all; the same pointer for every
         * p broadcasts, different ones scatter; sent from where they lie), and wait, at most
         * @p timeout_s, for every other process's block to this one: in_head[p], in[p] and
         * in_bytes[p] (entries of this process are left alone). @p stage holds 2 x size x
         * STRATA__NET_BLOCK bytes the link may receive into, the same for every exchange of
         * one communicator (the next exchange's receives may be posted into one half while
         * this one's blocks are read). What came in stays valid until the next exchange. A
         * process that does not arrive in time is named in the error (STRATA_ETIMEDOUT); after
         * a failure elsewhere, STRATA_EABORTED.
         */
        int (*exchange)(struct strata_net *n, const void *head, const void *const *out,
                        const size_t *out_bytes, void *stage, const void **in_head,
                        const void **in, size_t *in_bytes, double timeout_s);
        /**
         * Optional: an in-place sum/max/min of @p count elements across processes by the
         * library's own algorithm (fast, summation order not fixed). NULL when not offered.
         */
        int (*native_all_reduce)(struct strata_net *n, void *buf, size_t count,
                                 enum strata_dtype dt, enum strata_reduce_op op, double timeout_s);
        /** End the whole job after a local failure (@p why is printed first); may not return. */
        void (*abort)(struct strata_net *n, int code, const char *why);
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
 * drivers/net/net.c: exchange full blocks @p rounds times on the coordinating thread (local
 * rank 0's, outside any collective), so that the link's own buffers (Open MPI's free lists)
 * are grown at set-up and steps allocate nothing.
 */
int strata__net_warm_up(struct strata_comm *c, int rounds);

/** drivers/registry.c: the MPI link (loads libstrata-mpi.so the first time). */
int strata__net_mpi(const struct strata__net_ops **out);

/** What the MPI link's open() takes: the application's communicator (NULL: MPI_COMM_WORLD), a
 *  C `MPI_Comm *` or, with @c fortran, a Fortran handle (`MPI_Fint *`). */
struct strata__mpi_where {
        const void *comm;
        int fortran;
};

/** drivers/shm/spawn_link.c: the link among the processes of strata_spawn(), over a shared region
 *  of strata__procs_bytes(size) bytes mapped before the fork. */
extern const struct strata__net_ops strata__procs_net;

/** What the spawn link's open() takes: the region, this process, the processes. */
struct strata__procs_where {
        void *region;
        int rank, size;
};

/** Bytes of the region strata__procs_net joins @p size processes over. */
size_t strata__procs_bytes(int size);

/** The region's abort word: set by whoever sees process @p culprit fail (the first wins). */
void strata__procs_abort(void *region, int culprit, const char *why);

/** Whether the region was aborted: the culprit (-1: not aborted) and the message. */
int strata__procs_aborted(void *region, char *why, size_t n);

#endif /* STRATA_DRIVERS_NET_H */
