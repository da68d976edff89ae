/*
 * strata-train's HDF5 reader refuses every bad file with one message naming the file and the
 * dataset (and for a bad value the sample), never a crash, and prints nothing of HDF5's own.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"
#include "tests/support/cli.h"
#include "tests/support/h5files.h"
#include "tools/train/h5.h"

static _Alignas(4096) unsigned char mem[1 << 16];
static char dir[64], path[128];
static unsigned long long d10x3[2] = { 10, 3 }, d10[1] = { 10 }, d9[1] = { 9 };
static float x[30], t[10];
static int32_t labels[10];

/* dir/good.h5: x (10 x 3 f32), y (10 f32), and the other datasets a test adds. */
static const char *good_file(void)
{
        cli_mkdtemp(dir, sizeof(dir), "h5bad");
        snprintf(path, sizeof(path), "%s/good.h5", dir);
        h5w_dataset(path, "x", H5W_F32, 2, d10x3, x);
        h5w_dataset(path, "y", H5W_F32, 1, d10, t);
        return path;
}

/* Query (and, if that passes, load) fails with a message holding each of @p needles. */
static void refused(const char *file, const char *xs, const char *ts, const char *n1,
                    const char *n2)
{
        struct strata_arena a;
        struct h5_set s;
        int rc = h5_query(&s, file, xs, ts);

        if (rc == 0) {
                cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
                rc = h5_load(&s, &a);
        }
        cr_assert_eq(rc, 2, "%s %s %s: accepted", file, xs, ts);
        cr_assert_not_null(strstr(h5_error(), n1), "%s", h5_error());
        cr_assert_not_null(strstr(h5_error(), n2), "%s", h5_error());
        cr_assert_null(strchr(h5_error(), '\n'), "one line: %s", h5_error());
}

Test(h5_reader_refuses, missing_dataset_and_not_a_dataset)
{
        const char *f = good_file();
        unsigned long long d[2] = { 10, 1 };

        refused(f, "x", "targets", "good.h5: no dataset 'targets'", "");
        refused(f, "nope/x", "y", "no dataset 'nope/x'", "");
        refused(f, "", "y", "no dataset ''", "");
        h5w_dataset(f, "grp/z", H5W_F32, 2, d, t);
        refused(f, "grp", "y", "good.h5: dataset 'grp': is not a dataset", "");
        cli_rmtree(dir);
}

Test(h5_reader_refuses, sample_counts_differ)
{
        const char *f = good_file();

        h5w_dataset(f, "short", H5W_F32, 1, d9, t);
        refused(f, "x", "short", "good.h5: dataset 'x' has 10 samples, dataset 'short' 9", "");
        cli_rmtree(dir);
}

/* The first NaN or infinity is named by its sample; f64 beyond f32's range too. */
Test(h5_reader_refuses, nan_and_inf_name_the_sample)
{
        const char *f = good_file();
        float xn[30] = { 0 }, ti[10] = { 0 };
        double big[10] = { 0 };

        xn[3 * 4 + 2] = NAN;
        xn[3 * 7] = NAN;
        ti[6] = -INFINITY;
        big[8] = 1e300;
        h5w_dataset(f, "xn", H5W_F32, 2, d10x3, xn);
        h5w_dataset(f, "ti", H5W_F32, 1, d10, ti);
        h5w_dataset(f, "big", H5W_F64, 1, d10, big);
        refused(f, "xn", "y", "good.h5: dataset 'xn': sample 4 holds NaN", "value 2");
        refused(f, "x", "ti", "dataset 'ti': sample 6 holds -inf", "");
        refused(f, "x", "big", "dataset 'big': sample 8 holds 1e+300, beyond f32's range", "");
        cli_rmtree(dir);
}

Test(h5_reader_refuses, bad_labels_and_types)
{
        const char *f = good_file();
        unsigned long long d2[2] = { 10, 2 };
        int32_t neg[10] = { 0 }, two[20] = { 0 };
        int64_t huge[10] = { 0 };
        char str[10][4] = { "abc" };

        neg[5] = -1;
        huge[9] = 1LL << 40;
        h5w_dataset(f, "neg", H5W_I32, 1, d10, neg);
        h5w_dataset(f, "huge", H5W_I64, 1, d10, huge);
        h5w_dataset(f, "two", H5W_I32, 2, d2, two);
        h5w_dataset(f, "ints", H5W_I32, 1, d10, labels);
        h5w_dataset(f, "str", H5W_STR, 1, d10, str);
        refused(f, "x", "neg", "dataset 'neg': sample 5 has label -1", "");
        refused(f, "x", "huge", "dataset 'huge': sample 9 has label", "[0, 16777216)");
        refused(f, "x", "two", "dataset 'two': holds 2 integers a sample", "");
        refused(f, "ints", "y", "dataset 'ints': holds integers; inputs are read as f32", "");
        refused(f, "x", "str", "dataset 'str': holds strings", "");
        cli_rmtree(dir);
}

