"""libstrata.so through ctypes: where it is found, the C structs a step passes, the prototypes.

The library is found, in this order: the file the STRATA_LIB environment variable names; a
libstrata.so beside this package; the build tree of the checkout the package lives in
(python/../build/libstrata.so, for PYTHONPATH=python); the dynamic linker's search path (the
install prefix: `make install` puts libstrata.so.0 in PREFIX/lib). The structs mirrored here
are those whose fields Python reads or fills (model, batch, data set, metrics, plan, weights
report); the configuration and the modules stay opaque storage of the sizes the library
reports (strata_config_bytes(), strata_module_bytes()), so that they cannot drift.
"""
import ctypes
import ctypes.util
import os

MAX_SPATIAL = 3   # STRATA_MAX_SPATIAL (strata/nn.h)
MAX_INPUTS = 8    # STRATA_MAX_INPUTS
MAX_OUTPUTS = 8   # STRATA_MAX_OUTPUTS
WEIGHTS_LEFT = 2048  # STRATA_WEIGHTS_LEFT (strata/checkpoint.h)
WEIGHTS_META = 1024  # STRATA_WEIGHTS_META

F32, F64, I32 = 0, 1, 4  # enum strata_dtype
WEIGHTS_STRICT, WEIGHTS_PARTIAL = 0, 1


class Dims(ctypes.Structure):
    """struct strata_dims."""
    _fields_ = [("channels", ctypes.c_int), ("ndim", ctypes.c_int),
                ("size", ctypes.c_int * MAX_SPATIAL)]


class ModelInput(ctypes.Structure):
    """struct strata_model_input."""
    _fields_ = [("features", ctypes.c_int), ("dims", Dims)]


class ModelOutput(ctypes.Structure):
    """struct strata_model_output."""
    _fields_ = [("module", ctypes.c_int), ("loss", ctypes.c_void_p), ("weight", ctypes.c_float)]


class Model(ctypes.Structure):
    """struct strata_model."""
    _fields_ = [("in_features", ctypes.c_int), ("nmodules", ctypes.c_int),
                ("modules", ctypes.c_void_p), ("loss", ctypes.c_void_p),
                ("reduction", ctypes.c_int), ("loss_beta", ctypes.c_float),
                ("in_dims", Dims), ("ninputs", ctypes.c_int),
                ("inputs", ModelInput * MAX_INPUTS), ("noutputs", ctypes.c_int),
                ("outputs", ModelOutput * MAX_OUTPUTS)]


class Batch(ctypes.Structure):
    """struct strata_batch."""
    _fields_ = [("x", ctypes.c_void_p), ("y", ctypes.c_void_p), ("rows", ctypes.c_int),
                ("dim", ctypes.c_int), ("images", ctypes.c_void_p), ("index", ctypes.c_void_p),
                ("nimages", ctypes.c_uint32), ("scale", ctypes.c_float),
                ("shift", ctypes.c_float), ("xtype", ctypes.c_int), ("t", ctypes.c_void_p),
                ("ttype", ctypes.c_int), ("tdim", ctypes.c_int)]


class Dataset(ctypes.Structure):
    """struct strata_dataset."""
    _fields_ = [("images", ctypes.c_void_p), ("labels", ctypes.c_void_p),
                ("n", ctypes.c_uint32), ("dim", ctypes.c_uint32), ("classes", ctypes.c_int),
                ("x", ctypes.c_void_p), ("xtype", ctypes.c_int), ("t", ctypes.c_void_p),
                ("ttype", ctypes.c_int), ("tdim", ctypes.c_int), ("y", ctypes.c_void_p)]


class Metrics(ctypes.Structure):
    """struct strata_metrics."""
    _fields_ = [("loss", ctypes.c_double), ("correct", ctypes.c_int), ("rows", ctypes.c_int),
                ("mse", ctypes.c_double), ("mae", ctypes.c_double),
                ("noutputs", ctypes.c_int), ("losses", ctypes.c_double * MAX_OUTPUTS),
                ("corrects", ctypes.c_int * MAX_OUTPUTS)]


class PlanInfo(ctypes.Structure):
    """struct strata_plan_info."""
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("bytes", "align", "params", "per_device", "device_bytes", "pinned_bytes",
                 "optimizer_bytes", "shard_params", "layer_bytes")]


