/* Tensor descriptors: shape, strides, dtype and device over memory carved from an arena. */
#ifndef STRATA_TENSOR_H
#define STRATA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types. bf16 and f16 are storage types, accumulated in f32 where reduced. */
enum strata_dtype {
        STRATA_F32 = 0,
        STRATA_F64,
        STRATA_BF16,
        STRATA_F16,
        STRATA_I32,
        STRATA_I64,
        STRATA_U8,
        STRATA_DTYPE_COUNT
};

/** Highest rank a tensor descriptor holds. */
#define STRATA_MAX_RANK 4

/** A view of memory; it owns nothing (no reference counting, no heap). */
struct strata_tensor {
        void *data;                      /**< first element */
        enum strata_dtype dtype;         /**< element type */
        int rank;                        /**< 0..STRATA_MAX_RANK */
        int device;                      /**< device index the memory belongs to */
        int64_t shape[STRATA_MAX_RANK];  /**< extents */
        int64_t stride[STRATA_MAX_RANK]; /**< in elements */
};

/**
 * @brief Bytes of one element of @p dtype.
 * @return The size, or 0 for an unknown dtype.
 */
size_t strata_dtype_size(enum strata_dtype dtype);

/**
 * @brief Describe a contiguous row-major tensor.
 * @param t      Filled on success; untouched on failure.
 * @param data   Its memory (may be NULL only if a dimension is 0).
 * @param dtype  Element type.
 * @param rank   0..STRATA_MAX_RANK.
 * @param shape  @p rank extents, each >= 0.
 * @param device Device index.
 * @retval STRATA_OK, STRATA_EINVAL (bad rank, dtype, negative extent, NULL data),
 *         STRATA_EOVERFLOW (element count overflows).
 */
int strata_tensor_init(struct strata_tensor *t, void *data, enum strata_dtype dtype, int rank,
                       const int64_t *shape, int device);

/** @brief Number of elements (product of the shape; 1 for rank 0). */
int64_t strata_tensor_numel(const struct strata_tensor *t);

/** @brief Non-zero when the strides are those of a contiguous row-major layout. */
int strata_tensor_is_contiguous(const struct strata_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_TENSOR_H */
