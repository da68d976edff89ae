/*
 * A host application's own threaded BLAS beside Strata (issue 43 item 3): Debian's threaded
 * OpenBLAS, linked by the program itself with libstrata.so, multiplies exactly before, during
 * (from another thread, with 4 OpenBLAS threads) and after a ddp run of 2 devices, which stays
 * bitwise the run made without it, and OpenBLAS's names resolve to OpenBLAS
 * (tests/build/host_blas.sh; under ASan and TSan the program is instrumented too).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(host_blas, threaded_openblas_before_during_and_after_a_ddp_run, .timeout = 240)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "sh %s/tests/build/host_blas.sh %s %s %s >&2",
                 STRATA_SOURCE_DIR, STRATA_SOURCE_DIR, STRATA_BUILD_DIR, STRATA_SAN);
        cr_assert_eq(system(cmd), 0, "the host's OpenBLAS or Strata's run went wrong beside "
                     "the other (see output)");
}
