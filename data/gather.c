/*
 * The row gathers (data/gather.h): u8 image rows, and the application's f32 or f64 rows,
 * direct or through an index, converted to f32 where a device reads them; and a batch's rows
 * for one device, taken where they lie when they are f32 already.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "strata/data.h"
#include "arch/simd.h"
#include "data/gather.h"

void strata__gather_rows(const uint8_t *images, const uint32_t *index, int rows, int dim,
                         float scale, float shift, float *dst)
{
        /* The rows are scattered over the data set: ask for all their lines first, so the
         * cache misses overlap instead of being taken one row at a time. */
        for (int r = 0; r < rows; r++)
                for (int k = 0; k < dim; k += 64)
                        __builtin_prefetch(images + (size_t)index[r] * (size_t)dim + k, 0, 0);
        for (int r = 0; r < rows; r++)
                strata__bytes_to_float(images + (size_t)index[r] * (size_t)dim,
                                       dst + (size_t)r * (size_t)dim, scale, shift,
                                       (uint32_t)dim);
}

STRATA_SIMD static void f64_to_float(const double *restrict src, float *restrict dst,
                                     uint32_t n)
{
        for (uint32_t k = 0; k < n; k++)
                dst[k] = (float)src[k];
}

void strata__gather_values(const void *src, enum strata_dtype type, const uint32_t *index,
                           int rows, int dim, float *dst)
{
        for (int r = 0; r < rows; r++) {
                size_t row = index ? index[r] : (size_t)r, at = row * (size_t)dim;
                float *d = dst + (size_t)r * (size_t)dim;

                if (type == STRATA_F64)
                        f64_to_float((const double *)src + at, d, (uint32_t)dim);
                else
                        memcpy(d, (const float *)src + at, sizeof(float) * (size_t)dim);
        }
}

STRATA_SIMD void strata__bytes_to_float(const uint8_t *restrict src, float *restrict dst,
                                        float scale, float shift, uint32_t n)
{
        for (uint32_t k = 0; k < n; k++)
                dst[k] = (float)src[k] * scale + shift;
}

/*
 * Rows [lo, lo + rows) of @p base (@p width values of @p type a row; indexed through
 * b->index when the batch has one) converted to f32 into @p host.
 */
static void gather(const struct strata_batch *b, const void *base, enum strata_dtype type,
                   int width, int lo, int rows, float *host)
{
        size_t skip = b->index ? 0 : (size_t)lo * (size_t)width;

        strata__gather_values(strata__values_at(base, type, skip), type,
                              b->index ? b->index + lo : NULL, rows, width, host);
}

const float *strata__batch_inputs(const struct strata_batch *b, int lo, int rows, float *host)
{
        if (b->images)
                strata__gather_rows(b->images, b->index + lo, rows, b->dim, b->scale, b->shift,
                                    host);
        else if (strata__batch_in_place(b, b->xtype))
                return (const float *)b->x + (size_t)lo * b->dim;
        else
                gather(b, b->x, b->xtype, b->dim, lo, rows, host);
        return host;
}

const float *strata__batch_targets(const struct strata_batch *b, int lo, int rows, float *host)
{
        if (strata__batch_in_place(b, b->ttype))
                return (const float *)b->t + (size_t)lo * b->tdim;
        gather(b, b->t, b->ttype, b->tdim, lo, rows, host);
        return host;
}
