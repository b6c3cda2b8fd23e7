"""int8 models out: onnxruntime's dynamic quantization of an exported ONNX model, with what it
costs in accuracy and what it gains in latency.

:func:`quantize_onnx` writes ``<name>.int8.onnx`` beside a verified fp32 ``<name>.onnx``
(``onnxruntime.quantization.quantize_dynamic``: weights stored as int8, activations quantized
at run time; ``weight_type`` QInt8; 7-bit weights, ``reduce_range``, on a CPU whose int8
products saturate: :func:`saturates_int8`) and reports

    accuracy        with evaluation data ``(x, y)``: the top-1 accuracy of the fp32 and the
                    int8 model on it (both in onnxruntime) and their ``change`` (int8 - fp32)
    max_abs_diff    the largest absolute difference of the int8 model's output from the fp32
                    model's on the example input (the accuracy's stand-in without data)
    latency_ms      the median of ``n_runs`` timed calls of each model at batch 1 in an
                    onnxruntime session of ``threads`` threads (fp32 and int8 calls alternate,
                    so a change of load on the machine falls on both), and ``speedup``
                    (fp32 / int8; below 1 when int8 is slower, as it can be for convolutions
                    on a CPU without int8 dot-product instructions)

The int8 file is written under a temporary name and renamed once measured, so a failure leaves
nothing behind.
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError, ExportError
from nasforge.run.deploy import onnx_session

if TYPE_CHECKING:  # torch loads when a model is quantized
    import torch

__all__ = ["QUANTIZE", "evaluation_data", "int8_path", "quantize_onnx", "saturates_int8"]

QUANTIZE = ("int8",)

log = logging.getLogger("nasforge.run")


def int8_path(path: str | Path) -> Path:
    """Returns where the int8 model of the ONNX file ``path`` is written: ``model.onnx`` ->
    ``model.int8.onnx``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.int8{path.suffix}")