Test(h5_reader_refuses, empty_scalar_and_unwritten)
{
        const char *f = good_file();
        unsigned long long d0[2] = { 0, 3 }, dz[2] = { 10, 0 };
        float one = 1.0f;

        h5w_dataset(f, "none", H5W_F32, 2, d0, NULL);
        h5w_dataset(f, "zero", H5W_F32, 2, dz, NULL);
        h5w_dataset(f, "scalar", H5W_F32, 0, NULL, &one);
        h5w_dataset(f, "unwritten", H5W_F32, 2, d10x3, NULL);
        h5w_dataset(f, "unwritten_z", H5W_F32Z, 2, d10x3, NULL);
        refused(f, "none", "y", "dataset 'none': holds no values", "");
        refused(f, "zero", "y", "dataset 'zero': holds no values", "");
        refused(f, "scalar", "y", "dataset 'scalar': is a scalar", "");
        refused(f, "unwritten", "y", "dataset 'unwritten': has no data written", "");
        refused(f, "unwritten_z", "y", "dataset 'unwritten_z': has no data written", "");
        cli_rmtree(dir);
}

/* A file cut short, garbage after HDF5's signature, a text file, a directory, no file. */
Test(h5_reader_refuses, damaged_and_foreign_files)
{
        const char *f = good_file();
        static const char sig[] = "\x89HDF\r\n\x1a\n";
        char garbage[4096], other[160];
        long size;
        FILE *fp = fopen(f, "rb");

        cr_assert_not_null(fp);
        fseek(fp, 0, SEEK_END);
        size = ftell(fp);
        fclose(fp);
        h5w_truncate(f, (unsigned long)size - 60);
        refused(f, "x", "y", "good.h5: a damaged or truncated HDF5 file", "");
        h5w_truncate(f, 100);
        refused(f, "x", "y", "good.h5: a damaged or truncated HDF5 file", "");
        for (size_t i = 0; i < sizeof(garbage); i++) {
                garbage[i] = (char)(i * 131 + 7);
        }
        memcpy(garbage, sig, 8);
        snprintf(other, sizeof(other), "%s/garbage.h5", dir);
        h5w_bytes(other, garbage, sizeof(garbage));
        refused(other, "x", "y", "garbage.h5: a damaged or truncated HDF5 file", "");
        snprintf(other, sizeof(other), "%s/notes.txt", dir);
        h5w_bytes(other, "x,y\n1,2\n", 8);
        refused(other, "x", "y", "notes.txt: not an HDF5 file", "");
        refused(dir, "x", "y", dir, "not a regular file");
        refused("/nonexistent/f.h5", "x", "y", "/nonexistent/f.h5: No such file", "");
        cli_rmtree(dir);
}

/* HDF5's own error stack is never printed: stderr stays empty through a refusal. */
Test(h5_reader_refuses, hdf5_prints_nothing)
{
        const char *f = good_file();
        char log[160], buf[256];
        int saved = dup(2), fd;
        struct h5_set s;
        ssize_t got;

        snprintf(log, sizeof(log), "%s/stderr", dir);
        fd = open(log, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        cr_assert_geq(fd, 0);
        fflush(stderr);
        dup2(fd, 2);
        cr_assert_eq(h5_query(&s, f, "x", "missing/deep/name"), 2);
        cr_assert_eq(h5_query(&s, f, "grp", "y"), 2);
        h5w_truncate(f, 100);
        cr_assert_eq(h5_query(&s, f, "x", "y"), 2);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        fd = open(log, O_RDONLY);
        got = read(fd, buf, sizeof(buf) - 1);
        buf[got > 0 ? got : 0] = 0;
        close(fd);
        cr_assert_str_empty(buf, "HDF5 printed: %s", buf);
        cli_rmtree(dir);
}
