"""Two-stage search as a run (the ``two-stage`` kind): a cheap first stage proposes a shortlist
of K architectures, the second trains them for real and picks by validation. One record holds
both:

    stage 1   a one-shot algorithm, a proxy or a trivial rule scores candidates
              (:mod:`nasforge.twostage.propose`); a one-shot search writes its progress rows
              and checkpoints as a one-shot run does. The shortlist (:mod:`.shortlist`: best
              first, within the budget, one per function) is written once, into the meta
              (:mod:`nasforge.run.shortlist`), with the size baseline of stage 1's scores
              (:mod:`nasforge.run.agreement`)
    stage 2   the multi-trial engine trains the shortlist in stage 1's order on the run's
              executor (pool, Ray, in-process), under its stopper if one is given (ASHA,
              successive halving: multi-fidelity over the evaluator's epochs). By default none:
              every shortlisted architecture trains to the end (see :data:`DEFAULT_STOPPER`).
              The trials, asks and tells are the engine's own, so a resume replays them
    pick      the finished (not stopped) trial best by the objective's metric: the run's pick,
              which status, export and ``load_model`` give first

A kill in stage 1 resumes the supernet from its last checkpoint (bitwise); a kill in stage 2
finds the shortlist recorded and resumes the engine's trials. A stop asked of the run ends it
at the stage's boundary (an epoch; a trial), and ``nasforge resume`` continues it.

A run file names it like any strategy::

    strategy: {name: two-stage, shortlist: {algorithm: spos, k: 16, epochs: 4}, stopper: asha}
    space: ...        evaluator: {type: classification, data: digits, epochs: 9}
    data: digits      # stage 1's data, as a one-shot run takes it
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nasforge.engine.experiment import Experiment
from nasforge.errors import ConfigError, StopRequested
from nasforge.oneshot.baseline import record_agreement
from nasforge.proxies.size import SIZES, arch_size
from nasforge.run.agreement import size_agreement
from nasforge.run.refs import materialize
from nasforge.run.results import rank_trials
from nasforge.run.runner import BaseRunner, find_ref, register_runner
from nasforge.run.shortlist import read_shortlist, write_shortlist
from nasforge.run.store import Store
from nasforge.space.search_space import Arch, arch_id
from nasforge.strategy import RandomStrategy
from nasforge.twostage.propose import Proposer, get_proposer
from nasforge.twostage.shortlist import Candidate, ShortlistSettings, choose, function_key

__all__ = ["DEFAULT_STOPPER", "TwoStageSearch"]

log = logging.getLogger("nasforge.twostage")

#: stage 2's stopper when none is given: none, every shortlisted architecture trains to the
#: end. Measured on the ground-truth tables (benchmarks/budgeted_search.py; docs/oneshot.md),
#: a shortlist of 8 trained one at a time under ASHA keeps stage 1's first almost always
#: (ASHA lets the first trial at a rung go on, and a later one only if it beats the earlier
#: ones there, at one epoch where curves still cross): training all 8 picked better at 6-24%
#: of the epochs of training every row once
DEFAULT_STOPPER = None

#: the settings of stage 2 that are the engine's own (passed to its Experiment as they are)
_STAGE2 = ("stopper", "executor", "concurrency", "trial_timeout", "threads", "progress",
           "keep_checkpoints")  # fmt: skip


@register_runner
class TwoStageSearch(BaseRunner):
    """Returns, after :meth:`run`, a two-stage search of ``space`` recorded in ``directory``
    (see the module docstring): ``shortlist`` (a :class:`ShortlistSettings` or its mapping:
    ``algorithm``, ``k``, ``pool``, ``budget``, ``seed`` and the one-shot algorithm's
    settings) proposes on ``data`` (as a one-shot run takes it); ``evaluator`` trains the
    shortlist (a multi-trial evaluator: ``{type: classification, epochs: 9}``, a function);
    ``stage2`` holds the engine's settings (``stopper``, default none: the whole shortlist
    trains to the end; ``asha``, ``sh`` or any stopper for multi-fidelity; ``executor``,
    ``concurrency``, ``trial_timeout``, ``threads``, ``progress``, ``keep_checkpoints``)
    and ``metric``/``mode`` the objective (default: the evaluator's metric, maximised).

    Invariants: every setting of both stages is checked before the record exists; stage 2
    trains only the recorded shortlist; a resumed run ends with the pick of an uninterrupted
    one (at the same thread count, with trials that do not race: the in-process executor or
    one trial at a time).

    Raises:
        ConfigError: a bad setting of either stage, unknown algorithm, evaluator, executor or
            stopper; (``run``) no candidate within the budget.
        StoreError: as every runner (a directory that holds a run; a resume of another).
    """

    kind = "two-stage"
    controls = frozenset({"stop"})

    def __init__(
        self,
        space: Any,
        evaluator: Any,
        data: Any,
        shortlist: ShortlistSettings | Mapping[str, Any] | None = None,
        *,
        metric: str | None = None,
        mode: str = "max",
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        callbacks: Sequence[Any] | None = None,
        **stage2: Any,
    ) -> None:
        unknown = sorted(set(stage2) - set(_STAGE2))
        if unknown:
            raise ConfigError(
                f"{unknown} are no settings of a two-stage search; stage 2 takes {list(_STAGE2)}"
                ", and stage 1's settings go in `shortlist` (e.g. {algorithm: spos, k: 8})"
            )
        self.shortlist = ShortlistSettings.from_mapping(shortlist)
        self.stage2 = {"stopper": DEFAULT_STOPPER, **stage2}
        self.evaluator_spec, self._metric, self._mode = evaluator, metric, mode
        # the engine checks the evaluator, executor, stopper and metric now (no record yet)
        probe = self._experiment(space, [space.search_space().default()], directory)
        self.evaluator = probe.evaluator
        super().__init__(probe.objective, directory, source, space, callbacks)
        self.data = data
        self.proposer: Proposer = get_proposer(self.shortlist.algorithm)(
            space, self.shortlist, data, self.directory, stage2.get("threads"),
            stage2.get("progress", "auto"),
        )  # fmt: skip

    def _experiment(self, space: Any, archs: list[Arch], directory: Any) -> Experiment:
        """Returns stage 2: the engine's experiment that trains ``archs`` in order."""
        return Experiment(space, self.evaluator_spec, RandomStrategy(self.shortlist.seed,
                          initial=archs), n_trials=len(archs), metric=self._metric,
                          mode=self._mode, directory=directory, **self.stage2)  # fmt: skip

    # -- the kind ------------------------------------------------------------------------------
    @classmethod
    def names(cls) -> list[str]:
        """Returns the strategy name a run file gives: ``two-stage``."""
        return ["two-stage"]

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> TwoStageSearch:
        """Returns a two-stage search from a run file's settings (``space``, ``evaluator``,
        ``data``, ``strategy: {name: two-stage, shortlist: ..., stopper: ...}``; stage 2's
        settings there or beside it) or a stored section.

        Raises:
            ConfigError: no space, evaluator or data; a bad reference or setting.
        """
        s = {k: v for k, v in settings.items() if k not in ("search_space", "oneshot")}
        objective = s.pop("objective", None)
        strategy = s.pop("strategy", None)
        if isinstance(strategy, Mapping):
            for key, value in strategy.items():
                if key != "name":
                    s.setdefault(key, value)
        s.update(overrides)
        missing = [k for k in ("space", "evaluator", "data") if s.get(k) is None]
        if missing:
            raise ConfigError(
                f"a two-stage run needs {missing}: `space`, `evaluator` (stage 2's training) "
                "and `data` (stage 1's); see docs/oneshot.md"
            )
        if objective is not None:
            s.update(metric=objective.metric, mode=objective.mode)
        space = materialize(s.pop("space"), base)
        data = materialize(s.pop("data"), base)
        # the engine reads the evaluator as a multi-trial run file gives it
        spec = {"space": space, "evaluator": s.pop("evaluator"), "n_trials": 1}
        probe = Experiment.from_section({**spec, "strategy": "random"}, base=base)
        return cls(space, probe.evaluator, data, **s)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep: the space and the shortlist's."""
        return ("search_space", "shortlist")

    def section(self) -> dict[str, Any]:
        """Returns the search's settings as JSON-able data."""
        data = self.data
        if not (data is None or isinstance(data, str)):
            ref = find_ref(data)
            data = ref if ref is not None else {"unrebuildable": type(data).__name__}
        probe = self._experiment(self.space, [self.space.search_space().default()], None)
        engine = probe.section()
        return {
            "search_space": self.space.search_space().to_dict(),
            "shortlist": self.shortlist.data(),
            "evaluator": engine["evaluator"],
            "data": data,
            **self.stage2,
            "stopper": engine["stopper"],
            **self.proposer.section(),
        }

    def strategy_name(self) -> str:
        """Returns ``two-stage (<stage 1's algorithm>)``."""
        return f"two-stage ({self.shortlist.algorithm})"

    # -- the run -------------------------------------------------------------------------------
    def _execute(self, store: Store, resume: bool) -> None:
        recorded = read_shortlist(store) if resume else None
        if recorded is None:
            chosen = self._stage1(store, resume)
        else:
            log.info("%s: stage 1's shortlist is recorded; resuming stage 2", self.directory)
            chosen = [dict(c["arch"]) for c in recorded["candidates"]]
        stage2 = self._experiment(self.space, chosen, self.directory)
        # the engine keeps its own settings in its section of the config (its executor)
        store.set_config({**store.config(), stage2.kind: stage2.section()})
        stage2.run_stage(store, resume and recorded is not None)
        if stage2.stopping:
            raise StopRequested(f"{self.directory}: stopped on request in stage 2")
        o = self.objective
        best = rank_trials(store.trials("done"), o.metric, o.mode, o.constraints)
        if best:
            store.set_picks([best[0].id])
            log.info("two-stage pick: trial %d, %s %.4f", best[0].id, o.metric,
                     (best[0].metrics or {})[o.metric])  # fmt: skip

    def _stage1(self, store: Store, resume: bool) -> list[Arch]:
        """Returns the shortlist's architectures after stage 1 scored its candidates and the
        shortlist, its size baseline and a note were recorded.

        Raises:
            ConfigError: no candidate lies within the budget.
        """
        s = self.shortlist
        scored = self.proposer.score(store, resume)
        example = self.proposer.example()
        candidates = [
            Candidate(dict(a), arch_id(a), function_key(self.space, a), float(v),
                      arch_size(self.space, a, example))
            for a, v in scored
        ]  # fmt: skip
        sizes = {k: [c.sizes[k] for c in candidates] for k in SIZES}
        record_agreement(
            store, size_agreement([c.score for c in candidates], sizes, self.proposer.scorer)
        )
        by_size = self.proposer.by_size()
        chosen = choose(candidates, s.k, s.budget, by_size)
        if not chosen:
            raise ConfigError(
                f"none of the {len(candidates)} candidates stage 1 scored lies within the "
                f"budget {s.budget}; raise the budget or the pool"
            )
        write_shortlist(store, {"rule": s.algorithm, "k": s.k, "pool": len(candidates),
                                "budget": s.budget, "by_size": by_size,
                                "candidates": [c.data() for c in chosen]})  # fmt: skip
        functions = len({c.key for c in candidates})
        store.add_note(
            "two-stage", "shortlist",
            f"stage 1 ({s.algorithm}) scored {len(candidates)} candidates ({functions} "
            f"functions); the shortlist keeps the best {len(chosen)} within the budget, one "
            "per function" + (f", {by_size} of them the largest" if by_size else ""),
            candidates=len(candidates), shortlist=len(chosen),
        )  # fmt: skip
        log.info("shortlist: %s", json.dumps([c.arch_id for c in chosen]))
        return [c.arch for c in chosen]
