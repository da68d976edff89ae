/*
 * The Fortran module refuses arrays of the wrong sizes before the library reads or writes
 * them, names every status and reads parameters (tests/build/fortran_sizes.sh: a Fortran
 * program against the build tree; under ASan itself instrumented).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(fortran_sizes, wrappers_check_every_size, .timeout = 240)
{
        char cmd[2048];

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("gfortran's program is not built under TSan");
        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/fortran_sizes.sh %s %s %s >&2",
                 STRATA_SOURCE_DIR, STRATA_SOURCE_DIR, STRATA_BUILD_DIR, STRATA_SAN);
        cr_assert_eq(system(cmd), 0, "a Fortran wrapper let a wrong size through (see output)");
}
