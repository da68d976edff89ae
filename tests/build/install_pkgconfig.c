/*
 * `make install` gives a library, headers, strata.pc and the tools that a program can build
 * against; the C++ example builds with pkg-config (shared and --static) and the Fortran one
 * with the installed module, and both train.
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(install_pkgconfig, tiny_program_builds_and_runs, .timeout = 240)
{
        cr_assert_eq(cli_build_script("install_pkgconfig.sh"), 0,
                     "install + pkg-config build failed (see output)");
}

Test(install_pkgconfig, cpp_and_fortran_examples_build_and_train, .timeout = 240)
{
        cr_assert_eq(cli_build_script("examples.sh"), 0,
                     "an example failed to build or train (see output)");
}
