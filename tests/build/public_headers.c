/*
 * Every installed public header, and the umbrella, compiles alone as C++17 and as C11 with
 * -Wall -Wextra -Wpedantic -Werror from the install prefix only (tests/build/public_headers.sh);
 * the check fails on a header with C11's _Atomic and on one that needs a header not installed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Run public_headers.sh with @p args; its exit status. */
static int run_check(const char *args)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/public_headers.sh %s >&2",
                 STRATA_SOURCE_DIR, args);
        return system(cmd);
}

/* Write @p text to @p dir/strata/@p name. */
static void put(const char *dir, const char *name, const char *text)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/strata/%s", dir, name);
        f = fopen(path, "w");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
}

Test(public_headers, installed_headers_compile_as_cpp_and_c, .timeout = 240)
{
        char args[1024];

        if (STRATA_SAN[0] != '\0')
                cr_skip("install is checked in the plain build, not under " STRATA_SAN);
        snprintf(args, sizeof(args), "%s %s", STRATA_SOURCE_DIR, STRATA_BUILD_DIR);
        cr_assert_eq(run_check(args), 0, "a public header is not C++17/C11-clean (see output)");
}

Test(public_headers, check_fails_on_atomic_and_on_an_internal_include, .timeout = 60)
{
        char dir[] = "/tmp/strata-headers-XXXXXX", sub[64], args[128];

        cr_assert_not_null(mkdtemp(dir));
        snprintf(sub, sizeof(sub), "%s/strata", dir);
        cr_assert_eq(mkdir(sub, 0700), 0);
        snprintf(args, sizeof(args), "--dir %s", dir);
        put(dir, "ok.h", "#ifndef OK_H\n#define OK_H\nstruct ok { int x; };\n#endif\n");
        cr_assert_eq(run_check(args), 0, "a clean fixture header was refused");
        put(dir, "atomic.h", "#include <stdint.h>\nstruct t { _Atomic uint64_t step; };\n");
        cr_expect_neq(run_check(args), 0, "a header with _Atomic passed as C++");
        unlink(strcat(sub, "/atomic.h"));
        put(dir, "inner.h", "#include \"kernel/trace.h\"\n");
        cr_expect_neq(run_check(args), 0, "a header needing an uninstalled one passed");
        snprintf(args, sizeof(args), "rm -rf %s", dir);
        cr_assert_eq(system(args), 0);
}
