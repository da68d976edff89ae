/*
 * strata-train's HDF5 reader (see h5.h). Every size is taken from the file's metadata and
 * checked before anything is allocated or read: the counts fit the loaders' 32-bit indices,
 * the bytes fit a size_t, and an unfiltered dataset's storage is all there, inside the file.
 * A read goes through a memory space of the queried size, so a file that changed in between
 * fails the read instead of overrunning the arena.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/train/h5.h"

#define ALIGN 64
#define MAX_CHUNK ((hsize_t)64 << 20) /* a larger chunk than the data itself is refused */

static char msg[768];

/*
 * The message "FILE: dataset 'NAME': what" (without a dataset: "FILE: what"); returns 2.
 * Kept for h5_error(), never printed: the reader is linked alone into the tests, which check
 * that it writes nothing; the tool prints the message with its bad().
 */
__attribute__((format(printf, 3, 4))) static int fail(const char *file, const char *name,
                                                      const char *fmt, ...)
{
        size_t k;
        va_list ap;

        if (name) {
                snprintf(msg, sizeof(msg), "%s: dataset '%s': ", file, name);
        } else {
                snprintf(msg, sizeof(msg), "%s: ", file);
        }
        k = strlen(msg);
        va_start(ap, fmt);
        vsnprintf(msg + k, sizeof(msg) - k, fmt, ap);
        va_end(ap);
        return 2;
}

/** @brief The message of the last failure. */
const char *h5_error(void)
{
        return msg;
}

/*
 * A readable regular file that HDF5 opens, or a negative id after the message. Opened without
 * blocking first: a FIFO's open would wait for a writer forever.
 */
static hid_t open_file(const char *file)
{
        struct stat st;
        hid_t f;
        int fd;

        H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the user sees Strata's message only */
        fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                return fail(file, NULL, "%s", strerror(errno)), -1;
        }
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return fail(file, NULL, "not a regular file (%s)",
                            S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                            : S_ISCHR(st.st_mode) ? "a character device" : "a special file"), -1;
        }
        close(fd);
        if (H5Fis_hdf5(file) <= 0) {
                return fail(file, NULL, "not an HDF5 file"), -1;
        }
        f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0) {
                fail(file, NULL, "a damaged or truncated HDF5 file");
        }
        return f;
}

/* The stored type: f32 or f64 floats, or integers (read as int32); @p size its bytes. */
static int describe_type(hid_t d, struct h5_array *a, size_t *size)
{
        hid_t t = H5Dget_type(d);
        H5T_class_t c = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);

        *size = t < 0 ? 0 : H5Tget_size(t);
        if (t >= 0) {
                H5Tclose(t);
        }
        if (c == H5T_FLOAT && (*size == 4 || *size == 8)) {
                a->type = *size == 4 ? STRATA_F32 : STRATA_F64;
                return 0;
        }
        if (c == H5T_INTEGER && *size > 0) {
                a->type = STRATA_I32;
                return 0;
        }
        if (c == H5T_FLOAT) {
                return fail(a->file, a->name, "holds %zu-byte floats; f32 or f64 are read",
                            *size);
        }
        return fail(a->file, a->name, "holds %s; f32 or f64 values (or integer labels) are "
                    "read", c == H5T_STRING ? "strings" : "values that are not numbers");
}

/* Samples and values a sample from the dataspace: the first dimension, the others' product. */
static int describe_shape(hid_t d, struct h5_array *a, hsize_t *values)
{
        hsize_t dims[H5S_MAX_RANK], w = 1;
        hid_t s = H5Dget_space(d);
        int nd = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);

        if (nd > 0 && H5Sget_simple_extent_dims(s, dims, NULL) != nd) {
                nd = -1;
        }
        if (s >= 0) {
                H5Sclose(s);
        }
        if (nd <= 0) {
                return fail(a->file, a->name, "is %s, not an array of samples",
                            nd == 0 ? "a scalar" : "unreadable");
        }
        for (int i = 1; i < nd; i++) {
                if (dims[i] && w > INT32_MAX / dims[i]) {
                        return fail(a->file, a->name, "has more than %d values a sample",
                                    INT32_MAX);
                }
                w *= dims[i];
        }
        if (dims[0] == 0 || w == 0) {
                return fail(a->file, a->name, "holds no values (its shape has a 0)");
        }
        if (dims[0] > INT32_MAX) {
                return fail(a->file, a->name, "has %llu samples; at most %d are read",
                            (unsigned long long)dims[0], INT32_MAX);
        }
        a->n = (uint32_t)dims[0];
        a->width = (uint32_t)w;
        a->rank = nd - 1;
        for (int i = 1; i < nd && i <= 4; i++)
                a->dims[i - 1] = (uint32_t)dims[i];
        *values = dims[0] * w;
        return 0;
}

