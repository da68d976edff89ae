/*
 * The graph modules from Fortran: a mesh over the program's own arrays trains, a bad one is
 * refused at init with the edge and value named (tests/build/fortran_graph.sh: a Fortran program
 * against the build tree; under ASan itself instrumented).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(fortran_graph, a_mesh_from_fortran_trains_and_a_bad_one_is_refused, .timeout = 240)
{
        char cmd[2048];

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("gfortran's program is not built under TSan");
        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/fortran_graph.sh %s %s %s >&2",
                 STRATA_SOURCE_DIR, STRATA_SOURCE_DIR, STRATA_BUILD_DIR, STRATA_SAN);
        cr_assert_eq(system(cmd), 0, "the Fortran graph program failed (see output)");
}
