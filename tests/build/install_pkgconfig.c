/*
 * `make install` gives a library, headers, strata.pc and the tools that a program can build
 * against; the C++ example builds with pkg-config (shared and --static) and the Fortran one
 * with the installed module, and both train.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* Run tests/build/@p script with the source and build directories; 0 when it passed. */
static int run_script(const char *script)
{
        char cmd[2048];

        if (STRATA_SAN[0] != '\0')
                cr_skip("install is checked in the plain build, not under " STRATA_SAN);
        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/%s %s %s >&2", STRATA_SOURCE_DIR, script,
                 STRATA_SOURCE_DIR, STRATA_BUILD_DIR);
        return system(cmd);
}

Test(install_pkgconfig, tiny_program_builds_and_runs, .timeout = 240)
{
        cr_assert_eq(run_script("install_pkgconfig.sh"), 0,
                     "install + pkg-config build failed (see output)");
}

Test(install_pkgconfig, cpp_and_fortran_examples_build_and_train, .timeout = 240)
{
        cr_assert_eq(run_script("examples.sh"), 0,
                     "an example failed to build or train (see output)");
}
