"""The parts of a pool worker's process state that NumPy and torch hold (global random
generators, grad mode, default dtype and device, deterministic and anomaly modes, backend
flags, float32 precision, ...), for :mod:`nasforge.engine.worker_state`. Nothing here imports
either library: each part is read once its module is loaded.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from nasforge.engine._state_parts import MISSING, Part

__all__: list[str] = []  # internal: worker_state's parts


def _np() -> Any:
    return sys.modules["numpy"]


def _torch() -> Any:
    return sys.modules["torch"]


def _attr(path: str) -> Any:
    obj = _torch()
    for name in path.split("."):
        obj = getattr(obj, name, MISSING)
        if obj is MISSING:
            break
    return obj


#: torch's flags read and set as attributes (``torch.backends...``); those this torch lacks
#: read as missing and are left alone
_TORCH_FLAGS = (
    "backends.cudnn.enabled",
    "backends.cudnn.benchmark",
    "backends.cudnn.deterministic",
    "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "backends.mkldnn.enabled",
    "backends.opt_einsum.enabled",
    "backends.opt_einsum.strategy",
)

#: the float32 precision of matmuls and convolutions (TF32, bf16): torch 2.9's attributes,
#: parents before children, and the older flags and call they replace, which read through
#: them (and raise once a process used both kinds)
_PRECISION = (
    "backends.fp32_precision",
    "backends.cuda.matmul.fp32_precision",
    "backends.cudnn.fp32_precision",
    "backends.cudnn.conv.fp32_precision",
    "backends.cudnn.rnn.fp32_precision",
    "backends.mkldnn.fp32_precision",
    "backends.mkldnn.matmul.fp32_precision",
    "backends.mkldnn.conv.fp32_precision",
    "backends.mkldnn.rnn.fp32_precision",
)
_LEGACY_PRECISION = ("backends.cuda.matmul.allow_tf32", "backends.cudnn.allow_tf32")


def _attr_or_error(path: str, call: bool = False) -> Any:
    try:
        value = _attr(path)
        return value() if call and value is not MISSING else value
    except RuntimeError as exc:  # torch refuses to read a flag after both APIs were used
        return f"<{type(exc).__name__}>"


def _precision() -> tuple[Any, ...]:
    with warnings.catch_warnings():  # the older flags warn when read
        warnings.simplefilter("ignore")
        paths = (*_PRECISION, *_LEGACY_PRECISION)
        matmul = _attr_or_error("get_float32_matmul_precision", call=True)
        return (*(_attr_or_error(p) for p in paths), matmul)


def _put_precision(saved: tuple[Any, ...]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = dict(zip(_PRECISION, saved, strict=False))
        if _attr(_PRECISION[0]) is MISSING:  # an older torch: its own flags and call
            new = dict(zip(_LEGACY_PRECISION, saved[len(_PRECISION) :], strict=False))
            _torch().set_float32_matmul_precision(saved[-1])
        for path, value in new.items():
            if value is not MISSING and _attr_or_error(path) != value:
                owner, name = path.rsplit(".", 1)
                setattr(_attr(owner), name, value)


#: torch's settings read and set by a pair of functions: (getter, setter)
_TORCH_CALLS = (
    ("is_grad_enabled", "set_grad_enabled"),
    ("get_default_dtype", "set_default_dtype"),
    ("get_num_threads", "set_num_threads"),
    ("backends.cuda.flash_sdp_enabled", "backends.cuda.enable_flash_sdp"),
    ("backends.cuda.mem_efficient_sdp_enabled", "backends.cuda.enable_mem_efficient_sdp"),
    ("backends.cuda.math_sdp_enabled", "backends.cuda.enable_math_sdp"),
    ("backends.cuda.cudnn_sdp_enabled", "backends.cuda.enable_cudnn_sdp"),
    ("backends.mha.get_fastpath_enabled", "backends.mha.set_fastpath_enabled"),
)


def _torch_flags() -> tuple[Any, ...]:
    with warnings.catch_warnings():  # a flag torch deprecated warns when read
        warnings.simplefilter("ignore")
        return tuple(_attr(p) for p in _TORCH_FLAGS)


def _put_torch_flags(saved: tuple[Any, ...]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, value in zip(_TORCH_FLAGS, saved, strict=True):
            if value is not MISSING and _attr(path) != value:
                owner, name = path.rsplit(".", 1)
                setattr(_attr(owner), name, value)


def _torch_calls() -> tuple[Any, ...]:
    return tuple(_attr(get)() if _attr(get) is not MISSING else MISSING for get, _ in _TORCH_CALLS)


def _put_torch_calls(saved: tuple[Any, ...]) -> None:
    for (get, put), value in zip(_TORCH_CALLS, saved, strict=True):
        if value is not MISSING and _attr(get)() != value:
            _attr(put)(value)


def _torch_modes() -> tuple[Any, ...]:
    t = _torch()
    deterministic = t.are_deterministic_algorithms_enabled()
    warn_only = t.is_deterministic_algorithms_warn_only_enabled()
    anomaly = t.is_anomaly_enabled(), t.is_anomaly_check_nan_enabled()
    autocast = t.is_autocast_enabled("cpu"), t.get_autocast_dtype("cpu")
    return deterministic, warn_only, *anomaly, *autocast, t.get_default_device()


def _put_torch_modes(saved: tuple[Any, ...]) -> None:
    t, now = _torch(), _torch_modes()
    if now[:2] != saved[:2]:
        # what use_deterministic_algorithms does, without its first call's import of
        # torch._inductor (seconds): inductor's copy of the flag is set where it is loaded
        t._C._set_deterministic_algorithms(saved[0], warn_only=saved[1])
        inductor: Any = sys.modules.get("torch._inductor.config")
        if inductor is not None:
            inductor.deterministic = saved[0]
    if now[2:4] != saved[2:4]:
        t.set_anomaly_enabled(saved[2], saved[3])
    if now[4:6] != saved[4:6]:
        t.set_autocast_enabled("cpu", saved[4])
        t.set_autocast_dtype("cpu", saved[5])
    if now[6] != saved[6]:  # the CPU is the default without a device context: none pushed
        t.set_default_device(None if saved[6] == t.device("cpu") else saved[6])


#: NumPy's and torch's parts, each taken once its module is loaded
LIBRARY_PARTS = [
    Part(
        "NumPy's global random generator",
        lambda: _np().random.get_state(),
        lambda s: _np().random.set_state(s),
        always=True,
        needs="numpy",
    ),
    Part(
        "NumPy's error handling and print options",
        lambda: (_np().geterr(), _np().get_printoptions()),
        lambda s: (_np().seterr(**s[0]), _np().set_printoptions(**s[1])),
        needs="numpy",
    ),
    Part(
        "torch's CPU random generator",
        lambda: _torch().get_rng_state(),
        lambda s: _torch().set_rng_state(s),
        always=True,
        needs="torch",
    ),
    Part("torch's settings", _torch_calls, _put_torch_calls, needs="torch"),
    Part("torch's backend flags", _torch_flags, _put_torch_flags, needs="torch"),
    Part("torch's float32 precision", _precision, _put_precision, needs="torch"),
    Part("torch's modes", _torch_modes, _put_torch_modes, needs="torch"),
    Part("torch's inter-op threads", lambda: _torch().get_num_interop_threads(), needs="torch"),
    Part("torch's inference mode", lambda: _torch().is_inference_mode_enabled(), needs="torch"),
    Part("CUDA initialised", lambda: _torch().cuda.is_initialized(), needs="torch"),
]
