/* Writing small HDF5 files for tests (see h5files.h). */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/support/h5files.h"

/* The file type and the memory type of @p t. */
static void types(enum h5w_type t, hid_t *ft, hid_t *mt)
{
        static const hid_t *const file[] = {
                [H5W_F32] = &H5T_IEEE_F32LE_g, [H5W_F64BE] = &H5T_IEEE_F64BE_g,
                [H5W_F32Z] = &H5T_IEEE_F32LE_g, [H5W_I32] = &H5T_STD_I32LE_g,
                [H5W_I64] = &H5T_STD_I64LE_g, [H5W_F64] = &H5T_IEEE_F64LE_g,
        };

        H5open();
        if (t == H5W_STR) {
                *ft = H5Tcopy(H5T_C_S1);
                H5Tset_size(*ft, 4);
                *mt = H5Tcopy(*ft);
                return;
        }
        *ft = H5Tcopy(*file[t]);
        *mt = H5Tcopy(t == H5W_F32 || t == H5W_F32Z ? H5T_NATIVE_FLOAT :
                      t == H5W_I32 ? H5T_NATIVE_INT32 : t == H5W_I64 ? H5T_NATIVE_INT64 :
                      H5T_NATIVE_DOUBLE);
}

/* Chunked (a sample a chunk) and deflated for H5W_F32Z; otherwise the default layout. */
static hid_t create_plist(enum h5w_type t, int rank, const unsigned long long *dims)
{
        hid_t p = H5Pcreate(H5P_DATASET_CREATE);
        hsize_t chunk[H5S_MAX_RANK];

        if (t == H5W_F32Z) {
                chunk[0] = 1;
                for (int i = 1; i < rank; i++) {
                        chunk[i] = dims[i];
                }
                cr_assert_geq(H5Pset_chunk(p, rank, chunk), 0);
                cr_assert_geq(H5Pset_deflate(p, 6), 0);
        }
        return p;
}

void h5w_dataset(const char *file, const char *name, enum h5w_type type, int rank,
                 const unsigned long long *dims, const void *data)
{
        hsize_t d[H5S_MAX_RANK];
        hid_t f, s, ds, ft, mt, p, lp = H5Pcreate(H5P_LINK_CREATE);

        for (int i = 0; i < rank; i++) {
                d[i] = dims[i];
        }
        types(type, &ft, &mt);
        f = access(file, F_OK) == 0 ? H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT) :
                                      H5Fcreate(file, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
        cr_assert_geq(f, 0, "%s", file);
        s = rank ? H5Screate_simple(rank, d, NULL) : H5Screate(H5S_SCALAR);
        p = create_plist(type, rank, dims);
        H5Pset_create_intermediate_group(lp, 1);
        ds = H5Dcreate2(f, name, ft, s, lp, p, H5P_DEFAULT);
        cr_assert_geq(ds, 0, "%s: %s", file, name);
        if (data) {
                cr_assert_geq(H5Dwrite(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
        }
        H5Dclose(ds);
        H5Pclose(p);
        H5Pclose(lp);
        H5Sclose(s);
        H5Tclose(ft);
        H5Tclose(mt);
        cr_assert_geq(H5Fclose(f), 0);
}

void h5w_bytes(const char *path, const void *bytes, unsigned long n)
{
        FILE *f = fopen(path, "wb");

        cr_assert_not_null(f, "%s", path);
        cr_assert_eq(fwrite(bytes, 1, n, f), n);
        cr_assert_eq(fclose(f), 0);
}

void h5w_truncate(const char *path, unsigned long n)
{
        cr_assert_eq(truncate(path, (off_t)n), 0, "%s", path);
}
