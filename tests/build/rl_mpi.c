/*
 * RL agents across processes: 2 mpi processes of the cart-pole example train TD3, SAC and PPO
 * bitwise as one process on 2 devices (ddp) does, twice the same; too few environments are
 * refused under mpi (tests/build/rl_mpi.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(rl_mpi, td3_across_processes_is_ddp_bitwise, .timeout = 300)
{
        cr_assert_eq(cli_build_script("rl_mpi.sh"), 0,
                     "the cart-pole example under mpirun failed or differed (see output)");
}
