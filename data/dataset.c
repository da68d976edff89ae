/*
 * Data sets: IDX image and label files checked against each other and loaded into an arena,
 * the application's own arrays (described, checked, never copied), or synthetic sets drawn
 * from Philox (contract in include/strata/data.h).
 */
#include <math.h>
#include <stdint.h>

#include "strata/data.h"
#include "strata/status.h"
#include "base/base.h"
#include "data/gather.h"
#include "data/idx.h"
#include "kernel/philox.h"

/*
 * The two files of a data set agree: 3-D images whose rows x columns fit a model's input
 * width (an int: 2^31 - 1; their 32-bit product wrapped silently before), 1-D labels, one
 * label per image.
 */
static int dataset_shape(const char *images, const struct strata_idx_info *a,
                         const char *labels, const struct strata_idx_info *b, uint32_t *dim)
{
        uint64_t d;

        if (a->ndims != 3)
                return strata__fail(STRATA_EFORMAT, "%s: images must be 3-D, got %d-D", images,
                                    a->ndims);
        if (b->ndims != 1)
                return strata__fail(STRATA_EFORMAT, "%s: labels must be 1-D, got %d-D", labels,
                                    b->ndims);
        if (a->dims[0] != b->dims[0])
                return strata__fail(STRATA_EFORMAT, "%s has %u images but %s has %u labels",
                                    images, a->dims[0], labels, b->dims[0]);
        d = (uint64_t)a->dims[1] * a->dims[2];
        if (d > INT32_MAX)
                return strata__fail(STRATA_EFORMAT, "%s: images of %u x %u pixels are too "
                                    "large (at most 2^31 - 1 features)", images, a->dims[1],
                                    a->dims[2]);
        *dim = (uint32_t)d;
        return STRATA_OK;
}

int strata_dataset_bytes(const char *images, const char *labels, size_t *bytes)
{
        struct strata_idx_info a, b;
        uint32_t dim;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "dataset bytes: NULL argument");
        STRATA_TRY(strata_idx_info(images, &a));
        STRATA_TRY(strata_idx_info(labels, &b));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim));
        STRATA_TRY(strata__idx_fits(images, &a));
        STRATA_TRY(strata__idx_fits(labels, &b));
        *bytes = STRATA__ALIGN_UP(a.bytes, 64) + STRATA__ALIGN_UP(b.bytes, 64);
        return STRATA_OK;
}

int strata_dataset_load(struct strata_dataset *ds, struct strata_arena *arena,
                        const char *images, const char *labels)
{
        struct strata_idx_info a, b;
        const uint8_t *x, *y;
        uint32_t dim;
        int maxl = 0;

        if (!ds || !arena || !images || !labels)
                return strata__fail(STRATA_EINVAL, "dataset load: NULL argument");
        STRATA_TRY(strata_idx_info(images, &a));
        STRATA_TRY(strata_idx_info(labels, &b));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim)); /* before any payload */
        STRATA_TRY(strata_idx_load(images, arena, &a, &x));
        STRATA_TRY(strata_idx_load(labels, arena, &b, &y));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim)); /* the files may have changed */
        for (uint32_t i = 0; i < b.dims[0]; i++)
                maxl = y[i] > maxl ? y[i] : maxl;
        *ds = (struct strata_dataset){ .images = x, .labels = y, .n = a.dims[0], .dim = dim,
                                       .classes = maxl + 1 };
        return STRATA_OK;
}

int strata_dataset_synthetic(struct strata_dataset *ds, struct strata_arena *arena, uint32_t n,
                             uint32_t dim, int classes, uint64_t seed)
{
        uint8_t *x, *y;
        void *p;
        size_t bytes;

        if (!ds || !arena)
                return strata__fail(STRATA_EINVAL, "synthetic dataset: NULL %s",
                                    !ds ? "dataset" : "arena");
        if (n == 0 || dim == 0)
                return strata__fail(STRATA_EINVAL, "synthetic dataset: %u samples of %u features: "
                                    "both must be at least 1", n, dim);
        if (classes < 2 || classes > 256)
                return strata__fail(STRATA_EINVAL, "synthetic dataset: %d classes; a label is one "
                                    "byte, so 2..256 classes", classes);
        if (strata__mul_size(n, dim, &bytes))
                return strata__fail(STRATA_EOVERFLOW, "synthetic dataset: size overflows");
        STRATA_TRY(strata_arena_alloc(arena, bytes, 64, &p));
        x = p;
        STRATA_TRY(strata_arena_alloc(arena, n, 64, &p));
        y = p;
        for (uint32_t i = 0; i < n; i++) {
                /* The label picks a band of features that is brighter: learnable, not trivial. */
                int label = (int)(strata__uniform_at(seed, 1, i) * (float)classes);
                uint32_t band = dim / (uint32_t)classes;

                y[i] = (uint8_t)label;
                for (uint32_t k = 0; k < dim; k++) {
                        float u = strata__uniform_at(seed, 2 + (uint64_t)i, k);
                        int hot = band && k / band == (uint32_t)label;

                        x[(size_t)i * dim + k] = (uint8_t)(u * (hot ? 255.0f : 160.0f));
                }
        }
        *ds = (struct strata_dataset){ .images = x, .labels = y, .n = n, .dim = dim,
                                       .classes = classes };
        return STRATA_OK;
}

