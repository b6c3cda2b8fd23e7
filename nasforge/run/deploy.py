"""Models out: a frozen model written as ONNX, TorchScript or a ``torch.export`` program,
verified when it is written, and its latency measured on the runtime that serves it.

Formats (``FORMATS``)

    onnx              ``model.onnx`` through ``torch.onnx.export`` (the dynamo exporter), run
                      back with onnxruntime
    torchscript       ``model.ts``: ``torch.jit.trace``, run back with ``torch.jit.load``
    exported-program  ``model.pt2``: ``torch.export.save``, run back with
                      ``torch.export.load(...).module()``

Every export is checked before it is kept: the written file is loaded and run on the example
input beside the PyTorch model, and the largest absolute difference of their outputs must be
within ``tolerance`` (``TOLERANCE`` = 1e-4 for fp32). The batch axis is exported dynamic
(``Dim.AUTO``); the report says whether it stayed dynamic, which is checked by running the
written file on a batch of another size, not assumed. A file is written under a temporary name
and renamed only once it passes, so a failed export leaves nothing behind.

Latency (:func:`measure_latency`): ``runtime="torch"`` times the eager module;
``runtime="onnxruntime"`` exports it to ONNX (verified) and times an onnxruntime session with
``threads`` intra-op threads. Both return the median of ``n_runs`` timed calls in
milliseconds, after ``n_warmup`` untimed ones. The clock (``CLOCKS``) is ``wall`` (elapsed
time) or ``cpu``: the CPU time of the calling thread, which with one thread is the thread that
computes (neither runtime starts a pool for one thread), so it is the latency the call has on
a core of its own, unaffected by other processes taking the core from it; on a shared, loaded
machine the wall clock's medians mostly measure the scheduler (see ``docs/deploy.md``).
:func:`latency_call` returns the prepared call, to time several models interleaved.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError, ExportError

if TYPE_CHECKING:  # torch loads when a model is exported
    import torch
    from torch import nn

__all__ = [
    "FORMATS",
    "RUNTIMES",
    "SUFFIXES",
    "TOLERANCE",
    "CLOCKS",
    "derive_example",
    "check_clock",
    "latency_call",
    "export_model",
    "measure_latency",
    "onnx_session",
    "time_call",
    "time_interleaved",
    "time_once",
]

FORMATS = ("onnx", "torchscript", "exported-program")
SUFFIXES = {"onnx": ".onnx", "torchscript": ".ts", "exported-program": ".pt2"}
RUNTIMES = ("torch", "onnxruntime")
CLOCKS = ("wall", "cpu")
TOLERANCE = 1e-4  # fp32: the largest absolute output difference an export may have

log = logging.getLogger("nasforge.run")

# how exporters name an operator in their errors, most specific first: the dynamo ONNX
# exporter's OpOverload(op='mylib.op', overload='default'), an FX node's target
# torch.ops.aten.unfold.default, TorchScript's aten::unfold
_OPS = (
    re.compile(r"OpOverload\(op='(?P<op>[\w.]+)', overload='(?P<overload>\w+)'\)"),
    re.compile(r"target=torch\.ops\.(?P<op>[\w]+\.[\w]+(?:\.\w+)?)"),
    re.compile(r"(?P<op>\b(?!torch\b)[A-Za-z_]\w*::[A-Za-z_]\w*)"),
)


def _first(out: Any) -> torch.Tensor:
    """Returns the tensor a model's output stands for: itself, the first of a tuple or list,
    the first value of a mapping (a Hugging Face output's ``logits``)."""
    import torch

    while not isinstance(out, torch.Tensor):
        if isinstance(out, Mapping):
            out = next(iter(out.values()))
        elif isinstance(out, (tuple, list)):
            out = out[0]
        else:
            out = getattr(out, "logits", None)
            if out is None:
                raise ExportError("the model's output holds no tensor to compare")
    return out


def derive_example(model: nn.Module, batch: int = 2) -> torch.Tensor:
    """Returns an input of ``batch`` samples that ``model`` runs on: the model's own
    ``example_input(batch)`` when it has one, else one shaped after its first layer (a
    ``Conv2d``/``Conv1d``'s channels at the first side of 32, 28, 8, 224 that runs; a
    ``Linear``'s features; token ids for an ``Embedding``). The default batch is 2 because
    ``torch.export`` fixes a batch of 1 as a constant.

    Raises:
        ConfigError: no such input runs the model (pass ``example=``/``--input-shape``).
    """
    import torch
    from torch import nn

    own = getattr(model, "example_input", None)
    if callable(own):
        x = own(batch)
        if isinstance(x, torch.Tensor):
            return x
    candidates: list[torch.Tensor] = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            candidates = [torch.randn(batch, m.in_channels, s, s) for s in (32, 28, 8, 224)]
        elif isinstance(m, nn.Conv1d):
            candidates = [torch.randn(batch, m.in_channels, s) for s in (128, 32)]
        elif isinstance(m, nn.Linear):
            candidates = [torch.randn(batch, m.in_features)]
        elif isinstance(m, nn.Embedding):
            candidates = [torch.randint(0, m.num_embeddings, (batch, 16))]
        else:
            continue
        break
    was = model.training
    model.eval()
    try:
        for x in candidates:
            try:
                with torch.no_grad():
                    model(x)
            except (RuntimeError, ValueError, IndexError):
                continue
            return x
    finally:
        model.train(was)
    raise ConfigError(
        f"cannot derive an example input for {type(model).__name__} (tried "
        f"{[tuple(x.shape) for x in candidates] or 'no shape: no conv, linear or embedding'}); "
        "pass example=<tensor> (Python) or --input-shape C,H,W (nasforge export)"
    )


def _operator(exc: BaseException) -> str | None:
    """Returns the operator an exporter's error names, or None."""
    text = "\n".join(str(e) for e in _chain(exc))
    for pattern in _OPS:
        m = pattern.search(text)
        if m:
            d = m.groupdict()
            return d["op"] + (f".{d['overload']}" if d.get("overload") else "")
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:200]


