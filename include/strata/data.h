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
#include "strata/tensor.h"

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

/**
 * A data set: a labelled u8 image set (n samples of dim bytes, labels in [0, classes)), or the
 * application's own arrays (strata_dataset_arrays(): x with float targets t or int32 labels
 * y), which are never copied: batches index them and each device converts its rows.
 */
struct strata_dataset {
        const uint8_t *images; /**< n * dim bytes (NULL for arrays) */
        const uint8_t *labels; /**< n bytes (NULL for arrays) */
        uint32_t n;
        uint32_t dim;
        int classes;           /**< labels: highest + 1; float targets: 0 */
        const void *x;         /**< arrays: n * dim values of xtype, row-major, or NULL */
        enum strata_dtype xtype; /**< STRATA_F32 or STRATA_F64 */
        const void *t;         /**< arrays: n * tdim float targets of ttype, or NULL */
        enum strata_dtype ttype; /**< STRATA_F32 or STRATA_F64 */
        int tdim;              /**< values per target row (0 with labels) */
        const int32_t *y;      /**< arrays: n int32 labels, or NULL */
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

/**
 * @brief Describe the application's arrays as a data set, without copying them: @p n rows
 *        of @p dim inputs of @p xtype (STRATA_F32 or STRATA_F64, row-major: a Fortran
 *        x(dim, n) is the same memory) and targets: @p tdim float values a row of @p ttype
 *        (STRATA_F32 or STRATA_F64), or with @p ttype STRATA_I32 one int32 label a row
 *        (@p tdim 1; classes = highest label + 1). Every value is checked once here: a NaN
 *        or infinity in x or the targets, or a negative label, is refused with a message
 *        naming the array, row and column. The arrays must outlive the data set.
 * @retval STRATA_OK, STRATA_EINVAL (NULL, zero sizes, bad types or values; *ds untouched).
 */
int strata_dataset_arrays(struct strata_dataset *ds, const void *x, enum strata_dtype xtype,
                          uint32_t n, uint32_t dim, const void *targets,
                          enum strata_dtype ttype, int tdim);

/**
 * @brief A deterministic synthetic regression set in @p arena (for tests and benchmarks):
 *        n rows of dim f32 inputs uniform in [-1, 1) and tdim f32 targets
 *        t = tanh(x W) + 0.1 sin(3 x W) for a fixed random W (dim x tdim) from @p seed.
 * @retval STRATA_OK, STRATA_EINVAL (zero sizes), STRATA_ENOMEM (arena too small).
 */
int strata_dataset_synthetic_regression(struct strata_dataset *ds, struct strata_arena *arena,
                                        uint32_t n, uint32_t dim, int tdim, uint64_t seed);

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
 * A batch: targets — int32 labels (@c y, classification) or float targets (@c t, tdim values
 * a row) — and inputs: rows of @c dim values (@c x, f32 or f64), or the rows' indices into a
 * u8 image set (@c images, @c index) that each device gathers and converts itself
 * (feature = byte * scale + shift) when the batch reaches it.
 *
 * With @c index and no @c images, @c x and @c t are whole sets of @c nimages rows (an
 * in-memory data set, strata_loader_next_indexed()) and row r of the batch is row index[r]
 * of them; @c y still holds the batch's own rows labels. f64 values are converted to f32
 * where each device takes its rows. A zero-initialised batch with x and y set is today's.
 */
struct strata_batch {
        const void *x;          /**< rows * dim values of xtype (f32 or f64), or NULL with
                                     images; with index and no images, the whole set's
                                     nimages rows */
        const int32_t *y;       /**< rows labels, or NULL with float targets */
        int rows;
        int dim;
        const uint8_t *images;  /**< u8 rows of dim bytes */
        const uint32_t *index;  /**< rows indices into images (or into x and t) */
        uint32_t nimages;       /**< rows in @c images (or x and t): every index is below it */
        float scale, shift;     /**< conversion of bytes to features */
        enum strata_dtype xtype; /**< type of x's values: STRATA_F32 (0, the default) or
                                      STRATA_F64 (converted to f32 where each device takes
                                      its rows) */
        const void *t;          /**< float targets: rows * tdim values of ttype, row-major, or
                                     NULL when the batch carries labels (y) */
        enum strata_dtype ttype; /**< STRATA_F32 (default) or STRATA_F64 */
        int tdim;               /**< values per target row: the model's outputs */
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
        float *t;         /**< staging float targets: batch * tdim (arrays with targets) */
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
 * @brief Start over with a new index list (e.g. a sampler's indices for the next epoch). A
 *        loader gives no batch before its first reset.
 * @retval STRATA_OK; STRATA_EINVAL (NULL loader, a loader never initialised, NULL indices
 *         with a count, or an index not below the data set's size: the message names it; the
 *         loader is left as it was).
 */
int strata_loader_reset(struct strata_loader *l, const uint32_t *indices, uint32_t count);

/**
 * @brief Assemble the next batch (an arrays set: its rows converted to f32 into the staging,
 *        inputs and targets). Loop with `while ((rc = strata_loader_next(&l, &b)) > 0)`.
 * @return 1 and a filled @p b when a batch was produced; 0 at the end of the epoch; a
 *         negative status with its message: STRATA_EINVAL (NULL argument), STRATA_EBADSTATE
 *         (a loader never initialised, or never reset: it has no epoch). On an error *b is
 *         emptied (0 rows), so that a step given it refuses it.
 */
int strata_loader_next(struct strata_loader *l, struct strata_batch *b);

/**
 * @brief The next batch as indices into the image set (or an arrays set's x and t): only
 *        labels are assembled here; each device gathers and converts its own rows (parallel
 *        batch_to_device).
 * @return As strata_loader_next().
 */
int strata_loader_next_indexed(struct strata_loader *l, struct strata_batch *b);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_DATA_H */
