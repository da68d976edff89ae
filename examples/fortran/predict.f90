! Deploying a trained surrogate in a simulation, from Fortran: examples/c/predict.c's program.
! An inference-only runtime (inference_only: no gradients, no optimizer state planned) of
! batch 1, the trained weights loaded once at start, then one prediction per time step: the
! surrogate advances a field of 16 cells (clamped to [-1, 1]) for STEPS steps. The weights are
! any safetensors file of the model "input(16) linear(32) relu linear(16)":
!   ./predict w.safetensors 100
! It prints the mean latency of a prediction and the final field's checksum (the bits of its
! sum in double), the C program's. Built and run by `make test` (tests/build/deploy.sh).
program predict
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64
  use strata
  implicit none
  integer, parameter :: cells = 16
  real(real32), parameter :: two_pi = 6.2831853
  type(strata_module), target :: mods(3)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(c_ptr) :: rt
  real(real32), target :: u(cells), pred(cells)
  real(real64) :: sum
  character(len=4096) :: path
  character(len=32) :: arg
  integer :: steps, s, i
  integer(int64) :: t0, t1, rate

  if (command_argument_count() < 1) then
    print '(a)', "usage: predict WEIGHTS.safetensors [STEPS]"
    stop 2
  end if
  call get_command_argument(1, path)
  steps = 100
  if (command_argument_count() > 1) then
    call get_command_argument(2, arg)
    read (arg, *) steps
  end if

  call check(strata_model_parse("input(16) linear(32) relu linear(16)", mods, model), "model")
  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", 1.0_c_double), "batch")
  call check(strata_set(cfg, "classes", real(cells, c_double)), "classes")
  call check(strata_set(cfg, "strategy", real(STRATA_STRATEGY_SINGLE, c_double)), "strategy")
  call check(strata_set(cfg, "inference_only", 1.0_c_double), "inference_only")
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")
  call check(strata_load_weights(rt, trim(path)), "weights")

  do i = 1, cells
    u(i) = sin(two_pi * real(i - 1, real32) / real(cells, real32))
  end do
  call system_clock(t0, rate)
  do s = 1, steps
    call check(strata_predict(rt, u, pred), "predict")
    u = max(-1.0_real32, min(1.0_real32, pred))
  end do
  call system_clock(t1)
  call check(strata_teardown(rt), "teardown")

  sum = 0
  do i = 1, cells
    sum = sum + real(u(i), real64)
  end do
  print '(i0, a, f0.3, a)', steps, " predictions, ", &
    real(t1 - t0, real64) / real(rate, real64) / steps * 1e6_real64, " us each"
  print '(a, z16.16)', "checksum ", transfer(sum, 0_int64)

contains

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc /= STRATA_OK) then
      print '(a, a, a)', what, ": ", strata_error()
      stop 1
    end if
  end subroutine

end program predict
