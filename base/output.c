/*
 * Safe output (contract in base/output.h): every file Strata writes is created here. A regular
 * target is replaced through an exclusive temporary file beside it; a character device or a
 * FIFO is written in place; anything else is refused. No allocation: paths live in the
 * caller's buffers, the directory is read with getdents64 into a stack buffer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "strata/status.h"
#include "base/base.h"
#include "base/output.h"

#define TMP_TAG ".tmp."  /* <name>.tmp.<pid>.<16 hex> */
#define HEX_DIGITS 16

static int sys_fail(const struct strata__out *o, const char *what, const char *path, int err)
{
        return strata__fail(STRATA_EIO, "%s: cannot %s '%s': %s", o->what, what, path,
                            strerror(err));
}

/* The directory part of @p path into @p dir ("." when there is none); the name part. */
static const char *split(const char *path, char *dir)
{
        const char *slash = strrchr(path, '/');

        if (!slash)
                snprintf(dir, STRATA__OUT_PATH, ".");
        else if (slash == path)
                snprintf(dir, STRATA__OUT_PATH, "/");
        else
                snprintf(dir, STRATA__OUT_PATH, "%.*s", (int)(slash - path), path);
        return slash ? slash + 1 : path;
}

/* Follow the symlinks at @p path into o->path: the name that will be replaced. */
static int resolve(struct strata__out *o, const char *path)
{
        char link[STRATA__OUT_PATH], dir[STRATA__OUT_PATH];
        struct stat st;

        if (snprintf(o->path, STRATA__OUT_PATH, "%s", path) >= STRATA__OUT_PATH)
                return strata__fail(STRATA_EINVAL, "%s: path too long: '%.64s...'", o->what, path);
        for (int hops = 0;; hops++) {
                ssize_t n;

                if (lstat(o->path, &st) != 0)
                        return errno == ENOENT ? STRATA_OK : sys_fail(o, "stat", o->path, errno);
                if (!S_ISLNK(st.st_mode))
                        return STRATA_OK;
                if (hops == STRATA__OUT_LINKS)
                        return sys_fail(o, "follow the links of", path, ELOOP);
                n = readlink(o->path, link, sizeof(link) - 1);
                if (n < 0)
                        return sys_fail(o, "read the link", o->path, errno);
                link[n] = '\0';
                split(o->path, dir);
                if ((link[0] == '/' ? snprintf(o->path, STRATA__OUT_PATH, "%s", link)
                                    : snprintf(o->path, STRATA__OUT_PATH, "%s/%s", dir, link))
                    >= STRATA__OUT_PATH)
                        return sys_fail(o, "follow the links of", path, ENAMETOOLONG);
        }
}

/* A character device or a FIFO with a reader, written in place; other kinds are refused. */
static int open_in_place(struct strata__out *o, const char *path, mode_t kind)
{
        struct stat st;

        if (!S_ISCHR(kind) && !S_ISFIFO(kind))
                return strata__fail(STRATA_EINVAL, "%s: '%s' is a %s, not a file to write; "
                                                   "nothing written", o->what, path,
                                    S_ISDIR(kind) ? "directory" : S_ISSOCK(kind) ? "socket"
                                                                  : "block device");
        /* O_NONBLOCK: a FIFO nobody reads is refused at once instead of hanging the run. */
        o->fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (o->fd < 0 && errno == ENXIO)
                return strata__fail(STRATA_EINVAL, "%s: FIFO '%s' has no reader", o->what, path);
        if (o->fd < 0)
                return sys_fail(o, "open", path, errno);
        if (fstat(o->fd, &st) != 0 || (st.st_mode & S_IFMT) != (kind & S_IFMT) ||
            fcntl(o->fd, F_SETFL, 0) != 0) {
                strata__out_abort(o);
                return strata__fail(STRATA_EIO, "%s: '%s' changed while it was opened", o->what,
                                    path);
        }
        snprintf(o->path, STRATA__OUT_PATH, "%s", path);
        return STRATA_OK;
}

