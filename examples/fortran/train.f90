! Strata from Fortran: train a small MLP on synthetic data (4 classes in 20 dimensions) with
! ddp on 2 devices and check that the loss falls. Built and run by `make test`
! (tests/build/examples.sh) with gfortran against the installed strata.f90 and pkg-config.
program train
  use, intrinsic :: iso_c_binding
  use strata
  implicit none
  integer, parameter :: dim = 20, classes = 4, n = 1024, batch = 64
  real(c_float), target :: x(dim, n)
  integer(c_int32_t), target :: y(n)
  type(strata_module), target :: mods(3)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(strata_batch) :: b
  type(strata_metrics) :: m
  type(c_ptr) :: rt
  real(c_float) :: noise(dim)
  real(c_double) :: sum, first, last
  integer :: i, epoch, s, k

  ! Each class is a blob around its own corner of the cube.
  do i = 1, n
    k = mod(i, classes)
    y(i) = k
    call random_number(noise)
    x(:, i) = noise - 0.5
    x(k * 5 + 1:k * 5 + 5, i) = x(k * 5 + 1:k * 5 + 5, i) + 1.5
  end do

  mods(1) = strata_module(ops=strata_module_ops("linear"), out=32)
  mods(2) = strata_module(ops=strata_module_ops("relu"))
  mods(3) = strata_module(ops=strata_module_ops("linear"), out=classes)
  model = strata_model(in_features=dim, nmodules=3, modules=c_loc(mods))

  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", real(batch, c_double)), "batch")
  call check(strata_set(cfg, "classes", real(classes, c_double)), "classes")
  call check(strata_set(cfg, "strategy", real(STRATA_STRATEGY_DDP, c_double)), "strategy")
  call check(strata_set(cfg, "devices", 2.0_c_double), "devices")
  call check(strata_set(cfg, "optim.lr", 0.05_c_double), "lr")
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")

  first = 0
  last = 0
  do epoch = 1, 5
    sum = 0
    do s = 0, n / batch - 1
      b%x = c_loc(x(1, s * batch + 1))
      b%y = c_loc(y(s * batch + 1))
      b%rows = batch
      b%dim = dim
      call check(strata_train_step(rt, b, m), "train step")
      sum = sum + m%loss
    end do
    last = sum / (n / batch)
    if (epoch == 1) first = last
    print '(a, i0, a, f7.4)', "epoch ", epoch, " loss ", last
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

end program train
