/* Writing small HDF5 files for tests, with the HDF5 C API. */
#ifndef STRATA_TESTS_H5FILES_H
#define STRATA_TESTS_H5FILES_H

/* How a dataset is stored. */
enum h5w_type {
        H5W_F32,        /* f32, contiguous */
        H5W_F64BE,      /* f64 big-endian, contiguous (read back as native doubles) */
        H5W_F32Z,       /* f32, chunked and deflated */
        H5W_I32,        /* int32 */
        H5W_I64,        /* int64 */
        H5W_STR,        /* 4-byte strings */
        H5W_F64,        /* f64, native order */
};

/**
 * Add dataset @p name of @p rank dimensions @p dims (rank 0: a scalar) to @p file, created if
 * it does not exist; @p data holds the values in the type's own C form (a double for H5W_F64BE,
 * char[4] for H5W_STR), or NULL to leave the dataset never written. Fails the test on error.
 */
void h5w_dataset(const char *file, const char *name, enum h5w_type type, int rank,
                 const unsigned long long *dims, const void *data);

/** Write @p n bytes to @p path (a plain file). */
void h5w_bytes(const char *path, const void *bytes, unsigned long n);

/** Keep the first @p n bytes of @p path. */
void h5w_truncate(const char *path, unsigned long n);

#endif
