/*
 * libFuzzer target: the IDX/gzip reader (strata_idx_info, strata_idx_load) on arbitrary bytes,
 * plain or gzip-framed. Whatever the input, the calls return a status without crashing,
 * hanging or reading past what they were given; a refused load writes nothing. The input is
 * a memfd (a regular file with no name to clean up). Built and run by `make fuzz`; the seed
 * corpus (tools/fuzz/corpus/idx) holds valid IDX files, plain and gzip, multi-member too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strata/strata.h"

static _Alignas(4096) unsigned char mem[1 << 20]; /* the loads' arena: bounds what they take */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
        struct strata_idx_info info = { .ndims = -1 };
        const uint8_t *payload = NULL;
        struct strata_arena a;
        char path[64];
        int fd = memfd_create("strata-fuzz-idx", MFD_CLOEXEC), rc;

        if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n))
                abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        rc = strata_idx_info(path, &info);
        if (rc == STRATA_OK && (info.ndims < 1 || info.ndims > 4))
                abort(); /* an accepted header has a sane rank */
        if (strata_arena_init(&a, mem, sizeof(mem), NULL) != STRATA_OK)
                abort();
        info.ndims = -1;
        rc = strata_idx_load(path, &a, &info, &payload);
        if (rc != STRATA_OK && (payload || info.ndims != -1))
                abort(); /* a refused load wrote its outputs */
        if (rc == STRATA_OK && info.bytes && !payload)
                abort();
        for (size_t i = 0; rc == STRATA_OK && i < info.bytes; i++)
                (void)*(volatile const uint8_t *)&payload[i]; /* ASan checks every byte */
        close(fd);
        return 0;
}
