! In-situ training from Fortran: a simulation learns a surrogate of itself while it runs, the
! workload of TorchFort's simulation example (and of ../shared/anchors/torch_insitu.py, its
! PyTorch peer); examples/c/insitu.c is the same program in C, bit for bit.
!
! The simulation advances u(x, y, t) = sin(pi (x - ax t)) sin(pi (y - ay t)) on a periodic
! 32x32 grid over [-1, 1)^2 (ax = 1, ay = 0.789, dt = 0.01), in real64, storing real32 fields
! u(32, 32, batch). Each training step hands BATCH consecutive states (input u, target
! du/dx + du/dy) to strata_train as they are, no copy: the last dimension is the sample. The
! model is one Linear over the flattened field (1024-1024, no activation) or, with --fcn,
! TorchFort's default fully convolutional model, stated in one line: one Conv2d(1, 1, 3,
! padding=1, padding_mode="circular") over the field u(32, 32) as one channel; MSE, Adam
! (lr 1e-3) with cosine annealing over the run. Afterwards 100 single-sample inferences at later times
! give the validation MSE: the trained parameters are checkpointed and loaded into an inference
! runtime of one device (batch 1), which first predicts with its initial parameters.
!
! Under `mpirun -np P` every process computes its share of each batch's states and Strata's
! mpi strategy joins the processes on the application's communicator (a duplicate of
! MPI_COMM_WORLD, passed by its Fortran handle). Alone, DEVICES > 1 trains with ddp.
!
! Usage: insitu [STEPS [BATCH [DEVICES]]] [--fcn] [--export FILE.safetensors] [--ckpt FILE]
program insitu
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64
  use mpi
  use strata
  implicit none
  integer, parameter :: n = 32, cells = n * n, warmup = 10, nval = 100
  real(real64), parameter :: ax = 1.0_real64, ay = 0.789_real64, dt = 0.01_real64
  real(real64), parameter :: pi = 3.14159265358979323846_real64
  integer :: steps, batch, devices, rank, procs, comm, provided, ierr
  logical :: fcn
  character(len=256) :: export_path, ckpt_path
  type(strata_module), target :: mods(1)
  type(strata_model), target :: model
  type(c_ptr) :: rt
  real(real64) :: sim_s, train_s, loss, mse, untrained, infer_s

  call mpi_init_thread(MPI_THREAD_FUNNELED, provided, ierr) ! Strata calls MPI from this thread
  call arguments()
  call mpi_comm_dup(MPI_COMM_WORLD, comm, ierr)
  call mpi_comm_rank(comm, rank, ierr)
  call mpi_comm_size(comm, procs, ierr)
  if (fcn) then
    model = strata_model(loss=strata_loss_ops("mse"))
    call check(strata_model_parse("input(1,32,32) conv2d(1,3,padding=1,padding_mode=circular)", &
                                  mods, model), "model")
  else
    mods(1) = strata_module(ops=strata_module_ops("linear"), out=cells)
    model = strata_model(in_features=cells, nmodules=1, modules=c_loc(mods), &
                         loss=strata_loss_ops("mse"))
  end if

  call train()
  call check(strata_save(rt, trim(ckpt_path)), "save")
  if (len_trim(export_path) > 0) then
    call check(strata_export_safetensors(rt, trim(export_path)), "export")
  end if
  call check(strata_teardown(rt), "teardown")
  if (rank == 0) then
    call infer()
    open(unit=10, file=trim(ckpt_path), status="old")
    close(10, status="delete")
    call report()
  end if
  call mpi_comm_free(comm, ierr)
  call mpi_finalize(ierr)

