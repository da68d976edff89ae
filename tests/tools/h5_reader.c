/*
 * strata-train's HDF5 reader on good files: shapes flattened per sample, f32 and f64 (any
 * byte order), chunked and deflated data, integer labels; the bytes it plans are the bytes
 * it takes; a held-out fraction and a second file for evaluation.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "strata/strata.h"
#include "tests/support/cli.h"
#include "tests/support/h5files.h"
#include "tools/train/h5.h"

static _Alignas(4096) unsigned char mem[1 << 16];
static char dir[64], path[128];

static const char *fixture(const char *name)
{
        cli_mkdtemp(dir, sizeof(dir), "h5");
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return path;
}

/* Query, then load into a fresh arena: the arena's use is what h5_bytes() planned, at most. */
static void query_load(struct h5_set *s, const char *file, const char *x, const char *t)
{
        struct strata_arena a;

        cr_assert_eq(h5_query(s, file, x, t), 0, "%s", h5_error());
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(h5_load(s, &a), 0, "%s", h5_error());
        cr_assert_leq(strata_arena_used(&a), h5_bytes(s));
}

Test(h5_reader, f32_regression)
{
        const char *f = fixture("f32.h5");
        unsigned long long dx[2] = { 10, 3 }, dt[2] = { 10, 2 };
        float x[30], t[20];
        struct h5_set s;

        for (int i = 0; i < 30; i++) {
                x[i] = (float)i * 0.5f - 3.0f;
        }
        for (int i = 0; i < 20; i++) {
                t[i] = (float)(i % 7);
        }
        h5w_dataset(f, "x", H5W_F32, 2, dx, x);
        h5w_dataset(f, "y", H5W_F32, 2, dt, t);
        query_load(&s, f, "x", "y");
        cr_assert_eq(s.x.n, 10);
        cr_assert_eq(s.x.width, 3);
        cr_assert_eq(s.x.type, STRATA_F32);
        cr_assert_eq(s.x.bytes, 120);
        cr_assert_eq(s.t.width, 2);
        cr_assert_eq(s.t.type, STRATA_F32);
        cr_assert_eq((uintptr_t)s.x.data % 64, 0);
        cr_assert_eq((uintptr_t)s.t.data % 64, 0);
        cr_assert_eq(memcmp(s.x.data, x, sizeof(x)), 0);
        cr_assert_eq(memcmp(s.t.data, t, sizeof(t)), 0);
        cli_rmtree(dir);
}

/* f64 in the file's byte order (big-endian here) lands as native doubles. */
Test(h5_reader, f64_any_byte_order)
{
        const char *f = fixture("f64.h5");
        unsigned long long dx[2] = { 4, 2 }, dt[1] = { 4 };
        double x[8] = { 1e-300, -2.5, 3, 4, 5, 6, 7, 1e30 }, t[4] = { 0.1, 0.2, 0.3, 0.4 };
        struct h5_set s;

        h5w_dataset(f, "in", H5W_F64BE, 2, dx, x);
        h5w_dataset(f, "out", H5W_F64, 1, dt, t);
        query_load(&s, f, "in", "out");
        cr_assert_eq(s.x.type, STRATA_F64);
        cr_assert_eq(s.t.type, STRATA_F64);
        cr_assert_eq(s.x.bytes, 64);
        cr_assert_eq(s.t.width, 1);
        cr_assert_eq(memcmp(s.x.data, x, sizeof(x)), 0);
        cr_assert_eq(memcmp(s.t.data, t, sizeof(t)), 0);
        cli_rmtree(dir);
}

/* Samples of shape 2 x 3 x 4 are 24 values each, in C order; chunked and deflated is the same. */
Test(h5_reader, samples_of_any_shape_flattened)
{
        const char *f = fixture("3d.h5");
        unsigned long long dx[4] = { 6, 2, 3, 4 }, dt[2] = { 6, 1 };
        static float x[6 * 24], t[6];
        struct h5_set s, z;

        for (int i = 0; i < 6 * 24; i++) {
                x[i] = (float)i;
        }
        h5w_dataset(f, "fields", H5W_F32, 4, dx, x);
        h5w_dataset(f, "packed", H5W_F32Z, 4, dx, x);
        h5w_dataset(f, "/sub/t", H5W_F32, 2, dt, t);
        query_load(&s, f, "fields", "/sub/t");
        cr_assert_eq(s.x.n, 6);
        cr_assert_eq(s.x.width, 24);
        cr_assert_eq(((const float *)s.x.data)[5 * 24 + 23], 143.0f);
        query_load(&z, f, "packed", "sub/t");
        cr_assert_eq(z.x.width, 24);
        cr_assert_eq(memcmp(z.x.data, x, sizeof(x)), 0);
        cli_rmtree(dir);
}

