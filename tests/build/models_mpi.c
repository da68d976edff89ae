/*
 * Several models on one runtime across processes: DDPG (examples/c/ddpg.c) learns alone, and
 * 2 mpi processes of one device train bitwise the 4 models ddp does on 2 devices
 * (tests/build/models_mpi.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(models_mpi, ddpg_learns_and_mpi_is_ddp, .timeout = 300)
{
        cr_assert_eq(cli_build_script("models_mpi.sh"), 0,
                     "the DDPG example failed to build, learn or match (see output)");
}
