/*
 * The IDX reader: u8 IDX files, plain or gzip (contract in include/strata/data.h).
 *
 * Files are read with read(2) in fixed chunks and inflated with zlib whose state is carved
 * from a scratch arena on the caller's stack, so loading never touches the heap.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/data.h"
#include "strata/status.h"
#include "base/base.h"
#include "data/idx.h"

#define CHUNK 16384
#define ZSCRATCH (64 * 1024) /* inflate state (~7 KiB) + 32 KiB window, with room */
#define IDX_MAX_BYTES ((size_t)1 << 34)
#define DEFLATE_MAX_RATIO 1032 /* deflate's largest expansion: 258 bytes from 2 bits */

struct reader {
        const char *path;
        int fd;
        int gz;
        int zinit;
        int eof;
        size_t size; /* of the file */
        z_stream zs;
        size_t have, off; /* plain files: bytes buffered and consumed in `in` */
        struct strata_arena scratch;
        unsigned char in[CHUNK];
        _Alignas(64) unsigned char zmem[ZSCRATCH];
};

static voidpf zalloc_arena(voidpf opaque, uInt items, uInt size)
{
        void *p = NULL;

        if (strata_arena_alloc(opaque, (size_t)items * size, 16, &p) != STRATA_OK)
                return Z_NULL;
        return p;
}

static void zfree_arena(voidpf opaque, voidpf p)
{
        (void)opaque;
        (void)p; /* the scratch arena dies with the reader */
}

static int fill_in(struct reader *r, size_t *got)
{
        ssize_t n;

        do
                n = read(r->fd, r->in, sizeof(r->in));
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return strata__fail(STRATA_EIO, "%s: read failed: %s", r->path, strerror(errno));
        *got = (size_t)n;
        if (n == 0)
                r->eof = 1;
        return STRATA_OK;
}

static int reader_open(struct reader *r, const char *path)
{
        struct stat st;
        size_t got = 0;

        memset(r, 0, offsetof(struct reader, in));
        r->path = path;
        /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
        r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (r->fd < 0)
                return strata__fail(STRATA_EIO, "%s: cannot open: %s", path, strerror(errno));
        if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode))
                return strata__fail(STRATA_EINVAL, "%s: not a regular file (%s)", path,
                                    S_ISDIR(st.st_mode)    ? "a directory"
                                    : S_ISFIFO(st.st_mode) ? "a FIFO"
                                    : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                    : S_ISSOCK(st.st_mode) ? "a socket"
                                                           : "not a file");
        r->size = (size_t)st.st_size;
        (void)fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
        STRATA_TRY(fill_in(r, &got));
        r->have = got;
        r->gz = got >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b;
        if (!r->gz)
                return STRATA_OK;
        STRATA_TRY(strata_arena_init(&r->scratch, r->zmem, sizeof(r->zmem), NULL));
        r->zs.zalloc = zalloc_arena;
        r->zs.zfree = zfree_arena;
        r->zs.opaque = &r->scratch;
        r->zs.next_in = r->in;
        r->zs.avail_in = (uInt)got;
        if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK)
                return strata__fail(STRATA_EFORMAT, "%s: cannot start gzip inflation", path);
        r->zinit = 1;
        return STRATA_OK;
}

static void reader_close(struct reader *r)
{
        if (r->zinit)
                inflateEnd(&r->zs);
        if (r->fd >= 0)
                close(r->fd);
        r->fd = -1;
}

