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

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.store import Store, is_run
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_weights
from nasforge.space import arch_id

if TYPE_CHECKING:
    from nasforge.ofa.mobilenet import OFAMobileNetV3
    from nasforge.ofa.spaces import OFASpec

__all__ = ["OFADeploy"]

log = logging.getLogger("nasforge.ofa")


@register_runner
class OFADeploy(BaseRunner):
    """Returns, after :meth:`run`, one sub-network per latency target found on published
    artifacts and recorded in ``directory`` (see the module docstring).

    Raises:
        ConfigError: no targets, a missing file, or a resolution without a latency table.
    """

    kind = "ofa-deploy"

    def __init__(
        self,
        latency_table: str | Sequence[str],
        predictor: str,
        targets: Sequence[float],
        *,
        supernet: str | None = None,
        resolutions: Sequence[int] | None = None,
        population: int = 100,
        generations: int = 500,
        parent_ratio: float = 0.25,
        mutation_ratio: float = 0.5,
        mutate_prob: float = 0.1,
        seed: int = 0,
        threads: int | None = None,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        from nasforge.ofa.evolution import EvolutionConfig

        if not targets:
            raise ConfigError("give at least one latency target in ms (targets / --target-ms)")
        tables = [latency_table] if isinstance(latency_table, (str, Path)) else latency_table
        self.tables = [str(Path(t).resolve()) for t in tables]
        if resolutions:  # only the tables of these input sides
            folder = Path(self.tables[0])
            self.tables = [str(folder / f"{int(r)}_lookup_table.yaml") for r in resolutions]
        for path in [*self.tables, predictor, *([supernet] if supernet else [])]:
            if not Path(path).exists():
                raise ConfigError(f"{path} not found")
        self.predictor = str(Path(predictor).resolve())
        self.supernet = None if supernet is None else str(Path(supernet).resolve())
        self.targets = [float(t) for t in targets]
        self.evolution = EvolutionConfig(
            population=population, n_generations=generations, parent_ratio=parent_ratio,
            mutation_ratio=mutation_ratio, mutate_prob=mutate_prob,
        )  # fmt: skip
        self.seed, self.threads = seed, threads
        self.resolutions = None if not resolutions else tuple(int(r) for r in resolutions)
        self.net = _load_supernet(self.supernet) if self.supernet else None
        super().__init__(Objective("accuracy", "max"), directory, source)

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
        if base is not None:
            for key in ("latency_table", "predictor", "supernet"):
                value = s.get(key)
                if isinstance(value, str):
                    s[key] = str((base / value).resolve())
                elif isinstance(value, list):
                    s[key] = [str((base / v).resolve()) for v in value]
        return cls(**s)

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
            store.finish_trial(tid, "done", metrics, checkpoint=checkpoint,
                               evaluation="predicted", event=False)  # fmt: skip
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