/* A chunked dataset's chunk bytes (HDF5 holds a whole chunk in memory to read it), else 0. */
static hsize_t chunk_bytes(hid_t p, size_t size)
{
        hsize_t c[H5S_MAX_RANK], b = size;
        int nd = H5Pget_chunk(p, H5S_MAX_RANK, c);

        for (int i = 0; i < nd; i++) {
                if (c[i] && b > ((hsize_t)1 << 62) / c[i]) {
                        return (hsize_t)1 << 62;
                }
                b *= c[i];
        }
        return nd > 0 ? b : 0;
}

/*
 * The data must be in this file and all there: not virtual or external, some of it written,
 * no more than the file holds, and an unfiltered contiguous dataset's bytes exactly its
 * shape's, inside the file. Chunks are bounded so that reading one cannot exhaust memory.
 */
static int check_storage(hid_t f, hid_t d, const struct h5_array *a, hsize_t logical,
                         size_t size)
{
        hid_t p = H5Dget_create_plist(d);
        H5D_layout_t lay = p < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(p);
        int external = p < 0 ? 0 : H5Pget_external_count(p);
        hsize_t chunk = p < 0 ? 0 : chunk_bytes(p, size);
        hsize_t stored = H5Dget_storage_size(d), fsize = 0;
        haddr_t at = H5Dget_offset(d);

        if (p >= 0) {
                H5Pclose(p);
        }
        H5Fget_filesize(f, &fsize);
        if (lay == H5D_VIRTUAL || external > 0 || lay == H5D_LAYOUT_ERROR) {
                return fail(a->file, a->name, "keeps its data in other files; not read");
        }
        if (stored == 0) {
                return fail(a->file, a->name, "has no data written");
        }
        if (stored > fsize || (lay == H5D_CONTIGUOUS && at != HADDR_UNDEF &&
                                (at > fsize || stored > fsize - at))) {
                return fail(a->file, a->name, "claims %llu bytes beyond the file's %llu "
                            "(truncated?)", (unsigned long long)stored,
                            (unsigned long long)fsize);
        }
        if (lay == H5D_CONTIGUOUS && stored != logical) {
                return fail(a->file, a->name, "stores %llu bytes for a shape of %llu",
                            (unsigned long long)stored, (unsigned long long)logical);
        }
        if (chunk > logical && chunk > MAX_CHUNK) {
                return fail(a->file, a->name, "has chunks of %llu bytes, larger than its data",
                            (unsigned long long)chunk);
        }
        return 0;
}

/* The names of a file's datasets, as they are found, comma-separated. */
struct names {
        char s[384];
        size_t len;
        int n, cut;
};

static herr_t add_dataset(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
        struct names *v = data;
        hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
        int k;

        (void)info;
        if (d < 0) {
                return 0; /* a group or another object */
        }
        H5Dclose(d);
        k = snprintf(v->s + v->len, sizeof(v->s) - v->len, "%s'%s'", v->n ? ", " : "", name);
        if (k < 0 || (size_t)k >= sizeof(v->s) - v->len) {
                v->cut = 1;
                return 1; /* enough to name: stop */
        }
        v->len += (size_t)k;
        v->n++;
        return 0;
}

/* No dataset @p name in @p f: the message lists the datasets the file has. */
static int missing(hid_t f, const struct h5_array *a)
{
        struct names v = { .len = 0 };

        H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, add_dataset, &v);
        if (!v.n) {
                return fail(a->file, NULL, "no dataset '%s'; the file has no datasets", a->name);
        }
        return fail(a->file, NULL, "no dataset '%s'; its datasets are %s%s", a->name, v.s,
                    v.cut ? ", ..." : "");
}

