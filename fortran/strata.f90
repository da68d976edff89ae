! Strata from Fortran: an iso_c_binding interface to the C API.
!
! Compile this file with your program (gfortran -std=f2018 -c strata.f90), link with
! `pkg-config --libs strata`. The configuration is opaque storage set by name
! (strata_set: "devices", "optim.lr", ...); the structs a training loop passes (module,
! model, batch, metrics, checkpoint info) are mirrored as bind(C) types, whose sizes and field
! offsets tests/build/fortran_layout.sh compares with the C structs'. Every function returns
! a Strata status (STRATA_OK, or one of the STRATA_E* below, as the C enum); strata_error()
! gives the reason as a string and strata_status_name() the status's name. Every wrapper over
! the caller's arrays checks their sizes (samples, widths, room for the outputs) before the
! library reads or writes them, and refuses a mismatch with STRATA_EINVAL and a message.
!
! The application's own arrays go in as they are, never copied: real(real32) or real(real64)
! inputs x(dim, n) or x(d1, d2, ..., n) (the last dimension is the sample, the others are
! flattened: the same memory as C's row-major [n][dim]), targets t(outputs, n) of either kind
! or integer(c_int32_t) labels y(n), through the generic strata_train, strata_evaluate and
! strata_predict. A rank-1 x is one sample. f64 values are converted to f32 where each device
! takes its rows.
module strata
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64
  implicit none
  private

  ! enum strata_status: every status (include/strata/status.h, STRATA_STATUS_LIST)
  integer(c_int), parameter, public :: STRATA_OK = 0, STRATA_EINVAL = -1, STRATA_ENOMEM = -2, &
                                       STRATA_ESEALED = -3, STRATA_EBADSTATE = -4, &
                                       STRATA_ENOTSUP = -5, STRATA_EIO = -6, &
                                       STRATA_EFORMAT = -7, STRATA_ETIMEDOUT = -8, &
                                       STRATA_EABORTED = -9, STRATA_EOVERFLOW = -10, &
                                       STRATA_ESYS = -11, STRATA_EDEVICE = -12, &
                                       STRATA_ENODEV = -13, STRATA_EINJECTED = -14, &
                                       STRATA_ENONFINITE = -15, STRATA_ESTOPPED = -16
  integer(c_int), parameter, public :: STRATA_CKPT_LOSS_NAME = 24
  ! enum strata_strategy_kind
  integer(c_int), parameter, public :: STRATA_STRATEGY_SINGLE = 0, STRATA_STRATEGY_DP = 1, &
                                       STRATA_STRATEGY_DDP = 2, STRATA_STRATEGY_SPAWN = 3, &
                                       STRATA_STRATEGY_MPI = 4
  ! enum strata_dtype (the types of a batch's arrays)
  integer(c_int), parameter, public :: STRATA_F32 = 0, STRATA_F64 = 1, STRATA_I32 = 4
  ! enum strata_optim_kind and enum strata_lr_schedule ("optim.kind", "optim.schedule")
  integer(c_int), parameter, public :: STRATA_OPTIM_SGD = 0, STRATA_OPTIM_ADAMW = 1
  integer(c_int), parameter, public :: STRATA_LR_CONSTANT = 0, STRATA_LR_STEP = 1, &
                                       STRATA_LR_COSINE = 2, STRATA_LR_MULTISTEP = 3, &
                                       STRATA_LR_ONECYCLE = 4
  ! enum strata_accumulate_reduce ("accumulate_reduce": how micro-batches are reduced)
  integer(c_int), parameter, public :: STRATA_ACCUMULATE_REDUCE_WINDOW = 0, &
                                       STRATA_ACCUMULATE_REDUCE_EACH = 1
  ! enum strata_reduction (strata_model%reduction)
  integer(c_int), parameter, public :: STRATA_REDUCTION_MEAN = 0, STRATA_REDUCTION_SUM = 1

  ! enum strata_padding_mode (strata_module%padding_mode), enum strata_upsample_mode
  ! (strata_module%mode), and the padding values of strata_module%padding
  integer(c_int), parameter, public :: STRATA_PAD_ZEROS = 0, STRATA_PAD_CIRCULAR = 1, &
    STRATA_PAD_REFLECT = 2, STRATA_PAD_REPLICATE = 3
  integer(c_int), parameter, public :: STRATA_UPSAMPLE_NEAREST = 0, STRATA_UPSAMPLE_LINEAR = 1
  integer(c_int), parameter, public :: STRATA_PADDING_SAME = -1, STRATA_PADDING_NONE = -2

  !> A sample's layout (struct strata_dims): channels and up to 3 spatial extents, outermost
  !> first (PyTorch's (C, D, H, W)); a Fortran array (W, H, D, C) of a sample is that layout.
  type, bind(C), public :: strata_dims
    integer(c_int) :: channels = 0
    integer(c_int) :: ndim = 0
    integer(c_int) :: size(3) = 0
  end type

  !> An unstructured mesh's connectivity (struct strata_mesh): edge e goes from node src(e+1)
  !> to dst(e+1), 0-based node indices; src and dst are c_loc of the application's int32
  !> arrays of edges values, valid and unchanged for the runtime's life.
  type, bind(C), public :: strata_mesh
    integer(c_int) :: nodes = 0
    integer(c_int) :: edges = 0
    type(c_ptr) :: src = c_null_ptr
    type(c_ptr) :: dst = c_null_ptr
  end type

  ! enum strata_gather_side and enum strata_scatter_reduce (strata_module%graph)
  integer(c_int), parameter, public :: STRATA_GATHER_SRC = 0, STRATA_GATHER_DST = 1
  integer(c_int), parameter, public :: STRATA_SCATTER_SUM = 0, STRATA_SCATTER_MEAN = 1

  !> One module of a model (struct strata_module). The per-dimension arrays are PyTorch's
  !> int-or-tuple arguments, outermost spatial dimension first; a 0 past the first entry
  !> takes the first's value.
  type, bind(C), public :: strata_module
    type(c_ptr) :: ops = c_null_ptr
    integer(c_int) :: out = 0
    real(c_float) :: p = 0, eps = 0, decay = 0
    real(c_float) :: slope = 0
    integer(c_int) :: kernel(3) = 0, stride(3) = 0, padding(3) = 0, dilation(3) = 0
    integer(c_int) :: scale(3) = 0
    integer(c_int) :: padding_mode = STRATA_PAD_ZEROS
    integer(c_int) :: mode = STRATA_UPSAMPLE_NEAREST
    integer(c_int) :: no_bias = 0
    !> merge modules (add, concat): the earlier module whose output they read, by its index
    !> from 0 (C's), or -1 - k for the model's input k (-1: input 0)
    integer(c_int) :: from = 0
    !> non-zero: the module's input is what from names (a branch), not the previous output
    integer(c_int) :: branch = 0
    !> spectral convolutions: the lowest frequencies kept per spatial dimension (modes, or
    !> modes1 and modes2)
    integer(c_int) :: modes(3) = 0
    !> mha: heads (must divide the embedding) and a causal mask (0 or 1)
    integer(c_int) :: heads = 0, causal = 0
    !> layernorm, rmsnorm: normalise over the sample's last norm_dims dimensions (0: all)
    integer(c_int) :: norm_dims = 0
    !> gather: STRATA_GATHER_SRC or _DST; scatter: STRATA_SCATTER_SUM or _MEAN
    integer(c_int) :: graph = 0
    !> gather, scatter: c_loc of a strata_mesh, valid for the runtime's life
    type(c_ptr) :: mesh = c_null_ptr
  end type

  ! Most inputs and outputs of a model (strata_model%inputs, strata_model%outputs)
  integer(c_int), parameter, public :: STRATA_MAX_INPUTS = 8, STRATA_MAX_OUTPUTS = 8

  !> One of a model's several inputs (struct strata_model_input): features consecutive values
  !> of the sample's row, with their layout.
  type, bind(C), public :: strata_model_input
    integer(c_int) :: features = 0
    type(strata_dims) :: dims
  end type

  !> One of a model's outputs (struct strata_model_output): a module's output (index from 0,
  !> C's) with its loss (c_null_ptr: the model's) and weight (0: 1.0). With several outputs a
  !> cross-entropy output's target is one value of the targets row, its class index (0-based).
  type, bind(C), public :: strata_model_output
    integer(c_int) :: module = 0
    type(c_ptr) :: loss = c_null_ptr
    real(c_float) :: weight = 0
  end type

  !> A model: input width, its modules and its loss (struct strata_model).
  type, bind(C), public :: strata_model
    integer(c_int) :: in_features = 0
    integer(c_int) :: nmodules = 0
    type(c_ptr) :: modules = c_null_ptr
    type(c_ptr) :: loss = c_null_ptr  !< NULL: softmax cross-entropy (strata_loss_ops)
    integer(c_int) :: reduction = STRATA_REDUCTION_MEAN
    real(c_float) :: loss_beta = 0    !< Huber's beta (0: 1.0)
    type(strata_dims) :: in_dims      !< the input sample's layout (channels 0: flat)
    !> several inputs (0: one, in_features and in_dims): a row is their values in turn
    integer(c_int) :: ninputs = 0
    type(strata_model_input) :: inputs(STRATA_MAX_INPUTS)
    !> several outputs (0: the last module's, with loss): a row of targets is theirs in turn
    integer(c_int) :: noutputs = 0
    type(strata_model_output) :: outputs(STRATA_MAX_OUTPUTS)
  end type

  !> A batch (struct strata_batch): what strata_train and the others fill from arrays.
  type, bind(C), public :: strata_batch
    type(c_ptr) :: x = c_null_ptr, y = c_null_ptr
    integer(c_int) :: rows = 0, dim = 0
    type(c_ptr) :: images = c_null_ptr, index = c_null_ptr
    integer(c_int32_t) :: nimages = 0
    real(c_float) :: scale = 0, shift = 0
    integer(c_int) :: xtype = STRATA_F32
    type(c_ptr) :: t = c_null_ptr
    integer(c_int) :: ttype = STRATA_F32
    integer(c_int) :: tdim = 0
  end type

  !> Metrics of one step (struct strata_metrics).
  type, bind(C), public :: strata_metrics
    real(c_double) :: loss = 0
    integer(c_int) :: correct = 0, rows = 0
    real(c_double) :: mse = 0, mae = 0  !< float targets: mean squared and absolute error
    integer(c_int) :: noutputs = 0      !< several outputs: their count (0: none)
    real(c_double) :: losses(STRATA_MAX_OUTPUTS) = 0 !< each output's own loss, unweighted
    !> each label (cross-entropy) output's rows predicted right (its accuracy: / rows)
    integer(c_int) :: corrects(STRATA_MAX_OUTPUTS) = 0
  end type

  !> What a checkpoint that was loaded held (struct strata_ckpt_info).
  type, bind(C), public :: strata_ckpt_info
    integer(c_int64_t) :: step = 0
    integer(c_int) :: world = 0, strategy = 0, bitwise = 0
    character(kind=c_char) :: loss(STRATA_CKPT_LOSS_NAME) = c_null_char !< its loss ("": unknown)
  end type

  !> A parameter group as its module declared it (struct strata_param_group).
  type, bind(C), public :: strata_param_group
    type(c_ptr) :: name = c_null_ptr
    integer(c_int) :: dtype = STRATA_F32
    integer(c_size_t) :: count = 0
    integer(c_int) :: role = 0
    integer(c_int) :: ndim = 0
    integer(c_size_t) :: shape(6) = 0
  end type

  !> One group of a device's model (struct strata_param), from strata_parameter(): its values
  !> are C pointers; strata_parameter() copies them into a Fortran array.
  type, bind(C), public :: strata_param
    character(kind=c_char) :: name(64) = c_null_char
    integer(c_int) :: layer = 0
    type(strata_param_group) :: group
    type(c_ptr) :: value = c_null_ptr, grad = c_null_ptr
    integer(c_int) :: opt_slots = 0
    type(c_ptr) :: opt_state(2) = c_null_ptr
    type(c_ptr) :: master = c_null_ptr
    integer(c_size_t) :: offset = 0, shard_lo = 0, shard_hi = 0
  end type

  !> A configuration: storage for one struct strata_config, reserved by strata_config_new,
  !> and one slot after it for the MPI communicator's handle (strata_set_strategy).
  type, public :: strata_config
    integer(c_int64_t), allocatable :: store(:)
  end type

  !> An array as a batch sees it: address, type, values, samples (its last extent; 1 for a
  !> rank-1 array, one sample).
  type :: array_ref
    type(c_ptr) :: p = c_null_ptr
    integer(c_int) :: dtype = STRATA_F32
    integer(c_size_t) :: n = 0, rows = 0
  end type

  integer, parameter :: TRAIN = 0, EVALUATE = 1

  public :: strata_config_new, strata_set, strata_set_model, strata_set_strategy
  public :: strata_module_ops, strata_loss_ops, strata_model_parse
  public :: strata_init, strata_connect, strata_teardown, strata_is_global_zero
  public :: strata_train, strata_evaluate, strata_predict
  public :: strata_train_step, strata_eval_step, strata_predict_step
  public :: strata_save, strata_load, strata_export_safetensors, strata_error
  public :: strata_load_weights
  public :: strata_status_name, strata_parameter_count, strata_parameter

  !> Set a numeric configuration field by name, from a real or an integer value.
  interface strata_set
    module procedure set_real, set_int
  end interface

  !> One training step on the caller's arrays: strata_train(rt, x, t [, metrics]).
  interface strata_train
    module procedure train_ss, train_sd, train_ds, train_dd, train_sl, train_dl
  end interface

  !> One evaluation step (no gradients): strata_evaluate(rt, x, t [, metrics]).
  interface strata_evaluate
    module procedure eval_ss, eval_sd, eval_ds, eval_dd, eval_sl, eval_dl
  end interface

  !> The model's outputs for x into out(outputs, n), real32 or real64: strata_predict(rt, x, out).
  interface strata_predict
    module procedure predict_ss, predict_sd, predict_ds, predict_dd
  end interface

  interface
    function c_config_bytes() bind(C, name="strata_config_bytes") result(n)
      import :: c_size_t
      integer(c_size_t) :: n
    end function
    subroutine c_config_init(cfg) bind(C, name="strata_config_init")
      import :: c_ptr
      type(c_ptr), value :: cfg
    end subroutine
    function c_config_set(cfg, key, value) bind(C, name="strata_config_set") result(rc)
      import :: c_ptr, c_char, c_double, c_int
      type(c_ptr), value :: cfg
      character(kind=c_char), intent(in) :: key(*)
      real(c_double), value :: value
      integer(c_int) :: rc
    end function
    function c_config_set_model(cfg, model) bind(C, name="strata_config_set_model") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: cfg, model
      integer(c_int) :: rc
    end function
    function c_config_set_mpi_comm(cfg, comm, fortran) &
        bind(C, name="strata_config_set_mpi_comm") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: cfg, comm
      integer(c_int), value :: fortran
      integer(c_int) :: rc
    end function
    function c_strategy_from_name(name, kind) bind(C, name="strata_strategy_from_name") &
        result(rc)
      import :: c_char, c_int
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), intent(out) :: kind
      integer(c_int) :: rc
    end function
    function c_module_ops(name) bind(C, name="strata_module_ops_by_name") result(ops)
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr) :: ops
    end function
    function c_loss_ops(name) bind(C, name="strata_loss_ops_by_name") result(ops)
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr) :: ops
    end function
    function c_model_parse(line, mods, max, model) bind(C, name="strata_model_parse") &
        result(rc)
      import :: c_ptr, c_char, c_int
      character(kind=c_char), intent(in) :: line(*)
      type(c_ptr), value :: mods, model
      integer(c_int), value :: max
      integer(c_int) :: rc
    end function
    function c_init(rt, cfg) bind(C, name="strata_init") result(rc)
      import :: c_ptr, c_int
      type(c_ptr) :: rt
      type(c_ptr), value :: cfg
      integer(c_int) :: rc
    end function
    function strata_connect(rt) bind(C, name="strata_connect") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: rc
    end function
    function strata_train_step(rt, batch, metrics) bind(C, name="strata_train_step") result(rc)
      import :: c_ptr, c_int, strata_batch, strata_metrics
      type(c_ptr), value :: rt
      type(strata_batch), intent(in) :: batch
      type(strata_metrics), intent(out) :: metrics
      integer(c_int) :: rc
    end function
    function strata_eval_step(rt, batch, metrics) bind(C, name="strata_eval_step") result(rc)
      import :: c_ptr, c_int, strata_batch, strata_metrics
      type(c_ptr), value :: rt
      type(strata_batch), intent(in) :: batch
      type(strata_metrics), intent(out) :: metrics
      integer(c_int) :: rc
    end function
    function strata_predict_step(rt, batch, out, capacity) bind(C, name="strata_predict_step") &
        result(rc)
      import :: c_ptr, c_int, c_size_t, strata_batch
      type(c_ptr), value :: rt
      type(strata_batch), intent(in) :: batch
      type(c_ptr), value :: out
      integer(c_size_t), value :: capacity
      integer(c_int) :: rc
    end function
    function c_save(rt, path, app, app_bytes) bind(C, name="strata_save_checkpoint") result(rc)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: rt, app
      character(kind=c_char), intent(in) :: path(*)
      integer(c_size_t), value :: app_bytes
      integer(c_int) :: rc
    end function
    function c_load(rt, path, app, app_cap, app_bytes, info) &
        bind(C, name="strata_load_checkpoint") result(rc)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: rt, app, app_bytes, info
      character(kind=c_char), intent(in) :: path(*)
      integer(c_size_t), value :: app_cap
      integer(c_int) :: rc
    end function
    function c_load_weights(rt, path, flags, info) bind(C, name="strata_load_weights") &
        result(rc)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: rt, info
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int), value :: flags
      integer(c_int) :: rc
    end function
    function c_export(rt, path) bind(C, name="strata_export_safetensors") result(rc)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: rt
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int) :: rc
    end function
    function c_is_global_zero(rt) bind(C, name="strata_is_global_zero") result(yes)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: yes
    end function
    function strata_teardown(rt) bind(C, name="strata_teardown") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: rc
    end function
    function c_set_error(status, message) bind(C, name="strata_set_error") result(rc)
      import :: c_int, c_char
      integer(c_int), value :: status
      character(kind=c_char), intent(in) :: message(*)
      integer(c_int) :: rc
    end function
    function c_status_name(status) bind(C, name="strata_status_name") result(name)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: name
    end function
    function c_outputs(rt, outputs) bind(C, name="strata_outputs") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int), intent(out) :: outputs
      integer(c_int) :: rc
    end function
    function c_parameter_count(rt, n) bind(C, name="strata_parameter_count") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int), intent(out) :: n
      integer(c_int) :: rc
    end function
    function c_parameter(rt, dev, index, p) bind(C, name="strata_parameter") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt, p
      integer(c_int), value :: dev, index
      integer(c_int) :: rc
    end function
    function c_parameter_copy(rt, dev, index, out, capacity, n) &
        bind(C, name="strata_parameter_copy") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: rt, out
      integer(c_int), value :: dev, index
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: n
      integer(c_int) :: rc
    end function
    function c_last_error() bind(C, name="strata_last_error") result(msg)
      import :: c_ptr
      type(c_ptr) :: msg
    end function
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
  end interface

