! A MeshGraphNet-style surrogate of a diffusion on a triangulated domain, from Fortran: the same
! mesh, simulation and model line as examples/c/mesh_surrogate.c (see its head comment), the
! mesh a type(strata_mesh) over the program's own int32 arrays (0-based node numbers) set on
! every gather and scatter module. Node features are x(nodes, 3, samples): Fortran's
! (spatial, C, N) is PyTorch's (N, C, nodes). Trains, then prints the validation relative L2
! error beside the untrained model's and the last loss's bits; exits 1 when the error did not
! fall below half the untrained one.
! Under `mpirun -np P` (built with mpifort) every process simulates only its rows of each
! batch, training and validation, and Strata's mpi strategy joins the processes on the
! program's communicator (a duplicate of MPI_COMM_WORLD): bitwise ddp on P x DEVICES devices.
! Each process sums the errors of its validation rows; process 0 adds the sums and prints.
! Alone, DEVICES > 1 trains with ddp (decision 0083).
!   mesh_surrogate [TRAIN [EPOCHS [DEVICES]]]   (256, 10, 1)
program mesh_surrogate
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64, output_unit
  use mpi
  use strata
  implicit none
  integer, parameter :: s = 16, nodes = s * s, edges = 2 * (2 * s * (s - 1) + (s - 1)**2)
  integer, parameter :: steps = 20, nval = 64, batch = 8, proc = 2
  integer(c_int32_t), target :: src(edges), dst(edges)
  real(real64) :: px(nodes), py(nodes), w(edges), dt
  type(strata_mesh), target :: mesh
  type(strata_module), target :: mods(64)
  type(strata_model), target :: model
  type(strata_config) :: cfg
  type(strata_metrics) :: m
  type(c_ptr) :: rt, gather, scatter
  real(real32), allocatable :: x(:, :, :), y(:, :), xv(:, :, :), yv(:, :)
  integer :: ntrain, epochs, devices, e, k, i, rank, procs, comm, provided, ierr, lo, hi
  real(real64) :: e0, e1
  character(len=4096) :: line

  call mpi_init_thread(MPI_THREAD_FUNNELED, provided, ierr) ! Strata calls MPI from this thread
  call mpi_comm_dup(MPI_COMM_WORLD, comm, ierr)
  call mpi_comm_rank(comm, rank, ierr)
  call mpi_comm_size(comm, procs, ierr)
  lo = batch * rank / procs           ! this process's rows of every batch: lo + 1 .. hi
  hi = batch * (rank + 1) / procs
  ntrain = arg(1, 256)
  epochs = arg(2, 10)
  devices = arg(3, 1)
  if (ntrain < batch .or. mod(ntrain, batch) /= 0 .or. epochs < 1 .or. devices < 1) then
    if (rank == 0) print '(a)', "usage: mesh_surrogate [TRAIN (a multiple of 8) [EPOCHS [DEVICES]]]"
    call mpi_abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call build_mesh()
  allocate(x(nodes, 3, ntrain), y(nodes, ntrain), xv(nodes, 3, nval), yv(nodes, nval))
  x = 0
  y = 0
  xv = 0
  yv = 0
  do k = 1, ntrain
    if (mine(k)) call simulate(int(k - 1, int64), x(:, :, k), y(:, k))
  end do
  do k = 1, nval
    if (mine(k)) call simulate(1000000_int64 + k - 1, xv(:, :, k), yv(:, k))
  end do

  call model_line(line)
  call check(strata_model_parse(trim(line), mods, model), "model line")
  mesh = strata_mesh(nodes=nodes, edges=edges, src=c_loc(src), dst=c_loc(dst))
  gather = strata_module_ops("gather")
  scatter = strata_module_ops("scatter")
  do i = 1, model%nmodules
    if (c_associated(mods(i)%ops, gather) .or. c_associated(mods(i)%ops, scatter)) &
      mods(i)%mesh = c_loc(mesh)
  end do
  model%loss = strata_loss_ops("mse")
  call strata_config_new(cfg)
  call check(strata_set_model(cfg, model), "model")
  call check(strata_set(cfg, "batch", batch), "batch")
  call check(strata_set(cfg, "classes", nodes), "classes")
  call check(strata_set(cfg, "seed", 1), "seed")
  call check(strata_set(cfg, "optim.kind", STRATA_OPTIM_ADAMW), "optimizer")
  call check(strata_set(cfg, "optim.lr", 1e-3_c_double), "lr")
  if (procs > 1) then
    call check(strata_set_strategy(cfg, "mpi", devices, comm), "strategy")
  else if (devices > 1) then
    call check(strata_set_strategy(cfg, "ddp", devices), "strategy")
  end if
  call check(strata_init(rt, cfg), "init")
  call check(strata_connect(rt), "connect")
  e0 = rel_l2()
  do e = 1, epochs
    do k = 1, ntrain, batch
      call check(strata_train(rt, x(:, :, k:k + batch - 1), y(:, k:k + batch - 1), m), "train")
    end do
  end do
  e1 = rel_l2()
  call check(strata_teardown(rt), "teardown")
  if (rank == 0) then
    print '(a, i0, a, i0, a, i0, a, i0, a, i0, a, i0, a)', "mesh surrogate (Fortran): ", &
      nodes, " nodes, ", edges, " edges; ", ntrain, " samples, ", epochs, " epochs, ", procs, &
      " process(es) x ", devices, " device(s)"
    print '(a, es12.5, a, f7.4, a, f7.4, a)', "last loss ", m%loss, &
      "; validation relative L2 ", e1, " (untrained ", e0, ")"
    print '(a, z16.16)', "last loss bits ", transfer(m%loss, 0_int64)
  end if
  if (rank == 0 .and. .not. (e1 < 0.5_real64 * e0)) then
    print '(a)', "the validation error did not fall below half the untrained one"
    flush(output_unit)
    call mpi_abort(MPI_COMM_WORLD, 1, ierr)
  end if
  call mpi_comm_free(comm, ierr)
  call mpi_finalize(ierr)

