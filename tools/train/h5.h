/*
 * strata-train's HDF5 reader: two named datasets of one file, the inputs and the targets, the
 * first dimension of each the sample and the others flattened into the sample's values.
 * h5_query() describes them from the file's metadata (samples, values a sample, type, bytes)
 * so that the tool sizes its arena before anything is read; h5_load() then reads them into
 * that arena and checks every value. Only the tool links HDF5 (docs/decisions/0021): the
 * library is handed plain arrays.
 *
 * HDF5's own error printing is switched off; every failure leaves one message naming the file
 * and the dataset (h5_error()) and returns 2, the tool's exit status for bad input.
 */
#ifndef STRATA_TOOLS_TRAIN_H5_H
#define STRATA_TOOLS_TRAIN_H5_H

#include <stddef.h>
#include <stdint.h>

#include "strata/arena.h"
#include "strata/tensor.h"

/* Labels are below this: a larger one is refused (the model would need as many outputs). */
#define H5_MAX_LABEL (1 << 24)

/* One dataset of a file. */
struct h5_array {
        const char *file;
        const char *name;
        uint32_t n;                /* samples: the first dimension */
        uint32_t width;            /* values a sample: the product of the other dimensions */
        int rank;                  /* the other dimensions: a sample's (C, D, H, W) */
        uint32_t dims[4];          /* their extents, when rank <= 4 */
        enum strata_dtype type;    /* STRATA_F32 or STRATA_F64 as stored; STRATA_I32: the file's
                                      integers, read as int32 labels */
        size_t bytes;              /* n * width values of type */
        const void *data;          /* set by h5_load(): in the arena */
        int32_t max_label;         /* set by h5_load() for labels: the highest */
};

/* The inputs (f32 or f64) and targets (f32 or f64 values, or one integer label a sample). */
struct h5_set {
        struct h5_array x;
        struct h5_array t;
};

/**
 * @brief Describe datasets @p inputs and @p targets of @p file into @p s, from the metadata
 *        only: both must exist with as many samples each, the inputs floats, the targets
 *        floats or one integer a sample, stored in full within the file.
 * @return 0, or 2 with the message in h5_error().
 */
int h5_query(struct h5_set *s, const char *file, const char *inputs, const char *targets);

/** @brief The arena bytes h5_load() takes for @p s, its alignment included. */
size_t h5_bytes(const struct h5_set *s);

/**
 * @brief Read a queried set into @p arena (64-byte aligned arrays) and check its values: a
 *        NaN or an infinity, an f64 value beyond f32's range, a negative label or one not
 *        below H5_MAX_LABEL is refused with the sample's index.
 * @return 0, or 2 with the message in h5_error().
 */
int h5_load(struct h5_set *s, struct strata_arena *arena);

/**
 * @brief An evaluation set from another file must have the training set's values a sample
 *        and the same kind of targets.
 * @return 0, or 2 with the message in h5_error().
 */
int h5_match(const struct h5_set *train, const struct h5_set *eval);

/**
 * @brief Split a set: the last floor(n * @p fraction) samples evaluate, the others train
 *        (no copy: both point into @p all). Both parts must keep a sample.
 * @return 0, or 2 with the message in h5_error().
 */
int h5_split(const struct h5_set *all, double fraction, struct h5_set *train,
             struct h5_set *eval);

/** @brief The message of the last failure. */
const char *h5_error(void);

#endif