contains

  !> A configuration with the defaults of STRATA_CONFIG_INIT.
  subroutine strata_config_new(cfg)
    type(strata_config), intent(out), target :: cfg
    allocate(cfg%store((c_config_bytes() + 7) / 8 + 1))
    cfg%store = 0
    call c_config_init(c_loc(cfg%store))
  end subroutine

  function set_real(cfg, key, value) result(rc)
    type(strata_config), intent(inout), target :: cfg
    character(len=*), intent(in) :: key
    real(c_double), intent(in) :: value
    integer(c_int) :: rc
    rc = c_config_set(c_loc(cfg%store), key // c_null_char, value)
  end function

  function set_int(cfg, key, value) result(rc)
    type(strata_config), intent(inout), target :: cfg
    character(len=*), intent(in) :: key
    integer, intent(in) :: value
    integer(c_int) :: rc
    rc = c_config_set(c_loc(cfg%store), key // c_null_char, real(value, c_double))
  end function

  !> The model the runtime trains (it must stay alive, with its modules, until teardown).
  function strata_set_model(cfg, model) result(rc)
    type(strata_config), intent(inout), target :: cfg
    type(strata_model), intent(in), target :: model
    integer(c_int) :: rc
    rc = c_config_set_model(c_loc(cfg%store), c_loc(model))
  end function

  !> The strategy by name ("single", "dp", "ddp", "spawn", "mpi"), its devices per process,
  !> and for "mpi" the application's communicator: a Fortran handle (`use mpi`'s integer, or
  !> mpi_f08's comm%MPI_VAL; absent: MPI_COMM_WORLD).
  function strata_set_strategy(cfg, name, devices, comm) result(rc)
    type(strata_config), intent(inout), target :: cfg
    character(len=*), intent(in) :: name
    integer, intent(in), optional :: devices, comm
    integer(c_int) :: rc, kind
    integer :: slot
    rc = c_strategy_from_name(name // c_null_char, kind)
    if (rc == STRATA_OK) rc = set_int(cfg, "strategy", int(kind))
    if (rc == STRATA_OK .and. present(devices)) rc = set_int(cfg, "devices", devices)
    if (rc /= STRATA_OK .or. .not. present(comm)) return
    slot = size(cfg%store)
    cfg%store(slot) = transfer([int(comm, c_int), 0_c_int], 0_c_int64_t) ! MPI_Fint first
    rc = c_config_set_mpi_comm(c_loc(cfg%store), c_loc(cfg%store(slot)), 1_c_int)
  end function

  !> A built-in module kind: "linear", "relu", "batchnorm1d", "dropout", "tanh", "sigmoid",
  !> "gelu", "gelu-tanh", "silu", "leaky-relu", "maxpool1d" (2d, 3d), "avgpool1d" (2d, 3d),
  !> "upsample", "flatten", "layernorm".
  function strata_module_ops(name) result(ops)
    character(len=*), intent(in) :: name
    type(c_ptr) :: ops
    ops = c_module_ops(name // c_null_char)
  end function

  !> A model from one line ("input(1,32,32) conv2d(1,3,padding=1,padding_mode=circular)",
  !> strata_model_parse in strata/nn.h): mods receives the modules, model%modules points
  !> to them (mods must stay alive as long as the model), its loss is kept.
  function strata_model_parse(line, mods, model) result(rc)
    character(len=*), intent(in) :: line
    type(strata_module), intent(inout), target, contiguous :: mods(:)
    type(strata_model), intent(inout), target :: model
    integer(c_int) :: rc
    rc = c_model_parse(line // c_null_char, c_loc(mods), int(size(mods), c_int), &
                       c_loc(model))
  end function

  !> A built-in loss by its table's name ("softmax_cross_entropy", "mse", ...), for
  !> strata_model%loss.
  function strata_loss_ops(name) result(ops)
    character(len=*), intent(in) :: name
    type(c_ptr) :: ops
    ops = c_loss_ops(name // c_null_char)
  end function

  !> setup_environment: plan, reserve and start the devices.
  function strata_init(rt, cfg) result(rc)
    type(c_ptr), intent(out) :: rt
    type(strata_config), intent(in), target :: cfg
    integer(c_int) :: rc
    rt = c_null_ptr
    rc = c_init(rt, c_loc(cfg%store))
  end function

  !> .true. in the process that holds global rank 0 (the one that writes checkpoints).
  logical function strata_is_global_zero(rt)
    type(c_ptr), intent(in) :: rt
    strata_is_global_zero = c_is_global_zero(rt) /= 0
  end function

  !> save_checkpoint: everything a bitwise resume needs, written atomically to path.
  function strata_save(rt, path) result(rc)
    type(c_ptr), intent(in) :: rt
    character(len=*), intent(in) :: path
    integer(c_int) :: rc
    rc = c_save(rt, path // c_null_char, c_null_ptr, 0_c_size_t)
  end function

  !> load_checkpoint: validate path completely, then restore it; info says what it held.
  function strata_load(rt, path, info) result(rc)
    type(c_ptr), intent(in) :: rt
    character(len=*), intent(in) :: path
    type(strata_ckpt_info), intent(out), optional, target :: info
    integer(c_int) :: rc
    type(c_ptr) :: pinfo
    pinfo = c_null_ptr
    if (present(info)) pinfo = c_loc(info)
    rc = c_load(rt, path // c_null_char, c_null_ptr, 0_c_size_t, c_null_ptr, pinfo)
  end function

  !> Device 0's parameters as safetensors, for PyTorch.
  function strata_export_safetensors(rt, path) result(rc)
    type(c_ptr), intent(in) :: rt
    character(len=*), intent(in) :: path
    integer(c_int) :: rc
    rc = c_export(rt, path // c_null_char)
  end function

  !> load_weights: a safetensors file's tensors into the model by their state_dict names,
  !> strictly (every group, its shape, nothing else; a refusal changes nothing), or with
  !> partial = .true. the tensors that fit; optimizer state starts at zero. strata_error()
  !> names what did not fit.
  function strata_load_weights(rt, path, partial) result(rc)
    type(c_ptr), intent(in) :: rt
    character(len=*), intent(in) :: path
    logical, intent(in), optional :: partial
    integer(c_int) :: rc, flags
    flags = 0
    if (present(partial)) then
      if (partial) flags = 1
    end if
    rc = c_load_weights(rt, path // c_null_char, flags, c_null_ptr)
  end function

  ! ---- arrays as batches ----

  function ref_s(a) result(ref)
    real(real32), intent(in), target, contiguous :: a(..)
    type(array_ref) :: ref
    ref = array_ref(c_loc(a), STRATA_F32, size(a, kind=c_size_t), 1)
    if (rank(a) >= 2) ref%rows = size(a, rank(a), kind=c_size_t)
  end function

  function ref_d(a) result(ref)
    real(real64), intent(in), target, contiguous :: a(..)
    type(array_ref) :: ref
    ref = array_ref(c_loc(a), STRATA_F64, size(a, kind=c_size_t), 1)
    if (rank(a) >= 2) ref%rows = size(a, rank(a), kind=c_size_t)
  end function

  function ref_l(a) result(ref)
    integer(c_int32_t), intent(in), target, contiguous :: a(:)
    type(array_ref) :: ref
    ref = array_ref(c_loc(a), STRATA_I32, size(a, kind=c_size_t), size(a, kind=c_size_t))
  end function

  ! A refusal of this module's own (a size the arrays do not have), through strata_error().
  function refuse(msg) result(rc)
    character(len=*), intent(in) :: msg
    integer(c_int) :: rc
    rc = c_set_error(STRATA_EINVAL, msg // c_null_char)
  end function

  ! "N" for an integer, for messages.
  function str(n) result(s)
    integer(c_size_t), intent(in) :: n
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write(buf, '(i0)') n
    s = trim(buf)
  end function

  ! The batch of inputs x (and targets t when t%p is set) into b: x's samples are its rows,
  ! and the targets must have as many (labels: one a sample; float targets: their last
  ! dimension), every size within the C API's int.
  function batch_of(x, t, b) result(rc)
    type(array_ref), intent(in) :: x, t
    type(strata_batch), intent(out) :: b
    integer(c_int) :: rc
    integer(c_size_t), parameter :: most = huge(0_c_int)
    rc = STRATA_OK
    if (x%n < 1) then
      rc = refuse("the inputs x are empty")
    else if (x%rows > most .or. x%n / max(x%rows, 1_c_size_t) > most) then
      rc = refuse("the inputs x have " // str(x%rows) // " samples of " // &
                  str(x%n / x%rows) // " values: too many for one batch")
    else if (t%dtype == STRATA_I32 .and. t%n /= x%rows) then
      rc = refuse("the labels have " // str(t%n) // " values; the inputs x have " // &
                  str(x%rows) // " samples (their last dimension)")
    else if (c_associated(t%p) .and. t%dtype /= STRATA_I32 .and. t%rows /= x%rows) then
      rc = refuse("the targets t have " // str(t%rows) // " samples, the inputs x " // &
                  str(x%rows) // " (the last dimension of each)")
    else if (c_associated(t%p) .and. t%dtype /= STRATA_I32 .and. &
             t%n / max(t%rows, 1_c_size_t) > most) then
      rc = refuse("the targets t have " // str(t%n / max(t%rows, 1_c_size_t)) // &
                  " values a sample: too many")
    end if
    if (rc /= STRATA_OK) return
    b%x = x%p
    b%xtype = x%dtype
    b%rows = int(x%rows, c_int)
    b%dim = int(x%n / x%rows, c_int)
    if (t%dtype == STRATA_I32) then
      b%y = t%p
    else if (c_associated(t%p)) then
      b%t = t%p
      b%ttype = t%dtype
      b%tdim = int(t%n / t%rows, c_int)
    end if
  end function

  ! A training or evaluation step on x and t; metrics (optional) receive the step's metrics.
  function step(rt, what, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    integer, intent(in) :: what
    type(array_ref), intent(in) :: x, t
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    type(strata_metrics) :: m
    type(strata_batch) :: b
    rc = batch_of(x, t, b)
    if (rc /= STRATA_OK) return
    if (what == TRAIN) then
      rc = strata_train_step(rt, b, m)
    else
      rc = strata_eval_step(rt, b, m)
    end if
    if (present(metrics)) metrics = m
  end function

  function train_ss(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..), t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_s(x), ref_s(t), metrics)
  end function

  function train_sd(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    real(real64), intent(in), target, contiguous :: t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_s(x), ref_d(t), metrics)
  end function

  function train_ds(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    real(real32), intent(in), target, contiguous :: t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_d(x), ref_s(t), metrics)
  end function

  function train_dd(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..), t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_d(x), ref_d(t), metrics)
  end function

  function train_sl(rt, x, y, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    integer(c_int32_t), intent(in), target, contiguous :: y(:)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_s(x), ref_l(y), metrics)
  end function

  function train_dl(rt, x, y, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    integer(c_int32_t), intent(in), target, contiguous :: y(:)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, TRAIN, ref_d(x), ref_l(y), metrics)
  end function

  function eval_ss(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..), t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_s(x), ref_s(t), metrics)
  end function

  function eval_sd(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    real(real64), intent(in), target, contiguous :: t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_s(x), ref_d(t), metrics)
  end function

  function eval_ds(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    real(real32), intent(in), target, contiguous :: t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_d(x), ref_s(t), metrics)
  end function

  function eval_dd(rt, x, t, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..), t(..)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_d(x), ref_d(t), metrics)
  end function

  function eval_sl(rt, x, y, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    integer(c_int32_t), intent(in), target, contiguous :: y(:)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_s(x), ref_l(y), metrics)
  end function

  function eval_dl(rt, x, y, metrics) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    integer(c_int32_t), intent(in), target, contiguous :: y(:)
    type(strata_metrics), intent(out), optional :: metrics
    integer(c_int) :: rc
    rc = step(rt, EVALUATE, ref_d(x), ref_l(y), metrics)
  end function

  ! predict_step into f32 storage at out%p: out must have x's samples (its last dimension, or
  ! one sample for both rank 1) of the model's outputs each; *n gets rows x outputs.
  function predict_into(rt, x, out, n) result(rc)
    type(c_ptr), intent(in) :: rt
    type(array_ref), intent(in) :: x, out
    integer(c_size_t), intent(out) :: n
    integer(c_int) :: rc, k
    type(strata_batch) :: b
    n = 0
    rc = batch_of(x, array_ref(), b)
    if (rc == STRATA_OK) rc = c_outputs(rt, k)
    if (rc /= STRATA_OK) return
    if (out%rows /= x%rows) then
      rc = refuse("the outputs out have room for " // str(out%rows) // &
                  " samples, the inputs x have " // str(x%rows) // &
                  " (the last dimension of each)")
    else if (out%n /= x%rows * int(k, c_size_t)) then
      rc = refuse("the outputs out have " // str(out%n / max(out%rows, 1_c_size_t)) // &
                  " values a sample; the model has " // str(int(k, c_size_t)) // " outputs")
    else
      rc = strata_predict_step(rt, b, out%p, out%n)
      n = out%n
    end if
  end function

  ! Widen n f32 values at the start of a real64 array's storage to real64 in place: from the
  ! last, so that no f32 value is overwritten before it is read.
  subroutine widen(p, n)
    type(c_ptr), intent(in) :: p
    integer(c_size_t), intent(in) :: n
    real(c_float), pointer :: f(:)
    real(c_double), pointer :: d(:)
    integer(c_size_t) :: i
    call c_f_pointer(p, f, [n])
    call c_f_pointer(p, d, [n])
    do i = n, 1, -1
      d(i) = real(f(i), c_double)
    end do
  end subroutine

  function predict_ss(rt, x, out) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    real(real32), intent(inout), target, contiguous :: out(..)
    integer(c_int) :: rc
    integer(c_size_t) :: n
    rc = predict_into(rt, ref_s(x), ref_s(out), n)
  end function

  function predict_ds(rt, x, out) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    real(real32), intent(inout), target, contiguous :: out(..)
    integer(c_int) :: rc
    integer(c_size_t) :: n
    rc = predict_into(rt, ref_d(x), ref_s(out), n)
  end function

  !> real64 outputs: predicted as f32 into out's own storage, then widened in place (out
  !> holds exactly rows x outputs values, checked).
  function predict_sd(rt, x, out) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real32), intent(in), target, contiguous :: x(..)
    real(real64), intent(inout), target, contiguous :: out(..)
    integer(c_int) :: rc
    integer(c_size_t) :: n
    rc = predict_into(rt, ref_s(x), ref_d(out), n)
    if (rc == STRATA_OK) call widen(c_loc(out), n)
  end function

  function predict_dd(rt, x, out) result(rc)
    type(c_ptr), intent(in) :: rt
    real(real64), intent(in), target, contiguous :: x(..)
    real(real64), intent(inout), target, contiguous :: out(..)
    integer(c_int) :: rc
    integer(c_size_t) :: n
    rc = predict_into(rt, ref_d(x), ref_d(out), n)
    if (rc == STRATA_OK) call widen(c_loc(out), n)
  end function

  ! A C string as a Fortran string.
  function from_c(p) result(msg)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: msg
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function

  !> The last error of this thread, as a Fortran string.
  function strata_error() result(msg)
    character(len=:), allocatable :: msg
    msg = from_c(c_last_error())
  end function

  !> The name of a status ("STRATA_EINVAL"), for logs.
  function strata_status_name(status) result(name)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: name
    name = from_c(c_status_name(status))
  end function

  !> How many parameter and buffer groups the model has: strata_parameter's indices 0..n-1.
  function strata_parameter_count(rt, n) result(rc)
    type(c_ptr), intent(in) :: rt
    integer, intent(out) :: n
    integer(c_int) :: rc, cn
    cn = 0
    rc = c_parameter_count(rt, cn)
    n = int(cn)
  end function

  !> Group index (0-based, as strata_parameter() in C) of device dev's model (default 0):
  !> p describes it (p%name, p%group%shape...), values (optional) receive its values: the whole
  !> group, or under fsdp the part the device holds, n (optional) of them. values smaller than
  !> that is refused, nothing written.
  function strata_parameter(rt, index, p, values, n, dev) result(rc)
    type(c_ptr), intent(in) :: rt
    integer, intent(in) :: index
    type(strata_param), intent(out), target :: p
    real(real32), intent(inout), target, contiguous, optional :: values(:)
    integer, intent(out), optional :: n
    integer, intent(in), optional :: dev
    integer(c_int) :: rc, d
    integer(c_size_t) :: got
    d = 0
    if (present(dev)) d = int(dev, c_int)
    got = 0
    rc = c_parameter(rt, d, int(index, c_int), c_loc(p))
    if (rc == STRATA_OK .and. present(values)) &
      rc = c_parameter_copy(rt, d, int(index, c_int), c_loc(values), &
                            size(values, kind=c_size_t), got)
    if (present(n)) n = int(got)
  end function

end module strata

! Reinforcement learning in situ from Fortran (include/strata/rl.h, decision 0077): an agent
! (TD3, SAC or PPO) whose struct, arena and block live in one allocation of the module's
! (strata_rl_agent_region_bytes()), acting on and recording the simulation's own arrays:
! states state(state_dim, n_envs), actions action(action_dim, n_envs) (the memory of C's
! row-major [n_envs][dim]), rewards reward(n_envs), done flags done(n_envs). Every wrapper
! checks the arrays' shapes against the configuration before the library reads them.
module strata_rl
  use, intrinsic :: iso_c_binding
  use strata, only: STRATA_OK, STRATA_EINVAL
  implicit none
  private

  ! enum strata_rl_algo
  integer(c_int), parameter, public :: STRATA_RL_TD3 = 1, STRATA_RL_PPO = 2, STRATA_RL_SAC = 3

  !> struct strata_rl_agent_config, field for field (zeros pick the defaults).
  type, bind(C), public :: strata_rl_agent_config
    integer(c_int) :: algo = 0
    integer(c_int32_t) :: state_dim = 0, action_dim = 0, n_envs = 0, hidden = 0
    real(c_float) :: gamma = 0, actor_lr = 0, critic_lr = 0
    integer(c_int32_t) :: batch = 0, max_size = 0, min_size = 0
    real(c_float) :: tau = 0
    integer(c_int32_t) :: policy_delay = 0
    real(c_float) :: target_noise = 0, target_noise_clip = 0, expl_noise = 0
    real(c_float) :: alpha = 0, alpha_lr = 0
    integer(c_int) :: fixed_alpha = 0
    integer(c_int32_t) :: steps = 0, epochs = 0, minibatch = 0
    real(c_float) :: clip = 0, lambda = 0, vf_coef = 0, ent_coef = 0, log_std = 0
    integer(c_int) :: fixed_std = 0
    integer(c_int) :: normalize_states = 0
    real(c_float) :: normalize_clip = 0
    integer(c_int64_t) :: seed = 0
    type(c_ptr) :: runtime = c_null_ptr
  end type

  !> An agent: its region and the C agent in it.
  type, public :: strata_rl_agent
    integer(c_int64_t), allocatable :: store(:)
    type(c_ptr) :: ag = c_null_ptr
    type(strata_rl_agent_config) :: cfg
  end type

  public :: strata_rl_agent_new, strata_rl_act, strata_rl_record, strata_rl_ready
  public :: strata_rl_train, strata_rl_export_policy, strata_rl_save, strata_rl_load
  public :: strata_rl_agent_teardown

  interface
    function c_region_bytes(cfg, bytes) bind(C, name="strata_rl_agent_region_bytes") result(rc)
      import :: c_int, c_size_t, strata_rl_agent_config
      type(strata_rl_agent_config), intent(in) :: cfg
      integer(c_size_t), intent(out) :: bytes
      integer(c_int) :: rc
    end function
    function c_init_region(ag, mem, size, cfg) bind(C, name="strata_rl_agent_init_region") &
        result(rc)
      import :: c_int, c_ptr, c_size_t, strata_rl_agent_config
      type(c_ptr), intent(out) :: ag
      type(c_ptr), value :: mem
      integer(c_size_t), value :: size
      type(strata_rl_agent_config), intent(in) :: cfg
      integer(c_int) :: rc
    end function
    function c_act(ag, state, ns, action, na, explore) bind(C, name="strata_rl_act") result(rc)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ag, state, action
      integer(c_size_t), value :: ns, na
      integer(c_int), value :: explore
      integer(c_int) :: rc
    end function
    function c_record(ag, state, action, reward, next, done, rows) &
        bind(C, name="strata_rl_record") result(rc)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ag, state, action, reward, next, done
      integer(c_size_t), value :: rows
      integer(c_int) :: rc
    end function
    function c_ready(ag) bind(C, name="strata_rl_ready") result(r)
      import :: c_int, c_ptr
      type(c_ptr), value :: ag
      integer(c_int) :: r
    end function
    function c_train(ag, n) bind(C, name="strata_rl_train") result(rc)
      import :: c_int, c_int32_t, c_ptr
      type(c_ptr), value :: ag
      integer(c_int32_t), value :: n
      integer(c_int) :: rc
    end function
    function c_path_call(ag, path) bind(C, name="strata_rl_export_policy") result(rc)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ag
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int) :: rc
    end function
    function c_save(ag, path) bind(C, name="strata_rl_save") result(rc)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ag
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int) :: rc
    end function
    function c_load(ag, path) bind(C, name="strata_rl_load") result(rc)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ag
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int) :: rc
    end function
    function c_rl_set_error(status, message) bind(C, name="strata_set_error") result(rc)
      import :: c_int, c_char
      integer(c_int), value :: status
      character(kind=c_char), intent(in) :: message(*)
      integer(c_int) :: rc
    end function
    function c_teardown(ag) bind(C, name="strata_rl_agent_teardown") result(rc)
      import :: c_int, c_ptr
      type(c_ptr), value :: ag
      integer(c_int) :: rc
    end function
  end interface

contains

  !> Make agent a of configuration cfg (its region allocated here, once).
  function strata_rl_agent_new(a, cfg) result(rc)
    type(strata_rl_agent), intent(inout), target :: a
    type(strata_rl_agent_config), intent(in) :: cfg
    integer(c_int) :: rc
    integer(c_size_t) :: bytes
    rc = c_region_bytes(cfg, bytes)
    if (rc /= STRATA_OK) return
    if (allocated(a%store)) deallocate(a%store)
    allocate(a%store(bytes / 8 + 1))
    rc = c_init_region(a%ag, c_loc(a%store), bytes, cfg)
    if (rc == STRATA_OK) a%cfg = cfg
  end function

  !> An array of w rows and n columns holds n_envs samples of width want; else the error
  !> message names the array and both shapes.
  function fits(a, what, w, n, want) result(ok)
    type(strata_rl_agent), intent(in) :: a
    character(len=*), intent(in) :: what
    integer, intent(in) :: w, n, want
    logical :: ok
    integer(c_int) :: rc
    character(len=160) :: msg
    ok = w == want .and. n == max(1, int(a%cfg%n_envs))
    if (ok) return
    write (msg, '(a, a, i0, a, i0, a, i0, a, i0, a)') what, " is (", w, ", ", n, &
      "); the agent takes (", want, ", ", max(1, int(a%cfg%n_envs)), ") (width, n_envs)"
    rc = c_rl_set_error(STRATA_EINVAL, trim(msg) // c_null_char)
  end function

  !> Actions of the n_envs environments' states: state(state_dim, n_envs) in,
  !> action(action_dim, n_envs) out; explore (default .true.) adds the exploration.
  function strata_rl_act(a, state, action, explore) result(rc)
    type(strata_rl_agent), intent(in) :: a
    real(c_float), intent(in), target, contiguous :: state(:, :)
    real(c_float), intent(inout), target, contiguous :: action(:, :)
    logical, intent(in), optional :: explore
    integer(c_int) :: rc, e
    e = 1
    if (present(explore)) then
      if (.not. explore) e = 0
    end if
    rc = STRATA_EINVAL
    if (.not. fits(a, "state", size(state, 1), size(state, 2), int(a%cfg%state_dim))) return
    if (.not. fits(a, "action", size(action, 1), size(action, 2), int(a%cfg%action_dim))) return
    rc = c_act(a%ag, c_loc(state), size(state, kind=c_size_t), c_loc(action), &
               size(action, kind=c_size_t), e)
  end function

  !> Record one step of every environment: states, actions, rewards, next states, done flags.
  function strata_rl_record(a, state, action, reward, next, done) result(rc)
    type(strata_rl_agent), intent(in) :: a
    real(c_float), intent(in), target, contiguous :: state(:, :), action(:, :), next(:, :)
    real(c_float), intent(in), target, contiguous :: reward(:)
    integer(c_int), intent(in), target, contiguous :: done(:)
    integer(c_int) :: rc
    rc = STRATA_EINVAL
    if (.not. fits(a, "state", size(state, 1), size(state, 2), int(a%cfg%state_dim))) return
    if (.not. fits(a, "next", size(next, 1), size(next, 2), int(a%cfg%state_dim))) return
    if (.not. fits(a, "action", size(action, 1), size(action, 2), int(a%cfg%action_dim))) return
    if (.not. fits(a, "reward", 1, size(reward), 1)) return
    if (.not. fits(a, "done", 1, size(done), 1)) return
    rc = c_record(a%ag, c_loc(state), c_loc(action), c_loc(reward), c_loc(next), c_loc(done), &
                  size(reward, kind=c_size_t))
  end function

  !> .true. when strata_rl_train may run.
  function strata_rl_ready(a) result(r)
    type(strata_rl_agent), intent(in) :: a
    logical :: r
    r = c_ready(a%ag) /= 0
  end function

  !> n updates (TD3, SAC), or PPO's epochs over its full rollout (n = 1).
  function strata_rl_train(a, n) result(rc)
    type(strata_rl_agent), intent(in) :: a
    integer, intent(in) :: n
    integer(c_int) :: rc
    rc = c_train(a%ag, int(n, c_int32_t))
  end function

  !> The policy's weights as safetensors at path.
  function strata_rl_export_policy(a, path) result(rc)
    type(strata_rl_agent), intent(in) :: a
    character(len=*), intent(in) :: path
    integer(c_int) :: rc
    rc = c_path_call(a%ag, trim(path) // c_null_char)
  end function

  !> Save the agent under prefix (PREFIX-K.ckpt, PREFIX-rl.state).
  function strata_rl_save(a, prefix) result(rc)
    type(strata_rl_agent), intent(in) :: a
    character(len=*), intent(in) :: prefix
    integer(c_int) :: rc
    rc = c_save(a%ag, trim(prefix) // c_null_char)
  end function

  !> Load what strata_rl_save wrote under prefix; the agent continues bitwise.
  function strata_rl_load(a, prefix) result(rc)
    type(strata_rl_agent), intent(in) :: a
    character(len=*), intent(in) :: prefix
    integer(c_int) :: rc
    rc = c_load(a%ag, trim(prefix) // c_null_char)
  end function

  !> Stop the agent's runtime and release its region.
  function strata_rl_agent_teardown(a) result(rc)
    type(strata_rl_agent), intent(inout) :: a
    integer(c_int) :: rc
    rc = c_teardown(a%ag)
    a%ag = c_null_ptr
    if (allocated(a%store)) deallocate(a%store)
  end function

end module strata_rl
