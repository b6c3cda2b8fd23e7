"""From a trained supernet to deployable sub-networks: accuracy and latency estimators, a search
over several targets, and export of each chosen sub-network as a frozen model with weights.

Accuracy     ``measured``   top-1 of the extracted, recalibrated sub-network (memoized);
                            sensible when the space is small (CompOFA's 243 networks)
             ``predictor``  the MLP of :mod:`nasforge.ofa.predictor`, fitted on sampled pairs
Latency      ``measured``   wall time of the extracted sub-network, memoized by configuration
             ``table``      per-layer lookup table, each distinct layer shape measured once
             ``flops``      multiply-adds counted analytically (millions)

Latency is measured on eager PyTorch unless the setting is a mapping naming another runtime:
``latency: {runtime: onnxruntime, threads: 1}`` measures each sub-network exported to ONNX in
an onnxruntime session of one thread (keys: ``mode`` (``measured`` by default, or ``table``),
``runtime`` (``torch`` or ``onnxruntime``), ``threads``, ``batch``, ``n_runs``, ``clock``
(``wall`` by default, or ``cpu``: the calling thread's CPU time, with ``threads: 1``) and, for
``table``, ``calibrate``: how many sampled networks (``CALIBRATION_SEED`` on) are measured end
to end to fit the table's scale and offset, ``CALIBRATE`` by default, 0 for the raw sum).
The table's layers and its calibration networks are timed in the same interleaved rounds
(:func:`~nasforge.ofa.measure.table_latencies`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError, StoreError
from nasforge.ofa.latency import LatencyTable, MemoizedCost, count_macs, distinct_shapes
from nasforge.ofa.measure import network_latency, table_latencies
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.predictor import AccuracyPredictor
from nasforge.ofa.spaces import OFASpec
from nasforge.ofa.train import evaluate
from nasforge.run.deploy import RUNTIMES, check_clock
from nasforge.runtime.distributed import ONE, Ranks

__all__ = [
    "LATENCY_MODES",
    "LATENCY_KEYS",
    "CALIBRATE",
    "CALIBRATION_SEED",
    "N_RUNS",
    "ACCURACY_MODES",
    "make_latency",
    "make_accuracy",
    "measure_pairs",
    "save_supernet",
    "load_supernet",
]

logger = logging.getLogger(__name__)

LATENCY_MODES = ("measured", "table", "flops")
ACCURACY_MODES = ("measured", "predictor")
Score = Callable[[Mapping[str, Any]], float]


LATENCY_KEYS = ("mode", "runtime", "threads", "batch", "n_runs", "clock", "calibrate")
CALIBRATE = 8  # networks measured end to end to calibrate a latency table
#: the calls each latency is the median of, by mode: a table's rounds cost little beside the
#: exports (50 rounds of 93 layer shapes took 111 s against 107 s at 20), and at 20 the rank
#: of 50 sub-networks moved between runs at load 2 (Spearman rho 0.89-0.96; at 50, 0.99)
N_RUNS = {"measured": 5, "table": 50}
CALIBRATION_SEED = 1_000_000  # their sample seeds: CALIBRATION_SEED, +1, ...


def make_latency(
    net: OFAMobileNetV3, mode: str | Mapping[str, Any], batch: int = 1, n_runs: int | None = None
) -> tuple[Score, Callable[[], int]]:
    """Returns ``(arch -> cost, n_measurements)`` for latency mode ``mode`` (ms, or MMACs for
    ``flops``); measured latencies are memoized by canonical configuration. ``mode`` is one of
    ``LATENCY_MODES``, or a mapping of ``LATENCY_KEYS`` that also names the runtime and its
    threads (see the module's docstring). ``n_runs`` (or the mapping's) is the calls each
    latency is the median of, ``N_RUNS`` of the mode when None.

    Raises:
        ConfigError: unknown mode, runtime or key.
    """
    space = net.search_space()
    runtime, threads, clock, n_cal = "torch", None, "wall", CALIBRATE
    if isinstance(mode, Mapping):
        unknown = sorted(set(mode) - set(LATENCY_KEYS))
        if unknown:
            raise ConfigError(f"unknown latency settings {unknown}; known: {list(LATENCY_KEYS)}")
        runtime, threads = mode.get("runtime", "torch"), mode.get("threads")
        batch, n_runs = mode.get("batch", batch), mode.get("n_runs", n_runs)
        clock, n_cal = mode.get("clock", clock), mode.get("calibrate", n_cal)
        mode = mode.get("mode", "measured")
        if runtime not in RUNTIMES:
            raise ConfigError(f"latency runtime {runtime!r} is not one of {RUNTIMES}")
        check_clock(clock, threads)
        if not isinstance(n_cal, int) or n_cal == 1 or n_cal < 0:
            raise ConfigError(f"latency calibrate {n_cal!r} is not 0 or a count of 2 or more "
                              "networks; set 0 for the raw sum, or e.g. 8")  # fmt: skip
    if n_runs is None:
        n_runs = N_RUNS.get(str(mode), N_RUNS["measured"])
    settings: dict[str, Any] = dict(
        batch=batch, n_runs=n_runs, runtime=runtime, threads=threads, clock=clock
    )
    if mode == "measured":
        memo = MemoizedCost(space, network_latency(net, **settings))
        return memo, lambda: memo.n_measured
    if mode == "table":
        archs = [space.sample_dims(CALIBRATION_SEED + i) for i in range(n_cal)]
        shapes = distinct_shapes(space)
        entries, measured = table_latencies(net, shapes, archs, **settings)
        table, n = LatencyTable(space, entries), len(shapes)
        if n_cal:
            scale, offset = table.calibrate(archs, measured)
            logger.info("latency table calibrated on %d networks: %.3f * sum + %.3f ms",
                        n_cal, scale, offset)  # fmt: skip
        logger.info("latency table: %d layer shapes measured", n)
        return table, lambda: n + n_cal  # callable: predict
    if mode == "flops":
        return (lambda a: count_macs(space, a) / 1e6), lambda: 0
    raise ConfigError(f"latency mode {mode!r} is not one of {LATENCY_MODES}")


def measure_pairs(
    net: OFAMobileNetV3,
    data: tuple[torch.Tensor, torch.Tensor],
    calibration: torch.Tensor,
    n_pairs: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    ranks: Ranks = ONE,
) -> tuple[list[dict[str, Any]], list[float]]:
    """Returns the ``n_pairs`` sub-networks sampled from ``seed`` and their measured accuracies
    on ``data`` (batch norm recalibrated on ``calibration``): what the accuracy predictor is
    fitted on. On several ``ranks`` (every rank calling it alike) each rank measures every
    ``world``-th sub-network and every rank gets all the accuracies, in order, as one process
    measures them; ``progress(done, n)`` counts this rank's."""
    space = net.search_space()
    archs = [space.sample_dims(seed * 100_003 + i) for i in range(n_pairs)]
    mine = ranks.split(archs)
    accs = []
    for i, a in enumerate(mine):
        accs.append(evaluate(net, dict(a), data, calibration))
        if progress is not None:
            progress(i + 1, len(mine))
    return archs, ranks.gather(accs, n_pairs)


