/*
 * The in-situ examples (C and Fortran) build against an install and learn the advection
 * surrogate alone and under `mpirun -np 2`: validation MSE below a bound the untrained model
 * does not meet, and 1-process and 2-process runs bitwise equal (tests/build/insitu.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(insitu, c_and_fortran_examples_learn_alone_and_under_mpirun, .timeout = 300)
{
        cr_assert_eq(cli_build_script("insitu.sh"), 0,
                     "an in-situ example failed to build, learn or match (see output)");
}
