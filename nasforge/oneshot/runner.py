"""One-shot search as a run: what ``nasforge run`` does with ``strategy = "nasb"`` (the
``oneshot`` kind), recorded in the run record like every other kind:

    progress    one row per finished epoch: losses, supernet validation accuracy, the argmax
                architecture, seconds
    checkpoints ``checkpoints/oneshot_epoch<E>.pt`` after each epoch: the supernet, the
                optimizers, the schedule and every generator (tensors and plain data only), so
                that a resume goes on after the last finished epoch and ends bitwise equal to
                an uninterrupted run (at the same thread count); older epochs' files are removed
    trials      the found architecture (``evaluation: inherited``): validation accuracy as a
                frozen model with the supernet's weights and batch norm recalibrated on
                training batches, ``test_accuracy`` when the data has a test part, ``params``,
                ``supernet_val_acc``, ``search_seconds``; its weights are its checkpoint. For
                SPOS and few-shot, every architecture the evolution scored is a trial too, and
                for ENAS every sample of its final pick.
    artifacts   ``supernet``: the trained supernet's state dict
    meta        ``size_agreement``: Kendall's tau between the scores of the candidates it
                scored and their parameter counts and FLOPs (:mod:`nasforge.run.agreement`),
                the trivial baseline ``nasforge status`` and the dashboard show beside the pick

Data: ``(X, y)`` tensors (split evenly into a weight half and an architecture half), a mapping
``{"train": (X, y), "val": (X, y)[, "test": (X, y)]}``, a :class:`nasforge.data.Splits`
(train for weights, val for the architecture, test reported), ``"digits"``, ``"digits-flat"``
(the same, flattened to 64 features), or a callable returning any of these.

A SPOS search can start from a supernet trained elsewhere: ``supernet: RUN_DIR`` names a run
whose record holds a ``supernet`` artifact (e.g. pipeline training), and ``epochs: 0`` goes
straight to the evolution.

Model and data parallel: ``model_parallel=M, schedule="cmp"`` (or ``"mp"``), ``replicas=R`` and
``workers="thread" | "process"`` run the search with :func:`nasforge.oneshot.cmp.cmp_search`
(docs/cmp.md); the record is the same, and a resume continues bitwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

import torch

from nasforge.data import to_tensors
from nasforge.errors import ConfigError, StoreError, did_you_mean
from nasforge.oneshot.algorithms import (
    algorithm_names,
    config_for,
    flat_settings,
    get_algorithm,
    own_settings,
    setting_names,
)
from nasforge.oneshot.baseline import record_agreement, size_baseline
from nasforge.oneshot.cmp import DEFAULT_WORKERS, CMPSettings, check_parallel, cmp_search
from nasforge.oneshot.common import Batch, SearchResult, Split, accuracy, inherited, split_data
from nasforge.oneshot.search import SearchState, budget_for, search
from nasforge.oneshot.search import supernet as make_supernet
from nasforge.run.files import read_recorded
from nasforge.run.progress import fmt_time
from nasforge.run.refs import materialize
from nasforge.run.runner import BaseRunner, Objective, find_ref, register_runner
from nasforge.run.store import Store, TrialOutcome
from nasforge.runtime.threads import set_threads, threads_for
from nasforge.runtime.weights import load_weights, save_state, save_weights
from nasforge.space import ModelSpace, arch_id
from nasforge.space.search_space import Arch
from nasforge.strategy import list_strategies

__all__ = ["OneShot", "OneShotSearch", "get_oneshot", "load_data"]

log = logging.getLogger("nasforge.oneshot")


class _Parallel(TypedDict):
    """The parallel settings of a search: :func:`~nasforge.oneshot.cmp.cmp_search`'s keywords."""

    model_parallel: int
    schedule: str
    replicas: int
    workers: str


#: The parallel settings of a one-device search (the default).
_ONE_DEVICE: _Parallel = {
    "model_parallel": 1,
    "schedule": "cmp",
    "replicas": 1,
    "workers": DEFAULT_WORKERS,
}

_NUMERIC_ROW_KEYS = ("epoch", "train_loss", "val_loss", "val_acc", "seconds")


