/*
 * A cut IDX file is called truncated, whatever was cut: a gzip file cut inside its deflate
 * stream, a plain file whose header claims more data than the file holds (found from the
 * header alone, before anything is sized from it), and a gzip file whose header claims more
 * than it holds (read through by strata__idx_check_payload); synthetic data sets name the
 * argument that is wrong.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "data/idx.h"
#include "strata/strata.h"
#include "tests/support/idxfiles.h"

static unsigned char buf[1 << 16], gz[1 << 17];

/* @p n bytes of @p src gzip-compressed into gz (random-looking data: it does not shrink). */
static size_t deflate_gz(const unsigned char *src, size_t n)
{
        z_stream z = { 0 };

        cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
                     Z_OK);
        z.next_in = (unsigned char *)src;
        z.avail_in = (uInt)n;
        z.next_out = gz;
        z.avail_out = sizeof(gz);
        cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
        deflateEnd(&z);
        return z.total_out;
}

Test(idx_truncated, gzip_cut_inside_its_deflate_stream)
{
        uint32_t dims[1] = { 40000 };
        size_t n = test_idx(buf, 1, dims, 131, 7), z = deflate_gz(buf, n);
        const char *path = test_write(test_tmpdir(), "cut.gz", gz, z / 2, 0);
        struct strata_idx_info info;

        cr_assert_eq(strata_idx_info(path, &info), STRATA_OK, "the header is intact: %s",
                     strata_last_error());
        cr_assert_eq(strata__idx_check_payload(path), STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "truncated"), "%s", strata_last_error());
        cr_assert_null(strstr(strata_last_error(), "corrupt gzip"), "%s", strata_last_error());
}

Test(idx_truncated, plain_header_claiming_more_than_the_file)
{
        uint32_t dims[3] = { 1000000, 28, 28 }; /* 784 MB claimed, 100 rows present */
        size_t n = test_idx(buf, 3, (uint32_t[3]){ 10, 28, 28 }, 1, 0);
        static _Alignas(64) unsigned char mem[1 << 16];
        struct strata_idx_info info;
        struct strata_arena a;
        const char *path, *labels;
        const uint8_t *d;

        buf[4] = (unsigned char)(dims[0] >> 24);
        buf[5] = (unsigned char)(dims[0] >> 16);
        buf[6] = (unsigned char)(dims[0] >> 8);
        buf[7] = (unsigned char)dims[0];
        path = test_write(test_tmpdir(), "claims", buf, n, 0);
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_idx_info(path, &info), STRATA_OK, "the header alone is valid");
        labels = test_write(test_tmpdir(), "labels",
                            (unsigned char[8]){ 0, 0, 8, 1, 0, 0x0f, 0x42, 0x40 }, 8, 0);
        cr_assert_eq(strata_dataset_bytes(path, labels, &n), STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "truncated: its header claims 784000000 "
                                                       "bytes of data"),
                           "%s", strata_last_error());
        cr_assert_eq(strata_idx_load(path, &a, &info, &d), STRATA_EFORMAT, "before any memory "
                     "is taken from the arena");
        cr_assert_not_null(strstr(strata_last_error(), "truncated: its header claims"), "%s",
                           strata_last_error());
}

Test(idx_truncated, gzip_header_claiming_more_is_read_through)
{
        size_t n = test_idx(buf, 1, (uint32_t[1]){ 1000 }, 1, 0);
        const char *path;

        buf[4] = 0;
        buf[5] = 0;
        buf[6] = 0x27; /* 10000 claimed, 1000 present */
        buf[7] = 0x10;
        path = test_write(test_tmpdir(), "claims.gz", buf, n, 1);
        cr_assert_eq(strata__idx_check_payload(path), STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "truncated"), "%s", strata_last_error());
        n = test_idx(buf, 1, (uint32_t[1]){ 1000 }, 1, 0);
        cr_assert_eq(strata__idx_check_payload(test_write(test_tmpdir(), "ok.gz", buf, n, 1)),
                     STRATA_OK, "%s", strata_last_error());
}

Test(idx_truncated, synthetic_names_the_wrong_argument)
{
        static _Alignas(64) unsigned char mem[1 << 16];
        struct strata_dataset ds;
        struct strata_arena a;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&ds, &a, 10, 8, 300, 1), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "300 classes"), "%s", strata_last_error());
        cr_assert_eq(strata_dataset_synthetic(&ds, &a, 0, 8, 4, 1), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "0 samples"), "%s", strata_last_error());
        cr_assert_eq(strata_dataset_synthetic(NULL, &a, 10, 8, 4, 1), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "NULL dataset"), "%s", strata_last_error());
}
