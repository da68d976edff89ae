/*
 * The configuration fingerprint of a job of several processes (internal to strategy/): what
 * every process must share for the collectives to match and the replicas to have one shape,
 * as one fixed-size record of named text fields. The job (process/job.c) gathers every process's at
 * set-up, before the first collective of a step, and refuses a difference naming the field,
 * both values and the process; the last field is the collective schedule itself (the world,
 * the shards, the gradient buckets or fsdp's layers). A strategy whose schedule depends on
 * more adds a field and one line of the field table. After the text fields, every numeric
 * setting of the configuration that must match (learning rate, momentum, seed, clipping, ...:
 * the by-name keys less those that say how one process runs) travels by value, so a new field
 * of struct strata_config is compared without a line here.
 */
#ifndef STRATA_STRATEGY_FINGERPRINT_H
#define STRATA_STRATEGY_FINGERPRINT_H

#include "strategy/internal.h"

/** Bytes of a fingerprint whatever its fields: what processes exchange never changes size. */
#define STRATA__FINGERPRINT_BYTES ((size_t)1024)

/** Settings a fingerprint carries by value (a test checks that every shared field fits). */
#define STRATA__FINGERPRINT_SETTINGS 40

/** One process's configuration, each field a NUL-terminated text (the message shows it). */
struct strata__fingerprint {
        char version[16];     /* the library's version */
        char strategy[16];
        char devices[8];      /* devices per process */
        char widths[96];      /* input width, then each module's declared output width */
        char modules[240];    /* module kinds in order */
        char loss[32];
        char parameters[24];  /* trained floats of a replica */
        char batch[16];       /* the largest global batch planned */
        char precision[16];
        char bucket[24];      /* gradient bucket bytes (ddp's default applied) */
        char grad_type[8];    /* the gradient all-reduce's type */
        char mpi_allreduce[8];
        char sync_bn[8];
        char optimizer[16];
        char accumulate[16]; /* micro-batches a window, " each" where each is reduced */
        char schedule[128];   /* world, shards, ddp's buckets in order (strata__ddp_bucket_walk),
                               * or fsdp's layers */
        char invariant[16];   /* invariant mode: its chunks, or "off" */
        char sync[16];        /* the synchronisation variant (strata__sync.name) */
        uint64_t settings[STRATA__FINGERPRINT_SETTINGS]; /* every field set by name that must
                                                          * match (strata__config_shared()) */
};
_Static_assert(sizeof(struct strata__fingerprint) <= STRATA__FINGERPRINT_BYTES,
               "a fingerprint fits its fixed size");

/** Fill @p out (STRATA__FINGERPRINT_BYTES, zeroed first) from the runtime @p rt. */
void strata__fingerprint_make(const struct strata_runtime *rt, void *out);

/**
 * Compare the @p n fingerprints at @p all (STRATA__FINGERPRINT_BYTES each, process order) with
 * process 0's, field by field: STRATA_OK, or STRATA_EINVAL naming the first process and field
 * that differ ("process 1 has model widths 784-128-10, process 0 784-64-10"), the same
 * message on every process.
 */
int strata__fingerprint_check(const void *all, int n);

#endif /* STRATA_STRATEGY_FINGERPRINT_H */
