/*
 * The batch loader: u8 rows converted to float features (scaled, or standardised with the
 * data set's mean and deviation) into buffers carved at init, or handed on as indices for
 * each device to gather its own rows (contract in include/strata/data.h; the gathers are
 * data/gather.c's).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/data.h"
#include "strata/status.h"
#include "base/base.h"
#include "data/gather.h"

int strata_loader_init(struct strata_loader *l, struct strata_arena *arena,
                       const struct strata_dataset *ds, int batch, int drop_last)
{
        void *x, *y, *t = NULL;
        size_t fl;

        if (!l || !arena || !ds || batch <= 0)
                return strata__fail(STRATA_EINVAL, "loader: bad argument (batch %d)", batch);
        if (strata__mul_size((size_t)batch, ds->dim, &fl) ||
            strata__mul_size(fl, sizeof(float), &fl))
                return strata__fail(STRATA_EOVERFLOW, "loader: batch %d too large", batch);
        STRATA_TRY(strata_arena_alloc(arena, fl, 0, &x));
        STRATA_TRY(strata_arena_alloc(arena, (size_t)batch * sizeof(int32_t), 0, &y));
        if (ds->t && (size_t)ds->tdim > SIZE_MAX / sizeof(float) / (size_t)batch)
                return strata__fail(STRATA_EOVERFLOW, "loader: batch %d too large", batch);
        if (ds->t)
                STRATA_TRY(strata_arena_alloc(arena, (size_t)batch * ds->tdim * sizeof(float), 0,
                                              &t));
        *l = (struct strata_loader){ .ds = ds, .batch = batch, .drop_last = drop_last,
                                     .scale = 1.0f / 255.0f, .x = x, .y = y, .t = t };
        return STRATA_OK;
}

/* The index list of a reset to no indices: set, so that the loader is not "never reset". */
static const uint32_t no_indices[1];

int strata_loader_reset(struct strata_loader *l, const uint32_t *indices, uint32_t count)
{
        if (!l || !l->ds || (count && !indices))
                return strata__fail(STRATA_EINVAL, "loader reset: %s",
                                    !l ? "NULL loader" : !l->ds ? "the loader was never "
                                    "initialised (strata_loader_init)" : "NULL indices");
        for (uint32_t i = 0; i < count; i++)
                if (indices[i] >= l->ds->n)
                        return strata__fail(STRATA_EINVAL, "loader reset: index %u (entry %u) "
                                            "is not below the %u samples", indices[i], i,
                                            l->ds->n);
        l->indices = count ? indices : no_indices;
        l->count = count;
        l->pos = 0;
        return STRATA_OK;
}

void strata_loader_standardize(struct strata_loader *l, const struct strata_dataset *stats)
{
        /* Pixels are bytes: count them per value (four tables, so that equal neighbours do
         * not wait on one counter), then the sums are exact integers in double. */
        uint64_t h[4][256] = { { 0 } };
        size_t n = (size_t)stats->n * stats->dim, i = 0;
        const uint8_t *px = stats->images;
        double s = 0.0, s2 = 0.0, mean, sd;

        for (; i + 4 <= n; i += 4) {
                h[0][px[i]]++;
                h[1][px[i + 1]]++;
                h[2][px[i + 2]]++;
                h[3][px[i + 3]]++;
        }
        for (; i < n; i++)
                h[0][px[i]]++;
        for (int v = 0; v < 256; v++) {
                double c = (double)(h[0][v] + h[1][v] + h[2][v] + h[3][v]);

                s += c * v;
                s2 += c * v * v;
        }
        mean = n ? s / (double)n : 0.0;
        sd = n ? sqrt(s2 / (double)n - mean * mean) : 0.0;
        if (!(sd > 0.0))
                sd = 1.0;
        l->scale = (float)(1.0 / sd);
        l->shift = (float)(-mean / sd);
}