def make_accuracy(
    net: OFAMobileNetV3,
    mode: str,
    data: tuple[torch.Tensor, torch.Tensor],
    calibration: torch.Tensor,
    n_pairs: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    ranks: Ranks = ONE,
) -> Score:
    """Returns ``arch -> accuracy`` for accuracy mode ``mode``: memoized measurement, or a
    predictor fitted on ``n_pairs`` measured sampled sub-networks (:func:`measure_pairs`,
    split across ``ranks``: every rank fits the same predictor).

    Raises:
        ConfigError: unknown mode.
    """
    space = net.search_space()
    cache: dict[str, float] = {}

    def measured(arch: Mapping[str, Any]) -> float:
        key = space.arch_id(arch)
        if key not in cache:
            cache[key] = evaluate(net, dict(arch), data, calibration)
        return cache[key]

    if mode == "measured":
        return measured
    if mode != "predictor":
        raise ConfigError(f"accuracy mode {mode!r} is not one of {ACCURACY_MODES}")
    archs, accs = measure_pairs(net, data, calibration, n_pairs, seed, progress, ranks)
    predictor = AccuracyPredictor.structured(space, seed=seed)
    predictor.fit(archs, accs)
    return predictor


def save_supernet(net: OFAMobileNetV3, directory: str | Path) -> Path:
    """Writes ``spec.json`` and ``supernet.pt`` (a state dict) to ``directory``; returns it."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps(net.spec.to_dict(), indent=1))
    torch.save(net.state_dict(), d / "supernet.pt")
    return d


def load_supernet(directory: str | Path) -> OFAMobileNetV3:
    """Returns the trained supernet of a run: one whose record holds a ``supernet`` artifact
    (spec from its config), or a folder that :func:`save_supernet` wrote.

    Raises:
        StoreError: no trained supernet there (no record, or a record whose training has not
            finished, and no ``spec.json`` + ``supernet.pt``), a foreign or corrupted record,
            or unreadable weights.
    """
    from nasforge.ofa.record import KIND, open_ofa_store
    from nasforge.run.store import is_run

    d = Path(directory)
    if is_run(d):
        with open_ofa_store(d) as store:
            spec_data, path = store.config()[KIND]["spec"], store.artifact("supernet")
        if path is None:
            raise StoreError(
                f"the training recorded in {d} has not finished; continue it with "
                f"`nasforge resume {d}`"
            )
    elif (d / "spec.json").exists() and (d / "supernet.pt").exists():
        spec_data, path = json.loads((d / "spec.json").read_text()), d / "supernet.pt"
    else:
        raise StoreError(
            f"{d} holds no trained supernet (no run record, nor spec.json and supernet.pt); "
            f"run `nasforge ofa train --out {d}` first"
        )
    net = OFAMobileNetV3(OFASpec.from_dict(spec_data))
    try:
        state = torch.load(path, weights_only=True)
    except Exception as exc:  # missing, corrupt or foreign file
        raise StoreError(f"cannot read supernet weights {path}: {exc}") from exc
    net.load_state_dict(state)
    return net
