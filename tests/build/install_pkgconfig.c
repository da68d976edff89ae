/* `make install` gives a library, headers and strata.pc that a program can build against. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(install_pkgconfig, tiny_program_builds_and_runs, .timeout = 240)
{
        char cmd[2048];

        if (STRATA_SAN[0] != '\0')
                cr_skip("install is checked in the plain build, not under " STRATA_SAN);
        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/install_pkgconfig.sh %s %s",
                 STRATA_SOURCE_DIR, STRATA_SOURCE_DIR, STRATA_BUILD_DIR);
        cr_assert_eq(system(cmd), 0, "install + pkg-config build failed (see output)");
}
