#!/bin/sh
# The graph modules from Fortran: a type(strata_mesh) over the program's own int32 arrays (0-based
# node numbers), referenced by gather and scatter modules through c_loc, trains (the loss goes
# down); a mesh with an index past the nodes is refused at init, the edge and value named.
# Built against the build tree's archive (under the ASan build with -fsanitize=address).
#   fortran_graph.sh SRC BUILD SAN
set -eu
src=$1 build=$2 san=${3:-}
dir=$build/fortran-graph
rm -rf "$dir"
mkdir -p "$dir"
flags="-std=f2018 -Wall -Wextra -Werror -g"
[ "$san" = asan ] && flags="$flags -fsanitize=address,undefined -fno-omit-frame-pointer"
cat > "$dir/graph.f90" <<'F90'
program graph
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64
  use strata
  implicit none
  integer, parameter :: ch = 2, nodes = 4, edges = 5, batch = 8, outs = 3
  integer(c_int32_t), target :: src(edges) = [0, 1, 2, 3, 0], dst(edges) = [1, 2, 3, 0, 2]
  integer(c_int32_t), target :: bad(edges) = [0, 1, 2, 7, 0]
  type(strata_mesh), target :: mesh, badmesh
  type(strata_module), target :: mods(3)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(strata_metrics) :: m
  real(real64) :: x(ch * nodes, batch), t(outs, batch), first
  type(c_ptr) :: rt
  integer :: step

  call random_number(x)
  call random_number(t)
  mesh = strata_mesh(nodes=nodes, edges=edges, src=c_loc(src), dst=c_loc(dst))
  badmesh = strata_mesh(nodes=nodes, edges=edges, src=c_loc(bad), dst=c_loc(dst))
  mods(1) = strata_module(ops=strata_module_ops("gather"), graph=STRATA_GATHER_DST, &
                          mesh=c_loc(mesh))
  mods(2) = strata_module(ops=strata_module_ops("scatter"), graph=STRATA_SCATTER_MEAN, &
                          mesh=c_loc(mesh))
  mods(3) = strata_module(ops=strata_module_ops("linear"), out=outs)
  model = strata_model(in_features=ch * nodes, nmodules=3, modules=c_loc(mods), &
                       loss=strata_loss_ops("mse"), in_dims=strata_dims(ch, 1, [nodes, 0, 0]))
  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", batch), "batch")
  call check(strata_set(cfg, "classes", outs), "classes")
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")
  first = -1
  do step = 1, 20
    call check(strata_train(rt, x, t, m), "train")
    if (first < 0) first = m%loss
  end do
  if (.not. (m%loss < first)) call fail("the loss did not go down")
  call check(strata_teardown(rt), "teardown")
  mods(1)%mesh = c_loc(badmesh)
  if (strata_init(rt, cfg) /= STRATA_EINVAL) call fail("a bad mesh was accepted")
  if (index(strata_error(), "mesh edge 3 has source node 7 (nodes are 0..3)") == 0) &
    call fail("refused with: " // strata_error())
  deallocate(cfg%store)
  print '(a)', "ok: a mesh from Fortran"

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

end program graph
F90
libs=$(PKG_CONFIG_PATH="$build/pkgconfig" pkg-config --libs --static strata | sed 's/-lstrata//')
cd "$dir"
gfortran $flags -c "$src/fortran/strata.f90"
gfortran $flags -o graph graph.f90 strata.o "$build/libstrata.a" $libs
./graph