/* Parse `<pid>` or `<pid>.<16 hex>` ending @p s: the writer's pid, or -1. */
static long tmp_pid(const char *s)
{
        char *end;
        long pid;

        if (*s < '1' || *s > '9')
                return -1;
        pid = strtol(s, &end, 10);
        if (*end == '\0')
                return pid; /* the name the checkpoint writer used before random suffixes */
        if (*end != '.' || strlen(end + 1) != HEX_DIGITS)
                return -1;
        for (const char *h = end + 1; *h; h++)
                if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
                        return -1;
        return pid;
}

/* Remove @p name in @p dfd when it is a regular temporary of @p base whose writer is dead. */
static void sweep_one(int dfd, const char *name, const char *base, size_t blen)
{
        struct stat st;
        long pid;

        if (strncmp(name, base, blen) != 0 ||
            strncmp(name + blen, TMP_TAG, sizeof(TMP_TAG) - 1) != 0)
                return;
        pid = tmp_pid(name + blen + sizeof(TMP_TAG) - 1);
        if (pid <= 0 || pid == (long)getpid() || pid > INT32_MAX)
                return;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                return;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                (void)unlinkat(dfd, name, 0);
}

/* Stale temporaries of @p base in @p dir: best effort, a failure changes nothing else. */
static void sweep(const char *dir, const char *base)
{
        char buf[4096] __attribute__((aligned(8)));
        size_t blen = strlen(base);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ssize_t n;

        if (dfd < 0)
                return;
        while ((n = getdents64(dfd, buf, sizeof(buf))) > 0) {
                for (ssize_t off = 0; off < n;) {
                        struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);

                        if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN)
                                sweep_one(dfd, e->d_name, base, blen);
                        off += e->d_reclen;
                }
        }
        close(dfd);
}

/* 64 unpredictable bits: getrandom(), or the clock and a counter when it has none yet. */
static uint64_t random64(void)
{
        static uint64_t counter;
        struct timespec t;
        uint64_t r;

        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
                return r;
        clock_gettime(CLOCK_REALTIME, &t);
        r = (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)t.tv_sec;
        return r ^ __atomic_add_fetch(&counter, 0x2545f4914f6cdd1dull, __ATOMIC_RELAXED);
}

/* Create the temporary file beside o->path: exclusive, never through a link, mode 0600. */
static int create_tmp(struct strata__out *o)
{
        char dir[STRATA__OUT_PATH];
        const char *base = split(o->path, dir);

        if (!*base || strlen(base) + 40 > 255)
                return strata__fail(STRATA_EINVAL, "%s: '%s': %s", o->what, o->path,
                                    *base ? "name too long for a temporary file beside it"
                                          : "names a directory");
        sweep(dir, base);
        for (int tries = 0; tries < 16; tries++) {
                if (snprintf(o->tmp, STRATA__OUT_PATH, "%s/%s" TMP_TAG "%ld.%016llx", dir, base,
                             (long)getpid(), (unsigned long long)random64()) >= STRATA__OUT_PATH)
                        return sys_fail(o, "name a temporary file for", o->path, ENAMETOOLONG);
                o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (o->fd >= 0)
                        return STRATA_OK;
                if (errno != EEXIST)
                        break;
        }
        o->tmp[0] = '\0';
        return strata__fail(STRATA_EIO, "%s: cannot create a temporary file in '%s' for '%s': %s",
                            o->what, dir, o->path, strerror(errno));
}

int strata__out_open(struct strata__out *o, const char *path)
{
        struct stat st;

        o->fd = -1;
        o->tmp[0] = '\0';
        o->path[0] = '\0';
        if (!path || !*path)
                return strata__fail(STRATA_EINVAL, "%s: empty path", o->what);
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
                return open_in_place(o, path, st.st_mode);
        STRATA_TRY(resolve(o, path));
        return create_tmp(o);
}

