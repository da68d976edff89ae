/*
 * What the checkpoint's files share (internal to strategy/checkpoint/; save.c defines what is
 * not inline here): the file's layout and the tensors of a checkpoint of this runtime with the
 * pieces each is held in, which load.c validates and restores; the check every entry point
 * makes and the runtime's CheckpointIO; and the writing of one file on the writing process,
 * which the safetensors export (export.c) goes through as the checkpoint does.
 */
#ifndef STRATA_STRATEGY_CHECKPOINT_CHECKPOINT_H
#define STRATA_STRATEGY_CHECKPOINT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "nn/checkpoint.h"
#include "strategy/internal.h"

/* One tensor of the checkpoint, where it lives in this runtime. */
struct strata__ckpt_tensor {
        char name[STRATA__CKPT_NAME];
        uint32_t dtype, ndim;
        uint64_t shape[2];
        void *ptr;          /* device memory of replica dev, or host memory (dev < 0) */
        size_t bytes;
        int dev;
        int owner;          /* the global device that holds it (its process sends it) */
        int group, slot;    /* its group, the optimizer slot (-1: the values); sharded: its
                             * owners hold it */
        int sharded;
        int per_device;     /* one piece per device of shape[0] (the step counts) */
};

/*
 * Where table entry @p i starts in a checkpoint file (the header, then the table); with @p i
 * the number of entries, where the table ends.
 */
static inline uint64_t strata__ckpt_entry_at(uint64_t i)
{
        return sizeof(struct strata__ckpt_header) + i * sizeof(struct strata__ckpt_entry);
}

/*
 * A save of every process of a job whose optimizer state is sharded over them: every process
 * calls it, and process 0 alone writes the file.
 */
static inline int strata__ckpt_across(const struct strata_runtime *rt)
{
        return (strata__caps(rt->strategy) & STRATA__CAP_SHARD_STATE) &&
               rt->world > rt->nreplicas;
}

/* The devices a checkpoint of this runtime holds: the job's when it saves across processes. */
static inline int strata__ckpt_world(const struct strata_runtime *rt)
{
        return strata__ckpt_across(rt) ? rt->world : rt->nreplicas;
}

/*
 * Tensor @p i of a checkpoint of this model saved on @p world devices; -1 past the last. Its
 * pointer is where it lives in this runtime, or NULL for a device this runtime lacks.
 */
int strata__ckpt_tensor_at(struct strata_runtime *rt, int world, int i,
                           struct strata__ckpt_tensor *t);

/* Group @p g of device 0's values as a tensor (the first of its checkpoint tensors). */
void strata__ckpt_values(const struct strata_runtime *rt, int g, struct strata__ckpt_tensor *t);

/* The header @p hd of file @p path is a Strata checkpoint's of this format, intact. */
int strata__ckpt_check_header(const struct strata__ckpt_header *hd, const char *path);

/* How many tensors a checkpoint of this model saved on @p world devices holds. */
int strata__ckpt_count(struct strata_runtime *rt, int world);

/* The model's identity: input width, classes, every group's name and shape. */
uint64_t strata__ckpt_fingerprint(const struct strata_runtime *rt);

/*
 * Piece @p k of tensor @p t: where it lives (ptr NULL: in another process, owner's), its
 * bytes, and where they start in the tensor. A sharded optimizer slot is in pieces, device
 * k's the part of the group in its shard (devices in order: the shards side by side are the
 * whole tensor, consolidated); the step counts one per device; any other tensor is one piece.
 * 1 for a piece (possibly empty), 0 past the last.
 */
int strata__ckpt_piece(struct strata_runtime *rt, const struct strata__ckpt_tensor *t, int k,
                       struct strata__ckpt_tensor *out, size_t *at);

/*
 * The runtime's CheckpointIO (the application's, or the default file one), and in *@p h the
 * runtime's one handle, cleared for the file about to be created or opened.
 */
const struct strata_checkpoint_io *strata__ckpt_io(struct strata_runtime *rt,
                                                   struct strata_ckpt_handle **h);

/*
 * @p rt may save, load or export now (@p what, the API call, names it in messages): a runtime,
 * READY, between steps at an optimizer-step boundary, and @p path is a name.
 */
int strata__ckpt_between_steps(const struct strata_runtime *rt, const char *what,
                               const char *path);

/*
 * Where a save's bytes go on the writing process: a checksum, and the file when @c io is set.
 * The first write error is kept and later writes are skipped, so a save across processes
 * still takes part in every transfer and all end together.
 */
struct strata__ckpt_sink {
        const struct strata_checkpoint_io *io;
        struct strata_ckpt_handle *h;
        uint32_t crc;
        int rc;
};

/* @p n bytes at @p p into the sink @p arg (a struct strata__ckpt_sink). */
void strata__ckpt_take(void *arg, const void *p, size_t n);

/*
 * Tensor @p t's bytes in order, piece by piece, into @p s. Across processes every process
 * takes part (each piece comes from its owner's process) and only process 0's sink is fed.
 */
int strata__ckpt_stream(struct strata_runtime *rt, const struct strata__ckpt_tensor *t,
                        struct strata__ckpt_sink *s);

/* A file's bytes in order into a sink: the checkpoint's (its application block) or the export's. */
struct strata__ckpt_content {
        int (*fill)(struct strata_runtime *rt, struct strata__ckpt_sink *s,
                    const struct strata__ckpt_content *c);
        const char *what;       /* the API call, for messages */
        const void *app;
        size_t app_bytes;
};

/*
 * Write @p path on this process (process 0 of a job that saves across processes; the others
 * only send their pieces), commit or abort it; @p together: every process of the job calls
 * this, and all agree on the outcome.
 */
int strata__ckpt_written(struct strata_runtime *rt, const char *path,
                         const struct strata__ckpt_content *c, int together);

#endif /* STRATA_STRATEGY_CHECKPOINT_CHECKPOINT_H */
