/*
 * The deployment examples (C and Fortran) build against an install, load weights that the
 * installed strata-train exported into an inference-only runtime, and predict the same field
 * bit for bit; weights of another model are refused by both (tests/build/deploy.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(deploy, c_and_fortran_examples_load_weights_and_predict_alike, .timeout = 300)
{
        cr_assert_eq(cli_build_script("deploy.sh"), 0,
                     "a deployment example failed to build, predict or match (see output)");
}
