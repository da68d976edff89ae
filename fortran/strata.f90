! Strata from Fortran: an iso_c_binding interface to the main entry points of the C API.
!
! Compile this file with your program (gfortran -c strata.f90), link with
! `pkg-config --libs strata`. The configuration is opaque storage set by name
! (strata_config_set: "devices", "optim.lr", ...); the small structs a training loop
! passes (module, model, batch, metrics) are mirrored as bind(C) types. Every function
! returns a Strata status (0 = STRATA_OK); strata_error() gives the reason as a string.
! Data is row-major in C terms: a batch of rows x dim features is a Fortran array
! x(dim, rows), each column one row.
module strata
  use, intrinsic :: iso_c_binding
  implicit none
  private

  integer(c_int), parameter, public :: STRATA_OK = 0
  integer(c_int), parameter, public :: STRATA_STRATEGY_SINGLE = 0, STRATA_STRATEGY_DP = 1, &
                                       STRATA_STRATEGY_DDP = 2

  !> One module of a model (struct strata_module).
  type, bind(C), public :: strata_module
    type(c_ptr) :: ops = c_null_ptr
    integer(c_int) :: out = 0
    real(c_float) :: p = 0, eps = 0, decay = 0
    real(c_float) :: slope = 0
  end type

  !> A model: input width, its modules and its loss (struct strata_model).
  type, bind(C), public :: strata_model
    integer(c_int) :: in_features = 0
    integer(c_int) :: nmodules = 0
    type(c_ptr) :: modules = c_null_ptr
    type(c_ptr) :: loss = c_null_ptr  !< NULL: softmax cross-entropy
    integer(c_int) :: reduction = 0   !< 0 mean, 1 sum
    real(c_float) :: loss_beta = 0    !< Huber's beta (0: 1.0)
  end type

  !> A batch of float rows and labels (struct strata_batch; images/index unused here).
  type, bind(C), public :: strata_batch
    type(c_ptr) :: x = c_null_ptr, y = c_null_ptr
    integer(c_int) :: rows = 0, dim = 0
    type(c_ptr) :: images = c_null_ptr, index = c_null_ptr
    integer(c_int32_t) :: nimages = 0
    real(c_float) :: scale = 0, shift = 0
    integer(c_int) :: xtype = 0       !< 0 f32, 1 f64
    type(c_ptr) :: t = c_null_ptr     !< float targets (or NULL: labels y)
    integer(c_int) :: ttype = 0, tdim = 0
  end type

  !> Metrics of one step (struct strata_metrics).
  type, bind(C), public :: strata_metrics
    real(c_double) :: loss = 0
    integer(c_int) :: correct = 0, rows = 0
    real(c_double) :: mse = 0, mae = 0
  end type

  !> A configuration: storage for one struct strata_config, reserved by strata_config_new.
  type, public :: strata_config
    integer(c_int64_t), allocatable :: store(:)
  end type

  public :: strata_config_new, strata_set, strata_set_model, strata_module_ops
  public :: strata_init, strata_connect, strata_train_step, strata_eval_step
  public :: strata_teardown, strata_error

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
    function c_module_ops(name) bind(C, name="strata_module_ops_by_name") result(ops)
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr) :: ops
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
    function strata_teardown(rt) bind(C, name="strata_teardown") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
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
    allocate(cfg%store((c_config_bytes() + 7) / 8))
    call c_config_init(c_loc(cfg%store))
  end subroutine

  !> Set a numeric field by name ("devices", "batch", "optim.lr", ...).
  function strata_set(cfg, key, value) result(rc)
    type(strata_config), intent(inout), target :: cfg
    character(len=*), intent(in) :: key
    real(c_double), intent(in) :: value
    integer(c_int) :: rc
    rc = c_config_set(c_loc(cfg%store), key // c_null_char, value)
  end function

  !> The model the runtime trains (it must stay alive, with its modules, until teardown).
  function strata_set_model(cfg, model) result(rc)
    type(strata_config), intent(inout), target :: cfg
    type(strata_model), intent(in), target :: model
    integer(c_int) :: rc
    rc = c_config_set_model(c_loc(cfg%store), c_loc(model))
  end function

  !> A built-in module kind: "linear", "relu", "batchnorm1d", "dropout", "tanh", "sigmoid",
  !> "gelu", "gelu-tanh", "silu", "leaky-relu".
  function strata_module_ops(name) result(ops)
    character(len=*), intent(in) :: name
    type(c_ptr) :: ops
    ops = c_module_ops(name // c_null_char)
  end function

  !> setup_environment: plan, reserve and start the devices.
  function strata_init(rt, cfg) result(rc)
    type(c_ptr), intent(out) :: rt
    type(strata_config), intent(in), target :: cfg
    integer(c_int) :: rc
    rt = c_null_ptr
    rc = c_init(rt, c_loc(cfg%store))
  end function

  !> The last error of this thread, as a Fortran string.
  function strata_error() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = c_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function

end module strata