/* Read up to n bytes; *got < n only at the end of the data. */
static int reader_read(struct reader *r, unsigned char *dst, size_t n, size_t *got)
{
        size_t done = 0;

        while (done < n) {
                if (!r->gz) {
                        size_t k;

                        if (r->off == r->have) {
                                if (r->eof)
                                        break;
                                STRATA_TRY(fill_in(r, &r->have));
                                r->off = 0;
                                continue;
                        }
                        k = r->have - r->off < n - done ? r->have - r->off : n - done;
                        memcpy(dst + done, r->in + r->off, k);
                        r->off += k;
                        done += k;
                } else {
                        size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
                        int zrc;

                        if (r->zs.avail_in == 0 && !r->eof) {
                                size_t k = 0;

                                STRATA_TRY(fill_in(r, &k));
                                r->zs.next_in = r->in;
                                r->zs.avail_in = (uInt)k;
                        }
                        r->zs.next_out = dst + done;
                        r->zs.avail_out = (uInt)want;
                        zrc = inflate(&r->zs, Z_NO_FLUSH);
                        done += want - r->zs.avail_out;
                        if (zrc == Z_STREAM_END) {
                                /* Another gzip member may follow (gzip -t accepts those). */
                                if (r->zs.avail_in == 0 && !r->eof) {
                                        size_t k = 0;

                                        STRATA_TRY(fill_in(r, &k));
                                        r->zs.next_in = r->in;
                                        r->zs.avail_in = (uInt)k;
                                }
                                if (r->zs.avail_in == 0)
                                        break;
                                if (inflateReset(&r->zs) != Z_OK)
                                        return strata__fail(STRATA_EFORMAT, "%s: gzip member "
                                                            "reset failed", r->path);
                                continue;
                        }
                        if (zrc == Z_BUF_ERROR && r->eof && r->zs.avail_in == 0)
                                return strata__fail(STRATA_EFORMAT, "%s: truncated: the gzip "
                                                    "stream is cut after %zu bytes of data",
                                                    r->path, (size_t)r->zs.total_out);
                        if (zrc != Z_OK && !(zrc == Z_BUF_ERROR && !r->eof))
                                return strata__fail(STRATA_EFORMAT, "%s: corrupt gzip data (%s)",
                                                    r->path, r->zs.msg ? r->zs.msg : "zlib error");
                        if (r->eof && r->zs.avail_in == 0 && want == r->zs.avail_out)
                                return strata__fail(STRATA_EFORMAT,
                                                    "%s: gzip stream ends early (truncated)",
                                                    r->path);
                }
        }
        *got = done;
        return STRATA_OK;
}

/*
 * The data the header claims must fit the file: exactly for a plain file, within deflate's
 * largest expansion for gzip. Checked before anything is sized from the header, so a cut file
 * is called truncated rather than too large for memory.
 */
static int fits_the_file(const struct reader *r, const struct strata_idx_info *info)
{
        size_t most = r->size, header = 4 + 4 * (size_t)info->ndims, bytes = info->bytes;

        if (r->gz && strata__mul_size(r->size, DEFLATE_MAX_RATIO, &most))
                return STRATA_OK;
        if (bytes <= most - (most < header ? most : header))
                return STRATA_OK;
        return strata__fail(STRATA_EFORMAT, "%s: truncated: its header claims %zu bytes of data; "
                            "the %s file of %zu bytes %s", r->path, bytes,
                            r->gz ? "gzip" : "plain", r->size,
                            r->gz ? "cannot hold that many" : "holds fewer");
}

static int read_header(struct reader *r, struct strata_idx_info *info)
{
        unsigned char h[4 + 16];
        size_t got, bytes = 1;

        STRATA_TRY(reader_read(r, h, 4, &got));
        if (got < 4)
                return strata__fail(STRATA_EFORMAT, "%s: shorter than an IDX header", r->path);
        if (h[0] != 0 || h[1] != 0)
                return strata__fail(STRATA_EFORMAT, "%s: bad IDX magic %02x%02x%02x%02x",
                                    r->path, h[0], h[1], h[2], h[3]);
        if (h[2] != 0x08)
                return strata__fail(STRATA_EFORMAT,
                                    "%s: IDX element type 0x%02x unsupported (need 0x08, u8)",
                                    r->path, h[2]);
        if (h[3] < 1 || h[3] > 4)
                return strata__fail(STRATA_EFORMAT, "%s: IDX has %d dimensions (1..4)", r->path,
                                    h[3]);
        info->ndims = h[3];
        STRATA_TRY(reader_read(r, h + 4, 4u * h[3], &got));
        if (got < 4u * h[3])
                return strata__fail(STRATA_EFORMAT, "%s: truncated IDX header", r->path);
        for (int i = 0; i < info->ndims; i++) {
                const unsigned char *d = h + 4 + 4 * i;

                info->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 |
                                (uint32_t)d[2] << 8 | d[3];
                if (info->dims[i] == 0)
                        return strata__fail(STRATA_EFORMAT, "%s: dimension %d is 0", r->path, i);
                if (strata__mul_size(bytes, info->dims[i], &bytes))
                        return strata__fail(STRATA_EFORMAT, "%s: payload too large", r->path);
        }
        info->bytes = bytes;
        if (bytes > IDX_MAX_BYTES) { /* a cut file is called so first */
                STRATA_TRY(fits_the_file(r, info));
                return strata__fail(STRATA_EFORMAT, "%s: payload of %zu bytes too large (at most "
                                    "%zu)", r->path, bytes, IDX_MAX_BYTES);
        }
        return STRATA_OK;
}

