! Strata from Fortran: a model with two inputs and two outputs, each output with its own loss
! weight (TorchFort's train_multiarg). Input a and input b (4 values a sample each) go through
! their own layers, are concatenated, and two heads learn a + b and a * b; the loss is
! MSE(a + b) + 0.5 MSE(a * b). A sample's row is a's values then b's, a row of targets the
! first head's then the second's: x(1:4, i) = a, x(5:8, i) = b. ddp on 2 devices; the loss
! must fall, and each head's own loss (m%losses) weighted must add up to it. Built and run by
! `make test` (tests/build/examples.sh).
program train_multiarg
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32
  use strata
  implicit none
  integer, parameter :: n = 1024, batch = 64
  character(len=*), parameter :: line = "input(4) input(4) linear(16) tanh " // &
    "linear(16,from=input1) tanh concat(from=1) linear(4) output(mse) " // &
    "linear(4,from=4) output(mse,weight=0.5)"
  real(real32), target :: x(8, n), t(8, n)
  type(strata_module), target :: mods(8)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(strata_metrics) :: m
  type(c_ptr) :: rt
  real(c_double) :: sum, first, last, own(2)
  integer :: epoch, s

  call random_number(x)
  x = x - 0.5
  t(1:4, :) = x(1:4, :) + x(5:8, :)
  t(5:8, :) = x(1:4, :) * x(5:8, :)

  call check(strata_model_parse(line, mods, model), "model line")
  if (model%ninputs /= 2 .or. model%noutputs /= 2) then
    print '(a)', "the line did not give two inputs and two outputs"
    stop 1
  end if
  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", real(batch, c_double)), "batch")
  call check(strata_set(cfg, "classes", 8.0_c_double), "classes")
  call check(strata_set(cfg, "strategy", real(STRATA_STRATEGY_DDP, c_double)), "strategy")
  call check(strata_set(cfg, "devices", 2.0_c_double), "devices")
  call check(strata_set(cfg, "optim.lr", 0.1_c_double), "lr")
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")

  first = 0
  last = 0
  do epoch = 1, 5
    sum = 0
    own = 0
    do s = 0, n / batch - 1
      call check(strata_train(rt, x(:, s * batch + 1:(s + 1) * batch), &
                              t(:, s * batch + 1:(s + 1) * batch), m), "train step")
      sum = sum + m%loss
      own = own + m%losses(1:2)
    end do
    last = sum / (n / batch)
    own = own / (n / batch)
    if (epoch == 1) first = last
    print '(a, i0, a, f8.5, a, f8.5, a, f8.5)', "epoch ", epoch, " loss ", last, &
      "  a+b ", own(1), "  a*b ", own(2)
    if (m%noutputs /= 2 .or. &
        abs(own(1) + 0.5_c_double * own(2) - last) > 1e-9_c_double * last) then
      print '(a)', "the heads' own losses do not add up to the loss"
      stop 1
    end if
  end do
  call check(strata_teardown(rt), "teardown")
  if (last >= first) then
    print '(a)', "the loss did not fall"
    stop 1
  end if
  print '(a)', "ok: the loss fell"

contains

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc /= STRATA_OK) then
      print '(a, a, a)', what, ": ", strata_error()
      stop 1
    end if
  end subroutine

end program train_multiarg