/* One dataset's shape, type and bytes, from the metadata of open file @p f. */
static int describe(hid_t f, struct h5_array *a)
{
        hsize_t values = 0;
        size_t size = 0;
        hid_t d;
        int rc;

        if (H5Lexists(f, a->name, H5P_DEFAULT) <= 0) {
                return missing(f, a);
        }
        d = H5Dopen2(f, a->name, H5P_DEFAULT);
        if (d < 0) {
                return fail(a->file, a->name, "is not a dataset");
        }
        rc = describe_type(d, a, &size) || describe_shape(d, a, &values);
        if (!rc && (values > SIZE_MAX / 8 || size > SIZE_MAX / 8 / values)) {
                rc = fail(a->file, a->name, "has %llu values of %zu bytes: too many to read",
                          (unsigned long long)values, size);
        }
        if (!rc) {
                rc = check_storage(f, d, a, values * size, size);
        }
        H5Dclose(d);
        if (rc) {
                return 2;
        }
        a->bytes = (size_t)values * (a->type == STRATA_F64 ? 8 : 4);
        return 0;
}

/* What the two datasets must agree on: inputs are floats; the counts; one label a sample. */
static int check_pair(const struct h5_set *s)
{
        if (s->x.type == STRATA_I32) {
                return fail(s->x.file, s->x.name, "holds integers; inputs are read as f32 or "
                            "f64 floats");
        }
        if (s->x.n != s->t.n) {
                return fail(s->x.file, NULL, "dataset '%s' has %u samples, dataset '%s' %u",
                            s->x.name, s->x.n, s->t.name, s->t.n);
        }
        if (s->t.type == STRATA_I32 && s->t.width != 1) {
                return fail(s->t.file, s->t.name, "holds %u integers a sample; integer "
                            "targets are one class label a sample", s->t.width);
        }
        return 0;
}

/** @brief Describe datasets @p inputs and @p targets of @p file (h5.h). */
int h5_query(struct h5_set *s, const char *file, const char *inputs, const char *targets)
{
        hid_t f = open_file(file);
        int rc;

        if (f < 0) {
                return 2;
        }
        *s = (struct h5_set){ .x = { .file = file, .name = inputs },
                              .t = { .file = file, .name = targets } };
        rc = describe(f, &s->x) || describe(f, &s->t) || check_pair(s);
        H5Fclose(f);
        return rc ? 2 : 0;
}

/** @brief The arena bytes h5_load() takes for @p s, its alignment included. */
size_t h5_bytes(const struct h5_set *s)
{
        return s->x.bytes + s->t.bytes + 2 * ALIGN;
}

/* The first value that is not finite, or is beyond f32's range, as its index; else -1. */
static long bad_value(const struct h5_array *a)
{
        size_t count = (size_t)a->n * a->width;

        if (a->type == STRATA_F32) {
                const float *v = a->data;

                for (size_t i = 0; i < count; i++) {
                        if (!isfinite(v[i])) {
                                return (long)i;
                        }
                }
        } else {
                const double *v = a->data;

                for (size_t i = 0; i < count; i++) {
                        if (!(fabs(v[i]) <= FLT_MAX)) {
                                return (long)i;
                        }
                }
        }
        return -1;
}

/* Every value finite (f64: within f32's range, where it is converted). */
static int check_floats(const struct h5_array *a)
{
        long i = bad_value(a);
        double v;

        if (i < 0) {
                return 0;
        }
        v = a->type == STRATA_F32 ? ((const float *)a->data)[i] : ((const double *)a->data)[i];
        if (isfinite(v)) {
                return fail(a->file, a->name, "sample %lu holds %g, beyond f32's range "
                            "(value %lu of the sample)", (unsigned long)i / a->width, v,
                            (unsigned long)i % a->width);
        }
        return fail(a->file, a->name, "sample %lu holds %s (value %lu of the sample)",
                    (unsigned long)i / a->width, isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf",
                    (unsigned long)i % a->width);
}