int strata_idx_info(const char *path, struct strata_idx_info *info)
{
        struct reader r;
        struct strata_idx_info tmp;
        int rc;

        if (!path || !info)
                return strata__fail(STRATA_EINVAL, "idx info: NULL argument");
        rc = reader_open(&r, path);
        if (rc == STRATA_OK)
                rc = read_header(&r, &tmp);
        reader_close(&r);
        if (rc == STRATA_OK)
                *info = tmp;
        return rc;
}

int strata_idx_load(const char *path, struct strata_arena *arena, struct strata_idx_info *info,
                    const uint8_t **data)
{
        struct reader r;
        struct strata_idx_info tmp;
        unsigned char extra;
        void *p = NULL;
        size_t got = 0;
        int rc;

        if (!path || !arena || !info || !data)
                return strata__fail(STRATA_EINVAL, "idx load: NULL argument");
        STRATA_TRY_GOTO(rc, reader_open(&r, path), out);
        STRATA_TRY_GOTO(rc, read_header(&r, &tmp), out);
        STRATA_TRY_GOTO(rc, fits_the_file(&r, &tmp), out);
        STRATA_TRY_GOTO(rc, strata_arena_alloc(arena, tmp.bytes, 64, &p), out);
        STRATA_TRY_GOTO(rc, reader_read(&r, p, tmp.bytes, &got), out);
        if (got < tmp.bytes) {
                rc = strata__fail(STRATA_EFORMAT, "%s: truncated: %zu of %zu payload bytes",
                                  path, got, tmp.bytes);
                goto out;
        }
        STRATA_TRY_GOTO(rc, reader_read(&r, &extra, 1, &got), out);
        if (got != 0) {
                rc = strata__fail(STRATA_EFORMAT, "%s: trailing data after %zu payload bytes",
                                  path, tmp.bytes);
                goto out;
        }
        *info = tmp;
        *data = p;
out:
        reader_close(&r);
        return rc;
}

int strata__idx_check_payload(const char *path)
{
        struct strata_idx_info info;
        unsigned char buf[CHUNK];
        struct reader r;
        size_t left = 0, got = 1;
        int rc;

        STRATA_TRY_GOTO(rc, reader_open(&r, path), out);
        STRATA_TRY_GOTO(rc, read_header(&r, &info), out);
        for (left = info.bytes; left && got; left -= got)
                STRATA_TRY_GOTO(rc, reader_read(&r, buf, left < CHUNK ? left : CHUNK, &got), out);
        if (left)
                rc = strata__fail(STRATA_EFORMAT, "%s: truncated: %zu of the %zu bytes of data "
                                  "its header claims", path, info.bytes - left, info.bytes);
out:
        reader_close(&r);
        return rc;
}

int strata__idx_fits(const char *path, const struct strata_idx_info *info)
{
        struct reader r;
        int rc = reader_open(&r, path);

        if (rc == STRATA_OK)
                rc = fits_the_file(&r, info);
        reader_close(&r);
        return rc;
}