class Sampler(ctypes.Structure):
    """struct strata_sampler."""
    _fields_ = [("n", ctypes.c_uint32), ("world", ctypes.c_int), ("rank", ctypes.c_int),
                ("shuffle", ctypes.c_int), ("drop_last", ctypes.c_int),
                ("seed", ctypes.c_uint64), ("per_rank", ctypes.c_uint32),
                ("indices", ctypes.c_void_p), ("perm", ctypes.c_void_p)]


class WeightsInfo(ctypes.Structure):
    """struct strata_weights_info."""
    _fields_ = [("loaded", ctypes.c_int), ("missing", ctypes.c_int),
                ("mismatched", ctypes.c_int), ("unexpected", ctypes.c_int),
                ("left", ctypes.c_char * WEIGHTS_LEFT), ("model", ctypes.c_char * WEIGHTS_META),
                ("transform", ctypes.c_char * WEIGHTS_META)]


# The mirrored structs by their C names: the layout test compares their sizes with sizeof.
STRUCTS = {"strata_dims": Dims, "strata_model": Model, "strata_batch": Batch,
           "strata_dataset": Dataset, "strata_metrics": Metrics,
           "strata_plan_info": PlanInfo, "strata_sampler": Sampler,
           "strata_weights_info": WeightsInfo}


def _candidates():
    env = os.environ.get("STRATA_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libstrata.so"),
           os.path.join(here, os.pardir, os.pardir, "build", "libstrata.so")]
    found = ctypes.util.find_library("strata")
    out += [found] if found else []
    return out + ["libstrata.so.0"]


def _open():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            if os.environ.get("STRATA_LIB"):
                break
    raise ImportError("strata: libstrata.so not found; set STRATA_LIB to its path. Tried: " +
                      "; ".join(tried))


_P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_char_p
_PROTOS = {
    "strata_last_error": (_S, []),
    "strata_status_name": (_S, [_I]),
    "strata_config_bytes": (ctypes.c_size_t, []),
    "strata_module_bytes": (ctypes.c_size_t, []),
    "strata_config_init": (None, [_P]),
    "strata_config_set": (_I, [_P, _S, ctypes.c_double]),
    "strata_config_set_model": (_I, [_P, ctypes.POINTER(Model)]),
    "strata_strategy_from_name": (_I, [_S, ctypes.POINTER(_I)]),
    "strata_precision_parse": (_I, [_S, ctypes.POINTER(_I)]),
    "strata_loss_ops_by_name": (_P, [_S]),
    "strata_model_parse": (_I, [_S, _P, _I, ctypes.POINTER(Model)]),
    "strata_model_output": (_I, [ctypes.POINTER(Model), ctypes.POINTER(Dims)]),
    "strata_model_targets": (_I, [ctypes.POINTER(Model), ctypes.POINTER(_I), _P]),
    "strata_plan": (_I, [_P, ctypes.POINTER(PlanInfo)]),
    "strata_init": (_I, [ctypes.POINTER(_P), _P]),
    "strata_connect": (_I, [_P]),
    "strata_teardown": (_I, [_P]),
    "strata_outputs": (_I, [_P, ctypes.POINTER(_I)]),
    "strata_dataset_arrays": (_I, [ctypes.POINTER(Dataset), _P, _I, ctypes.c_uint32,
                                   ctypes.c_uint32, _P, _I, _I]),
    "strata_sampler_set_epoch": (None, [ctypes.POINTER(Sampler), ctypes.c_uint64]),
    "strata_train_step": (_I, [_P, ctypes.POINTER(Batch), ctypes.POINTER(Metrics)]),
    "strata_end_accumulation_window": (_I, [_P]),
    "strata_eval_step": (_I, [_P, ctypes.POINTER(Batch), ctypes.POINTER(Metrics)]),
    "strata_predict_step": (_I, [_P, ctypes.POINTER(Batch), _P, ctypes.c_size_t]),
    "strata_export_safetensors": (_I, [_P, _S]),
    "strata_load_weights": (_I, [_P, _S, ctypes.c_uint, ctypes.POINTER(WeightsInfo)]),
    "strata_save_checkpoint": (_I, [_P, _S, _P, ctypes.c_size_t]),
    "strata_load_checkpoint": (_I, [_P, _S, _P, ctypes.c_size_t, _P, _P]),
}

lib = _open()
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
