"""Training in resumable segments: the state a pipeline run carries from one segment to the
next, and the boundaries where it is taken.

A run of ``steps`` subnets (sequence ids 0 .. steps-1) ends a segment at every multiple of
``checkpoint_every`` and at ``steps``::

    steps = 10, checkpoint_every = 4      | 0 1 2 3 | 4 5 6 7 | 8 9 |
    boundaries (steps trained)                      4         8    10
    resumed from the state at 8:                                8 9   -> the same run's end

At a boundary the pipeline drains: stage 0 admits no subnet of the next segment before its
own last backward of this one, and a stage runs a subnet's backward only after every stage
behind it did, so when a stage's count of backwards reaches the boundary its layers hold the
updates of exactly the steps before it. Each stage then writes its *part* (a stage's layers,
momentum, counters; the last stage also the losses) and trains on; the parent merges the
parts into one training state (:func:`merge_parts`) and hands it to the caller, who saves it
(:class:`~nasforge.parallel.runner.PipelineTraining` as ``checkpoints/pipeline_step<N>.pt``).
The schedule (:mod:`nasforge.parallel.csp`) is untouched: it only starts at a low-water mark
(``FinishedList(start)``).

The training state (plain tensors and JSON-able data: ``torch.save``-able, loads with
``weights_only=True``)::

    format       1
    step         steps trained (sequence ids 0 .. step-1): the next segment starts there
    weights      {"b.c.param": tensor}  every layer of the supernet (TrainResult.state keys)
    momentum     {"b.c.param": tensor}  each parameter's SGD momentum buffer
    losses       [float] * step         every step's loss, in sequence order
    sampling     {"seed", "sampler", "batch_size", "feedback_lag"}: besides the step, all that
                 decides a step's subnet and batch (checked against the resuming config)
    layer_costs  [[float]] | None       layer mirroring's cost table, reused so every segment
                                        splits a subnet the same way
    stats        sums over every launch so far (see :func:`run_stats`)

Nothing else decides a step. A batch is a pure function of (seed, step) (``config._Data``). A
subnet is a pure function of (sampler, seed, the losses told before it): a resumed stage
re-creates its sampler from the seed, tells a learning sampler the recorded losses, and draws
and drops the first ``step`` subnets (:class:`~nasforge.parallel.sampler.SubnetFeed`
``start``). Replay rather than a saved RNG state: it needs nothing from any sampler (the
evolution strategy's population included) and is cheap (10,000 uniform subnets of 48 blocks
x 72 candidates: 0.16 s, measured on a loaded 2-core machine).

Invariants:
    * Under csp, and under bsp when every boundary is a multiple of its bulk, training from
      the state at any boundary to ``steps`` ends with bitwise the weights, momentum and
      losses of one uninterrupted run (whatever ``checkpoint_every`` and number of stages).
    * asp is reproducible by no means (a forward reads whichever updates have landed), so its
      resumed run is an asp run from the saved weights, not a copy of an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig
from nasforge.runtime.weights import save_state

__all__ = [
    "FORMAT",
    "BoundaryWatcher",
    "check_state",
    "make_part",
    "merge_parts",
    "next_boundary",
    "part_path",
    "run_stats",
    "sampling_of",
    "write_part",
]

#: Version of the training state's layout.
FORMAT = 1
#: Cache counters summed over launches (the rates are recomputed from them).
_COUNTS = ("hits", "misses", "evictions", "prefetches", "prefetch_used", "prefetch_wasted")


def next_boundary(step: int, steps: int, every: int) -> int:
    """Returns the first segment boundary after ``step``: the next multiple of ``every``, or
    ``steps`` (also when ``every`` is 0: one segment)."""
    if every <= 0:
        return steps
    return min(steps, (step // every + 1) * every)


def sampling_of(cfg: RunConfig) -> dict[str, Any]:
    """Returns what besides the step decides each step's subnet and batch under ``cfg``."""
    sampler = "explicit" if cfg.subnets is not None else cfg.sampler
    return {
        "seed": cfg.seed,
        "sampler": sampler,
        "batch_size": cfg.batch_size,
        "feedback_lag": cfg.feedback_lag,
    }