class OneShot:
    """Returns nothing; names a one-shot algorithm and its search settings (the loop's and the
    algorithm's own, one flat mapping split by
    :func:`~nasforge.oneshot.algorithms.config_for`), the one-shot counterpart of a
    multi-trial strategy object: ``OneShot("nasb", epochs=8, order="alternate")``.

    Raises:
        ConfigError: unknown algorithm or setting (a setting of another algorithm says
            whose), or an impossible setting.
    """

    def __init__(self, name: str, **settings: Any) -> None:
        if not isinstance(name, str) or name not in algorithm_names():
            hint = did_you_mean(str(name), algorithm_names())
            raise ConfigError(
                f"unknown strategy {name!r}; {hint + ' ' if hint else ''}expected a one-shot "
                f"algorithm {algorithm_names()} or a multi-trial strategy {list_strategies()}"
            )
        self.config = config_for(name, settings)
        self.config.check(allow_no_epochs=True)  # OneShotSearch checks epochs=0 against weights
        self.name = name

    def settings(self) -> dict[str, Any]:
        """Returns the search settings as JSON-able data: one flat mapping, the loop's then
        the algorithm's."""
        return json.loads(json.dumps(flat_settings(self.config)))

    def __repr__(self) -> str:
        return f"OneShot({self.name!r}, {self.settings()})"


def get_oneshot(spec: str | Mapping[str, Any] | OneShot, **settings: Any) -> OneShot:
    """Returns a OneShot from a name, a mapping ``{name: ..., <setting>: ...}`` or an instance;
    ``settings`` add to (or override) its settings.

    Raises:
        ConfigError: anything else, or a bad name or setting.
    """
    if isinstance(spec, OneShot):
        if not settings:
            return spec
        return OneShot(spec.name, **{**flat_settings(spec.config), **settings})
    if isinstance(spec, str):
        return OneShot(spec, **settings)
    if isinstance(spec, Mapping) and "name" in spec:
        rest = {k: v for k, v in spec.items() if k != "name"}
        return OneShot(spec["name"], **{**rest, **settings})
    raise ConfigError(
        f"a one-shot strategy is a name {algorithm_names()}, a mapping with 'name', or a "
        f"OneShot; got {spec!r:.100}"
    )


def load_data(data: Any, seed: int) -> tuple[Split, Batch | None]:
    """Returns the weight/architecture split and the test part (or None) of one-shot ``data``.

    Raises:
        ConfigError: ``data`` is missing or of no accepted form (see the module docstring).
    """
    if data is None:
        raise ConfigError(
            "a one-shot experiment needs data: define `data = (X, y)`, a nasforge.data.Splits, "
            "{'train': (X, y), 'val': (X, y)}, 'digits' or a function returning one of these"
        )
    flat = False
    if isinstance(data, str):
        if data not in ("digits", "digits-flat"):
            raise ConfigError(
                f"data {data!r} is unknown; the built-in data sets are 'digits' and "
                "'digits-flat' (64 features), or give 'module:function'"
            )
        from nasforge.data import load_digits

        flat, data = data == "digits-flat", load_digits
    if callable(data):
        data = data()
    if all(hasattr(data, k) for k in ("train", "val", "test")) and not isinstance(data, Mapping):
        data = {"train": data.train, "val": data.val, "test": data.test}
    if isinstance(data, Mapping) and "train" in data and "val" in data:
        parts = {
            k: to_tensors(data[k]) for k in ("train", "val", "test") if data.get(k) is not None
        }
        if flat:
            parts = {k: (x.flatten(1), y) for k, (x, y) in parts.items()}
        test = parts.pop("test", None)
        return split_data(parts, seed), test
    return split_data(data, seed), None


