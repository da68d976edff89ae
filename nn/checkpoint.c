/*
 * Checkpoint storage: the default CheckpointIO (POSIX files written through the safe output of
 * base/output.h: a temporary file in the target's directory, fsynced, renamed over the target,
 * directory fsynced; a symlink's target replaced, a device written in place) and the format's
 * checksums. What goes into a checkpoint is the runtime's business (strategy/checkpoint/).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/status.h"
#include "base/base.h"
#include "base/output.h"
#include "nn/checkpoint.h"

uint32_t strata__crc32(uint32_t crc, const void *p, size_t n)
{
        const unsigned char *b = p;

        while (n) {
                uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;

                crc = (uint32_t)crc32(crc, b, k);
                b += k;
                n -= k;
        }
        return crc;
}

uint32_t strata__crc32_header(const struct strata__ckpt_header *h)
{
        struct strata__ckpt_header c = *h;

        c.crc = 0;
        return strata__crc32(0, &c, sizeof(c));
}

static int sys_fail(const char *what, const char *path)
{
        return strata__fail(STRATA_EIO, "checkpoint: %s '%s': %s", what, path,
                            strerror(errno));
}

_Static_assert(STRATA_CKPT_PATH_MAX == STRATA__OUT_PATH, "the handle's paths are the output's");

/* The file implementation's writing handle as the safe output it is (base/output.h). */
static struct strata__out out_of(struct strata_ckpt_handle *h)
{
        return (struct strata__out){ .fd = h->fd, .path = h->path, .tmp = h->tmp,
                                     .what = "checkpoint" };
}

static int file_create(void *ctx, const char *path, struct strata_ckpt_handle *h)
{
        struct strata__out o = out_of(h);
        int rc;

        (void)ctx;
        rc = strata__out_open(&o, path);
        h->fd = o.fd;
        return rc;
}

static int file_write(struct strata_ckpt_handle *h, const void *buf, size_t n)
{
        struct strata__out o = out_of(h);
        int rc = strata__out_write(&o, buf, n);

        h->fd = o.fd;
        return rc;
}

static void file_abort(struct strata_ckpt_handle *h)
{
        struct strata__out o = out_of(h);

        strata__out_abort(&o);
        h->fd = o.fd;
}

static int file_commit(struct strata_ckpt_handle *h)
{
        struct strata__out o = out_of(h);
        int rc = strata__out_commit(&o);

        h->fd = o.fd;
        return rc;
}

static int file_open(void *ctx, const char *path, struct strata_ckpt_handle *h, uint64_t *size)
{
        struct stat st;

        (void)ctx;
        snprintf(h->path, sizeof(h->path), "%s", path);
        /* O_NONBLOCK: a FIFO or device given by mistake is refused below, not waited on. */
        h->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (h->fd < 0)
                return sys_fail("cannot open", path);
        if (fstat(h->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
                close(h->fd);
                h->fd = -1;
                return strata__fail(STRATA_EFORMAT, "checkpoint: '%s' is not a regular file",
                                    path);
        }
        *size = (uint64_t)st.st_size;
        return STRATA_OK;
}

static int file_read_at(struct strata_ckpt_handle *h, void *buf, size_t n, uint64_t off)
{
        char *p = buf;

        while (n) {
                ssize_t r = pread(h->fd, p, n, (off_t)off);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return sys_fail("cannot read", h->path);
                if (r == 0)
                        return strata__fail(STRATA_EFORMAT, "checkpoint '%s' is truncated",
                                            h->path);
                p += r;
                n -= (size_t)r;
                off += (uint64_t)r;
        }
        return STRATA_OK;
}

static void file_close(struct strata_ckpt_handle *h)
{
        if (h->fd >= 0)
                close(h->fd);
        h->fd = -1;
}

static int file_remove(void *ctx, const char *path)
{
        (void)ctx;
        if (unlink(path) != 0 && errno != ENOENT)
                return sys_fail("cannot remove", path);
        return STRATA_OK;
}

static const struct strata_checkpoint_io file_io = {
        .name = "file",
        .create = file_create,
        .write = file_write,
        .commit = file_commit,
        .abort = file_abort,
        .open = file_open,
        .read_at = file_read_at,
        .close = file_close,
        .remove = file_remove,
};

const struct strata_checkpoint_io *strata_checkpoint_file_io(void)
{
        return &file_io;
}
