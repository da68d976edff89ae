/* Test helpers that write IDX files; tests may use stdio and zlib's gz* freely. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/support/idxfiles.h"

/* The directories test_tmpdir() made in this process, removed when it exits. */
static char made[16][64];
static int nmade;
static pid_t owner;

static void remove_made(void)
{
        char cmd[160];

        for (int i = 0; i < nmade && getpid() == owner; i++) {
                snprintf(cmd, sizeof(cmd), "rm -rf '%.63s'", made[i]);
                (void)!system(cmd);
        }
}

const char *test_tmpdir(void)
{
        static char dir[64];

        strcpy(dir, "/tmp/strata-test-XXXXXX");
        if (!mkdtemp(dir))
                return NULL;
        if (owner != getpid()) { /* a forked test: its own list */
                owner = getpid();
                nmade = 0;
                atexit(remove_made);
        }
        if (nmade < 16)
                strcpy(made[nmade++], dir);
        return dir;
}

const char *test_write(const char *dir, const char *name, const void *bytes, size_t n, int gz)
{
        static char path[4][512];
        static int which;
        char *p = path[which++ & 3];

        snprintf(p, 512, "%s/%s", dir, name);
        if (gz) {
                gzFile f = gzopen(p, "wb");

                gzwrite(f, bytes, (unsigned)n);
                gzclose(f);
        } else {
                FILE *f = fopen(p, "wb");

                fwrite(bytes, 1, n, f);
                fclose(f);
        }
        return p;
}

size_t test_idx(unsigned char *buf, int ndims, const uint32_t *dims, int mul, int add)
{
        size_t n = 1, off = 4 + 4 * (size_t)ndims;

        buf[0] = buf[1] = 0;
        buf[2] = 0x08;
        buf[3] = (unsigned char)ndims;
        for (int i = 0; i < ndims; i++) {
                buf[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
                buf[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
                buf[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
                buf[7 + 4 * i] = (unsigned char)dims[i];
                n *= dims[i];
        }
        for (size_t i = 0; i < n; i++)
                buf[off + i] = (unsigned char)(i * (size_t)mul + (size_t)add);
        return off + n;
}
