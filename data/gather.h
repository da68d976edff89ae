/*
 * Converting rows to float features (internal; data/gather.c, shared by the loader,
 * batch_to_device and the losses' checks): u8 image rows, and the application's f32 or f64
 * rows.
 */
#ifndef STRATA_DATA_GATHER_H
#define STRATA_DATA_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "strata/data.h"

/** dst[k] = src[k] * scale + shift for n bytes. */
void strata__bytes_to_float(const uint8_t *src, float *dst, float scale, float shift, uint32_t n);

/** Row r of dst = converted images row index[r], for @p rows rows of @p dim bytes. */
void strata__gather_rows(const uint8_t *images, const uint32_t *index, int rows, int dim,
                         float scale, float shift, float *dst);

/**
 * Row r of dst = row index[r] (row r when @p index is NULL) of @p src, @p dim values of
 * @p type (STRATA_F32 or STRATA_F64) a row, as f32 (f64 rounded to nearest).
 */
void strata__gather_values(const void *src, enum strata_dtype type, const uint32_t *index,
                           int rows, int dim, float *dst);

/**
 * Rows [lo, lo + rows) of batch @p b's inputs (b->dim values a row) as f32: the rows where
 * they lie when they are f32 and not indexed, else u8 image rows, indexed or f64 rows gathered
 * and converted into @p host (rows x dim floats), which is returned.
 */
const float *strata__batch_inputs(const struct strata_batch *b, int lo, int rows, float *host);

/** The same for @p b's float targets (b->tdim values a row). */
const float *strata__batch_targets(const struct strata_batch *b, int lo, int rows, float *host);

/** Value @p k of @p base, an array of @p type (STRATA_F32 or STRATA_F64), as a double. */
static inline double strata__value(const void *base, enum strata_dtype type, size_t k)
{
        return type == STRATA_F64 ? ((const double *)base)[k] : ((const float *)base)[k];
}

/** Element @p k of @p base, an array of @p type (STRATA_F32 or STRATA_F64). */
static inline const void *strata__values_at(const void *base, enum strata_dtype type, size_t k)
{
        return type == STRATA_F64 ? (const void *)((const double *)base + k)
                                  : (const void *)((const float *)base + k);
}

/** Where batch row @p i lies in its x and t: index[i] for an indexed arrays batch, else i. */
static inline size_t strata__batch_row(const struct strata_batch *b, int i)
{
        return b->index && !b->images ? b->index[i] : (size_t)i;
}

/** Non-zero when @p b's x and t are read in place (f32 rows, not indexed). */
static inline int strata__batch_in_place(const struct strata_batch *b, enum strata_dtype type)
{
        return type == STRATA_F32 && !b->index;
}

#endif /* STRATA_DATA_GATHER_H */