def saturates_int8(cpuinfo: str | None = None, machine: str | None = None) -> bool:
    """Returns whether int8 matrix products can saturate on this CPU (or on one with the
    ``/proc/cpuinfo`` text ``cpuinfo`` and architecture ``machine``): an x86 CPU without VNNI
    multiplies u8 by s8 pairwise into 16 bits (VPMADDUBSW), which overflows for large
    weights and inputs; onnxruntime then advises 7-bit weights (``reduce_range``). On this
    project's AVX2 machine the full 8 bits flipped 7 of 64 argmaxes of a small MLP, 7 bits
    one. An x86 CPU whose flags cannot be read counts as saturating; other architectures do
    not saturate."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return True
    flags = set(cpuinfo.split())
    return not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}


def quantize_onnx(
    path: str | Path,
    example: torch.Tensor,
    data: tuple[torch.Tensor, torch.Tensor] | None = None,
    threads: int = 1,
    n_runs: int = 20,
    n_warmup: int = 3,
    batch_size: int = 256,
    reduce_range: bool | None = None,
) -> dict[str, Any]:
    """Returns the report (see the module docstring) of the ONNX model at ``path`` quantized to
    int8 and written to :func:`int8_path` of it: ``{"path", "quantize", "method",
    "reduce_range", "accuracy", "max_abs_diff", "latency_ms", "speedup", "threads",
    "n_runs"}``; ``accuracy`` is None without ``data`` (inputs and class labels), which is
    run in batches of ``batch_size``. ``reduce_range`` (7-bit weights) None: where this CPU's
    int8 products saturate (:func:`saturates_int8`).

    Raises:
        ConfigError: onnxruntime is not installed; ``data`` does not run the model or its
            labels do not match its inputs.
        ExportError: onnxruntime cannot quantize the model or run the quantized one (the
            message says which, in one line).
    """
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quant_pre_process,
        quantize_dynamic,
    )

    path = Path(path)
    out = int8_path(path)
    if reduce_range is None:
        reduce_range = saturates_int8()
    fd, name = tempfile.mkstemp(prefix=".part-", suffix=".onnx", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            quant_pre_process(path, tmp, skip_symbolic_shape=True)  # what ORT asks for first
            quantize_dynamic(tmp, tmp, weight_type=QuantType.QInt8, reduce_range=reduce_range)
            int8 = onnx_session(tmp, threads)
        except Exception as exc:  # onnxruntime's own error, in one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ExportError(
                f"{path.name} cannot be quantized to int8 by onnxruntime ({first}); "
                "export it without --quantize"
            ) from exc
        fp32 = onnx_session(path, threads)
        diff = float((_run(int8, example) - _run(fp32, example)).abs().max())
        accuracy = None
        if data is not None:
            a32, a8 = _accuracy(fp32, data, batch_size), _accuracy(int8, data, batch_size)
            accuracy = {"fp32": a32, "int8": a8, "change": a8 - a32, "n": len(data[1])}
        x1 = example[:1].numpy()
        t32, t8 = _alternate(fp32, int8, x1, n_warmup, n_runs)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    report = {
        "path": str(out),
        "quantize": "int8",
        "method": "onnxruntime quant_pre_process + quantize_dynamic, QInt8 weights"
        + (" of 7 bits (reduce_range: this CPU's int8 products saturate)" if reduce_range else ""),
        "reduce_range": reduce_range,
        "accuracy": accuracy,
        "max_abs_diff": diff,
        "latency_ms": {"fp32": t32, "int8": t8},
        "speedup": t32 / t8,
        "threads": threads,
        "n_runs": n_runs,
        "input_shape": list(example[:1].shape),
    }
    log.debug("%s: int8, max |diff| from fp32 %.2g, %.2fx", out, diff, t32 / t8)
    return report


def _run(sess: Any, x: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.from_numpy(sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0])


def _accuracy(sess: Any, data: tuple[torch.Tensor, torch.Tensor], batch_size: int) -> float:
    """Returns the top-1 accuracy of ``sess`` on ``data`` (inputs, labels)."""
    x, y = data
    if len(x) != len(y) or len(y) == 0:
        raise ConfigError(
            f"evaluation data has {len(x)} inputs and {len(y)} labels; give as many of each, "
            "at least one"
        )
    correct = 0
    for i in range(0, len(x), batch_size):
        try:
            logits = _run(sess, x[i : i + batch_size].float().contiguous())
        except Exception as exc:
            raise ConfigError(
                f"evaluation inputs of shape {tuple(x.shape[1:])} do not run the ONNX model "
                f"({str(exc).splitlines()[0][:160]}); export with an example of that shape "
                "(--input-shape C,H,W)"
            ) from exc
        correct += int((logits.argmax(-1) == y[i : i + batch_size]).sum())
    return correct / len(y)


def _alternate(a: Any, b: Any, x: Any, n_warmup: int, n_runs: int) -> tuple[float, float]:
    """Returns the median milliseconds of sessions ``a`` and ``b`` on ``x``, their calls
    alternating."""
    feed_a, feed_b = {a.get_inputs()[0].name: x}, {b.get_inputs()[0].name: x}
    for _ in range(n_warmup):
        a.run(None, feed_a)
        b.run(None, feed_b)
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(n_runs):
        for sess, feed, times in ((a, feed_a, ta), (b, feed_b, tb)):
            t = time.perf_counter()
            sess.run(None, feed)
            times.append((time.perf_counter() - t) * 1000)
    return statistics.median(ta), statistics.median(tb)


def evaluation_data(
    config: dict[str, Any], limit: int = 2000
) -> tuple[tuple[torch.Tensor, torch.Tensor], str] | None:
    """Returns ``((inputs, labels), where they come from)`` of the data a run's evaluator
    scores on (at most ``limit`` samples), or None when the run's record cannot rebuild it:
    each kind of run says what it can (:meth:`~nasforge.run.runner.BaseRunner.evaluation_data`;
    a multi-trial run's built-in classification evaluator gives its validation split, a
    once-for-all run the held-out part of its data); otherwise the int8 report gives the
    output difference only."""
    from nasforge.run.runner import get_runner

    kind = config.get("kind")
    section = config.get(kind) if isinstance(kind, str) else None
    if not isinstance(section, dict):
        return None
    try:
        runner = get_runner(str(kind))
    except ConfigError:  # a kind this installation does not know
        return None
    return runner.evaluation_data(section, limit)