def check_state(state: Any, cfg: RunConfig, shapes: Mapping[str, torch.Size]) -> int:
    """Returns the step a run configured by ``cfg`` resumes at from training state ``state``;
    ``shapes`` are the space's parameter shapes keyed as the state's ``weights``.

    Raises:
        ConfigError: not a training state of this format; a step past ``cfg.steps``; a
            sampling setting (seed, sampler, batch size, feedback lag) other than the state's;
            weights or momentum that do not fit the space; under bsp on several stages, a
            step inside a bulk.
    """
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise ConfigError(
            f"expected a pipeline training state of format {FORMAT} (TrainResult."
            f"training_state), got {got!r}; resume from a state this version saved"
        )
    step = state["step"]
    if not isinstance(step, int) or not 0 <= step <= cfg.steps or len(state["losses"]) != step:
        raise ConfigError(
            f"the training state is at step {step!r} with {len(state['losses'])} losses; "
            f"expected a step in 0..{cfg.steps} (the run's steps) with one loss per step"
        )
    want = sampling_of(cfg)
    for key, value in state["sampling"].items():
        if want.get(key) != value:
            raise ConfigError(
                f"the training state was trained with {key}={value!r}, this run has "
                f"{key}={want.get(key)!r}; resume with {key}={value!r} (each step's subnet "
                "and batch depend on it)"
            )
    for what in ("weights", "momentum"):
        got = {k: tuple(v.shape) for k, v in state[what].items()}
        if got != {k: tuple(s) for k, s in shapes.items()}:
            diff = sorted(set(got) ^ set(shapes)) or [k for k in got if got[k] != shapes[k]]
            raise ConfigError(
                f"the training state's {what} do not fit the space {cfg.space_cls.__name__} "
                f"(first differences: {diff[:3]}); resume with the space that trained it"
            )
    bulk = cfg.bulk or cfg.n_stages
    if cfg.policy == "bsp" and cfg.n_stages > 1 and step % bulk and step != cfg.steps:
        raise ConfigError(
            f"policy 'bsp' updates once per bulk of {bulk} subnets, and the training state is "
            f"at step {step}, inside a bulk; resume bsp from a multiple of {bulk} "
            "(checkpoint_every a multiple of the number of stages)"
        )
    return step


def part_path(folder: str | Path, step: int, rank: int) -> Path:
    """Returns where stage ``rank`` writes its part of the boundary at ``step``."""
    return Path(folder) / f"boundary{step}_rank{rank}.pt"


def make_part(
    step: int,
    ctx: Any,
    losses: Mapping[int, float],
    busy: float,
    wall: float,
    versions: Mapping[tuple[int, int], int] | None = None,
    costs: list[list[float]] | None = None,
) -> dict[str, Any]:
    """Returns one stage's part of the training state after ``step`` steps, from its layer
    cache ``ctx`` (a :class:`~nasforge.parallel.context.TieredLayerCache`), the losses it
    saw, its busy and loop seconds, its mirrors' WRITE versions and the mirror cost table."""
    weights, momentum = ctx.snapshot()
    return {
        "step": step,
        "state": weights,
        "momentum": momentum,
        "losses": dict(losses),
        "stats": ctx.stats,
        "busy": busy,
        "wall": wall,
        "versions": None if versions is None else {f"{b}.{c}": v for (b, c), v in versions.items()},
        "layer_costs": costs,
    }


def merge_parts(
    parts: Sequence[Mapping[str, Any]], prior: Mapping[str, Any] | None, cfg: RunConfig
) -> dict[str, Any]:
    """Returns the training state at a boundary from every stage's part there (in rank
    order; the last stage's holds the losses) and ``prior``, the state the launch started
    from (None: step 0).

    A part has ``step``, ``state`` (weights), ``momentum``, ``losses`` ({seq: loss}; the last
    stage), ``stats`` (cache counts), ``busy`` and ``wall`` (seconds since the launch's loop
    began), ``versions`` (layer mirroring: the sequence id of the WRITE each mirror holds,
    else None) and ``layer_costs``. A layer held by several stages (mirrors) is taken from
    the one holding its latest WRITE; the others hold the same values or an older one.
    """
    step = parts[-1]["step"]
    assert all(p["step"] == step for p in parts), "parts of different boundaries"
    weights: dict[str, torch.Tensor] = {}
    momentum: dict[str, torch.Tensor] = {}
    version: dict[str, int] = {}
    for p in parts:
        versions = p.get("versions") or {}
        for key, tensor in p["state"].items():
            v = versions.get(".".join(key.split(".", 2)[:2]), -1)  # "b.c.param" -> "b.c"
            if key not in weights or v > version[key]:
                weights[key], momentum[key], version[key] = tensor, p["momentum"][key], v
    start = 0 if prior is None else prior["step"]
    history = [] if prior is None else list(prior["losses"])
    losses = history + [parts[-1]["losses"][s] for s in range(start, step)]
    costs = parts[0].get("layer_costs")
    if costs is None and prior is not None:
        costs = prior.get("layer_costs")
    return {
        "format": FORMAT,
        "step": step,
        "weights": weights,
        "momentum": momentum,
        "losses": losses,
        "sampling": sampling_of(cfg),
        "layer_costs": costs,
        "stats": _add_stats(None if prior is None else prior["stats"], parts, step - start, cfg),
    }


