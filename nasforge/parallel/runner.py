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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import torch

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.parallel.supernet import ChoiceSupernet, block_label, choice_blocks
from nasforge.run.refs import materialize
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.store import Store
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_weights
from nasforge.weightsharing import accuracy

__all__ = ["PipelineTraining", "subnet_with_weights"]

log = logging.getLogger("nasforge.parallel")


class _Settings(TypedDict):
    """The training settings a pipeline run records: train_supernet's keyword arguments."""

    steps: int
    pipeline: int
    policy: str
    batch_size: int
    lr: float
    momentum: float
    seed: int
    sampler: str
    cache_subnets: float | None
    timeout_s: float
    memory_budget: float | None
    mirror: bool


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
    :class:`~nasforge.parallel.supernet.ChoiceSupernet` with ``space_kwargs``); the other
    arguments are :func:`~nasforge.parallel.train.train_supernet`'s.

    Raises:
        ConfigError: a bad setting or a space that is not a chain of LayerChoice blocks.
    """

    kind = "pipeline"

    def __init__(
        self,
        space: nf.ModelSpace | None = None,
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
        memory_budget: float | None = None,
        mirror: bool = False,
        n_eval: int = 8,
        timeout_s: float = 600.0,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        space_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if space is None:
            space = ChoiceSupernet(**dict(space_kwargs or {}))
        choice_blocks(space)  # a chain of LayerChoice blocks, or a clear error
        if not isinstance(n_eval, int) or n_eval < 0:
            raise ConfigError(f"n_eval must be an int >= 0, got {n_eval!r}")
        self.settings: _Settings = {
            "steps": steps, "pipeline": pipeline, "policy": policy, "batch_size": batch_size,
            "lr": lr, "momentum": momentum, "seed": seed, "sampler": sampler,
            "cache_subnets": cache_subnets, "timeout_s": timeout_s,
            "memory_budget": memory_budget, "mirror": mirror,
        }  # fmt: skip
        self.n_eval = n_eval
        super().__init__(Objective("accuracy", "max"), directory, source, space)

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
        if s.get("space") is not None:
            s["space"] = materialize(s["space"], base)
        return cls(**s)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep."""
        return ("steps", "seed", "policy", "batch_size", "lr", "memory_budget", "mirror")

    def section(self) -> dict[str, Any]:
        """Returns the training settings as JSON-able data."""
        return {**self.settings, "n_eval": self.n_eval}

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
        store.set_plan("steps", s["steps"])
        splits = load_digits(seed=s["seed"])
        train = _flat(splits.train)
        result = train_supernet(self.space, data=(train[0].numpy(), train[1].numpy()), **s)
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
        rng = random.Random(self.settings["seed"])
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
            store.finish_trial(tid, "done", {"accuracy": acc}, checkpoint=rel,
                               evaluation="inherited", event=False)  # fmt: skip


def _flat(pair: Any) -> tuple[torch.Tensor, torch.Tensor]:
    from nasforge.data import to_tensors

    x, y = to_tensors(pair)
    return x.flatten(1), y
