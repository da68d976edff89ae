/*
 * Flow control in situ: the heat-equation example learns its boundary control under SAC, two
 * runs bitwise equal (tests/build/rl_heat.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(rl_heat, sac_learns_the_boundary_control_bitwise_twice, .timeout = 300)
{
        cr_assert_eq(cli_build_script("rl_heat.sh"), 0,
                     "the heat-equation example failed to build, learn or repeat (see output)");
}