/* Every value of an n x width array of @p type is finite; the message names the array. */
static int check_finite(const char *what, const void *a, enum strata_dtype type, uint32_t n,
                        int width)
{
        for (uint32_t i = 0; i < n; i++)
                for (int j = 0; j < width; j++) {
                        double v = strata__value(a, type, (size_t)i * (size_t)width + j);

                        if (!isfinite(v))
                                return strata__fail(STRATA_EINVAL, "arrays data set: %s row "
                                                    "%u, column %d is %g", what, i, j, v);
                }
        return STRATA_OK;
}

/* int32 labels: none negative; *classes = the highest + 1. */
static int check_labels(const int32_t *y, uint32_t n, int *classes)
{
        int32_t hi = 0;

        for (uint32_t i = 0; i < n; i++) {
                if (y[i] < 0)
                        return strata__fail(STRATA_EINVAL, "arrays data set: label of row %u "
                                            "is %d (negative)", i, y[i]);
                hi = y[i] > hi ? y[i] : hi;
        }
        *classes = hi + 1;
        return STRATA_OK;
}

static int float_type(enum strata_dtype t)
{
        return t == STRATA_F32 || t == STRATA_F64;
}

int strata_dataset_arrays(struct strata_dataset *ds, const void *x, enum strata_dtype xtype,
                          uint32_t n, uint32_t dim, const void *targets,
                          enum strata_dtype ttype, int tdim)
{
        int labels = ttype == STRATA_I32, classes = 0;

        if (!ds || !x || !targets || n == 0 || dim == 0 || dim > INT32_MAX || tdim <= 0)
                return strata__fail(STRATA_EINVAL, "arrays data set: NULL array or zero size "
                                    "(n %u, dim %u, tdim %d)", n, dim, tdim);
        if (!float_type(xtype) || !(float_type(ttype) || labels) || (labels && tdim != 1))
                return strata__fail(STRATA_EINVAL, "arrays data set: inputs f32 or f64, "
                                    "targets f32, f64 or i32 labels (tdim 1); got types %d, "
                                    "%d, tdim %d", (int)xtype, (int)ttype, tdim);
        STRATA_TRY(check_finite("inputs", x, xtype, n, (int)dim));
        if (labels)
                STRATA_TRY(check_labels(targets, n, &classes));
        else
                STRATA_TRY(check_finite("targets", targets, ttype, n, tdim));
        *ds = (struct strata_dataset){ .n = n, .dim = dim, .classes = classes, .x = x,
                                       .xtype = xtype, .t = labels ? NULL : targets,
                                       .ttype = labels ? STRATA_F32 : ttype,
                                       .tdim = labels ? 0 : tdim,
                                       .y = labels ? targets : NULL };
        return STRATA_OK;
}

/* Row i of the synthetic regression: x uniform in [-1, 1), t = tanh(xW) + 0.1 sin(3 xW). */
static void regression_row(const float *w, uint64_t seed, uint32_t i, uint32_t dim, int tdim,
                           float *x, float *t)
{
        for (uint32_t k = 0; k < dim; k++)
                x[k] = 2.0f * strata__uniform_at(seed, 2 + (uint64_t)i, k) - 1.0f;
        for (int j = 0; j < tdim; j++) {
                double z = 0.0;

                for (uint32_t k = 0; k < dim; k++)
                        z += (double)x[k] * w[(size_t)k * tdim + j];
                t[j] = (float)(tanh(z) + 0.1 * sin(3.0 * z));
        }
}

int strata_dataset_synthetic_regression(struct strata_dataset *ds, struct strata_arena *arena,
                                        uint32_t n, uint32_t dim, int tdim, uint64_t seed)
{
        size_t nx, nt, nw;
        void *px, *pt, *pw;
        float *w;

        if (!ds || !arena || n == 0 || dim == 0 || dim > INT32_MAX || tdim <= 0)
                return strata__fail(STRATA_EINVAL, "synthetic regression: bad argument");
        if (strata__mul_size(n, dim, &nx) || strata__mul_size(n, (size_t)tdim, &nt) ||
            strata__mul_size(dim, (size_t)tdim, &nw) || nx > SIZE_MAX / sizeof(float) ||
            nt > SIZE_MAX / sizeof(float) || nw > SIZE_MAX / sizeof(float))
                return strata__fail(STRATA_EOVERFLOW, "synthetic regression: size overflows");
        STRATA_TRY(strata_arena_alloc(arena, nx * sizeof(float), 64, &px));
        STRATA_TRY(strata_arena_alloc(arena, nt * sizeof(float), 64, &pt));
        STRATA_TRY(strata_arena_alloc(arena, nw * sizeof(float), 64, &pw));
        w = pw;
        /* W scaled so that x W has unit variance: the targets use tanh's curved range. */
        for (size_t k = 0; k < nw; k++)
                w[k] = (2.0f * strata__uniform_at(seed, 1, k) - 1.0f) * sqrtf(3.0f / (float)dim);
        for (uint32_t i = 0; i < n; i++)
                regression_row(w, seed, i, dim, tdim, (float *)px + (size_t)i * dim,
                               (float *)pt + (size_t)i * tdim);
        return strata_dataset_arrays(ds, px, STRATA_F32, n, dim, pt, STRATA_F32, tdim);
}