contains

  ! Sample k (1-based) is one of this process's rows of its batch.
  logical function mine(kk)
    integer, intent(in) :: kk
    mine = mod(kk - 1, batch) >= lo .and. mod(kk - 1, batch) < hi
  end function

  integer function arg(i, default)
    integer, intent(in) :: i, default
    character(len=32) :: v
    integer :: st
    arg = default
    if (command_argument_count() < i) return
    call get_command_argument(i, v)
    read (v, *, iostat=st) arg
    if (st /= 0) arg = -1
  end function

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    integer :: ierr2
    if (rc /= STRATA_OK) then
      print '(a, a, a)', what, ": ", strata_error()
      flush(output_unit)
      call mpi_abort(MPI_COMM_WORLD, 1, ierr2)
    end if
  end subroutine

  real(real64) function uniform(state)
    integer(int64), intent(inout) :: state
    state = mod(state * 48271_int64, 2147483647_int64)
    uniform = real(state, real64) / 2147483647.0_real64
  end function

  subroutine link2(a, b, n)
    integer, intent(in) :: a, b
    integer, intent(inout) :: n
    src(n + 1) = a
    dst(n + 1) = b
    src(n + 2) = b
    dst(n + 2) = a
    n = n + 2
  end subroutine

  ! The nodes (0-based numbers n = i s + j), the triangles' edges, weights and time step.
  subroutine build_mesh()
    real(real64) :: h, sum(nodes), dx, dy
    integer :: i, j, k, n, ne
    h = 1.0_real64 / (s - 1)
    do i = 0, s - 1
      do j = 0, s - 1
        n = i * s + j + 1
        px(n) = j * h
        py(n) = i * h
        if (i > 0 .and. i < s - 1 .and. j > 0 .and. j < s - 1) then
          px(n) = px(n) + 0.25_real64 * h * sin(1.7_real64 * i + 2.3_real64 * j)
          py(n) = py(n) + 0.25_real64 * h * cos(2.9_real64 * i + 1.1_real64 * j)
        end if
      end do
    end do
    ne = 0
    do i = 0, s - 1
      do j = 0, s - 1
        n = i * s + j
        if (j + 1 < s) call link2(n, n + 1, ne)
        if (i + 1 < s) call link2(n, n + s, ne)
        if (i + 1 < s .and. j + 1 < s) then
          if (mod(i + j, 2) == 1) then
            call link2(n + 1, n + s, ne)
          else
            call link2(n, n + s + 1, ne)
          end if
        end if
      end do
    end do
    sum = 0
    do k = 1, edges
      dx = px(src(k) + 1) - px(dst(k) + 1)
      dy = py(src(k) + 1) - py(dst(k) + 1)
      w(k) = 1.0_real64 / (dx * dx + dy * dy)
      sum(dst(k) + 1) = sum(dst(k) + 1) + w(k)
    end do
    dt = 0.2_real64 / maxval(sum)
  end subroutine

  ! Sample kk: features (u, x, y) into f(:, 1:3), u after the steps into t.
  subroutine simulate(kk, f, t)
    integer(int64), intent(in) :: kk
    real(real32), intent(out) :: f(nodes, 3), t(nodes)
    real(real64) :: u(nodes), du(nodes), cx, cy, wid, a
    integer(int64) :: st
    integer :: b, it, j
    st = 1 + mod(kk * 7919_int64 + 101_int64, 2147483646_int64)
    u = 0
    do b = 1, 2
      cx = uniform(st)
      cy = uniform(st)
      wid = 0.08_real64 + 0.12_real64 * uniform(st)
      a = merge(-1.0_real64, 1.0_real64, uniform(st) < 0.5_real64)
      u = u + a * exp(-((px - cx)**2 + (py - cy)**2) / (2 * wid * wid))
    end do
    f(:, 1) = real(u, real32)
    f(:, 2) = real(px, real32)
    f(:, 3) = real(py, real32)
    do it = 1, steps
      du = 0
      do j = 1, edges
        du(dst(j) + 1) = du(dst(j) + 1) + w(j) * (u(src(j) + 1) - u(dst(j) + 1))
      end do
      u = u + dt * du
    end do
    t = real(u, real32)
  end subroutine

  ! The C example's line: encoders, the processor steps, the decoder.
  subroutine model_line(l)
    character(len=*), intent(out) :: l
    character(len=1024) :: step
    integer :: at, h, ee, p
    write (l, '(a, i0, a)') "input(3,", nodes, ") conv1d(16,1) relu conv1d(16,1) " // &
      "gather(src,from=input) gather(dst,from=input) concat(from=3) conv1d(16,1) relu " // &
      "conv1d(16,1)"
    at = 9
    h = 2
    ee = 8
    do p = 1, proc
      write (step, '(6(a, i0), a)') " gather(src,from=", h, ") gather(dst,from=", h, &
        ") concat(from=", at, ") concat(from=", ee, &
        ") conv1d(16,1) relu conv1d(16,1) tokens layernorm(dims=1) tokens add(from=", ee, &
        ") scatter(sum) concat(from=", h, ")"
      l = trim(l) // trim(step)
      write (step, '(a, i0, a)') " conv1d(16,1) relu conv1d(16,1) tokens layernorm(dims=1) " // &
        "tokens add(from=", h, ")"
      l = trim(l) // trim(step)
      ee = at + 10
      h = at + 19
      at = at + 20
    end do
    l = trim(l) // " conv1d(16,1) relu conv1d(1,1)"
  end subroutine

  ! The mean relative L2 error over the validation samples: each process predicts its rows of
  ! every batch (Strata writes only those), process 0 receives the sum (the others get 0).
  real(real64) function rel_l2()
    real(real32) :: out(nodes, batch)
    real(real64) :: part
    integer :: kk, r, ierr2
    part = 0
    do kk = 1, nval, batch
      call check(strata_predict(rt, xv(:, :, kk:kk + batch - 1), out), "predict")
      do r = lo, hi - 1
        part = part + sqrt(sum((real(out(:, r + 1), real64) - yv(:, kk + r))**2) / &
                           sum(real(yv(:, kk + r), real64)**2))
      end do
    end do
    rel_l2 = 0
    call mpi_reduce(part, rel_l2, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, comm, ierr2)
    rel_l2 = rel_l2 / nval
  end function

end program mesh_surrogate
