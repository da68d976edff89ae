/*
 * The Fortran module's bind(C) types have the sizes and field offsets of the C structs of the
 * same names, and its constants the C values (tests/build/fortran_layout.sh, from both
 * compilers' debug information).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(fortran_layout, bind_c_types_match_the_c_structs, .timeout = 120)
{
        cr_assert_eq(cli_build_script("fortran_layout.sh"), 0,
                     "fortran/strata.f90 and the C headers differ (see output)");
}