/* Labels of the next @p rows rows into the staging: an arrays set's int32, or image bytes. */
static const int32_t *next_labels(struct strata_loader *l, uint32_t rows)
{
        const uint32_t *idx = l->indices + l->pos;

        if (l->ds->x && !l->ds->y)
                return NULL;
        for (uint32_t r = 0; r < rows; r++)
                l->y[r] = l->ds->y ? l->ds->y[idx[r]] : l->ds->labels[idx[r]];
        return l->y;
}

/* An arrays set's next @p rows rows, inputs and targets converted to f32 into the staging. */
static void next_arrays(struct strata_loader *l, uint32_t rows, struct strata_batch *b)
{
        const struct strata_dataset *ds = l->ds;
        const uint32_t *idx = l->indices + l->pos;

        strata__gather_values(ds->x, ds->xtype, idx, (int)rows, (int)ds->dim, l->x);
        if (ds->t)
                strata__gather_values(ds->t, ds->ttype, idx, (int)rows, ds->tdim, l->t);
        *b = (struct strata_batch){ .x = l->x, .y = next_labels(l, rows), .rows = (int)rows,
                                    .dim = (int)ds->dim, .t = ds->t ? l->t : NULL,
                                    .tdim = ds->tdim };
        l->pos += rows;
}

/*
 * Whether @p l can give a batch into @p b: 1, 0 at the end of its epoch, or a negative status
 * for a NULL argument or a loader never initialised or never reset (*b emptied, so that a
 * step given it refuses it).
 */
static int ready(const struct strata_loader *l, struct strata_batch *b)
{
        const char *why = !l || !b ? "NULL loader or batch" : !l->ds ? "the loader was never "
                          "initialised (strata_loader_init)" : !l->indices ? "the loader was "
                          "never reset: strata_loader_reset() gives it the epoch's indices (a "
                          "sampler's)" : NULL;

        if (b && why)
                *b = (struct strata_batch){ .rows = 0 };
        if (why)
                return strata__fail(!l || !b ? STRATA_EINVAL : STRATA_EBADSTATE, "loader: %s",
                                    why);
        return l->pos < l->count && !(l->drop_last && l->count - l->pos < (uint32_t)l->batch);
}

int strata_loader_next(struct strata_loader *l, struct strata_batch *b)
{
        uint32_t left, rows, dim;
        int rc = ready(l, b);

        if (rc <= 0)
                return rc;
        left = l->count - l->pos;
        dim = l->ds->dim;
        rows = left < (uint32_t)l->batch ? left : (uint32_t)l->batch;
        if (l->ds->x) {
                next_arrays(l, rows, b);
                return 1;
        }
        for (uint32_t r = 0; r < rows; r++) {
                uint32_t idx = l->indices[l->pos + r];
                strata__bytes_to_float(l->ds->images + (size_t)idx * dim,
                                       l->x + (size_t)r * dim, l->scale, l->shift, dim);
                l->y[r] = l->ds->labels[idx];
        }
        l->pos += rows;
        *b = (struct strata_batch){ .x = l->x, .y = l->y, .rows = (int)rows, .dim = (int)dim };
        return 1;
}

int strata_loader_next_indexed(struct strata_loader *l, struct strata_batch *b)
{
        uint32_t left, rows;
        int rc = ready(l, b);

        if (rc <= 0)
                return rc;
        left = l->count - l->pos;
        rows = left < (uint32_t)l->batch ? left : (uint32_t)l->batch;
        *b = (struct strata_batch){ .y = next_labels(l, rows), .rows = (int)rows,
                                    .dim = (int)l->ds->dim, .images = l->ds->images,
                                    .index = l->indices + l->pos, .nimages = l->ds->n,
                                    .scale = l->scale, .shift = l->shift,
                                    .x = l->ds->x, .xtype = l->ds->xtype,
                                    .t = l->ds->t,
                                    .ttype = l->ds->ttype, .tdim = l->ds->tdim };
        l->pos += rows;
        return 1;
}