/* Labels in [0, H5_MAX_LABEL); the highest kept. */
static int check_labels(struct h5_array *a)
{
        const int32_t *y = a->data;

        a->max_label = 0;
        for (uint32_t i = 0; i < a->n; i++) {
                if (y[i] < 0 || y[i] >= H5_MAX_LABEL) {
                        return fail(a->file, a->name, "sample %u has label %d; labels are in "
                                    "[0, %d)", i, y[i], H5_MAX_LABEL);
                }
                if (y[i] > a->max_label) {
                        a->max_label = y[i];
                }
        }
        return 0;
}

/* One dataset read into the arena through a memory space of its queried size, then checked. */
static int load_array(hid_t f, struct h5_array *a, struct strata_arena *arena)
{
        hid_t mt = a->type == STRATA_F32 ? H5T_NATIVE_FLOAT :
                   a->type == STRATA_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT32;
        hsize_t count = (hsize_t)a->n * a->width;
        hid_t d = H5Dopen2(f, a->name, H5P_DEFAULT), ms = H5Screate_simple(1, &count, NULL);
        void *p = NULL;
        herr_t rc = -1;
        int room = strata_arena_alloc(arena, a->bytes, ALIGN, &p) == 0;

        if (room && d >= 0 && ms >= 0) {
                rc = H5Dread(d, mt, ms, H5S_ALL, H5P_DEFAULT, p);
        }
        if (ms >= 0) {
                H5Sclose(ms);
        }
        if (d >= 0) {
                H5Dclose(d);
        }
        if (!room) {
                return fail(a->file, a->name, "%llu bytes do not fit the arena",
                            (unsigned long long)a->bytes);
        }
        if (rc < 0) {
                return fail(a->file, a->name, "cannot be read (damaged, or changed since it "
                            "was opened)");
        }
        a->data = p;
        return a->type == STRATA_I32 ? check_labels(a) : check_floats(a);
}

/** @brief Read a queried set into @p arena and check its values (h5.h). */
int h5_load(struct h5_set *s, struct strata_arena *arena)
{
        hid_t f = open_file(s->x.file);
        int rc;

        if (f < 0) {
                return 2;
        }
        rc = load_array(f, &s->x, arena) || load_array(f, &s->t, arena);
        H5Fclose(f);
        return rc ? 2 : 0;
}

/** @brief An evaluation set must have the training set's widths and kind of targets. */
int h5_match(const struct h5_set *train, const struct h5_set *eval)
{
        const char *kind[2] = { "float targets", "integer labels" };
        int tl = train->t.type == STRATA_I32, el = eval->t.type == STRATA_I32;

        if (eval->x.width != train->x.width) {
                return fail(eval->x.file, eval->x.name, "has %u values a sample; %s's has %u",
                            eval->x.width, train->x.file, train->x.width);
        }
        if (tl != el) {
                return fail(eval->t.file, eval->t.name, "holds %s; %s's holds %s", kind[el],
                            train->t.file, kind[tl]);
        }
        if (eval->t.width != train->t.width) {
                return fail(eval->t.file, eval->t.name, "has %u values a sample; %s's has %u",
                            eval->t.width, train->t.file, train->t.width);
        }
        return 0;
}

/* Rows [from, from + n) of @p a. */
static struct h5_array rows(const struct h5_array *a, uint32_t from, uint32_t n)
{
        struct h5_array r = *a;
        size_t size = a->type == STRATA_F64 ? 8 : 4;

        r.n = n;
        r.bytes = (size_t)n * a->width * size;
        r.data = (const char *)a->data + (size_t)from * a->width * size;
        return r;
}

/** @brief Split a loaded set: its last floor(n * fraction) samples evaluate (h5.h). */
int h5_split(const struct h5_set *all, double fraction, struct h5_set *train,
             struct h5_set *eval)
{
        double k = floor((double)all->x.n * fraction);
        uint32_t m;

        if (!(k >= 1.0) || k >= (double)all->x.n) {
                return fail(all->x.file, NULL, "--val-fraction %g of %u samples leaves %s",
                            fraction, all->x.n, k < 1.0 ? "no evaluation sample" :
                            "no training sample");
        }
        m = (uint32_t)k;
        train->x = rows(&all->x, 0, all->x.n - m);
        train->t = rows(&all->t, 0, all->x.n - m);
        eval->x = rows(&all->x, all->x.n - m, m);
        eval->t = rows(&all->t, all->x.n - m, m);
        return 0;
}
