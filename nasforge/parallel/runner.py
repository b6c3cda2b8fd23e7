"""Pipeline supernet training as a run (the ``pipeline`` kind), recorded like every other:

    progress    one row per trained subnet (step): its loss
    checkpoints ``checkpoints/pipeline_step<N>.pt`` after every ``checkpoint_every`` steps: the
                training state there (weights, momentum, losses; :mod:`~nasforge.parallel.
                segments`), saved before the rows of its steps, so the last row names it
    artifacts   ``supernet``: the trained weights (safetensors), keyed like the space's own
                ``state_dict``, so that a later SPOS or evolutionary search starts from it by
                naming the run (``supernet: RUN_DIR`` in a one-shot run file)
    trials      ``n_eval`` sampled subnets measured on held-out digits with the trained
                weights (``evaluation: inherited``), each with its weights as checkpoint, so
                that ``status``, ``export`` and ``load_model`` work on a pipeline run too
    meta        ``pipeline.stats``: samples/s, bubble ratio and per-stage cache hit rates over
                every launch that trained the run (:func:`~nasforge.parallel.segments.
                run_stats`), updated at every checkpoint

Data: the digits' training split (flattened to 64 features) trains the supernet; the
validation split measures the subnets. A resume continues from the newest checkpoint and ends
(under csp; bsp too) with bitwise the supernet and losses of an uninterrupted run.
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
from nasforge.errors import ConfigError, DivergenceError, StoreError
from nasforge.parallel.config import check_checkpoint_every
from nasforge.parallel.supernet import ChoiceSupernet, block_label, choice_blocks
from nasforge.run.refs import materialize
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.settings import kind_settings, settings_data
from nasforge.run.store import Store, TrialOutcome
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_state, save_weights
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
    # steps per segment: a checkpoint (and a stop or resume point) after every this many; 0:
    # at the end only. Each boundary drains the pipeline (by reckoning about (pipeline - 1) /
    # this more bubble) and writes the supernet with its momentum: 64 keeps both small.
    checkpoint_every: int = 64

    def check(self) -> None:
        """Returns None when the settings this runner checks itself are valid (the rest are
        checked by the training's config).

        Raises:
            ConfigError: ``n_eval`` is not an int >= 0; ``checkpoint_every`` is not an int
                >= 0, or (bsp on several stages) not a multiple of ``pipeline``.
        """
        if not isinstance(self.n_eval, int) or self.n_eval < 0:
            raise ConfigError(f"n_eval must be an int >= 0, got {self.n_eval!r}")
        check_checkpoint_every(self.checkpoint_every, self.policy, self.pipeline)

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
    controls = frozenset({"stop"})
    boundary = "segment"

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
        return ("steps", "seed", "policy", "batch_size", "lr", "memory_budget", "mirror",
                "sampler")  # fmt: skip

    def section(self) -> dict[str, Any]:
        """Returns the training settings as JSON-able data."""
        return settings_data(self.settings)

    def _execute(self, store: Store, resume: bool) -> None:
        from nasforge.data import load_digits
        from nasforge.parallel.train import space_weights, train_supernet

        set_threads(1)
        s = self.settings
        ckpt = self.directory / "checkpoints"
        state = None
        if resume:
            if store.trials() or (s.n_eval == 0 and store.artifact("supernet") is not None):
                log.info("%s: the pipeline run already finished; nothing to do", self.directory)
                return
            state = _last_state(store, ckpt)
        store.set_plan("steps", s.steps)
        splits = load_digits(seed=s.seed)
        train = _flat(splits.train)
        data = (train[0].numpy(), train[1].numpy())

        def checkpoint(new: dict[str, Any]) -> None:
            nonlocal state
            step, before = new["step"], 0 if state is None else state["step"]
            path = Path(save_state(new, ckpt / f"pipeline_step{step}.pt"))
            for i in range(before + 1, step + 1):  # committed after the file: resume point
                store.add_progress(i, {"loss": new["losses"][i - 1]})
            store.set_meta("pipeline.stats", json.dumps(_stats(new)))
            for old in ckpt.glob("pipeline_step*.pt"):
                if old != path:
                    old.unlink()
            state = new
            if step < s.steps:  # a segment boundary: where a requested stop takes effect
                self.check_stop()

        if state is None or state["step"] < s.steps:
            try:
                train_supernet(self.space, data=data, from_state=state, checkpoint=checkpoint,
                               **s.train_kwargs())  # fmt: skip
            except DivergenceError:  # a resume keeps lr: its states would only diverge again
                for old in ckpt.glob("pipeline_step*.pt"):
                    old.unlink()
                raise
        assert state is not None and state["step"] == s.steps, "checkpointed after the last step"
        trained = type(self.space)(*self.space.__dict__["_nf_init_args"][0],
                                   **self.space.__dict__["_nf_init_args"][1])  # fmt: skip
        weights = {k: v.contiguous() for k, v in space_weights(trained, state["weights"]).items()}
        path = self.directory / "artifacts" / "supernet.safetensors"
        path.parent.mkdir(exist_ok=True)
        from safetensors.torch import save_file

        save_file(weights, str(path))
        stats = _stats(state)
        store.add_artifact("supernet", path, "supernet", stats)
        trained.load_state_dict(weights)
        self._evaluate(store, trained, _flat(splits.val))
        for old in ckpt.glob("pipeline_step*.pt"):  # finished: the artifact replaces it
            old.unlink()
        final = state["losses"][-1] if state["losses"] else float("nan")
        log.info("pipeline run: final loss %.4f, %s", final, stats)

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


def _stats(state: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the run's ``pipeline.stats``: :func:`~nasforge.parallel.segments.run_stats`
    and the batch size the training used (a memory budget may have chosen it)."""
    from nasforge.parallel.segments import run_stats

    return {**run_stats(state), "batch_size": state["sampling"]["batch_size"]}


def _last_state(store: Store, ckpt: Path) -> dict[str, Any] | None:
    """Returns the newest training state in ``ckpt`` (None: none yet, train from step 0),
    with the run's progress rows made to end at its step.

    The state file is written before the rows of its steps, and the one it supersedes is
    deleted after them, so the newest file is never behind the rows; rows a kill left
    unwritten are recorded from its losses.

    Raises:
        StoreError: steps are recorded but no checkpoint is there (deleted by hand).
    """
    rows = store.progress(last=1)
    last = rows[-1]["step"] if rows else 0
    files = sorted(
        ckpt.glob("pipeline_step*.pt"), key=lambda p: int(p.stem[len("pipeline_step") :])
    )
    if not files:
        if last:
            raise StoreError(
                f"{store.directory}: step {last} is recorded but no checkpoint "
                f"{ckpt}/pipeline_step<N>.pt is there; restore it, or train again in a new "
                "directory"
            )
        return None
    state: dict[str, Any] = torch.load(files[-1], weights_only=True)
    step = state["step"]
    store.truncate_progress(step)
    for i in range(min(last, step) + 1, step + 1):
        store.add_progress(i, {"loss": state["losses"][i - 1]})
    for old in files[:-1]:
        old.unlink()
    log.info("%s: resuming at step %d from %s", store.directory, step, files[-1].name)
    return state


def _flat(pair: Any) -> tuple[torch.Tensor, torch.Tensor]:
    from nasforge.data import to_tensors

    x, y = to_tensors(pair)
    return x.flatten(1), y
