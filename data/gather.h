/* Converting u8 rows to float features (internal; shared by the loader and batch_to_device). */
#ifndef STRATA_DATA_GATHER_H
#define STRATA_DATA_GATHER_H

#include <stddef.h>
#include <stdint.h>

/** dst[k] = src[k] * scale + shift for n bytes. */
void strata__bytes_to_float(const uint8_t *src, float *dst, float scale, float shift, uint32_t n);

/** Row r of dst = converted images row index[r], for @p rows rows of @p dim bytes. */
void strata__gather_rows(const uint8_t *images, const uint32_t *index, int rows, int dim,
                         float scale, float shift, float *dst);

#endif /* STRATA_DATA_GATHER_H */