def _add_stats(
    prior: Mapping[str, Any] | None, parts: Sequence[Mapping[str, Any]], steps: int, cfg: RunConfig
) -> dict[str, Any]:
    """Returns ``prior`` plus one launch's counters so far (``parts``: one per stage)."""
    wall = max(p["wall"] for p in parts)
    cache = [{k: float(p["stats"].get(k, 0)) for k in _COUNTS} for p in parts]
    out = {
        "wall_s": wall,
        "busy_s": sum(p["busy"] for p in parts),
        "stage_s": len(parts) * wall,
        "samples": steps * cfg.batch_size,
        "launches": 1,
        "cache": cache,
    }
    if prior is None:
        return out
    for key in ("wall_s", "busy_s", "stage_s", "samples", "launches"):
        out[key] += prior[key]
    if len(prior["cache"]) == len(cache):  # the same stages: their counts go on
        out["cache"] = [{k: a[k] + b[k] for k in _COUNTS} for a, b in zip(prior["cache"], cache)]
    return out


def run_stats(state: Mapping[str, Any]) -> dict[str, Any]:
    """Returns a run's pipeline statistics over every launch that trained it so far:
    ``samples_per_s`` (samples / loop seconds summed over launches; process start-up not
    counted), ``bubble_ratio`` (1 - busy stage-seconds / stage-seconds, summed over launches),
    ``cache_hit_rate`` per stage (hits / accesses summed over launches; counted afresh when a
    resume changed the number of stages) and ``launches``. Drains at segment boundaries fall
    inside the loop time, so they show in the bubble ratio."""
    s = state["stats"]
    rates = []
    for c in s["cache"]:
        total = c["hits"] + c["misses"]
        rates.append(c["hits"] / total if total else 0.0)
    return {
        "samples_per_s": s["samples"] / s["wall_s"] if s["wall_s"] else 0.0,
        "bubble_ratio": 1.0 - s["busy_s"] / s["stage_s"] if s["stage_s"] else 0.0,
        "cache_hit_rate": rates,
        "launches": s["launches"],
    }


class BoundaryWatcher:
    """Returns the parent's watch over a launch's boundaries: :meth:`poll` (called while the
    stages run, and once after they exit) hands each boundary's parts, once every stage wrote
    its own, to ``on_parts`` in step order; the run's last step is not a boundary here (the
    stages return it as their results)."""

    def __init__(
        self,
        folder: str | Path,
        n_stages: int,
        start: int,
        cfg: RunConfig,
        on_parts: Callable[[list[dict[str, Any]]], None],
    ) -> None:
        self.folder, self.n_stages, self.cfg, self.on_parts = Path(folder), n_stages, cfg, on_parts
        self.next = next_boundary(start, cfg.steps, cfg.checkpoint_every)

    def poll(self) -> None:
        """Returns None after handing on every boundary whose parts are all written."""
        while self.next < self.cfg.steps:
            paths = [part_path(self.folder, self.next, r) for r in range(self.n_stages)]
            if not all(p.exists() for p in paths):
                return
            parts = [torch.load(p, weights_only=True) for p in paths]
            for p in paths:
                p.unlink()
            self.next = next_boundary(self.next, self.cfg.steps, self.cfg.checkpoint_every)
            self.on_parts(parts)


def write_part(folder: str | Path, rank: int, part: Mapping[str, Any]) -> None:
    """Returns None once stage ``rank``'s part of a boundary is written (whole or not at all:
    the parent never reads half a part)."""
    save_state(dict(part), part_path(folder, part["step"], rank))
