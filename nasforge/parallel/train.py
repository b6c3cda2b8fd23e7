"""Training a supernet of choice blocks, sequentially or in a pipeline of N processes.

    result = train_supernet(ChoiceSupernet(n_blocks=8, n_candidates=4), steps=200, pipeline=4)
    space.load_state_dict(result.space_state_dict())    # the trained weights, keyed as the space
    model = subnet_model(space, space.search_space().sample(0))  # one subnet, trained weights

Training resumes from a saved state (:mod:`nasforge.parallel.segments`)::

    first = train_supernet(space, steps=3)                     # steps 1..3
    rest = train_supernet(space, steps=8, from_state=first.training_state)  # steps 4..8
    # rest.state, its momentum and first.losses + rest.losses: bitwise one 8-step call's (csp)

To record the training as a run (progress rows, the supernet as an artifact, evaluated
subnets as trials, a checkpoint at every segment boundary), use
:class:`nasforge.parallel.runner.PipelineTraining` or ``nasforge train-supernet --out DIR``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig
from nasforge.parallel.launcher import launch
from nasforge.parallel.runtime import train_sequential
from nasforge.parallel.segments import check_state, merge_parts
from nasforge.parallel.supernet import ChoiceSupernet, block_label, choice_blocks, layer_table

__all__ = ["TrainResult", "train_supernet", "subnet_model", "space_weights"]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """Returns nothing; the outcome of :func:`train_supernet`."""

    config: RunConfig
    losses: list[float]  # per step this call trained (start+1 .. steps), in sequence order
    state: dict[str, torch.Tensor]  # "b.c.param" -> tensor, every layer of the supernet
    wall_s: float  # training loop time (slowest stage), process start-up excluded
    bubble_ratio: float  # 1 - busy / (stages x wall); 0 for sequential
    cache: list[dict[str, float]] = field(default_factory=list)  # per stage cache statistics
    start: int = 0  # steps trained before this call (the state it started from)
    # the state after the last step (segments.py): resume with train_supernet(from_state=...)
    training_state: dict[str, Any] = field(default_factory=dict)

    @property
    def samples_per_s(self) -> float:
        """Returns trained samples per second of this call's loop time."""
        n = (self.config.steps - self.start) * self.config.batch_size
        return n / self.wall_s if self.wall_s else 0.0

    def space_state_dict(self) -> dict[str, torch.Tensor]:
        """Returns the weights keyed as the space's own ``state_dict`` (load_state_dict-able)."""
        return space_weights(self.config.space_cls(**self.config.space_kwargs), self.state)


