/*
 * Data: IDX files (MNIST format), plain or gzip, read into arena memory; a sampler with
 * PyTorch DistributedSampler semantics; batches assembled into a preallocated staging buffer.
 *
 * Nothing here allocates from the heap: zlib's state comes from a scratch arena on the stack,
 * files are read with read(2) in fixed chunks.
 */
#ifndef STRATA_DATA_H
#define STRATA_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "strata/arena.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Header of an IDX file. Only unsigned-byte data (type 0x08) is accepted. */
struct strata_idx_info {
        int ndims;         /**< 1..4 */
        uint32_t dims[4];  /**< extents */
        size_t bytes;      /**< product of dims: the payload size */
};

/**
 * @brief Read and validate an IDX header (a .gz file is inflated as far as the header).
 * @retval STRATA_OK, STRATA_EINVAL (NULL), STRATA_EIO (cannot open/read: message has the
 *         path and errno), STRATA_EFORMAT (bad magic, type, dims, or a corrupt gzip stream).
 */
int strata_idx_info(const char *path, struct strata_idx_info *info);

/**
 * @brief Load an IDX file's payload into @p arena.
 * @param path  The file (.gz is inflated with zlib).
 * @param arena Where the payload goes (info->bytes bytes, 64-byte aligned).
 * @param info  Filled with the header.
 * @param data  Receives the payload address.
 * @retval STRATA_OK, STRATA_EIO, STRATA_EFORMAT (also for a truncated file or trailing data),
 *         STRATA_ENOMEM (arena too small). On failure *data is untouched; the arena may have
 *         advanced.
 */
int strata_idx_load(const char *path, struct strata_arena *arena, struct strata_idx_info *info,
                    const uint8_t **data);

/** A labelled image set: n samples of dim bytes, labels in [0, classes). */
struct strata_dataset {
        const uint8_t *images; /**< n * dim bytes */
        const uint8_t *labels; /**< n bytes */
        uint32_t n;
        uint32_t dim;
        int classes;
};

/**
 * @brief Bytes a dataset pair needs in an arena (for planning), read from the two headers.
 * @retval As strata_idx_info(), plus STRATA_EFORMAT when the counts differ.
 */
int strata_dataset_bytes(const char *images, const char *labels, size_t *bytes);

/**
 * @brief Load an images/labels IDX pair; checks that counts match and labels are < 10 classes
 *        (classes = highest label + 1).
 * @retval As strata_idx_load(); STRATA_EFORMAT when counts differ or an image file is not 3-D.
 */
int strata_dataset_load(struct strata_dataset *ds, struct strata_arena *arena,
                        const char *images, const char *labels);

/**
 * @brief Fill a dataset with a deterministic synthetic problem of the same shape (for
 *        benchmarks): n samples of dim bytes, labels from a fixed random linear rule.
 */
int strata_dataset_synthetic(struct strata_dataset *ds, struct strata_arena *arena, uint32_t n,
                             uint32_t dim, int classes, uint64_t seed);

/** PyTorch DistributedSampler: which sample indices a rank visits in an epoch. */
struct strata_sampler {
        uint32_t n;         /**< dataset size */
        int world, rank;    /**< replicas and this one's index */
        int shuffle;        /**< permute per epoch */
        int drop_last;      /**< drop the tail instead of padding by wrap-around */
        uint64_t seed;
        uint32_t per_rank;  /**< samples this rank visits per epoch */
        uint32_t *indices;  /**< per_rank indices (arena) */
        uint32_t *perm;     /**< scratch: the full permutation (arena) */
};

/**
 * @brief Prepare a sampler; its buffers come from @p arena.
 * @retval STRATA_OK, STRATA_EINVAL (n == 0, rank out of [0, world)), STRATA_ENOMEM.
 */
int strata_sampler_init(struct strata_sampler *s, struct strata_arena *arena, uint32_t n,
                        int world, int rank, int shuffle, int drop_last, uint64_t seed);

/** @brief Compute this rank's indices for @p epoch (permutation from seed + epoch). */
void strata_sampler_set_epoch(struct strata_sampler *s, uint64_t epoch);

/**
 * A batch: int32 labels and either rows of float features (@c x), or the rows' indices into a
 * u8 image set (@c images, @c index) that each device gathers and converts itself
 * (feature = byte * scale + shift) when the batch reaches it.
 */
struct strata_batch {
        const float *x;         /**< rows * dim floats, or NULL with images/index */
        const int32_t *y;       /**< rows labels */
        int rows;
        int dim;
        const uint8_t *images;  /**< u8 rows of dim bytes */
        const uint32_t *index;  /**< rows indices into images */
        uint32_t nimages;       /**< images in @c images: every index must be below it */
        float scale, shift;     /**< conversion of bytes to features */
};

/** Assembles batches from a dataset and a list of indices into a staging buffer. */
struct strata_loader {
        const struct strata_dataset *ds;
        const uint32_t *indices;
        uint32_t count;   /**< indices available */
        uint32_t pos;     /**< next index */
        int batch;        /**< rows per batch */
        int drop_last;    /**< skip the last partial batch */
        float scale;      /**< x = byte * scale + shift (default 1/255, 0) */
        float shift;
        float *x;         /**< staging: batch * dim floats (arena) */
        int32_t *y;       /**< staging labels (arena) */
};

/**
 * @brief Prepare a loader with staging for @p batch rows, taken from @p arena.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM.
 */
int strata_loader_init(struct strata_loader *l, struct strata_arena *arena,
                       const struct strata_dataset *ds, int batch, int drop_last);

/**
 * @brief Standardise features: x = (byte / 255 - mean) / std, with the mean and standard
 *        deviation of all pixels of @p stats (usually the training set).
 */
void strata_loader_standardize(struct strata_loader *l, const struct strata_dataset *stats);

/**
 * @brief Start over with a new index list (e.g. a sampler's indices for the next epoch).
 * @retval STRATA_OK; STRATA_EINVAL (NULL loader, NULL indices with a count, or an index not
 *         below the data set's size: the message names it; the loader then has no batch).
 */
int strata_loader_reset(struct strata_loader *l, const uint32_t *indices, uint32_t count);

/**
 * @brief Assemble the next batch.
 * @return 1 and a filled @p b when a batch was produced, 0 at the end of the epoch (or for a
 *         NULL argument).
 */
int strata_loader_next(struct strata_loader *l, struct strata_batch *b);

/**
 * @brief The next batch as indices into the image set: only labels are assembled here; each
 *        device gathers and converts its own rows (parallel batch_to_device).
 * @return 1 and a filled @p b, 0 at the end of the epoch.
 */
int strata_loader_next_indexed(struct strata_loader *l, struct strata_batch *b);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DATA_H */
