/* Writing small IDX files (plain or gzip) for tests. */
#ifndef STRATA_TESTS_IDXFILES_H
#define STRATA_TESTS_IDXFILES_H

#include <stddef.h>
#include <stdint.h>

/** A fresh temporary directory (static buffer). */
const char *test_tmpdir(void);
/** Write raw bytes to dir/name, gzip-compressed when gz; returns the path (static buffer). */
const char *test_write(const char *dir, const char *name, const void *bytes, size_t n, int gz);
/** Build an IDX u8 image: header with dims, then payload bytes (i * mul + add). */
size_t test_idx(unsigned char *buf, int ndims, const uint32_t *dims, int mul, int add);

#endif
