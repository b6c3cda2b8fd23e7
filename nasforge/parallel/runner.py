"""Pipeline supernet training as a run (the ``pipeline`` kind), recorded like every other:

    progress    one row per trained subnet (step): its loss and the subnet
    artifacts   ``supernet``: the trained weights (safetensors), keyed like the space's own
                ``state_dict``, so that a later SPOS or evolutionary search starts from it by
                naming the run (``supernet: RUN_DIR`` in a one-shot run file)
    trials      ``n_eval`` sampled subnets measured on held-out digits with the trained
                weights (``evaluation: inherited``), each with its weights as checkpoint, so
                that ``status``, ``export`` and ``load_model`` work on a pipeline run too
    meta        ``pipeline.stats``: samples/s, bubble ratio and per-stage cache hit rates

Data: the digits' training split (flattened to 64 features) trains the supernet; the
validation split measures the subnets. A resume trains again from the start (a pipeline run is
short; its checkpoint is the finished supernet).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.parallel.supernet import ChoiceSupernet, block_label, choice_blocks
from nasforge.run.refs import materialize
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.settings import kind_settings, settings_data
from nasforge.run.store import Store, TrialOutcome
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_weights
from nasforge.weightsharing import accuracy

__all__ = ["PipelineTraining", "PipelineSettings", "subnet_with_weights"]

log = logging.getLogger("nasforge.parallel")


@dataclass
class PipelineSettings:
    """Returns nothing; the settings of a pipeline run, recorded as its section: the keyword
    arguments of :func:`~nasforge.parallel.train.train_supernet`, and ``n_eval``."""

    steps: int = 32  # subnets trained, one batch each
    pipeline: int = 1  # stages (1: sequential training in this process)
    policy: str = "csp"  # csp, bsp or asp
    batch_size: int = 16
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0
    sampler: str = "uniform"  # or "evolution"
    cache_subnets: float | None = 3.0  # device cache per stage, in subnets' stage layers
    timeout_s: float = 600.0
    memory_budget: float | None = None  # bytes per stage
    mirror: bool = False  # layer mirroring (csp)
    n_eval: int = 8  # sampled subnets measured with the trained weights

    def check(self) -> None:
        """Returns None when the settings this runner checks itself are valid (the rest are
        checked by the training's config).

        Raises:
            ConfigError: ``n_eval`` is not an int >= 0.
        """
        if not isinstance(self.n_eval, int) or self.n_eval < 0:
            raise ConfigError(f"n_eval must be an int >= 0, got {self.n_eval!r}")

    def train_kwargs(self) -> dict[str, Any]:
        """Returns :func:`~nasforge.parallel.train.train_supernet`'s keyword arguments."""
        return {k: v for k, v in settings_data(self).items() if k != "n_eval"}


def subnet_with_weights(space: nf.ModelSpace, arch: Mapping[str, Any]) -> torch.nn.Module:
    """Returns ``nf.freeze(space, arch)`` with each chosen candidate's weights copied from the
    (trained) space.

    Raises:
        ArchitectureError: ``arch`` does not fit the space.
    """
    model = nf.freeze(space, arch)
    names = {id(m): n for n, m in space.named_modules()}
    for blk in choice_blocks(space):
        chosen = blk.candidate(arch[block_label(blk)])
        model.get_submodule(names[id(blk)]).load_state_dict(chosen.state_dict())
    return model


@register_runner
class PipelineTraining(BaseRunner):
    """Returns, after :meth:`run`, a supernet trained by the NASPipe pipeline (or
    sequentially with ``pipeline=1``) and recorded in ``directory``.

    ``space`` is an ``nf.ModelSpace`` of LayerChoice blocks (default: a
    :class:`~nasforge.parallel.supernet.ChoiceSupernet` with ``space_kwargs``); ``settings``
    a :class:`PipelineSettings` (or a mapping of its fields). Its fields given as keywords
    still work until nasforge 0.4.0 and warn (DeprecationWarning).

    Raises:
        ConfigError: a bad setting or a space that is not a chain of LayerChoice blocks.
    """

    kind = "pipeline"

    def __init__(
        self,
        space: nf.ModelSpace | None = None,
        settings: PipelineSettings | Mapping[str, Any] | None = None,
        *,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        space_kwargs: Mapping[str, Any] | None = None,
        callbacks: Sequence[Any] | None = None,
        **deprecated: Any,
    ) -> None:
        self.settings = kind_settings(PipelineSettings, settings, deprecated, "PipelineTraining")
        if space is None:
            space = ChoiceSupernet(**dict(space_kwargs or {}))
        choice_blocks(space)  # a chain of LayerChoice blocks, or a clear error
        self.settings.check()
        self.n_eval = self.settings.n_eval
        super().__init__(Objective("accuracy", "max"), directory, source, space, callbacks)

    @classmethod
    def names(cls) -> list[str]:
        """Returns no strategy names: a pipeline run file says ``kind: pipeline``."""
        return []

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> PipelineTraining:
        """Returns a pipeline run from a run file's settings or a stored section.

        Raises:
            ConfigError: a bad reference or setting.
        """
        s = {**dict(settings), **overrides}
        s.pop("objective", None)
        s.pop("threads", None)  # a stage process always runs one thread
        space = None if s.get("space") is None else materialize(s["space"], base)
        where = {k: s.pop(k) for k in ("space", "directory", "source", "space_kwargs", "callbacks")
                 if k in s}  # fmt: skip
        where["space"] = space
        return cls(settings=kind_settings(PipelineSettings, s, {}, "a pipeline run"), **where)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep."""
        return ("steps", "seed", "policy", "batch_size", "lr", "memory_budget", "mirror")

    def section(self) -> dict[str, Any]:
        """Returns the training settings as JSON-able data."""
        return settings_data(self.settings)

    def _execute(self, store: Store, resume: bool) -> None:
        from nasforge.data import load_digits
        from nasforge.parallel.train import train_supernet

        set_threads(1)
        if resume:
            if store.trials():
                log.info("%s: the pipeline run already finished; nothing to do", self.directory)
                return
            store.truncate_progress(0)  # an interrupted run trains again from the start
        s = self.settings
        store.set_plan("steps", s.steps)
        splits = load_digits(seed=s.seed)
        train = _flat(splits.train)
        data = (train[0].numpy(), train[1].numpy())
        result = train_supernet(self.space, data=data, **s.train_kwargs())
        for i, loss in enumerate(result.losses):
            store.add_progress(i + 1, {"loss": loss})
        stats = {"samples_per_s": result.samples_per_s, "bubble_ratio": result.bubble_ratio,
                 "cache_hit_rate": [c.get("hit_rate") for c in result.cache],
                 "batch_size": result.config.batch_size}  # fmt: skip
        store.set_meta("pipeline.stats", json.dumps(stats))
        weights = {k: v.contiguous() for k, v in result.space_state_dict().items()}
        path = self.directory / "artifacts" / "supernet.safetensors"
        path.parent.mkdir(exist_ok=True)
        from safetensors.torch import save_file

        save_file(weights, str(path))
        store.add_artifact("supernet", path, "supernet", stats)
        trained = type(self.space)(*self.space.__dict__["_nf_init_args"][0],
                                   **self.space.__dict__["_nf_init_args"][1])  # fmt: skip
        trained.load_state_dict(weights)
        self._evaluate(store, trained, _flat(splits.val))
        log.info("pipeline run: final loss %.4f, %s", result.losses[-1], stats)

    def _evaluate(self, store: Store, space: nf.ModelSpace, val: tuple[Any, Any]) -> None:
        rng = random.Random(self.settings.seed)
        ss = space.search_space()
        seen: set[str] = set()
        for _ in range(self.n_eval):
            arch = ss.sample(rng)
            aid = nf.arch_id(arch)
            if aid in seen:
                continue
            seen.add(aid)
            model = subnet_with_weights(space, arch)
            acc = accuracy(model, val)
            tid = store.add_trial(aid, arch, event=False)
            ckpt = save_weights(model, self.directory / "checkpoints" / f"trial_{tid}.pt")
            rel = str(Path(ckpt).relative_to(self.directory))
            outcome = TrialOutcome("done", {"accuracy": acc}, checkpoint=rel,
                                   evaluation="inherited")  # fmt: skip
            store.finish_trial(tid, outcome, event=False)


def _flat(pair: Any) -> tuple[torch.Tensor, torch.Tensor]:
    from nasforge.data import to_tensors

    x, y = to_tensors(pair)
    return x.flatten(1), y