int strata__out_append(struct strata__out *o, const char *path)
{
        struct stat st;

        o->fd = -1;
        o->tmp[0] = '\0';
        o->path[0] = '\0';
        if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                return strata__out_open(o, path);
        STRATA_TRY(resolve(o, path));
        o->fd = open(o->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        return o->fd < 0 ? sys_fail(o, "open", o->path, errno) : STRATA_OK;
}

int strata__out_write(struct strata__out *o, const void *buf, size_t n)
{
        const char *p = buf;

        while (n) {
                ssize_t w = write(o->fd, p, n);
                int err = w < 0 ? errno : ENOSPC;

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        int rc = sys_fail(o, "write", o->path, err);

                        strata__out_abort(o);
                        return rc;
                }
                p += w;
                n -= (size_t)w;
        }
        return STRATA_OK;
}

/* The umask, read without changing it (umask(2) cannot read it without a race). */
static mode_t umask_now(void)
{
        char buf[2048], *u;
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
                close(fd);
        if (n <= 0)
                return 022;
        buf[n] = '\0';
        u = strstr(buf, "Umask:");
        return u ? (mode_t)strtol(u + 6, NULL, 8) & 0777 : 022;
}

/* The mode the new file gets: the replaced file's permissions, or 0666 less the umask. */
static mode_t final_mode(const char *path)
{
        struct stat st;

        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
                return st.st_mode & 0777;
        return 0666 & ~umask_now();
}

/* fsync that a device or FIFO written in place may not support. */
static int sync_fd(int fd, int in_place)
{
        return fsync(fd) == 0 || (in_place && (errno == EINVAL || errno == EROFS)) ? 0 : -1;
}

/* Rename the temporary file over the target and make the rename durable. */
static int rename_over(struct strata__out *o)
{
        char dir[STRATA__OUT_PATH];
        int d, rc = STRATA_OK;

        if (rename(o->tmp, o->path) != 0) {
                rc = sys_fail(o, "rename the temporary file onto", o->path, errno);
                (void)unlink(o->tmp);
                o->tmp[0] = '\0';
                return rc;
        }
        o->tmp[0] = '\0';
        split(o->path, dir);
        d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 || fsync(d) != 0)
                rc = sys_fail(o, "fsync the directory", dir, errno);
        if (d >= 0)
                close(d);
        return rc;
}

int strata__out_publish(struct strata__out *o)
{
        int rc;

        if (o->fd < 0)
                return strata__fail(STRATA_EINVAL, "%s: '%s' is not open", o->what, o->path);
        if (!o->tmp[0])
                return STRATA_OK;
        if (fchmod(o->fd, final_mode(o->path)) != 0 || fsync(o->fd) != 0) {
                rc = sys_fail(o, "set the mode of and fsync", o->path, errno);
                strata__out_abort(o);
                return rc;
        }
        rc = rename_over(o);
        if (rc != STRATA_OK)
                strata__out_abort(o);
        return rc;
}

int strata__out_commit(struct strata__out *o)
{
        int fd = o->fd, rc;

        if (fd < 0)
                return strata__fail(STRATA_EINVAL, "%s: '%s' is not open", o->what, o->path);
        if (o->tmp[0] && fchmod(fd, final_mode(o->path)) != 0) {
                rc = sys_fail(o, "set the mode of", o->tmp, errno);
                strata__out_abort(o);
                return rc;
        }
        if (sync_fd(fd, !o->tmp[0]) != 0) {
                rc = sys_fail(o, "fsync", o->path, errno);
                strata__out_abort(o);
                return rc;
        }
        o->fd = -1;
        if (close(fd) != 0) {
                rc = sys_fail(o, "close", o->path, errno);
                strata__out_abort(o);
                return rc;
        }
        return o->tmp[0] ? rename_over(o) : STRATA_OK;
}

void strata__out_abort(struct strata__out *o)
{
        if (o->fd >= 0)
                close(o->fd);
        o->fd = -1;
        if (o->tmp[0])
                (void)unlink(o->tmp);
        o->tmp[0] = '\0';
}
