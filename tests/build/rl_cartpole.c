/*
 * Reinforcement learning in situ: the cart-pole example learns under TD3, SAC and PPO, and two runs
 * of each are bitwise equal, returns and exported policy (tests/build/rl_cartpole.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(rl_cartpole, td3_sac_and_ppo_learn_and_repeat_bitwise, .timeout = 300)
{
        cr_assert_eq(cli_build_script("rl_cartpole.sh"), 0,
                     "the cart-pole example failed to build, learn or repeat (see output)");
}
