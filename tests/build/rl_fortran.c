/*
 * Reinforcement learning from Fortran: the config type mirrors C's, bad shapes are refused
 * by name, and the Fortran cart-pole learns under PPO, two runs bitwise equal
 * (tests/build/rl_fortran.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(rl_fortran, layout_shapes_and_a_repeatable_ppo_run, .timeout = 300)
{
        cr_assert_eq(cli_build_script("rl_fortran.sh"), 0,
                     "the Fortran RL binding or example failed (see output)");
}