def space_weights(space: nn.Module, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Returns the supernet weights ``state`` ("b.c.param" keys, as :attr:`TrainResult.state`
    and a training state's ``weights``) keyed as ``space``'s own ``state_dict``."""
    prefix = _layer_prefixes(space)
    return {
        f"{prefix[(int(b), int(c))]}.{name}": t
        for key, t in state.items()
        for b, c, name in [key.split(".", 2)]
    }


def _layer_prefixes(space: nn.Module) -> dict[tuple[int, int], str]:
    names = {id(m): n for n, m in space.named_modules()}
    return {
        (b, c): names[id(m)]
        for b, blk in enumerate(choice_blocks(space))
        for c, m in enumerate(blk.candidates())
    }


def _config_of(space_or_config: Any, **kw: Any) -> RunConfig:
    if isinstance(space_or_config, RunConfig):
        return replace(space_or_config, **kw)
    if isinstance(space_or_config, nf.ModelSpace):
        args, kwargs = space_or_config.__dict__["_nf_init_args"]
        if args:
            raise ConfigError(
                f"{type(space_or_config).__name__} was built with positional arguments {args!r}; "
                "build it with keyword arguments so stage processes can rebuild it"
            )
        choice_blocks(space_or_config)  # a chain of LayerChoice blocks, or a clear error
        return RunConfig(type(space_or_config), dict(kwargs), **kw)
    if isinstance(space_or_config, Mapping):
        return RunConfig(ChoiceSupernet, dict(space_or_config), **kw)
    raise ConfigError(
        f"train_supernet takes an nf.ModelSpace, a dict of ChoiceSupernet arguments or a "
        f"RunConfig, got {type(space_or_config).__name__}"
    )


def train_supernet(
    space_or_config: Any,
    *,
    steps: int = 32,
    pipeline: int = 1,
    policy: str = "csp",
    batch_size: int = 16,
    lr: float = 0.05,
    momentum: float = 0.9,
    seed: int = 0,
    sampler: str = "uniform",
    cache_subnets: float | None = 3.0,
    data: tuple[Any, Any] | None = None,
    timeout_s: float = 600.0,
    memory_budget: float | None = None,
    mirror: bool = False,
    from_state: Mapping[str, Any] | None = None,
    checkpoint_every: int = 0,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Returns the trained supernet after ``steps`` subnets (one batch each).

    ``pipeline=1`` trains in this process, one subnet at a time (the reference). ``pipeline=N``
    splits the blocks over N stage processes on this machine; with ``policy="csp"`` the result
    is bitwise that of ``pipeline=1`` (NASPipe's reproducibility). ``"bsp"`` and ``"asp"`` are
    the GPipe- and PipeDream-like baselines. ``data`` is ``(X, y)`` arrays; default sklearn
    digits. The space must be importable by name (a module-level class).

    ``memory_budget`` (bytes of device memory per stage) replaces ``batch_size`` with the
    largest batch every stage fits under the policy (:func:`nasforge.parallel.budget.fit_batch`:
    the whole partition resident for bsp and asp, the layer cache for csp), as the paper
    compares systems at equal memory; ``result.config.batch_size`` says which.

    ``mirror=True`` (csp only) splits each subnet over the stages by its own balanced partition
    (layer mirroring, §4.2: :mod:`nasforge.parallel.mirror`); still bitwise that of
    ``pipeline=1``.

    Segments (:mod:`nasforge.parallel.segments`): ``from_state`` (a
    :attr:`TrainResult.training_state`, or one handed to ``checkpoint``) starts at its step
    and trains up to ``steps``. ``checkpoint_every=k`` drains the pipeline after every k-th
    step, and ``checkpoint(state)`` gets the training state there and after the last step,
    in this process, while the stages train on; what it raises ends every stage and
    propagates (a caller's stop). Under csp, any segments give bitwise the weights, momentum
    and losses of one call; under bsp too when k is a multiple of ``pipeline`` (its bulk;
    else a ConfigError). asp is reproducible by no means (a forward reads whichever updates
    have landed), so its segments are an asp run, not a copy of one. Each drain idles the
    stages while the pipeline empties and fills: it shows in ``bubble_ratio``.

    Raises:
        ConfigError: bad argument, or a space that is not a chain of LayerChoice blocks;
            a ``from_state`` that does not fit this run (see
            :func:`~nasforge.parallel.segments.check_state`).
        ScheduleError: ``pipeline`` exceeds the number of blocks.
        WorkerError: a stage process failed; every stage process has been ended.
    """
    if not isinstance(pipeline, int) or pipeline < 1:
        raise ConfigError(f"pipeline must be a positive number of stages, got {pipeline!r}")
    cfg = _config_of(
        space_or_config,
        steps=steps,
        n_stages=pipeline,
        policy=policy,
        batch_size=batch_size,
        lr=lr,
        momentum=momentum,
        seed=seed,
        sampler=sampler,
        cache_subnets=cache_subnets,
        data=data,
        timeout_s=timeout_s,
        mirror=mirror,
        checkpoint_every=checkpoint_every,
    )
    if memory_budget is not None:
        from nasforge.parallel.budget import fit_batch

        cfg = replace(cfg, batch_size=fit_batch(cfg, memory_budget)[0])
    start = 0
    if from_state is not None:
        shapes = {k: t.shape for k, t in _layer_params(cfg).items()}
        start = check_state(from_state, cfg, shapes)

    def on_parts(parts: list[dict[str, Any]]) -> None:
        assert checkpoint is not None, "parts are taken only for a checkpoint"
        checkpoint(merge_parts(parts, from_state, cfg))

    if pipeline == 1:
        on_part = None if checkpoint is None else (lambda part: on_parts([part]))
        results = [train_sequential(cfg, from_state, on_part)]
        results[0]["losses"] = dict(enumerate(results[0]["losses"], start))
    else:
        results = launch(cfg, from_state, None if checkpoint is None else on_parts)
    final = merge_parts(results, from_state, cfg)
    wall = max(r["wall"] for r in results)
    bubble = 1.0 - sum(r["busy"] for r in results) / (pipeline * wall) if wall else 0.0
    log.info("trained steps %d..%d on %d stages (%s): %.1fs", start + 1, cfg.steps, pipeline,
             policy, wall)  # fmt: skip
    result = TrainResult(cfg, final["losses"][start:], final["weights"], wall, bubble,
                         [r["stats"] for r in results], start, final)  # fmt: skip
    if checkpoint is not None:
        checkpoint(final)
    return result


def _layer_params(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """Returns the space's parameters keyed as a training state's weights ("b.c.param")."""
    space = cfg.space_cls(**cfg.space_kwargs)
    return {
        f"{b}.{c}.{name}": p
        for (b, c), mod in layer_table(space).items()
        for name, p in mod.named_parameters()
    }


def subnet_model(space: nf.ModelSpace, arch: Mapping[str, Any]) -> nn.Sequential:
    """Returns the subnet ``arch`` of a (trained) chain space as a Sequential sharing its weights.

    Raises:
        ArchitectureError: ``arch`` does not fit the space.
    """
    arch = space.search_space().validate(arch)
    return nn.Sequential(*[blk.candidate(arch[block_label(blk)]) for blk in choice_blocks(space)])