@register_runner
class OneShotSearch(BaseRunner):
    """Returns, after :meth:`run`, a one-shot search of ``space`` recorded in ``directory``
    (the ``oneshot`` kind of run; see the module docstring for what it records).

    ``strategy`` is the name of a registered algorithm (``"darts"``, ``"enas"``, ``"fewshot"``,
    ``"nasb"``, ``"nasp"``, ``"proxylessnas"``, ``"spos"``, or one of yours), a mapping or a
    :class:`OneShot`; ``settings`` are the loop's :class:`~nasforge.oneshot.SearchConfig`
    fields (``epochs``, ``batch_size``, ``seed``, ...) and the algorithm's own, and override
    the strategy's. ``threads`` sets torch's thread count (default:
    :func:`nasforge.runtime.threads.default_threads`).
    ``model_parallel``, ``schedule``, ``replicas`` and ``workers`` split the search over
    partitions and replicas (:func:`~nasforge.oneshot.cmp.cmp_search`; docs/cmp.md).

    Invariants: configuration errors (bad algorithm, setting or data, a space a supernet cannot
    mix, a ``budget`` no architecture of the space meets) are raised before the record is
    created or any training starts; with a budget, the pick lies within it and its trial's
    metrics hold its ``params`` and ``flops`` beside the limits (``budget_params``, ...),
    the strategy section the budget itself; a resumed search ends
    with the same supernet and architecture as an uninterrupted one (same thread count).

    Raises:
        ConfigError: see above; also a multi-trial setting such as ``n_trials``.
        SpaceError: the space has a shape-changing value choice or another unmixable decision
            (the message names the label).
        StoreError: ``run`` on a directory that already holds a run, or ``resume`` on one that
            is missing or was made with another space or strategy; a ``supernet`` run without
            a supernet artifact.
    """

    kind = "oneshot"
    controls = frozenset({"stop"})
    data_parallel = True

    def __init__(
        self,
        space: ModelSpace,
        strategy: str | Mapping[str, Any] | OneShot,
        data: Any,
        *,
        directory: str | Path | None = None,
        progress: str = "auto",
        source: Mapping[str, Any] | None = None,
        threads: int | None = None,
        supernet: str | Path | None = None,
        model_parallel: int = 1,
        schedule: str = "cmp",
        replicas: int = 1,
        workers: str | None = None,
        callbacks: Sequence[Any] | None = None,
        **settings: Any,
    ) -> None:
        multi = {"n_trials", "time_budget", "executor", "concurrency", "evaluator", "evaluate",
                 "metric"}  # fmt: skip
        bad = sorted(multi & settings.keys())
        if bad:
            raise ConfigError(
                f"{bad} do not apply to a one-shot search: it trains one supernet itself and "
                "its budget is `epochs` (e.g. strategy: {name: nasb, epochs: 8})"
            )
        self.strategy = get_oneshot(strategy, **settings)
        self._recorded_strategy: dict[str, Any] | None = None  # see check()
        if not isinstance(space, ModelSpace):
            raise ConfigError(
                f"one-shot search takes a nasforge ModelSpace, got {type(space).__name__}"
            )
        self.search_space = space.search_space()
        if len(self.search_space) == 0:
            raise ConfigError(f"the space {type(space).__name__} has no decisions to search")
        probe = make_supernet(space, self.strategy.name)  # SpaceError now, not mid-training
        get_algorithm(self.strategy.name).check_space(space, self.strategy.config)
        self.supernet_run = None if supernet is None else str(supernet)
        self._weights = None if supernet is None else _supernet_weights(Path(supernet))
        self.strategy.config.check(allow_no_epochs=self._weights is not None)
        self.data = data
        self.split, self.test = load_data(data, self.strategy.config.seed)
        cfg = self.strategy.config
        if cfg.budget is not None:  # infeasible: one error before the record exists
            example = self.split.train[0][:2]
            if "latency" in cfg.budget:  # the table's layers, placed in their nodes
                probe.find_nodes(example)
            with threads_for(threads):  # a latency table is timed as the search will time it
                budget_for(probe, space, cfg, example)
        self.progress_mode = progress
        self.threads = threads
        self.parallel: _Parallel = {"model_parallel": model_parallel, "schedule": schedule,
                         "replicas": replicas, "workers": workers or DEFAULT_WORKERS}  # fmt: skip
        if self.parallel != _ONE_DEVICE:
            check_parallel(model_parallel, replicas, schedule, self.parallel["workers"],
                           self.strategy.config, self.strategy.name)  # fmt: skip
        super().__init__(Objective("accuracy", "max"), directory, source, space, callbacks)

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the oneshot kind's flags: how the search is spread
        (:class:`~nasforge.oneshot.cmp.CMPSettings`)."""
        parser.add_argument(
            "--model-parallel", type=int, help="consecutive partitions (oneshot; docs/cmp.md)"
        )
        parser.add_argument("--replicas", type=int, help="data-parallel replicas (oneshot)")

    @classmethod
    def names(cls) -> list[str]:
        """Returns the names of the registered one-shot algorithms (the built-ins and every one
        registered with :func:`~nasforge.oneshot.algorithms.register_algorithm`)."""
        return algorithm_names()

    @classmethod
    def claims(cls, strategy: Any) -> bool:
        """Returns whether ``strategy`` names a one-shot algorithm (or is a OneShot)."""
        return isinstance(strategy, OneShot) or super().claims(strategy)

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> OneShotSearch:
        """Returns a one-shot search from a run file's settings (``space``, ``strategy``,
        ``data``, and search settings) or a stored section (whose strategy settings may hold
        other algorithms' settings too, as a record written while one config held them all
        does: those are dropped).

        Raises:
            ConfigError: no space or data, a bad reference or setting.
        """
        s = dict(settings)
        s.pop("objective", None)
        s.pop("search_space", None)  # stored for the resume check; the space rebuilds it
        stored = s.get("strategy")
        if isinstance(stored, Mapping) and "config" in stored:  # a stored section
            # its strategy holds every search setting the run ran with: a run file's own
            # copies (read again on resume) do not replace them; overrides do
            name = stored["name"]
            s["strategy"] = {"name": name, **own_settings(name, stored["config"])}
            for key in setting_names(name):
                s.pop(key, None)
        s.update(overrides)
        if "space" not in s:
            raise ConfigError(
                "a one-shot run needs `space`; see docs/oneshot.md. (Resuming a run started "
                "from Python whose space could not be recorded? Resume it from Python.)"
            )
        space = materialize(s.pop("space"), base)
        strategy = s.pop("strategy")
        data = s.pop("data", None)
        if isinstance(data, Mapping) and "unrebuildable" in data:
            raise ConfigError(
                f"this run was started from Python with data that cannot be found again "
                f"({data['unrebuildable']}); resume it from Python with the same "
                "OneShotSearch(...).resume(), or give data as 'digits' or 'module:function'"
            )
        data = materialize(data, base)
        if s.get("supernet") is not None and base is not None:
            s["supernet"] = str((base / s["supernet"]).resolve())
        return cls(space, strategy, data, **s)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep: the space and the algorithm's settings."""
        return ("search_space", "strategy")

    def check(self) -> None:
        """Returns None; on a resume of a run whose record holds the strategy section of an
        earlier nasforge (one where one config held every algorithm's settings, or one that
        lacked a loop setting added since), keeps that section as written (:meth:`section`)
        when it agrees with this search on every setting the algorithm reads (a missing one at
        its default) and its other keys are other algorithms' settings, so that the run
        resumes; otherwise the shared resume check compares the sections as usual."""
        self._recorded_strategy = None
        try:
            recorded = read_recorded(self.directory).config.get(self.kind)
        except StoreError:  # no run there yet
            return
        stored = recorded.get("strategy") if isinstance(recorded, Mapping) else None
        if not (
            isinstance(stored, Mapping)
            and stored.get("name") == self.strategy.name
            and isinstance(stored.get("config"), Mapping)
        ):
            return
        settings = self.strategy.settings()
        try:  # the recorded settings with today's defaults for what its nasforge lacked
            own = own_settings(self.strategy.name, stored["config"])
            filled = json.loads(json.dumps(flat_settings(config_for(self.strategy.name, own))))
        except (ConfigError, TypeError, ValueError):
            return
        if filled == settings:
            self._recorded_strategy = dict(stored)

    def section(self) -> dict[str, Any]:
        """Returns the search's settings as JSON-able data."""
        data = self.data
        if not (data is None or isinstance(data, str)):
            ref = find_ref(data)
            data = ref if ref is not None else {"unrebuildable": type(data).__name__}
        return {
            "search_space": self.search_space.to_dict(),
            "strategy": self._recorded_strategy
            or {"name": self.strategy.name, "config": self.strategy.settings()},
            "data": data,
            "threads": self.threads,
            "supernet": self.supernet_run,
            **self.parallel,
        }

    def device(self) -> str:
        """Returns the device the search trains on (its ``device`` setting)."""
        return str(self.strategy.config.device)

    def _ranked_config(self) -> Any:
        """Returns the search's config with this rank's device (``cuda`` is ``cuda:LOCAL_RANK``
        on a rank of a data-parallel job).

        Raises:
            ConfigError: a data-parallel job asked of a model-parallel search.
        """
        cfg = self.strategy.config
        if not self.ranks.distributed:
            return cfg
        if self.parallel != _ONE_DEVICE:
            raise ConfigError(
                "a model-parallel search (model_parallel, replicas) runs its own processes; "
                "start it as one process, not with torchrun or --nproc (docs/distributed.md)"
            )
        return dataclasses.replace(cfg, device=self.ranks.device(cfg.device))

    def _follow(self, resume: bool) -> None:
        """Trains this rank's shards beside rank 0 (see :meth:`BaseRunner._follow`): the
        same search, started from rank 0's resume point, checkpoints left to rank 0."""
        cfg = self._ranked_config()
        set_threads(self.threads)
        what, start = self.ranks.broadcast(None)
        if what == "done":
            return

        def checkpoint(row: dict[str, Any] | None, state: SearchState) -> None:
            self.check_stop()  # at the step rank 0 takes a stop at

        search(self.space, self.strategy.name, {"train": self.split.train, "val": self.split.val},
               config=cfg, checkpoint=checkpoint, resume_from=start, weights=self._weights,
               threads=self.threads, progress="off", ranks=self.ranks)  # fmt: skip

    def _execute(self, store: Store, resume: bool) -> None:
        found = self.search_in(store, resume)
        if found is not None:
            self._record(store, *found)

    def search_in(self, store: Store, resume: bool) -> tuple[SearchResult, float] | None:
        """Returns the search's result and its seconds (across resumes) after training the
        supernet into ``store`` (progress rows, a checkpoint after each epoch), or None when
        the record already holds the search's trials (it finished). A run that composes this
        search as one of its stages (the two-stage search) calls it with its own open record.

        Raises:
            StoreError: a checkpoint the record names is missing.
            DivergenceError: a loss became NaN or infinite.
        """
        cfg = self._ranked_config()
        set_threads(self.threads)
        store.set_plan("epochs", cfg.epochs)
        ckpt = self.directory / "checkpoints"
        ckpt.mkdir(exist_ok=True)
        start = None
        done = resume and bool(store.trials())
        if resume and not done:
            start = _last_checkpoint(store, ckpt)
        self.ranks.broadcast(("done", None) if done else ("start", start))
        if done:
            log.info("%s: the one-shot search already finished; nothing to do", self.directory)
            return None
        progress = self.progress(cfg.epochs, None, self.progress_mode)
        t0 = time.monotonic() - float(store.get_meta("elapsed", "0") or 0)

        def checkpoint(row: dict[str, Any] | None, state: SearchState) -> None:
            # the file first, then the row and the resume point that names it: a kill between
            # them resumes from the checkpoint before
            name = (f"oneshot_epoch{state.epoch}.pt" if row is not None
                    else f"oneshot_epoch{state.epoch}_step{state.step}.pt")  # fmt: skip
            path = ckpt / name
            save_state(state.state_dict(), path)
            if row is not None:
                store.add_progress(row["epoch"], row)
            store.add_artifact("search_state", f"checkpoints/{name}", "checkpoint",
                               {"epoch": state.epoch, "step": state.step})  # fmt: skip
            store.set_meta("elapsed", repr(time.monotonic() - t0))
            for old in ckpt.glob("oneshot_epoch*.pt"):
                if old != path:
                    old.unlink()
            if row is None:
                self.check_stop()  # nasforge stop: this step is saved, so the run may end here
                return
            elapsed = time.monotonic() - t0
            eta = elapsed / row["epoch"] * (cfg.epochs - row["epoch"])
            val_loss = "-" if row["val_loss"] is None else f"{row['val_loss']:.4f}"
            progress.show(
                f"{self.strategy.name} epoch {row['epoch']}/{cfg.epochs} | train loss "
                f"{row['train_loss']:.4f} | val loss {val_loss} | supernet val acc "
                f"{row['val_acc']:.4f} | elapsed {fmt_time(elapsed)} | ETA {fmt_time(eta)} | "
                f"arch {row['arch_id']} {json.dumps(row['arch'], separators=(',', ':'))}",
                force=True,
            )
            self.check_stop()  # nasforge stop: this epoch is saved, so the run may end here

        # the line above is this run's progress (with the time spent before a resume)
        find = partial(search, threads=self.threads, progress="off", ranks=self.ranks)
        try:
            result = (find if self.parallel == _ONE_DEVICE else self._cmp_search)(
                self.space,
                self.strategy.name,
                {"train": self.split.train, "val": self.split.val},
                config=cfg,
                checkpoint=checkpoint,
                resume_from=start,
                weights=self._weights,
            )
        finally:
            progress.close()
        return result, time.monotonic() - t0

    def inherited(self, net: Any, arch: Arch) -> tuple[Any, float]:
        """Returns the frozen model of ``arch`` with the trained supernet's weights (``net``:
        a search result's supernet, on the CPU) and batch norm recalibrated on training
        batches, and its validation accuracy."""
        return inherited(net, arch, self.split, self.strategy.config)

    def example(self) -> torch.Tensor:
        """Returns one training input (what sets the input shape of a size count)."""
        return self.split.train[0][:1]

    def _cmp_search(self, space: ModelSpace, algorithm: str, data: Any, **kwargs: Any) -> Any:
        """Returns :func:`~nasforge.oneshot.cmp.cmp_search`'s result with this run's partitions,
        schedule, replicas and workers (docs/cmp.md)."""
        device = self.strategy.config.device
        parallel = CMPSettings(**self.parallel, threads=self.threads, device=device)
        return cmp_search(space, algorithm, data, parallel, **kwargs)

    def _record(self, store: Store, result: Any, seconds: float) -> None:
        # recorded from the CPU: the artifacts load anywhere, and the data stayed there
        net, arch = result.supernet.cpu(), result.arch
        ckpt = self.directory / "checkpoints"
        for evaluated, acc in result.evaluated:
            outcome = TrialOutcome("done", {"accuracy": acc}, evaluation="inherited")
            store.record_trial(arch_id(evaluated), evaluated, outcome)
        record_agreement(store, size_baseline(self.space, result.evaluated, self.example()))
        model, acc = self.inherited(net, arch)
        rows = store.progress()
        metrics = {
            "accuracy": acc,
            "params": float(sum(p.numel() for p in model.parameters())),
            "search_seconds": seconds,
            **result.metrics,  # what the algorithm knows of its pick (ProxylessNAS: latency)
        }
        if rows:
            metrics["supernet_val_acc"] = rows[-1]["val_acc"]
        if self.test is not None:
            metrics["test_accuracy"] = accuracy(model, self.test)
        save_weights(net, str(self.directory / "artifacts" / "supernet.pt"))
        store.add_artifact("supernet", "artifacts/supernet.pt", "supernet")
        tid = store.add_trial(arch_id(arch), arch, event=False)
        weights = save_weights(model, str(ckpt / f"trial_{tid}.pt"))
        curve = [{k: r[k] for k in _NUMERIC_ROW_KEYS if r.get(k) is not None} for r in rows]
        outcome = TrialOutcome("done", metrics, curve, duration=seconds,
                               checkpoint=str(Path(weights).relative_to(self.directory)),
                               evaluation="inherited")  # fmt: skip
        store.finish_trial(tid, outcome, event=False)
        store.set_picks([tid])  # what status, export and load_model give: the search's pick
        log.info(
            "%s found arch %s: accuracy %.4f (inherited weights)",
            self.strategy.name,
            arch_id(arch),
            metrics["accuracy"],
        )