contains

  subroutine check(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    integer :: ierr2
    if (rc /= STRATA_OK) then
      write(0, '(a, a, a, a)') "insitu: ", what, ": ", strata_error()
      call mpi_abort(MPI_COMM_WORLD, 1, ierr2)
    end if
  end subroutine

  real(real64) function now_s()
    integer(int64) :: count, rate
    call system_clock(count, rate)
    now_s = real(count, real64) / real(rate, real64)
  end function

  ! The state u and the target du/dx + du/dy at time t, computed in real64, stored in real32.
  subroutine field(t, u, du)
    real(real64), intent(in) :: t
    real(real32), intent(out) :: u(n, n), du(n, n)
    real(real64) :: x, y, px, py
    integer :: ix, iy
    do iy = 0, n - 1
      y = real(iy, real64) * (2.0_real64 / n) - 1.0_real64
      py = pi * (y - ay * t)
      do ix = 0, n - 1
        x = real(ix, real64) * (2.0_real64 / n) - 1.0_real64
        px = pi * (x - ax * t)
        u(ix + 1, iy + 1) = real(sin(px) * sin(py), real32)
        du(ix + 1, iy + 1) = real((pi * cos(px)) * sin(py) + (pi * sin(px)) * cos(py), real32)
      end do
    end do
  end subroutine

  ! The model, its loss and optimizer: the same for the training and the inference runtime.
  subroutine configure(cfg, rows)
    type(strata_config), intent(out) :: cfg
    integer, intent(in) :: rows
    call strata_config_new(cfg)
    call check(strata_set_model(cfg, model), "model")
    call check(strata_set(cfg, "batch", rows), "batch")
    call check(strata_set(cfg, "classes", cells), "classes")
    call check(strata_set(cfg, "optim.kind", int(STRATA_OPTIM_ADAMW)), "optim.kind")
    call check(strata_set(cfg, "optim.lr", 1e-3_real64), "optim.lr")
    call check(strata_set(cfg, "optim.schedule", int(STRATA_LR_COSINE)), "optim.schedule")
    call check(strata_set(cfg, "optim.t_max", steps), "optim.t_max")
  end subroutine

  ! Train on the simulation as it runs: each process fills its rows of the global batch.
  subroutine train()
    real(real32), allocatable, target :: u(:, :, :), du(:, :, :)
    type(strata_config) :: cfg
    type(strata_metrics) :: m
    integer :: s, i, lo, hi
    real(real64) :: t0, t1
    allocate(u(n, n, batch), du(n, n, batch))
    u = 0
    du = 0
    lo = batch * rank / procs
    hi = batch * (rank + 1) / procs
    call configure(cfg, batch)
    if (procs > 1) then
      call check(strata_set_strategy(cfg, "mpi", devices, comm), "strategy")
    else if (devices > 1) then
      call check(strata_set_strategy(cfg, "ddp", devices), "strategy")
    end if
    call check(strata_init(rt, cfg), "init")
    call check(strata_connect(rt), "connect")
    sim_s = 0
    train_s = 0
    do s = 0, steps - 1
      t0 = now_s()
      do i = lo, hi - 1
        call field(real(s * batch + i + 1, real64) * dt, u(:, :, i + 1), du(:, :, i + 1))
      end do
      t1 = now_s()
      call check(strata_train(rt, u, du, m), "train step")
      sim_s = sim_s + (t1 - t0)
      if (s >= warmup) train_s = train_s + (now_s() - t1)
    end do
    loss = m%loss
  end subroutine

  ! Mean squared error of the model's outputs (predicted into a real64 array) over the
  ! validation states, one sample a call.
  real(real64) function validate(inf)
    type(c_ptr), intent(in) :: inf
    real(real32) :: u(cells), du(cells)
    real(real64) :: out(cells), err, sum, t0
    integer :: k, i
    sum = 0
    do k = 0, nval - 1
      call field(real(steps * batch + 10 * k + 1, real64) * dt, u, du)
      t0 = now_s()
      call check(strata_predict(inf, u, out), "predict")
      infer_s = infer_s + (now_s() - t0)
      err = 0
      do i = 1, cells
        err = err + (out(i) - du(i)) * (out(i) - du(i))
      end do
      sum = sum + err / cells
    end do
    validate = sum / nval
  end function

  ! An inference runtime (one device, batch 1): untrained MSE, then the checkpoint's.
  subroutine infer()
    type(strata_config) :: cfg
    type(c_ptr) :: inf
    call configure(cfg, 1)
    call check(strata_init(inf, cfg), "inference init")
    call check(strata_connect(inf), "inference connect")
    infer_s = 0
    untrained = validate(inf)
    call check(strata_load(inf, trim(ckpt_path)), "load")
    infer_s = 0
    mse = validate(inf)
    call check(strata_teardown(inf), "inference teardown")
  end subroutine

  subroutine arguments()
    character(len=256) :: a
    integer :: i, pos
    steps = 2000
    batch = 16
    devices = 1
    export_path = ""
    ckpt_path = "insitu.ckpt"
    fcn = .false.
    pos = 0
    i = 1
    do while (i <= command_argument_count())
      call get_command_argument(i, a)
      if (a == "--fcn") then
        fcn = .true.
      else if (a == "--export" .or. a == "--ckpt") then
        i = i + 1
        if (a == "--export") call get_command_argument(i, export_path)
        if (a == "--ckpt") call get_command_argument(i, ckpt_path)
      else if (pos == 0) then
        read(a, *) steps
        pos = 1
      else if (pos == 1) then
        read(a, *) batch
        pos = 2
      else
        read(a, *) devices
      end if
      i = i + 1
    end do
    if (steps <= warmup .or. batch < 1 .or. devices < 1) then
      write(0, '(a)') "usage: insitu [STEPS > 10 [BATCH [DEVICES]]] [--fcn] [--export FILE] " // &
                      "[--ckpt FILE]"
      call mpi_abort(MPI_COMM_WORLD, 2, ierr)
    end if
  end subroutine

  ! A number as JSON writes it (gfortran's f0.d drops the leading zero).
  function num(x) result(s)
    real(real64), intent(in) :: x
    character(len=:), allocatable :: s
    character(len=32) :: buf
    write(buf, '(es16.9)') x
    s = trim(adjustl(buf))
  end function

  subroutine report()
    real(real64) :: sps
    character(len=16) :: bits
    sps = (steps - warmup) / train_s
    write(bits, '(z16.16)') transfer(loss, 0_int64)
    print '(a, i0, a, i0, a, i0, a, i0, a)', "in-situ (Fortran): ", procs, " process(es) x ", &
      devices, " device(s), batch ", batch, ", ", steps, " steps"
    print '(a, f6.3, a, f7.3, a, f7.1, a, i0, a)', "simulation ", sim_s, " s, training ", &
      train_s, " s (", sps, " steps/s, ", nint(sps * batch), " samples/s)"
    print '(a, es12.6, a, es12.6, a, es12.6, a, f0.1, a)', "last training loss ", loss, &
      ", validation MSE ", mse, " (untrained ", untrained, "), batch-1 inference ", &
      infer_s / nval * 1e6_real64, " us"
    print '(a, i0, a, i0, a, i0, a, i0, *(a))', &
      '{"impl": "strata", "lang": "fortran", "nprocs": ', procs, ', "devices": ', devices, &
      ', "batch": ', batch, ', "steps": ', steps, ', "steps_per_s": ', num(sps), &
      ', "samples_per_s": ', num(sps * batch), ', "sim_s": ', num(sim_s), ', "train_s": ', &
      num(train_s), ', "train_loss": ', num(loss), ', "loss_bits": "', bits, &
      '", "val_mse": ', num(mse), ', "val_mse_untrained": ', num(untrained), &
      ', "infer_us": ', num(infer_s / nval * 1e6_real64), '}'
  end subroutine

end program insitu