/* Integer targets (any integer type, shape (n) or (n, 1)) are int32 class labels. */
Test(h5_reader, integer_targets_are_labels)
{
        const char *f = fixture("cls.h5");
        unsigned long long dx[2] = { 5, 2 }, d1[1] = { 5 }, d2[2] = { 5, 1 };
        float x[10] = { 0 };
        int32_t y[5] = { 0, 3, 1, 2, 3 };
        int64_t y64[5] = { 4, 0, 7, 1, 1 };
        struct h5_set s;

        h5w_dataset(f, "x", H5W_F32, 2, dx, x);
        h5w_dataset(f, "y", H5W_I32, 1, d1, y);
        h5w_dataset(f, "y64", H5W_I64, 2, d2, y64);
        query_load(&s, f, "x", "y");
        cr_assert_eq(s.t.type, STRATA_I32);
        cr_assert_eq(s.t.width, 1);
        cr_assert_eq(s.t.max_label, 3);
        cr_assert_eq(memcmp(s.t.data, y, sizeof(y)), 0);
        query_load(&s, f, "x", "y64");
        cr_assert_eq(s.t.type, STRATA_I32);
        cr_assert_eq(s.t.bytes, 20);
        cr_assert_eq(s.t.max_label, 7);
        cr_assert_eq(((const int32_t *)s.t.data)[2], 7);
        cli_rmtree(dir);
}

/* The last floor(n * f) samples evaluate, without a copy; another file must match in shape. */
Test(h5_reader, held_out_fraction_and_second_file)
{
        const char *f = fixture("a.h5");
        char g[160];
        unsigned long long dx[2] = { 10, 3 }, dt[1] = { 10 }, dg[2] = { 10, 4 };
        float x[40] = { 0 }, t[10] = { 0 };
        int32_t labels[10] = { 0 };
        struct h5_set s, tr, ev, other;

        h5w_dataset(f, "x", H5W_F32, 2, dx, x);
        h5w_dataset(f, "y", H5W_F32, 1, dt, t);
        query_load(&s, f, "x", "y");
        cr_assert_eq(h5_split(&s, 0.25, &tr, &ev), 0, "%s", h5_error());
        cr_assert_eq(tr.x.n, 8);
        cr_assert_eq(ev.x.n, 2);
        cr_assert_eq(ev.t.n, 2);
        cr_assert_eq(ev.x.bytes, 24);
        cr_assert_eq((const float *)ev.x.data, (const float *)s.x.data + 24);
        cr_assert_eq((const float *)ev.t.data, (const float *)s.t.data + 8);
        cr_assert_eq(h5_split(&s, 0.05, &tr, &ev), 2);
        cr_assert_not_null(strstr(h5_error(), "no evaluation sample"), "%s", h5_error());
        cr_assert_eq(h5_split(&s, 1.0, &tr, &ev), 2);
        cr_assert_not_null(strstr(h5_error(), "no training sample"), "%s", h5_error());
        snprintf(g, sizeof(g), "%s/b.h5", dir);
        h5w_dataset(g, "x4", H5W_F32, 2, dg, x);
        h5w_dataset(g, "x3", H5W_F32, 2, dx, x);
        h5w_dataset(g, "labels", H5W_I32, 1, dt, labels);
        cr_assert_eq(h5_query(&other, g, "x4", "labels"), 0, "%s", h5_error());
        cr_assert_eq(h5_match(&s, &other), 2);
        cr_assert_not_null(strstr(h5_error(), "b.h5: dataset 'x4': has 4 values a sample"),
                           "%s", h5_error());
        cr_assert_eq(h5_query(&other, g, "x3", "labels"), 0, "%s", h5_error());
        cr_assert_eq(h5_match(&s, &other), 2);
        cr_assert_not_null(strstr(h5_error(), "holds integer labels"), "%s", h5_error());
        cr_assert_eq(h5_match(&s, &s), 0);
        cli_rmtree(dir);
}
