/* `make uninstall` removes everything `make install` put in place, libstrata-mpi.so too. */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(uninstall, leaves_nothing_of_strata, .timeout = 240)
{
        cr_assert_eq(cli_build_script("uninstall.sh"), 0, "make uninstall left files (see output)");
}
