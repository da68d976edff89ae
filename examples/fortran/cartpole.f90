! TorchFort's cart-pole trained in situ from Fortran (module strata_rl in fortran/strata.f90):
! the environment of examples/rl/cartpole.c (CartPole-v1's physics, a force of a x 10 N, a
! clipped to [-1, 1], 500 steps at most, reward 1 a step) in Fortran, driving a Strata agent.
!
! Usage: cartpole-f90 td3|sac|ppo [STEPS [EXPORT]]: STEPS environment steps (default 20000);
! EXPORT, the policy's safetensors at the end. Prints one JSON line: episodes, steps, the mean
! return of the first and last 10 episodes, and the sum of all returns.
program cartpole
  use, intrinsic :: iso_c_binding
  use strata, only: STRATA_OK, strata_error
  use strata_rl
  implicit none
  integer, parameter :: WARMUP = 1000, MAXEP = 20000
  type(strata_rl_agent_config) :: c
  type(strata_rl_agent) :: agent
  real(c_float) :: obs(4, 1), next(4, 1), act(1, 1), rew(1)
  real(c_double) :: s(4)
  real(c_float), allocatable :: returns(:)
  integer(c_int) :: done(1), stored(1), rc
  integer :: steps, n, t, episodes, seed_size
  integer, allocatable :: seed(:)
  logical :: ended, trunc
  character(len=256) :: arg, export
  real :: u
  real(c_float) :: ret

  call get_command_argument(1, arg)
  c%state_dim = 4
  c%action_dim = 1
  c%n_envs = 1
  c%hidden = 64
  c%gamma = 0.99
  c%seed = 1
  select case (trim(arg))
  case ("ppo")
    c%algo = STRATA_RL_PPO
    c%actor_lr = 3e-4
    c%critic_lr = 1e-3
    c%steps = 1024
    c%epochs = 10
    c%minibatch = 64
    c%log_std = -0.5
  case ("td3", "sac")
    c%algo = STRATA_RL_TD3
    if (trim(arg) == "sac") c%algo = STRATA_RL_SAC
    c%actor_lr = 1e-3
    if (trim(arg) == "sac") c%actor_lr = 3e-4
    c%critic_lr = 1e-3
    c%batch = 64
    c%max_size = 100000
    c%min_size = WARMUP
  case default
    print '(a)', "usage: cartpole-f90 td3|sac|ppo [STEPS [EXPORT]]"
    stop 2
  end select
  steps = 20000
  call get_command_argument(2, arg)
  if (len_trim(arg) > 0) read (arg, *) steps
  call get_command_argument(3, export)

  call random_seed(size=seed_size)
  allocate(seed(seed_size), returns(MAXEP))
  seed = 12345
  call random_seed(put=seed)
  rc = strata_rl_agent_new(agent, c)
  if (rc /= STRATA_OK) call fail("init")

  episodes = 0
  ret = 0
  call reset()
  do n = 0, steps - 1
    if (c%algo /= STRATA_RL_PPO .and. n < WARMUP) then
      call random_number(u)
      act(1, 1) = 2.0 * u - 1.0
    else
      rc = strata_rl_act(agent, obs, act)
      if (rc /= STRATA_OK) call fail("act")
    end if
    call step(real(act(1, 1), c_double))
    rew(1) = 1
    done(1) = merge(1, 0, ended)
    stored = done
    if (c%algo /= STRATA_RL_PPO .and. trunc) stored(1) = 0 ! off-policy: bootstrap at the limit
    rc = strata_rl_record(agent, obs, act, rew, next, stored)
    if (rc /= STRATA_OK) call fail("record")
    ret = ret + 1
    if (strata_rl_ready(agent)) then
      rc = strata_rl_train(agent, 1)
      if (rc /= STRATA_OK) call fail("train")
    end if
    obs = next
    if (ended) then
      episodes = episodes + 1
      if (episodes <= MAXEP) returns(episodes) = ret
      ret = 0
      call reset()
    end if
  end do
  if (len_trim(export) > 0) then
    rc = strata_rl_export_policy(agent, trim(export))
    if (rc /= STRATA_OK) call fail("export")
  end if
  t = min(episodes, MAXEP)
  print '(a, i0, a, i0, a, f0.3, a, f0.3, a, f0.1, a)', '{"episodes": ', episodes, &
    ', "steps": ', steps, ', "first10": ', sum(returns(1:min(10, t))) / max(1, min(10, t)), &
    ', "last10": ', sum(returns(max(1, t - 9):t)) / max(1, min(10, t)), &
    ', "returns_sum": ', sum(real(returns(1:t), c_double)), '}'
  rc = strata_rl_agent_teardown(agent)

contains

  subroutine reset()
    integer :: i
    do i = 1, 4
      call random_number(u)
      s(i) = 0.1d0 * u - 0.05d0
    end do
    t = 0
    obs(:, 1) = real(s, c_float)
  end subroutine

  subroutine step(a)
    real(c_double), intent(in) :: a
    real(c_double), parameter :: g = 9.8d0, mc = 1d0, mp = 0.1d0, l = 0.5d0, tau = 0.02d0
    real(c_double) :: f, co, si, tmp, thacc, xacc
    f = 10d0 * min(max(a, -1d0), 1d0)
    co = cos(s(3))
    si = sin(s(3))
    tmp = (f + mp * l * s(4) * s(4) * si) / (mc + mp)
    thacc = (g * si - co * tmp) / (l * (4d0 / 3d0 - mp * co * co / (mc + mp)))
    xacc = tmp - mp * l * thacc * co / (mc + mp)
    s(1) = s(1) + tau * s(2)
    s(2) = s(2) + tau * xacc
    s(3) = s(3) + tau * s(4)
    s(4) = s(4) + tau * thacc
    t = t + 1
    next(:, 1) = real(s, c_float)
    trunc = t >= 500
    ended = abs(s(1)) > 2.4d0 .or. abs(s(3)) > 12d0 * 2d0 * acos(-1d0) / 360d0 .or. trunc
  end subroutine

  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(a, a, a, a)', "cartpole-f90: ", what, ": ", strata_error()
    stop 1
  end subroutine

end program
