#!/bin/sh
# The Fortran module checks the sizes of the arrays it is given before the library reads or
# writes them: targets of another sample count, predict's out of another shape (too few
# samples, too few or too many outputs a sample, real32 and real64) are refused with a message
# and nothing written; the statuses have their names; strata_parameter() reads a group's name
# and values and refuses an array too small. Built against the build tree's archive (under
# the ASan build with -fsanitize=address, so that any write past an array is a failure).
#   fortran_sizes.sh SRC BUILD SAN
set -eu
src=$1 build=$2 san=${3:-}
dir=$build/fortran-sizes
rm -rf "$dir"
mkdir -p "$dir"
flags="-std=f2018 -Wall -Wextra -Werror -g"
[ "$san" = asan ] && flags="$flags -fsanitize=address,undefined -fno-omit-frame-pointer"
cat > "$dir/sizes.f90" <<'F90'
program sizes
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use strata
  implicit none
  integer, parameter :: dim = 4, outs = 3, batch = 8
  real(real64), allocatable :: x(:, :), t(:, :), t7(:, :), o64(:, :), o64small(:, :)
  real(real32), allocatable :: o(:, :), o7(:, :), o2(:, :), o1(:), w(:), wsmall(:)
  type(strata_module), target :: mods(3)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(strata_param) :: p
  type(c_ptr) :: rt
  integer :: n, i
  character(len=64) :: name

  allocate(x(dim, batch), t(outs, batch), t7(outs, 7), o(outs, batch), o7(outs, 7))
  allocate(o2(2, batch), o1(outs * batch), o64(outs, batch), o64small(outs, 7))
  allocate(w(32), wsmall(31))
  call random_number(x)
  t = 0.5d0
  t7 = 0.5d0
  mods(1) = strata_module(ops=strata_module_ops("linear"), out=8)
  mods(2) = strata_module(ops=strata_module_ops("relu"))
  mods(3) = strata_module(ops=strata_module_ops("linear"), out=outs)
  model = strata_model(in_features=dim, nmodules=3, modules=c_loc(mods), &
                       loss=strata_loss_ops("mse"))
  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", batch), "batch")
  call check(strata_set(cfg, "classes", outs), "classes")
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")

  call check(strata_train(rt, x, t), "train")
  call refused(strata_train(rt, x, t7), "the targets t have 7 samples, the inputs x 8 (the last &
                                     &dimension of each)")
  call refused(strata_evaluate(rt, x, t7), "the targets t have 7 samples, the inputs x 8")
  call check(strata_predict(rt, x, o), "predict")
  call refused(strata_predict(rt, x, o7), "the outputs out have room for 7 samples, the &
                                         &inputs x have 8")
  call refused(strata_predict(rt, x, o2), "the outputs out have 2 values a sample; the model has &
                                         &3 outputs")
  call refused(strata_predict(rt, x, o1), "the outputs out have room for 1 samples")
  call check(strata_predict(rt, x, o64), "predict real64")
  if (maxval(abs(o64 - real(o, real64))) > 0) call fail("real64 outputs differ from real32")
  call refused(strata_predict(rt, x, o64small), "the outputs out have room for 7 samples")
  call refused(strata_predict(rt, x(:, 1:0), o), "the inputs x are empty")

  if (strata_status_name(STRATA_ENONFINITE) /= "STRATA_ENONFINITE") call fail("status name")
  if (STRATA_ESTOPPED /= -16) call fail("STRATA_ESTOPPED")
  call check(strata_parameter_count(rt, n), "parameter count")
  if (n /= 4) call fail("4 groups expected")
  call check(strata_parameter(rt, 0, p, w, n), "parameter 0")
  name = ""
  do i = 1, 64
    if (p%name(i) == c_null_char) exit
    name(i:i) = p%name(i)
  end do
  if (name /= "layers.0.weight" .or. n /= 32 .or. p%group%count /= 32) &
    call fail("parameter 0 is " // trim(name))
  if (maxval(abs(w)) <= 0) call fail("parameter 0's values were not copied")
  call refused(strata_parameter(rt, 0, p, wsmall), "layers.0.weight has 32 values here; out " // &
               "holds 31")
  call refused(strata_parameter(rt, 4, p), "parameter 4 not in [0, 4)")
  call check(strata_teardown(rt), "teardown")
  deallocate(x, t, t7, o, o7, o2, o1, o64, o64small, w, wsmall, cfg%store)
  print '(a)', "ok: every size checked"

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(a)', what
    stop 1
  end subroutine

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc /= STRATA_OK) call fail(what // ": " // strata_error())
  end subroutine

  subroutine refused(rc, why)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: why
    if (rc /= STRATA_EINVAL) call fail("not refused: " // why)
    if (index(strata_error(), why) == 0) call fail("refused with: " // strata_error())
  end subroutine

end program sizes
F90
libs=$(PKG_CONFIG_PATH="$build/pkgconfig" pkg-config --libs --static strata | sed 's/-lstrata//')
cd "$dir"
gfortran $flags -c "$src/fortran/strata.f90"
gfortran $flags -o sizes sizes.f90 strata.o "$build/libstrata.a" $libs
./sizes
