/* The library never links HDF5: only strata-train and the test binary do (decision 0021). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "tests/support/cli.h"

Test(no_hdf5, library_references_no_hdf5_symbol)
{
        char cmd[512], out[4096];

        snprintf(cmd, sizeof(cmd),
                 "{ nm -u %s/libstrata.a; nm -D -u %s/libstrata.so; ldd %s/libstrata.so; } "
                 "2>&1 | grep -i -E ' H5|hdf5' | head -5", STRATA_BUILD_DIR, STRATA_BUILD_DIR,
                 STRATA_BUILD_DIR);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0);
        cr_assert_str_empty(out, "the library references HDF5:\n%s", out);
        snprintf(cmd, sizeof(cmd), "ldd %s/bin/strata-train | grep -c hdf5", STRATA_BUILD_DIR);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0);
        cr_assert_str_neq(out, "0\n", "strata-train should link HDF5");
}
