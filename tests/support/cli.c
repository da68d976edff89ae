#include "tests/support/cli.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/wait.h>

int cli_run(const char *bin, const char *args, char *out, size_t n)
{
        char cmd[2048];
        size_t got;
        FILE *p;
        int st;

        snprintf(cmd, sizeof(cmd), "%s %s 2>&1", bin, args);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        got = fread(out, 1, n - 1, p);
        out[got] = '\0';
        st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
