/*
 * The surrogate examples (issue 55, decision 0072): the FNO learns on a coarse grid and keeps
 * its error at twice the resolution, the MeshGraphNet-style surrogate learns from C (ddp on 2,
 * repeatable) and from Fortran, and the PyTorch peers read the examples' data
 * (tests/build/surrogates.sh); built against an install with pkg-config, the FNO (2-D and 3-D),
 * the mesh surrogate (C and Fortran) and the ViT-style one run under `mpirun -np 2` bitwise as
 * ddp on 2 devices (tests/build/surrogates_mpi.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(surrogate_examples, fno_and_mesh_surrogates_learn_from_c_and_fortran, .timeout = 300)
{
        cr_assert_eq(cli_build_script("surrogates.sh"), 0,
                     "a surrogate example failed to build or learn (see output)");
}

Test(surrogate_examples, installed_examples_under_mpirun_are_ddp_bitwise, .timeout = 300)
{
        cr_assert_eq(cli_build_script("surrogates_mpi.sh"), 0,
                     "a surrogate example failed under mpirun or differed from ddp (see output)");
}
