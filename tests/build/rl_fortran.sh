#!/bin/sh
# Reinforcement learning from Fortran (module strata_rl, fortran/strata.f90): the mirrored
# strata_rl_agent_config has the C struct's size and field offsets; arrays of the wrong shape
# are refused with a message naming them; examples/fortran/cartpole.f90 learns under PPO
# (20000 steps: the last 10 episodes' mean return more than twice the first 10's) and two
# runs are bitwise equal (returns and exported policy).
#   rl_fortran.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/rl-fortran
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
flags="-std=f2018 -Wall -Wextra -Werror -O2"
gfortran $flags -c "$src/fortran/strata.f90"
gfortran $flags -o cartpole-f90 "$src/examples/fortran/cartpole.f90" strata.o \
        -L"$build" -lstrata -Wl,-rpath,"$build"
cat > layout.c <<'C'
#include <stddef.h>
#include <stdio.h>
#include <strata/rl.h>
int main(void)
{
        printf("%zu %zu %zu %zu %zu\n", sizeof(struct strata_rl_agent_config),
               offsetof(struct strata_rl_agent_config, tau),
               offsetof(struct strata_rl_agent_config, fixed_alpha),
               offsetof(struct strata_rl_agent_config, seed),
               offsetof(struct strata_rl_agent_config, runtime));
        return 0;
}
C
cc -std=c11 -I"$src/include" -o layout layout.c
cat > check.f90 <<'F90'
program check
  use, intrinsic :: iso_c_binding
  use strata, only: STRATA_OK, STRATA_EINVAL, strata_error
  use strata_rl
  implicit none
  type(strata_rl_agent_config), target :: c
  type(strata_rl_agent) :: a
  real(c_float) :: s(4, 1), s3(3, 1), s2(4, 2), act(1, 1), r(1)
  integer(c_int) :: d(1), rc
  integer(c_intptr_t) :: b
  character(len=:), allocatable :: e
  b = transfer(c_loc(c), b)
  print '(i0, 4(1x, i0))', c_sizeof(c), transfer(c_loc(c%tau), b) - b, &
    transfer(c_loc(c%fixed_alpha), b) - b, transfer(c_loc(c%seed), b) - b, &
    transfer(c_loc(c%runtime), b) - b
  c%algo = STRATA_RL_TD3
  c%state_dim = 4
  c%action_dim = 1
  c%hidden = 8
  c%batch = 4
  c%max_size = 64
  c%seed = 3
  if (strata_rl_agent_new(a, c) /= STRATA_OK) stop 1
  s = 0.1
  rc = strata_rl_act(a, s3, act)
  e = strata_error()
  if (rc /= STRATA_EINVAL) stop 2
  if (index(e, "state is (3, 1)") == 0) stop 2
  rc = strata_rl_act(a, s2, act)
  e = strata_error()
  if (rc /= STRATA_EINVAL) stop 3
  if (index(e, "state is (4, 2)") == 0) stop 3
  d = 0
  r = 1
  rc = strata_rl_record(a, s, act, r, s3, d)
  e = strata_error()
  if (rc /= STRATA_EINVAL) stop 4
  if (index(e, "next is (3, 1)") == 0) stop 4
  if (strata_rl_act(a, s, act) /= STRATA_OK) stop 5
  r = transfer(int(z'7fc00000', c_int32_t), r(1))
  rc = strata_rl_record(a, s, act, r, s, d)
  e = strata_error()
  if (rc == STRATA_OK) stop 6
  if (index(e, "reward[0]") == 0) stop 6
  if (strata_rl_agent_teardown(a) /= STRATA_OK) stop 7
  print '(a)', "shapes and NaN refused"
end program
F90
gfortran $flags -o check check.f90 strata.o -L"$build" -lstrata -Wl,-rpath,"$build"
want=$(./layout)
got=$(./check | head -1)
./check | tail -1
[ "$want" = "$got" ] || { echo "rl_fortran: the config's layout: C $want, Fortran $got"; exit 1; }
echo "rl_fortran: strata_rl_agent_config is C's ($want)"
for k in 1 2; do
        ./cartpole-f90 ppo 20000 "ppo-$k.safetensors" > "ppo-$k.json"
done
cat ppo-1.json
sed 's/.*"first10": \([0-9.]*\), "last10": \([0-9.]*\).*/\1 \2/' ppo-1.json |
        awk '{ if (!($2 > 2 * $1)) { print "rl_fortran: returns did not rise: " $0; exit 1 } }'
cmp -s ppo-1.json ppo-2.json || { echo "rl_fortran: two runs' returns differ"; exit 1; }
cmp -s ppo-1.safetensors ppo-2.safetensors ||
        { echo "rl_fortran: two runs exported different policies"; exit 1; }
echo "rl_fortran: PPO learned from Fortran; two runs bitwise equal"
