/*
 * A failure domain: how the members of a group of ranks (threads of a worker pool, processes)
 * learn that one of them failed and report their own failure, without knowing what the members
 * are. A communicator (strata/comm.h) waits on its group; every wait is bounded by its timeout.
 */
#ifndef STRATA_GROUP_H
#define STRATA_GROUP_H

#ifdef __cplusplus
extern "C" {
#endif

/** A failure domain (see the file comment); every field is the provider's. */
struct strata_group {
        void *h;                                     /**< the provider's object */
        int (*aborted)(void *h);                     /**< non-zero once a member failed */
        int (*fail)(void *h, int member, int status); /**< keep the first error, release all */
        unsigned (*epoch)(void *h); /**< failed runs so far; changes only between runs */
        double timeout_s;           /**< bound on every wait */
        int oversubscribed;         /**< members share cores: waiters yield, not spin */
        double stall_s;             /**< report a wait longer than this (0: never) */
        /* private: the library's own per-member recording (its worker pool's), or NULL */
        void *tracks;
};

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GROUP_H */
