#include "tests/support/cli.h"

#include <criterion/criterion.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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
