/*
 * Checkpoints: the CheckpointIO ops table and the file format's constants.
 *
 * A checkpoint is written in one pass and becomes visible all at once: the default file
 * implementation writes a temporary file in the target's directory, fsyncs it, renames it
 * over the target and fsyncs the directory, so a crash at any moment leaves either the old
 * complete file or the new complete one (a symlink's target is replaced and the link kept; a
 * character device or FIFO is written in place, a directory refused). An application can pass its own ops (its HPC code's
 * I/O layer) with the same contract.
 *
 * Format (little-endian): a 128-byte header (magic "STRATACK", format version, byte-order
 * mark, tensor count, global step, accumulation position, world size, strategy, a model
 * fingerprint, the library version, a 256-byte application block, the header's CRC-32), one
 * 128-byte entry per tensor (stable name, dtype, shape, offset, bytes, CRC-32 of the data),
 * then the tensors' data. Names are those of strata_parameter() (`layers.0.weight`), the
 * optimizer's slots as `<name>.momentum_buffer`, `<name>.exp_avg`, `<name>.exp_avg_sq`, and
 * the running statistics of devices other than 0 as `replicas.<d>.<name>`.
 */
#ifndef STRATA_CHECKPOINT_H
#define STRATA_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_CKPT_VERSION 1        /**< format version written */
#define STRATA_CKPT_LOSS_NAME 24     /**< bytes of a loss's name in a checkpoint */
#define STRATA_CKPT_APP_BYTES 256    /**< the application's own block (sampler position, ...) */
#define STRATA_CKPT_PATH_MAX 4096

/**
 * Where the default file implementation keeps an open checkpoint (the runtime owns one, so
 * nothing is allocated). Other implementations may use @c fd and @c user as they like.
 */
struct strata_ckpt_handle {
        int fd;
        void *user;
        char path[STRATA_CKPT_PATH_MAX]; /**< the target */
        char tmp[STRATA_CKPT_PATH_MAX];  /**< what is written until commit */
};

/** strata_load_weights() flags. */
#define STRATA_WEIGHTS_STRICT 0u  /**< every group present with its shape, no other tensor */
#define STRATA_WEIGHTS_PARTIAL 1u /**< load the tensors that fit, report the rest */

#define STRATA_WEIGHTS_LEFT 2048  /**< bytes of strata_weights_info's list of what was left */
#define STRATA_WEIGHTS_META 1024  /**< bytes of a metadata value it reports */

/** The most metadata pairs strata_export_safetensors_meta() writes. */
#define STRATA_EXPORT_META 8

/**
 * One pair of a safetensors file's "__metadata__" (strings). strata-train writes
 * "strata.model" (the model line) and "strata.transform" (the input transform), which
 * strata_load_weights() reports.
 */
struct strata_meta_entry {
        const char *key;   /**< under 256 bytes; not "format" or "producer" (the export's) */
        const char *value; /**< under STRATA_WEIGHTS_META bytes */
};

/** What strata_load_weights() found: what it loaded, and what it left and why. */
struct strata_weights_info {
        int loaded;      /**< groups loaded (parameters and running statistics) */
        int missing;     /**< groups of the model the file lacks (kept as they were) */
        int mismatched;  /**< tensors named as a group with another shape or an unread dtype */
        int unexpected;  /**< tensors the model has no group for (BatchNorm's
                              num_batches_tracked, which the model does not keep, excepted) */
        /** each tensor left, "name: file [16, 20] F32, model [24, 20]" ("none" for a side
         *  that lacks it), "; " between them, cut with "..." when it does not fit */
        char left[STRATA_WEIGHTS_LEFT];
        /** the file's metadata "strata.model": the model line that wrote it ("" none) */
        char model[STRATA_WEIGHTS_META];
        /** the file's metadata "strata.transform": the input transform ("" none) */
        char transform[STRATA_WEIGHTS_META];
};

/** What strata_load_checkpoint() found. */
struct strata_ckpt_info {
        uint64_t step;  /**< training steps the saving run had taken */
        int world;      /**< its devices */
        int strategy;   /**< its strategy (enum strata_strategy_kind) */
        int bitwise;    /**< 1: same devices and strategy, or invariant mode with the same
                             chunks on any devices: the run continues bit for bit; 0:
                             resharded (replicated state continues; running statistics of
                             devices it lacked come from device 0; not bitwise) */
        /**
         * the loss of the saving run's model (its ops table's name, "mse"...; "" for a file
         * from before it was recorded). A checkpoint of another loss loads (fine-tuning
         * with another loss is legitimate); compare it with yours to warn.
         */
        char loss[STRATA_CKPT_LOSS_NAME];
};

/** CheckpointIO: how checkpoint bytes reach storage. Every function returns a status. */
struct strata_checkpoint_io {
        const char *name;
        void *ctx; /**< passed to create, open and remove */
        /** Start writing @p path; nothing at @p path changes before commit. */
        int (*create)(void *ctx, const char *path, struct strata_ckpt_handle *h);
        /** Append @p n bytes. */
        int (*write)(struct strata_ckpt_handle *h, const void *buf, size_t n);
        /** Make the bytes durable and visible at the path at once; closes @p h. */
        int (*commit)(struct strata_ckpt_handle *h);
        /** Give up a checkpoint being written: the path keeps what it had; closes @p h. */
        void (*abort)(struct strata_ckpt_handle *h);
        /** Open @p path for reading; *size gets its length. */
        int (*open)(void *ctx, const char *path, struct strata_ckpt_handle *h, uint64_t *size);
        /** Read exactly @p n bytes at @p off (STRATA_EFORMAT when the file is shorter). */
        int (*read_at)(struct strata_ckpt_handle *h, void *buf, size_t n, uint64_t off);
        /** Close a handle opened for reading. */
        void (*close)(struct strata_ckpt_handle *h);
        /** Remove the checkpoint at @p path (keep-last-K rotation). */
        int (*remove)(void *ctx, const char *path);
};

/** @brief The default implementation: POSIX files, atomic and durable as described above. */
const struct strata_checkpoint_io *strata_checkpoint_file_io(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_CHECKPOINT_H */
