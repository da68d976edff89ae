/*
 * Safe output (base/output.c): what a save does to the path it is given and to everything
 * around it. A symlink's target is replaced and the link kept; devices, FIFOs, directories
 * and sockets are never replaced; links and FIFOs planted at temporary names are never
 * touched; every write error is a status naming the path with nothing left behind; stale
 * temporaries of dead writers are swept, nothing else; nothing is allocated.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strata/status.h"
#include "base/output.h"
#include "tests/support/cli.h"
#include "tools/heapcount.h"

static char dir[64];
static char pbuf[STRATA__OUT_PATH], tbuf[STRATA__OUT_PATH];

static void setup(void)
{
        cli_mkdtemp(dir, sizeof(dir), "out");
}

static void teardown(void)
{
        cli_rmtree(dir);
}

TestSuite(output_safe, .init = setup, .fini = teardown);

static struct strata__out out(void)
{
        return (struct strata__out){ .fd = -1, .path = pbuf, .tmp = tbuf, .what = "test" };
}

static const char *at(const char *name)
{
        return cli_path(dir, name);
}

static void put_file(const char *path, const char *s, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

        cr_assert_geq(fd, 0, "%s", path);
        cr_assert_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
        close(fd);
        chmod(path, mode);
}

static void expect_content(const char *path, const char *s)
{
        char buf[256] = { 0 };
        int fd = open(path, O_RDONLY);

        cr_assert_geq(fd, 0, "%s", path);
        cr_assert_geq(read(fd, buf, sizeof(buf) - 1), 0);
        close(fd);
        cr_assert_str_eq(buf, s, "%s", path);
}

static mode_t kind(const char *path)
{
        struct stat st;

        cr_assert_eq(lstat(path, &st), 0, "%s", path);
        return st.st_mode & S_IFMT;
}

/* How many entries the test directory holds (., .. excluded). */
static int entries(void)
{
        char cmd[128], n[16];

        snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
        cr_assert_eq(cli_sh(cmd, n, sizeof(n)), 0);
        return atoi(n);
}

static int save(const char *path, const char *s)
{
        struct strata__out o = out();
        int rc = strata__out_open(&o, path);

        if (rc == STRATA_OK)
                rc = strata__out_write(&o, s, strlen(s));
        if (rc == STRATA_OK)
                rc = strata__out_commit(&o);
        cr_assert_eq(o.fd, -1, "an output is closed after commit or failure");
        return rc;
}