def _served(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """Returns the module an exporter traces for ``model`` and its ONNX input and output
    names: a Hugging Face model (it has ``config`` and ``main_input_name``) wrapped to take
    its main input (``input_ids``, ``pixel_values``) positionally, without a key-value cache,
    and return its logits as one tensor; any other model as it is (``x`` -> ``y``)."""
    from torch import nn

    name = getattr(model, "main_input_name", None)
    if not (isinstance(name, str) and hasattr(model, "config")):
        return model, ["x", "y"]
    key: str = name  # the closure below keeps the narrowed type

    class Logits(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            kwargs: dict[str, Any] = {key: x, "return_dict": True}
            if hasattr(self.inner.config, "use_cache"):
                kwargs["use_cache"] = False  # a cache is an output no serving graph wants
            return _first(self.inner(**kwargs))

    return Logits(model).eval(), [key, "logits"]


def _write(model: nn.Module, x: torch.Tensor, fmt: str, tmp: Path, dynamo: bool) -> None:
    """Writes ``model`` traced on ``x`` in format ``fmt`` to ``tmp`` (ONNX: with the dynamo
    exporter, or the TorchScript-based one when not ``dynamo``; a Hugging Face model through
    :func:`_served`)."""
    import torch

    batch = {0: torch.export.Dim.AUTO}
    served, names = _served(model)
    with _quiet("onnx_ir", "onnxscript", "torch.onnx", "torch.export"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own internals, not the user's
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit's: the format is asked
        _write_quietly(served, x, fmt, tmp, batch, dynamo, names)


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Raises the named loggers to ERROR for the block: the exporters log each pass at INFO
    and each missing optional package (torchvision) as a warning."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _write_quietly(
    model: nn.Module,
    x: torch.Tensor,
    fmt: str,
    tmp: Path,
    batch: dict[int, Any],
    dynamo: bool,
    names: list[str],
) -> None:
    import torch

    if fmt == "onnx" and not dynamo:
        axes = {names[0]: {0: "batch"}, names[1]: {0: "batch"}}
        torch.onnx.export(model, (x,), str(tmp), dynamo=False, input_names=names[:1],
                          output_names=names[1:], dynamic_axes=axes)  # fmt: skip
    elif fmt == "onnx":
        torch.onnx.export(
            model,
            (x,),
            str(tmp),
            dynamo=True,
            dynamic_shapes=(batch,),
            input_names=names[:1],
            output_names=names[1:],
            external_data=False,
            verbose=False,
        )
    elif fmt == "torchscript":
        traced = torch.jit.trace(model, (x,), check_trace=False)  # type: ignore[no-untyped-call]
        torch.jit.save(traced, str(tmp))
    else:
        ep = torch.export.export(model, (x,), dynamic_shapes=(batch,))
        torch.export.save(ep, str(tmp))


def onnx_session(path: str | Path, threads: int = 1) -> Any:
    """Returns an onnxruntime ``InferenceSession`` of the ONNX file at ``path`` on the CPU with
    ``threads`` intra-op threads (one inter-op thread, sequential execution, every graph
    optimization).

    Raises:
        ConfigError: onnxruntime is not installed.
    """
    try:
        import onnxruntime as ort  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigError(
            "the onnxruntime runtime needs the onnxruntime package: pip install onnxruntime"
        ) from exc
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _runner(path: Path, fmt: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Returns ``x -> output`` of the file at ``path`` loaded back in format ``fmt``."""
    import torch

    if fmt == "onnx":
        sess = onnx_session(path, threads=1)
        name = sess.get_inputs()[0].name
        return lambda x: torch.from_numpy(sess.run(None, {name: x.numpy()})[0])
    loaded: Any
    if fmt == "torchscript":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the format is asked for
            loaded = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
    else:
        loaded = torch.export.load(str(path)).module()
    return lambda x: _first(loaded(x))


def export_model(
    model: nn.Module,
    path: str | Path,
    format: str = "onnx",
    example: torch.Tensor | None = None,
    tolerance: float = TOLERANCE,
    dynamo: bool = True,
) -> dict[str, Any]:
    """Returns the report of ``model`` written to ``path`` in ``format`` (one of
    ``FORMATS``; ``path`` gets the format's suffix when it has none) and verified:
    ``{"path", "format", "max_abs_diff", "tolerance", "dynamic_batch", "input_shape"}``.
    ``example`` is the input it is traced and checked on (:func:`derive_example` when None).
    The model is put in eval mode. ``dynamo=False`` writes ONNX with torch's
    TorchScript-based exporter: the same graph for plain convolutional networks in a
    twentieth of the time (what latency measurement uses), verified all the same.

    Invariants:
        A file at the returned path ran on ``example`` within ``tolerance`` of the model; an
        export that fails leaves no file.

    Raises:
        ConfigError: unknown format; no example input can be derived, or ``example`` does not
            run the model.
        ExportError: the model has an operator the format cannot hold (the message names it),
            or the written file's output differs by more than ``tolerance``.
    """
    import torch

    if format not in FORMATS:
        raise ConfigError(f"export format {format!r} is not one of {FORMATS}")
    path = Path(path)
    if not path.suffix:
        path = path.with_suffix(SUFFIXES[format])
    model.eval()
    x = derive_example(model) if example is None else example
    try:
        with torch.no_grad():
            want = _first(model(x))
    except (RuntimeError, ValueError, IndexError, TypeError) as exc:
        raise ConfigError(
            f"the example input of shape {tuple(x.shape)} does not run "
            f"{type(model).__name__} ({_one_line(exc)}); pass an input it takes (example=, "
            "or --input-shape C,H,W without the batch)"
        ) from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".part-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            _write(model, x, format, tmp, dynamo)
        except Exception as exc:  # an exporter's own error: name the operator in one line
            op = _operator(exc)
            what = f"operator {op}" if op else _one_line(exc)
            raise ExportError(
                f"{type(model).__name__} cannot be exported to {format}: {what} is not "
                f"supported ({type(exc).__name__}); replace it, or export another format"
            ) from exc
        run = _runner(tmp, format)
        with torch.no_grad():
            diff = float((run(x) - want).abs().max())
        if not diff <= tolerance:
            raise ExportError(
                f"{type(model).__name__} exported to {format} differs from the model by "
                f"{diff:.3g} (max absolute) on the example input, above the tolerance "
                f"{tolerance:g}; nothing was written"
            )
        dynamic = _dynamic(model, run, x, tolerance)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    report = {
        "path": str(path),
        "format": format,
        "max_abs_diff": diff,
        "tolerance": tolerance,
        "dynamic_batch": dynamic,
        "input_shape": list(x.shape),
    }
    log.debug("%s: %s, max |diff| %.2g, dynamic batch %s", path, format, diff, dynamic)
    return report


def _dynamic(
    model: nn.Module, run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, tol: float
) -> bool:
    """Returns whether the written file runs a batch one larger than ``x``'s and matches."""
    import torch

    y = torch.cat([x, x[:1]])
    try:
        with torch.no_grad():
            return float((run(y) - _first(model(y))).abs().max()) <= tol
    except Exception:  # a static batch: the runtime rejects the shape
        return False


def latency_call(
    model: nn.Module, x: torch.Tensor, runtime: str = "torch", threads: int | None = None
) -> Callable[[], Any]:
    """Returns a call that runs ``model`` once on ``x`` in ``runtime`` (``"torch"``: the eager
    module, no grad, with ``threads`` torch threads when given; ``"onnxruntime"``: the model
    exported to ONNX and verified, in a session of ``threads`` threads, 1 when None).

    Raises:
        ConfigError: unknown runtime; onnxruntime is not installed.
        ExportError: the model does not export to ONNX.
    """
    import torch

    if runtime not in RUNTIMES:
        raise ConfigError(f"latency runtime {runtime!r} is not one of {RUNTIMES}")
    model.eval()
    if runtime == "torch":
        want = threads

        def call() -> Any:
            before = torch.get_num_threads()
            switch = want is not None and want != before
            if want is not None and switch:
                torch.set_num_threads(want)
            try:
                with torch.no_grad():
                    return model(x)
            finally:
                if switch:
                    torch.set_num_threads(before)

        return call
    with tempfile.TemporaryDirectory(prefix="nasforge-ort-") as d:
        path = Path(d) / "model.onnx"
        export_model(model, path, "onnx", example=x, dynamo=False)
        sess = onnx_session(path, threads=threads or 1)  # holds the model: the file may go
    feed = {sess.get_inputs()[0].name: x.numpy()}
    return lambda: sess.run(None, feed)


def check_clock(clock: str, threads: int | None) -> None:
    """Checks that ``clock`` is one of ``CLOCKS`` and can time ``threads`` threads.

    Raises:
        ConfigError: an unknown clock, or ``cpu`` with more than one thread (the calling
            thread's CPU time would miss the pool's work).
    """
    if clock not in CLOCKS:
        raise ConfigError(f"latency clock {clock!r} is not one of {CLOCKS}")
    if clock == "cpu" and threads != 1:
        raise ConfigError(
            f"the cpu clock times the calling thread, so it needs threads: 1 (got {threads}); "
            "set threads: 1 or clock: wall"
        )


def measure_latency(
    model: nn.Module,
    x: torch.Tensor,
    runtime: str = "torch",
    threads: int | None = None,
    n_warmup: int = 2,
    n_runs: int = 5,
    clock: str = "wall",
) -> float:
    """Returns the median time in milliseconds of ``model`` on ``x`` in ``runtime`` (see
    :func:`latency_call`) on ``clock`` (``wall``, or ``cpu``: the calling thread's CPU time,
    for ``threads=1``).

    Raises:
        ConfigError: unknown runtime or clock, the cpu clock with threads other than 1;
            onnxruntime is not installed.
        ExportError: the model does not export to ONNX.
    """
    check_clock(clock, threads)
    return time_call(latency_call(model, x, runtime, threads), n_warmup, n_runs, clock)


def time_call(call: Callable[[], Any], n_warmup: int, n_runs: int, clock: str = "wall") -> float:
    """Returns the median time of ``n_runs`` calls of ``call`` in milliseconds on ``clock``,
    after ``n_warmup`` untimed ones."""
    for _ in range(n_warmup):
        call()
    return statistics.median(time_once(call, clock) for _ in range(n_runs))


def time_interleaved(
    calls: Mapping[Any, Callable[[], Any]], n_warmup: int, n_runs: int, clock: str = "wall"
) -> dict[Any, float]:
    """Returns {key: median ms of its call} over ``n_runs`` rounds that each call every one of
    ``calls`` once in turn, after ``n_warmup`` untimed rounds: a burst of load on the machine
    spreads over every key rather than inflating the few timed during it."""
    for _ in range(n_warmup):
        for call in calls.values():
            call()
    times: dict[Any, list[float]] = {key: [] for key in calls}
    for _ in range(n_runs):
        for key, call in calls.items():
            times[key].append(time_once(call, clock))
    return {key: statistics.median(t) for key, t in times.items()}


def time_once(call: Callable[[], Any], clock: str = "wall") -> float:
    """Returns the time of one call of ``call`` in milliseconds on ``clock`` (``CLOCKS``)."""
    now = time.thread_time if clock == "cpu" else time.perf_counter
    t = now()
    call()
    return (now() - t) * 1000
