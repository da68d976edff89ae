/* IDX files, plain and gzip: valid files load; every malformed one is refused with a reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/strata.h"
#include "tests/support/idxfiles.h"

static unsigned char buf[4096];
static _Alignas(4096) unsigned char mem[1 << 16];

static int load(const char *path, const uint8_t **data, struct strata_idx_info *info)
{
        struct strata_arena a;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        return strata_idx_load(path, &a, info, data);
}

Test(idx_reader, plain_and_gzip_load_identically)
{
        const char *dir = test_tmpdir();
        uint32_t dims[3] = { 4, 3, 5 };
        size_t n = test_idx(buf, 3, dims, 7, 1);
        struct strata_idx_info a, b;
        const uint8_t *da, *db;

        cr_assert_eq(load(test_write(dir, "x", buf, n, 0), &da, &a), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(a.ndims, 3);
        cr_assert_eq(a.bytes, 60);
        cr_assert_eq(da[59], (uint8_t)(59 * 7 + 1));
        cr_assert_eq(strata_idx_info(test_write(dir, "x.gz", buf, n, 1), &b), STRATA_OK);
        cr_assert_eq(b.dims[2], 5);
        cr_assert_eq(load(test_write(dir, "y.gz", buf, n, 1), &db, &b), STRATA_OK);
        cr_assert_eq(memcmp(da, db, 60), 0);
}

static void refused(const void *bytes, size_t n, int gz, int want, const char *needle)
{
        const char *dir = test_tmpdir();
        struct strata_idx_info info = { .ndims = -7 };
        const uint8_t *d = (const uint8_t *)0x1;

        cr_assert_eq(load(test_write(dir, "bad", bytes, n, gz), &d, &info), want, "%s",
                     strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), needle), "%s", strata_last_error());
        cr_assert_eq(d, (const uint8_t *)0x1, "output written on failure");
        cr_assert_eq(info.ndims, -7, "info written on failure");
}

Test(idx_reader, truncated_payload)
{
        uint32_t dims[1] = { 100 };
        size_t n = test_idx(buf, 1, dims, 1, 0);

        refused(buf, n - 10, 0, STRATA_EFORMAT, "truncated");
        refused(buf, n - 10, 1, STRATA_EFORMAT, "truncated");
}

Test(idx_reader, trailing_data)
{
        uint32_t dims[1] = { 10 };
        size_t n = test_idx(buf, 1, dims, 1, 0);

        refused(buf, n + 3, 0, STRATA_EFORMAT, "trailing");
}

Test(idx_reader, bad_magic_type_dims)
{
        uint32_t dims[1] = { 10 };
        size_t n = test_idx(buf, 1, dims, 1, 0);

        buf[0] = 1;
        refused(buf, n, 0, STRATA_EFORMAT, "magic");
        buf[0] = 0;
        buf[2] = 0x0d;
        refused(buf, n, 0, STRATA_EFORMAT, "type");
        buf[2] = 0x08;
        buf[3] = 9;
        refused(buf, n, 0, STRATA_EFORMAT, "dimensions");
        buf[3] = 1;
        memset(buf + 4, 0, 4);
        refused(buf, n, 0, STRATA_EFORMAT, "is 0");
        refused(buf, 3, 0, STRATA_EFORMAT, "shorter");
}

Test(idx_reader, corrupt_gzip)
{
        uint32_t dims[1] = { 200 };
        size_t n = test_idx(buf, 1, dims, 3, 0);
        const char *dir = test_tmpdir();
        const char *p = test_write(dir, "c.gz", buf, n, 1);
        unsigned char gz[4096];
        FILE *f = fopen(p, "rb");
        size_t len = fread(gz, 1, sizeof(gz), f);

        fclose(f);
        for (size_t i = 12; i < len - 8; i++)
                gz[i] ^= 0x5a;
        refused(gz, len, 0, STRATA_EFORMAT, "gzip");
}

Test(idx_reader, missing_file_and_null_args)
{
        struct strata_idx_info info;
        const uint8_t *d;

        cr_assert_eq(load("/nonexistent/strata/file", &d, &info), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "/nonexistent/strata/file"));
        cr_assert_eq(strata_idx_info(NULL, &info), STRATA_EINVAL);
        cr_assert_eq(strata_idx_info("/x", NULL), STRATA_EINVAL);
}

Test(idx_reader, dataset_count_mismatch)
{
        const char *dir = test_tmpdir();
        uint32_t di[3] = { 5, 2, 2 }, dl[1] = { 4 };
        unsigned char lb[64];
        char pi[512], pl[512];
        struct strata_dataset ds;
        struct strata_arena a;
        size_t bytes;

        strcpy(pi, test_write(dir, "i", buf, test_idx(buf, 3, di, 1, 0), 0));
        strcpy(pl, test_write(dir, "l", lb, test_idx(lb, 1, dl, 1, 0), 0));
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_load(&ds, &a, pi, pl), STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "5 images but"), "%s", strata_last_error());
        cr_assert_eq(strata_dataset_bytes(pi, pl, &bytes), STRATA_EFORMAT);
}

/* A file of several gzip members (what `cat a.gz b.gz` or pigz writes) loads whole. */
Test(idx_reader, multi_member_gzip_loads_whole)
{
        const char *dir = test_tmpdir();
        uint32_t dims[2] = { 50, 20 };
        size_t n = test_idx(buf, 2, dims, 3, 2);
        char a[512], b[512], cmd[4096], whole[600];
        struct strata_idx_info info;
        const uint8_t *d;
        static unsigned char copy[4096];

        memcpy(copy, buf, n);
        snprintf(a, sizeof(a), "%s", test_write(dir, "part1.gz", copy, 300, 1));
        snprintf(b, sizeof(b), "%s", test_write(dir, "part2.gz", copy + 300, n - 300, 1));
        snprintf(whole, sizeof(whole), "%s/whole.gz", dir);
        snprintf(cmd, sizeof(cmd), "cat %s %s > %s && gzip -t %s", a, b, whole, whole);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        cr_assert_eq(load(whole, &d, &info), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(info.bytes, 1000);
        cr_assert_eq(memcmp(d, copy + (n - 1000), 1000), 0);
}

/* A FIFO is refused at once (opening it must not wait for a writer); so is a directory. */
Test(idx_reader, fifo_and_directory_refused_without_blocking, .timeout = 10)
{
        const char *dir = test_tmpdir();
        struct strata_idx_info info;
        const uint8_t *d;
        char fifo[512];

        snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        cr_assert_eq(load(fifo, &d, &info), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "not a regular file (a FIFO)"), "%s",
                           strata_last_error());
        cr_assert_eq(load(dir, &d, &info), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "a directory"), "%s", strata_last_error());
        cr_assert_eq(strata_idx_info("/dev/zero", &info), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "a device"), "%s", strata_last_error());
}

/*
 * An image of rows x columns whose product does not fit a 32-bit width is refused from the
 * header alone (the 32-bit product wrapped to a small, wrong width before).
 */
Test(idx_reader, image_size_overflow_refused_from_the_header)
{
        const char *dir = test_tmpdir();
        unsigned char img[16] = { 0, 0, 8, 3, 0, 0, 0, 2, 0, 1, 0, 0, 0, 1, 0, 1 };
        unsigned char lab[12] = { 0, 0, 8, 1, 0, 0, 0, 2, 0, 1 };
        char a[512];
        size_t bytes = 7;

        snprintf(a, sizeof(a), "%s", test_write(dir, "img", img, sizeof(img), 0));
        cr_assert_eq(strata_dataset_bytes(a, test_write(dir, "lab", lab, 10, 0), &bytes),
                     STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "65536 x 65537 pixels are too large"),
                           "%s", strata_last_error());
        cr_assert_eq(bytes, 7, "nothing written on failure");
}
