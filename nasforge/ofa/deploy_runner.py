"""Deployment search on once-for-all's published artifacts, as a run (the ``ofa-deploy`` kind).

No nasforge training run is needed: the per-device latency tables (one YAML per input
resolution), the published accuracy predictor and, optionally, a supernet (a published
checkpoint, or a run whose record holds a ``supernet`` artifact) are named by path. For each
latency target, the evolution (once-for-all's settings: population 100, 500 generations,
parent ratio 0.25, mutation ratio 0.5, mutation probability 0.1 per decision) finds the most
accurate sub-network by the predictor whose table latency meets it. Each result is a trial
(``evaluation: predicted``; metrics ``accuracy``, ``latency_ms``, ``target``) whose checkpoint
is the extracted sub-network's weights when a supernet was given, so ``nasforge export DIR
--per target`` and ``load_model`` work on it.

    nasforge ofa search --latency-table note10/ --predictor acc_predictor.pth \\
        --supernet ofa_mbv3_d234_e346_k357_w1.2 --target-ms 20,25,30 --out runs/note10
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.ofa.evolution import EvolutionConfig
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.settings import kind_settings
from nasforge.run.store import Store, TrialOutcome, is_run
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_weights
from nasforge.space import arch_id

if TYPE_CHECKING:
    from nasforge.ofa.mobilenet import OFAMobileNetV3
    from nasforge.ofa.spaces import OFASpec

__all__ = ["OFADeploy", "OFADeploySettings"]

log = logging.getLogger("nasforge.ofa")


_EVOLUTION = EvolutionConfig()


@dataclass
class OFADeploySettings:
    """Returns nothing; the settings of a deployment search beside the artifacts it reads
    (tables, predictor) and its targets, each with its default (once-for-all's evolution),
    written once; the record's section holds them, paths resolved."""

    supernet: str | None = None  # a run directory or a published checkpoint (None: no weights)
    resolutions: Sequence[int] | None = None  # only these input sides' tables
    # the evolution's, with once-for-all's defaults (EvolutionConfig's, not written again)
    population: int = _EVOLUTION.population
    generations: int = _EVOLUTION.n_generations
    parent_ratio: float = _EVOLUTION.parent_ratio
    mutation_ratio: float = _EVOLUTION.mutation_ratio
    mutate_prob: float = _EVOLUTION.mutate_prob
    seed: int = 0
    threads: int | None = None


@register_runner
class OFADeploy(BaseRunner):
    """Returns, after :meth:`run`, one sub-network per latency target found on published
    artifacts and recorded in ``directory`` (see the module docstring).

    ``settings`` is an :class:`OFADeploySettings` (or a mapping of its fields); its fields
    given as keywords still work until nasforge 0.4.0 and warn (DeprecationWarning).

    Raises:
        ConfigError: no targets, a missing file, a resolution without a latency table, or an
            unknown setting.
    """

    kind = "ofa-deploy"

    def __init__(
        self,
        latency_table: str | Sequence[str],
        predictor: str,
        targets: Sequence[float],
        settings: OFADeploySettings | Mapping[str, Any] | None = None,
        *,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        callbacks: Sequence[Any] | None = None,
        **deprecated: Any,
    ) -> None:
        self.settings = s = kind_settings(OFADeploySettings, settings, deprecated, "OFADeploy")
        if not targets:
            raise ConfigError("give at least one latency target in ms (targets / --target-ms)")
        tables = [latency_table] if isinstance(latency_table, (str, Path)) else latency_table
        self.tables = [str(Path(t).resolve()) for t in tables]
        if s.resolutions:  # only the tables of these input sides
            first = Path(self.tables[0])  # their folder, or one of them (a record's)
            folder = first if first.is_dir() else first.parent
            self.tables = [str(folder / f"{int(r)}_lookup_table.yaml") for r in s.resolutions]
        for path in [*self.tables, predictor, *([s.supernet] if s.supernet else [])]:
            if not Path(path).exists():
                raise ConfigError(f"{path} not found")
        self.predictor = str(Path(predictor).resolve())
        self.supernet = None if s.supernet is None else str(Path(s.supernet).resolve())
        self.targets = [float(t) for t in targets]
        self.evolution = EvolutionConfig(
            population=s.population, n_generations=s.generations, parent_ratio=s.parent_ratio,
            mutation_ratio=s.mutation_ratio, mutate_prob=s.mutate_prob,
        )  # fmt: skip
        self.seed, self.threads = s.seed, s.threads
        self.resolutions = None if not s.resolutions else tuple(int(r) for r in s.resolutions)
        self.net = _load_supernet(self.supernet) if self.supernet else None
        super().__init__(Objective("accuracy", "max"), directory, source, callbacks=callbacks)

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the ofa-deploy kind's flags: the evolution's size."""
        parser.add_argument("--population", type=int, help="evolution population (ofa-deploy)")
        parser.add_argument("--generations", type=int, help="evolution generations (ofa-deploy)")

    def _spec(self) -> OFASpec:
        """Returns the supernet's spec narrowed to the searched resolutions."""
        from dataclasses import replace

        assert self.net is not None, "only a search with a supernet has its spec"
        spec = self.net.spec
        return replace(spec, resolutions=self.resolutions) if self.resolutions else spec

    def config(self) -> dict[str, Any]:
        """Returns the run config; with a supernet, its space (narrowed to the searched
        resolutions) is the one exports are frozen from."""
        from nasforge.ofa.record import spec_ref

        config = super().config()
        if self.net is not None:
            config["space"] = spec_ref(self._spec())
        return config

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> OFADeploy:
        """Returns a deployment search from a run file's settings (paths relative to the file)
        or a stored section.

        Raises:
            ConfigError: a bad or missing setting.
        """
        s = {**dict(settings), **overrides}
        s.pop("objective", None)
        s.pop("space", None)  # a record's reference to the supernet's spec: the supernet has it
        if base is not None:
            for key in ("latency_table", "predictor", "supernet"):
                value = s.get(key)
                if isinstance(value, str):
                    s[key] = str((base / value).resolve())
                elif isinstance(value, list):
                    s[key] = [str((base / v).resolve()) for v in value]
        where = {k: s.pop(k) for k in ("latency_table", "predictor", "targets") if k in s}
        missing = sorted({"latency_table", "predictor", "targets"} - set(where))
        if missing:
            raise ConfigError(f"an ofa-deploy run needs {missing}; see docs/ofa.md")
        places = {k: s.pop(k) for k in ("directory", "source", "callbacks") if k in s}
        fields = kind_settings(OFADeploySettings, s, {}, "an ofa-deploy run")
        return cls(where["latency_table"], where["predictor"], where["targets"], fields, **places)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep."""
        return ("latency_table", "predictor", "supernet", "targets", "seed")

    def section(self) -> dict[str, Any]:
        """Returns the search's settings as JSON-able data."""
        e = self.evolution
        return {
            "latency_table": self.tables, "predictor": self.predictor, "supernet": self.supernet,
            "targets": self.targets, "population": e.population, "generations": e.n_generations,
            "parent_ratio": e.parent_ratio, "mutation_ratio": e.mutation_ratio,
            "mutate_prob": e.mutate_prob, "seed": self.seed, "threads": self.threads,
        }  # fmt: skip

    def _execute(self, store: Store, resume: bool) -> None:
        from nasforge.ofa.evolution import evolve
        from nasforge.ofa.latency import LatencyTable
        from nasforge.ofa.predictor import AccuracyPredictor

        set_threads(self.threads)
        from nasforge.ofa.spaces import OFASearchSpace

        net = self.net
        space = None if net is None else OFASearchSpace(self._spec())
        table = LatencyTable.from_ofa_yaml(self.tables, space)
        predictor = AccuracyPredictor.load_ofa(self.predictor, table.space)
        store.set_plan("trials", len(self.targets))
        done = {t.metrics["target"] for t in store.trials() if t.metrics}
        for target in self.targets:
            if target in done:
                continue
            r = evolve(table.space, predictor, table.predict, target, self.evolution, self.seed)
            tid = store.add_trial(arch_id(r.arch), r.arch, event=False)
            checkpoint = None
            if net is not None:
                from nasforge.ofa.mobilenet import extract

                path = self.directory / "checkpoints" / f"trial_{tid}.pt"
                checkpoint = str(Path(save_weights(extract(net, r.arch), path)).relative_to(
                    self.directory))  # fmt: skip
            metrics = {"accuracy": r.accuracy, "latency_ms": r.cost, "target": target}
            outcome = TrialOutcome("done", metrics, checkpoint=checkpoint, evaluation="predicted")
            store.finish_trial(tid, outcome, event=False)
            store.set_picks([*store.picks(), tid])  # one pick per target
            log.info("target %g ms: predicted accuracy %.4f at %.3f ms", target, r.accuracy,
                     r.cost)  # fmt: skip


def _load_supernet(path: str) -> OFAMobileNetV3:
    """Returns the supernet of a run directory (its ``supernet`` artifact) or of a published
    checkpoint file."""
    if Path(path).is_dir() and is_run(path):
        from nasforge.ofa.deploy import load_supernet

        return load_supernet(path)
    from nasforge.ofa.pretrained import load_pretrained

    return load_pretrained(path)