def _last_checkpoint(store: Store, ckpt: Path) -> dict[str, Any] | None:
    """Returns the state of the run's last checkpoint (the resume point its record names:
    an epoch's end or a step inside one), with the progress rows after it dropped; None: start
    from the first step."""
    point = store.artifacts().get("search_state")
    if point is not None:
        path = Path(point["path"])  # the store gives it under the run's directory
        if not path.exists():
            raise StoreError(
                f"{store.directory}: the checkpoint {path} of step {point['meta'].get('step')} "
                "is recorded but missing; restore it, or run the search again in a new directory"
            )
        store.truncate_progress(int(point["meta"]["epoch"]))
        return torch.load(path, weights_only=True, map_location="cpu")
    rows = store.progress(last=1)  # a record from before checkpoints named their step
    if not rows:
        return None
    epoch = rows[-1]["step"]
    path = ckpt / f"oneshot_epoch{epoch}.pt"
    if not path.exists():
        raise StoreError(
            f"{store.directory}: epoch {epoch} is recorded but its checkpoint {path} is missing; "
            "restore it, or run the search again in a new directory"
        )
    store.truncate_progress(epoch)
    # onto the CPU: loading the state into the search moves each tensor to its device
    return torch.load(path, weights_only=True, map_location="cpu")


def _supernet_weights(run: Path) -> dict[str, torch.Tensor]:
    """Returns the state dict of the supernet artifact of the run in ``run``.

    Raises:
        StoreError: no run there, or it has no supernet artifact.
    """
    with Store.open(run) as store:
        path = store.artifact("supernet")
    if path is None or not path.exists():
        raise StoreError(
            f"{run} records no trained supernet (artifact 'supernet'); name a run that trained "
            "one, e.g. `nasforge train-supernet ... --out DIR`"
        )
    return load_weights(path)