Test(output_safe, new_file_and_replaced_file)
{
        mode_t mask = umask(027);
        struct stat st;

        cr_assert_eq(save(at("new"), "one"), STRATA_OK, "%s", strata_last_error());
        expect_content(at("new"), "one");
        cr_assert_eq(stat(at("new"), &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0640, "a new file: 0666 less the umask");
        put_file(at("old"), "old contents", 0604);
        cr_assert_eq(save(at("old"), "two"), STRATA_OK, "%s", strata_last_error());
        expect_content(at("old"), "two");
        cr_assert_eq(stat(at("old"), &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0604, "a replaced file keeps its permissions");
        cr_assert_eq(entries(), 2, "no temporary file remains");
        umask(mask);
}

/* While written, the temporary is a private regular file beside the target. */
Test(output_safe, temporary_is_exclusive_private_and_random)
{
        struct strata__out o = out();
        char first[STRATA__OUT_PATH];
        struct stat st;

        cr_assert_eq(strata__out_open(&o, at("t.json")), STRATA_OK);
        cr_assert_eq(lstat(o.tmp, &st), 0);
        cr_assert(S_ISREG(st.st_mode));
        cr_assert_eq(st.st_mode & 0777, 0600);
        cr_assert_eq(strncmp(o.tmp, at("t.json.tmp."), strlen(at("t.json.tmp."))), 0, "%s",
                     o.tmp);
        snprintf(first, sizeof(first), "%s", o.tmp);
        strata__out_abort(&o);
        cr_assert_eq(access(first, F_OK), -1, "abort removes the temporary");
        cr_assert_eq(strata__out_open(&o, at("t.json")), STRATA_OK);
        cr_assert_str_neq(o.tmp, first, "the name is not predictable");
        strata__out_abort(&o);
        cr_assert_eq(entries(), 0);
}

Test(output_safe, symlink_target_replaced_and_link_kept)
{
        char link[256];
        ssize_t n;

        cr_assert_eq(mkdir(at("sub"), 0700), 0);
        put_file(at("sub/victim"), "before", 0644);
        cr_assert_eq(symlink("sub/victim", at("hop")), 0);
        cr_assert_eq(symlink("hop", at("link.json")), 0); /* two relative links */
        cr_assert_eq(save(at("link.json"), "after"), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(kind(at("link.json")), S_IFLNK, "the link stays a link");
        n = readlink(at("link.json"), link, sizeof(link) - 1);
        cr_assert_eq(n, 3);
        expect_content(at("sub/victim"), "after");
        /* A dangling link: its target is created, the link kept. */
        cr_assert_eq(symlink("sub/created", at("dangling")), 0);
        cr_assert_eq(save(at("dangling"), "new"), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(kind(at("dangling")), S_IFLNK);
        expect_content(at("sub/created"), "new");
        /* A loop is refused with the path. */
        cr_assert_eq(symlink("loop2", at("loop1")), 0);
        cr_assert_eq(symlink("loop1", at("loop2")), 0);
        cr_assert_eq(save(at("loop1"), "x"), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "loop1"), "%s", strata_last_error());
}

/*
 * Links and FIFOs at every name a writer used to predict (`<path>.tmp`, `<path>.tmp.<pid>`)
 * and at the new names' prefix: the save succeeds, nothing they point to changes, none of them
 * is replaced.
 */
Test(output_safe, planted_links_and_fifos_touch_nothing)
{
        const char *names[3];
        char pid_name[64], tail[96];

        snprintf(pid_name, sizeof(pid_name), "out.json.tmp.%d", (int)getpid());
        names[0] = "out.json.tmp";
        names[1] = pid_name;
        names[2] = "out.json.tmp.";
        put_file(at("victim.txt"), "precious", 0644);
        for (int i = 0; i < 3; i++) {
                cr_assert_eq(symlink(at("victim.txt"), at(names[i])), 0);
                snprintf(tail, sizeof(tail), "%s.fifo", names[i]);
                cr_assert_eq(mkfifo(at(tail), 0600), 0);
        }
        for (int k = 0; k < 3; k++)
                cr_assert_eq(save(at("out.json"), "trace"), STRATA_OK, "%s", strata_last_error());
        expect_content(at("out.json"), "trace");
        expect_content(at("victim.txt"), "precious");
        for (int i = 0; i < 3; i++) {
                snprintf(tail, sizeof(tail), "%s.fifo", names[i]);
                cr_assert_eq(kind(at(names[i])), S_IFLNK, "%s", names[i]);
                cr_assert_eq(kind(at(tail)), S_IFIFO, "%s", tail);
        }
        cr_assert_eq(entries(), 8, "victim, target, 3 links, 3 FIFOs: nothing else");
}

Test(output_safe, dev_full_is_an_error_and_stays_a_device)
{
        struct stat st;

        if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
                cr_skip("no /dev/full here");
        if (geteuid() != 0)
                cr_log_info("not root: the device could not have been replaced anyway");
        cr_assert_eq(save("/dev/full", "data"), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "'/dev/full'"), "%s",
                           strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "No space"), "%s", strata_last_error());
        cr_assert_eq(kind("/dev/full"), S_IFCHR, "the device node stays a character device");
        /* Through a link too; /dev/null is written in place and stays a device. */
        cr_assert_eq(symlink("/dev/full", at("full")), 0);
        cr_assert_eq(save(at("full"), "data"), STRATA_EIO);
        cr_assert_eq(save("/dev/null", "data"), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(kind("/dev/null"), S_IFCHR);
}

Test(output_safe, fifo_written_in_place_or_refused_without_reader)
{
        char buf[16] = { 0 };
        int rd;

        cr_assert_eq(mkfifo(at("pipe"), 0600), 0);
        cr_assert_eq(save(at("pipe"), "lost"), STRATA_EINVAL, "no reader: refused, not waited on");
        cr_assert_not_null(strstr(strata_last_error(), "no reader"), "%s", strata_last_error());
        rd = open(at("pipe"), O_RDONLY | O_NONBLOCK);
        cr_assert_geq(rd, 0);
        cr_assert_eq(save(at("pipe"), "through"), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(read(rd, buf, sizeof(buf) - 1), 7);
        cr_assert_str_eq(buf, "through");
        close(rd);
        cr_assert_eq(kind(at("pipe")), S_IFIFO);
        cr_assert_eq(entries(), 1);
}

Test(output_safe, directory_and_socket_refused)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int s = socket(AF_UNIX, SOCK_STREAM, 0);

        cr_assert_eq(mkdir(at("d"), 0700), 0);
        cr_assert_eq(save(at("d"), "x"), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "is a directory"), "%s",
                           strata_last_error());
        cr_assert_eq(save(at("d/"), "x"), STRATA_EINVAL);
        cr_assert_eq(kind(at("d")), S_IFDIR);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", at("sock"));
        cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(save(at("sock"), "x"), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "socket"), "%s", strata_last_error());
        cr_assert_eq(kind(at("sock")), S_IFSOCK);
        close(s);
        cr_assert_eq(entries(), 2);
}

/* A directory the writer may not write to (as root: a child running as nobody). */
Test(output_safe, read_only_directory_is_an_error)
{
        pid_t pid;
        int st;

        cr_assert_eq(chmod(dir, 0755), 0);
        cr_assert_eq(mkdir(at("ro"), 0755), 0);
        put_file(at("ro/f"), "kept", 0644);
        cr_assert_eq(chmod(at("ro"), 0555), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
                        _exit(3);
                _exit(save(at("ro/f"), "new") == STRATA_EIO &&
                      strstr(strata_last_error(), "/ro") ? 0 : 1);
        }
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
        expect_content(at("ro/f"), "kept");
        chmod(at("ro"), 0755);
}

