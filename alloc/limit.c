/*
 * What this process can get (alloc/limit.h): physical memory, the cgroup's memory limit and
 * the resource limits, each read once per call into stack buffers with open/read.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "strata/arena.h"
#include "alloc/limit.h"
#include "base/base.h"

/* A cgroup limit at or above this is "no limit" (v1 writes 2^63 rounded down to a page). */
#define CGROUP_NO_LIMIT (1ull << 62)

/* @p path's first n - 1 bytes into @p buf, NUL-terminated: its length, or -1. */
static long read_small(const char *path, char *buf, size_t n)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t got = 0;
        ssize_t r = 0;

        if (fd < 0)
                return -1;
        while (got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0)
                got += (size_t)r;
        close(fd);
        buf[got] = '\0';
        return r < 0 ? -1 : (long)got;
}

/* The limit in one cgroup file: "max", a number, or nothing readable (0: none). */
static unsigned long long cgroup_file(const char *path)
{
        char buf[64], *end;
        unsigned long long v;

        if (read_small(path, buf, sizeof(buf)) <= 0 || !strncmp(buf, "max", 3))
                return 0;
        v = strtoull(buf, &end, 10);
        return end == buf || v >= CGROUP_NO_LIMIT ? 0 : v;
}

/* @p dir (a cgroup's path) and each ancestor under @p mount: the least @p file there. */
static void cgroup_walk(struct strata__memory_limit *out, const char *mount, const char *dir,
                        const char *file)
{
        char d[512], path[1024];
        size_t len;

        snprintf(d, sizeof(d), "%s", dir);
        for (;;) {
                unsigned long long v;

                len = strlen(d);
                while (len > 0 && d[len - 1] == '/')
                        d[--len] = '\0';
                snprintf(path, sizeof(path), "%s%s/%s", mount, d, file);
                v = cgroup_file(path);
                if (v && v < out->bytes) {
                        out->bytes = (size_t)v;
                        snprintf(out->why, sizeof(out->why),
                                 "the cgroup's memory limit is %llu bytes (%.150s)", v, path);
                }
                if (!len)
                        return;
                *strrchr(d, '/') = '\0';
        }
}

/* One line of /proc/self/cgroup: "0::PATH" (v2) or "N:...memory...:PATH" (v1). */
static void cgroup_line(struct strata__memory_limit *out, const char *root, char *line)
{
        char *ctl = strchr(line, ':'), *path, mount[512], *tok, *save;

        if (!ctl || !(path = strchr(ctl + 1, ':')))
                return;
        *path++ = '\0';
        ctl++;
        if (!*ctl) {
                snprintf(mount, sizeof(mount), "%s", root);
                cgroup_walk(out, mount, path, "memory.max");
                snprintf(mount, sizeof(mount), "%s/unified", root);
                cgroup_walk(out, mount, path, "memory.max");
                return;
        }
        for (tok = strtok_r(ctl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (!strcmp(tok, "memory")) {
                        snprintf(mount, sizeof(mount), "%s/memory", root);
                        cgroup_walk(out, mount, path, "memory.limit_in_bytes");
                }
}

/* Every cgroup this process is in, v2 and v1. */
static void cgroups(struct strata__memory_limit *out, const struct strata__limit_files *f)
{
        char buf[4096], *line, *save;

        if (read_small(f->self_cgroup, buf, sizeof(buf)) <= 0)
                return;
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                cgroup_line(out, f->cgroup_root, line);
}

/* Field @p i (0-based) of statm, in bytes: what is mapped (0) or the data segment (5). */
static size_t statm_bytes(const char *statm, int i)
{
        char buf[256], *p = buf, *end;
        unsigned long long v = 0;
        long psz = sysconf(_SC_PAGESIZE);

        if (read_small(statm, buf, sizeof(buf)) <= 0)
                return 0;
        for (int k = 0; k <= i; k++, p = end) {
                v = strtoull(p, &end, 10);
                if (end == p)
                        return 0;
        }
        return (size_t)v * (size_t)(psz > 0 ? psz : 4096);
}

/* RLIMIT_AS or RLIMIT_DATA: the limit less what already counts against it. */
static void rlimit(struct strata__memory_limit *out, int which, const char *statm)
{
        size_t used = statm_bytes(statm, which == RLIMIT_AS ? 0 : 5);
        struct rlimit rl;
        size_t left;

        if (getrlimit(which, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
                return;
        left = (size_t)rl.rlim_cur > used ? (size_t)rl.rlim_cur - used : 0;
        if (left >= out->bytes)
                return;
        out->bytes = left;
        snprintf(out->why, sizeof(out->why), "the %s limit (ulimit -%c) is %llu bytes, %zu of "
                                             "them in use already",
                 which == RLIMIT_AS ? "address-space" : "data-segment",
                 which == RLIMIT_AS ? 'v' : 'd', (unsigned long long)rl.rlim_cur, used);
}

void strata__memory_limit(const struct strata__limit_files *files,
                          struct strata__memory_limit *out)
{
        struct strata__limit_files f = { "/proc/self/cgroup", "/sys/fs/cgroup",
                                         "/proc/self/statm" };
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

        if (files && files->self_cgroup)
                f.self_cgroup = files->self_cgroup;
        if (files && files->cgroup_root)
                f.cgroup_root = files->cgroup_root;
        if (files && files->statm)
                f.statm = files->statm;
        out->bytes = SIZE_MAX;
        snprintf(out->why, sizeof(out->why), "no memory limit is known");
        if (pages > 0 && psz > 0) {
                out->bytes = (size_t)pages * (size_t)psz;
                snprintf(out->why, sizeof(out->why), "the machine has %zu bytes of memory",
                         out->bytes);
        }
        cgroups(out, &f);
        rlimit(out, RLIMIT_AS, f.statm);
        rlimit(out, RLIMIT_DATA, f.statm);
}

int strata__memory_huge(size_t bytes, size_t room)
{
        return bytes >= STRATA_ALIGN_HUGEPAGE &&
               room >= STRATA_ALIGN_HUGEPAGE + STRATA__ALIGN_UP(bytes, STRATA_ALIGN_PAGE) - bytes;
}
