/*
 * Reinforcement learning in situ: the cart-pole example learns under TD3, SAC and PPO; two
 * runs of each are bitwise equal, returns and exported policy; one killed and resumed is the
 * run that never stopped (tests/build/rl_cartpole.sh).
 */
#include <criterion/criterion.h>

#include "tests/support/cli.h"

Test(rl_cartpole, td3_sac_and_ppo_learn_repeat_and_resume_bitwise, .timeout = 300)
{
        cr_assert_eq(cli_build_script("rl_cartpole.sh"), 0,
                     "the cart-pole example failed to build, learn or repeat (see output)");
}