/* A short write (file size limit, SIGXFSZ ignored): an error naming the path, nothing left. */
Test(output_safe, short_write_is_an_error_and_leaves_the_old_file)
{
        static char big[1 << 16];
        struct rlimit lim = { 8192, 8192 };
        struct strata__out o = out();

        put_file(at("m.ckpt"), "old", 0644);
        signal(SIGXFSZ, SIG_IGN);
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        memset(big, 'x', sizeof(big));
        cr_assert_eq(strata__out_open(&o, at("m.ckpt")), STRATA_OK);
        cr_assert_eq(strata__out_write(&o, big, sizeof(big)), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "m.ckpt"), "%s", strata_last_error());
        cr_assert_eq(o.fd, -1);
        cr_assert_eq(strata__out_commit(&o), STRATA_EINVAL, "a failed output cannot commit");
        strata__out_abort(&o); /* idempotent */
        expect_content(at("m.ckpt"), "old");
        cr_assert_eq(entries(), 1, "the temporary is removed");
}

/* A child that dies while writing leaves its temporary; the next save removes it. */
static void dead_writer(const char *path)
{
        pid_t pid = fork();
        int st;

        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct strata__out o = out();

                _exit(strata__out_open(&o, path) == STRATA_OK &&
                      strata__out_write(&o, "half", 4) == STRATA_OK ? 0 : 1);
        }
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

Test(output_safe, stale_temporaries_of_dead_writers_swept_nothing_else)
{
        char live[96], link[96], other[96], old[96];
        int dead = 0;
        pid_t pid = fork();

        cr_assert_geq(pid, 0);
        if (pid == 0)
                _exit(0);
        waitpid(pid, NULL, 0);
        dead = (int)pid; /* reaped: kill(dead, 0) is ESRCH until the pid is reused */
        dead_writer(at("run.ckpt"));
        dead_writer(at("other.ckpt"));
        cr_assert_eq(entries(), 2, "each dead writer left its temporary");
        snprintf(live, sizeof(live), "run.ckpt.tmp.1.0123456789abcdef");   /* pid 1 lives */
        snprintf(link, sizeof(link), "run.ckpt.tmp.%d.0123456789abcdef", dead);
        snprintf(old, sizeof(old), "run.ckpt.tmp.%d", dead);  /* the former checkpoint name */
        snprintf(other, sizeof(other), "run.ckpt.tmp.%d.xyz", dead); /* not the pattern */
        put_file(at(live), "live", 0600);
        put_file(at("victim"), "precious", 0600);
        cr_assert_eq(symlink(at("victim"), at(link)), 0);
        put_file(at(old), "old", 0600);
        put_file(at(other), "other", 0600);
        cr_assert_eq(save(at("run.ckpt"), "done"), STRATA_OK, "%s", strata_last_error());
        expect_content(at("run.ckpt"), "done");
        cr_assert_eq(access(at(old), F_OK), -1, "the former name of a dead writer is swept");
        cr_assert_eq(kind(at(live)), S_IFREG, "a live writer's temporary stays");
        cr_assert_eq(kind(at(link)), S_IFLNK, "a link named like a temporary stays");
        cr_assert_eq(kind(at(other)), S_IFREG);
        expect_content(at("victim"), "precious");
        /* run.ckpt, live, link, other, victim, other.ckpt's temporary: the other target's. */
        cr_assert_eq(entries(), 6);
}

Test(output_safe, bad_paths)
{
        static char huge[STRATA__OUT_PATH + 100];
        char longname[300];

        cr_assert_eq(save("", "x"), STRATA_EINVAL);
        memset(huge, 'n', sizeof(huge) - 1);
        huge[0] = '/';
        cr_assert_neq(save(huge, "x"), STRATA_OK);
        snprintf(longname, sizeof(longname), "%s/", dir);
        memset(longname + strlen(longname), 'a', 230);
        longname[strlen(dir) + 1 + 230] = '\0';
        cr_assert_eq(save(longname, "x"), STRATA_EINVAL, "no room for a temporary's name");
        cr_assert_not_null(strstr(strata_last_error(), "too long"), "%s", strata_last_error());
        cr_assert_eq(save(at("missing/f"), "x"), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "missing"), "%s", strata_last_error());
}

Test(output_safe, a_save_does_not_allocate)
{
        struct strata__out o = out();
        long calls;
        int rc;

        put_file(at("h.ckpt"), "old", 0644);
        dead_writer(at("h.ckpt")); /* a stale temporary: the sweep runs too */
        strata_heapcount_start();
        rc = strata__out_open(&o, at("h.ckpt"));
        rc = rc ? rc : strata__out_write(&o, "new", 3);
        rc = rc ? rc : strata__out_commit(&o);
        calls = strata_heapcount_stop();
        cr_assert_eq(rc, STRATA_OK, "%s", strata_last_error());
        expect_content(at("h.ckpt"), "new");
        cr_assert_eq(entries(), 1);
        if (calls < 0) { /* a skip leaves without the suite's fini: its folder goes here */
                cli_rmtree(dir);
                cr_skip("heap counting is not available under a sanitizer");
        }
        cr_assert_eq(calls, 0);
}
