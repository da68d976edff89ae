#include "tests/support/cli.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int cli_run(const char *bin, const char *args, char *out, size_t n)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "%s %s 2>&1", bin, args);
        return cli_sh(cmd, out, n);
}

int cli_sh(const char *cmd, char *out, size_t n)
{
        size_t got;
        FILE *p;
        int st;

        p = popen(cmd, "r");
        cr_assert_not_null(p);
        got = fread(out, 1, n - 1, p);
        out[got] = '\0';
        st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int cli_run_tty(const char *bin, const char *args, char *out, size_t n)
{
        char cmd[2048];
        size_t got = 0;
        int master, st;
        pid_t pid;

        snprintf(cmd, sizeof(cmd), "exec %s %s 2>/dev/null", bin, args);
        pid = forkpty(&master, NULL, NULL, NULL);
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        for (;;) {
                ssize_t r = got < n - 1 ? read(master, out + got, n - 1 - got) : 0;

                if (r <= 0)
                        break; /* EIO once the child has closed the terminal */
                got += (size_t)r;
        }
        out[got] = '\0';
        close(master);
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void cli_serial_jobs(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0); /* released when the test's process exits */
}

double cli_now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cli_kill_jobs(const char *seed)
{
        char cmd[256], pids[4096];

        snprintf(cmd, sizeof(cmd), "pgrep -f 'strata-trai[n].*seed %s'", seed);
        if (cli_sh(cmd, pids, sizeof(pids)) != 0)
                return;
        for (char *p = strtok(pids, "\n"); p; p = strtok(NULL, "\n")) {
                pid_t pid = (pid_t)atoi(p);

                if (pid > 0) {
                        kill(pid, SIGCONT);
                        kill(pid, SIGKILL);
                }
        }
}

int cli_have_mpi(void)
{
        char out[256];

        return access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
               cli_sh("command -v mpirun", out, sizeof(out)) == 0;
}

void cli_mkdtemp(char *dir, size_t n, const char *tag)
{
        snprintf(dir, n, "/tmp/strata-%s-XXXXXX", tag);
        cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir);
}

const char *cli_path(const char *dir, const char *name)
{
        static char p[4][512];
        static int k;

        k = (k + 1) % 4;
        cr_assert_lt(snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name), (int)sizeof(p[k]));
        return p[k];
}

void cli_rmtree(const char *dir)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)!system(cmd);
}

void cli_same_files(const char *dir, const char *a, const char *b)
{
        static char out[1024];
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), "cmp '%s/%s' '%s/%s'", dir, a, dir, b);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s and %s differ: %s", a, b, out);
}

long cli_slurp(const char *path, unsigned char *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        long n;

        cr_assert_not_null(f, "%s", path);
        n = (long)fread(buf, 1, cap, f);
        fclose(f);
        return n;
}

void cli_train_export(const char *launch, const char *args, const char *dir, const char *name)
{
        static char out[1 << 16];
        char cmd[2048];
        int rc;

        snprintf(cmd, sizeof(cmd), "%s%s/bin/strata-train %s --export-safetensors %s/%s 2>&1",
                 launch, STRATA_BUILD_DIR, args, dir, name);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
}

int cli_build_script(const char *script)
{
        char cmd[2048];

        if (STRATA_SAN[0] != '\0')
                cr_skip("checked in the plain build, not under " STRATA_SAN);
        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/%s %s %s >&2", STRATA_SOURCE_DIR, script,
                 STRATA_SOURCE_DIR, STRATA_BUILD_DIR);
        return system(cmd);
}

void cli_epoch_line(const char *out, int e, char *line, size_t n)
{
        char key[32];
        const char *p, *q;

        snprintf(key, sizeof(key), "{\"epoch\":%d,", e);
        p = strstr(out, key);
        q = p ? strstr(p, ",\"samples_per_s\"") : NULL;
        cr_assert(p && q, "no epoch %d line in: %s", e, out);
        snprintf(line, n, "%.*s", (int)(q - p), p);
}

int cli_resume_epoch(const char *dir, char *name, size_t n)
{
        char path[512];
        long s = 0;
        int e = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/latest", dir);
        f = fopen(path, "r");
        cr_assert_not_null(f, "no latest checkpoint in %s", dir);
        name[0] = '\0';
        cr_assert_not_null(fgets(name, (int)n, f));
        fclose(f);
        cr_assert(sscanf(name, "epoch-%d-step-%ld", &e, &s) == 2 ||
                  sscanf(name, "epoch-%d.ckpt", &e) == 1, "latest names %s", name);
        return s ? e : e + 1; /* a completed epoch: the next one is compared */
}
