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
    confirm   the ``confirm`` best finished trials of the shortlist (default
              :data:`DEFAULT_CONFIRM`) train once more, from another seed (the evaluator's
              ``reseeded``), to the end; skipped for an evaluator that cannot reseed
    pick      of the confirmed architectures, the best by the mean of the objective's metric
              over its trainings (without confirmation: the finished trial best by it); the
              run's pick, which status, export and ``load_model`` give first (its better
              training's weights)

A kill in stage 1 resumes the supernet from its last checkpoint (bitwise); a kill in stage 2
finds the shortlist recorded and resumes the engine's trials (the confirmation's too: it is
the same engine, its strategy the shortlist and then the finalists, so a resume replays it).
A stop asked of the run ends it at the stage's boundary (an epoch; a trial), and ``nasforge
resume`` continues it.

A run file names it like any strategy::

    strategy: {name: two-stage, shortlist: {algorithm: spos, k: 16, epochs: 4}, stopper: asha}
    space: ...        evaluator: {type: classification, data: digits, epochs: 9}
    data: digits      # stage 1's data, as a one-shot run takes it
"""

from __future__ import annotations

import json
import logging
import statistics
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
from nasforge.run.store import Store, TrialRecord
from nasforge.space.search_space import Arch, arch_id
from nasforge.strategy import RandomStrategy
from nasforge.twostage.propose import Proposer, get_proposer
from nasforge.twostage.shortlist import Candidate, ShortlistSettings, choose, function_key

__all__ = ["DEFAULT_CONFIRM", "DEFAULT_STOPPER", "TwoStageSearch"]

log = logging.getLogger("nasforge.twostage")

#: stage 2's stopper when none is given: none, every shortlisted architecture trains to the
#: end. Measured on the ground-truth tables (benchmarks/budgeted_search.py; docs/oneshot.md),
#: a shortlist of 8 trained one at a time under ASHA keeps stage 1's first almost always
#: (ASHA lets the first trial at a rung go on, and a later one only if it beats the earlier
#: ones there, at one epoch where curves still cross): training all 8 picked better at 6-24%
#: of the epochs of training every row once
DEFAULT_STOPPER = None

#: how many of stage 2's best trials train again from another seed before the pick, when
#: none is given: one training's seed moves a row of the MNIST-1D tables by up to 7 points of
#: test accuracy, so a pick by one validation score favours the lucky seed. Replayed on the
#: tables' recorded seeds (benchmarks/confirm_replay.py), a shortlist of 6 with its best 2
#: confirmed picked 0.6 to 3 percentile points above one of 8 trained once in 15 of 16 cells
#: and level in the last, at the same 8 trainings (docs/oneshot.md)
DEFAULT_CONFIRM = 2

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
    ``concurrency``, ``trial_timeout``, ``threads``, ``progress``, ``keep_checkpoints``),
    ``confirm`` how many of its best train again from another seed (default
    :data:`DEFAULT_CONFIRM`; 0: none) and ``metric``/``mode`` the objective (default: the
    evaluator's metric, maximised).

    Invariants: every setting of both stages is checked before the record exists; stage 2
    trains only the recorded shortlist; a resumed run ends with the pick of an uninterrupted
    one (at the same thread count, with trials that do not race: the in-process executor or
    one trial at a time).

    Raises:
        ConfigError: a bad setting of either stage (``confirm`` not an int from 0 to ``k``),
            unknown algorithm, evaluator, executor or stopper; (``run``) no candidate within
            the budget.
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
        confirm: int = DEFAULT_CONFIRM,
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
        k = self.shortlist.k
        if isinstance(confirm, bool) or not isinstance(confirm, int) or not 0 <= confirm <= k:
            raise ConfigError(
                f"confirm must be an int from 0 to the shortlist's k ({k}): how many of stage "
                f"2's best train again from another seed; got {confirm!r}"
            )
        self.confirm = confirm
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

    def _experiment(
        self, space: Any, archs: list[Arch], directory: Any, **settings: Any
    ) -> Experiment:
        """Returns stage 2: the engine's experiment that trains ``archs`` in order (with
        ``settings`` over stage 2's)."""
        return Experiment(space, self.evaluator_spec, RandomStrategy(self.shortlist.seed,
                          initial=archs), n_trials=len(archs), metric=self._metric,
                          mode=self._mode, directory=directory,
                          **{**self.stage2, **settings})  # fmt: skip

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
            "confirm": self.confirm,
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
        if not _ended(store, len(chosen)):  # a resume past the shortlist's round skips it
            self._stage2(store, self._experiment(self.space, chosen, self.directory),
                         resume and recorded is not None)  # fmt: skip
        o = self.objective
        # the finalists by the shortlist's round alone (a resume finds the same ones)
        first = [t for t in store.trials()[: len(chosen)] if t.status == "done"]
        ranked = rank_trials(first, o.metric, o.mode, o.constraints)
        again = [t.arch for t in ranked[: self.confirm]] if self._reseeds() else []
        if len(again) > 1:  # one confirmed alone could not change the pick
            if not _ended(store, len(chosen) + len(again)):
                confirmation = self._experiment(self.space, chosen + again, self.directory,
                                                stopper=None, retrain_duplicates=True)  # fmt: skip
                self._stage2(store, confirmation, True)  # replays the shortlist's round
            ranked = self._confirmed(store, {arch_id(a) for a in again})
        if ranked:
            store.set_picks([ranked[0].id])
            log.info("two-stage pick: trial %d, %s %.4f", ranked[0].id, o.metric,
                     (ranked[0].metrics or {})[o.metric])  # fmt: skip

    def _stage2(self, store: Store, experiment: Experiment, resume: bool) -> None:
        """Returns None after ``experiment`` ran its trials into ``store``, its settings
        recorded in its section of the config (a resume reads its executor there).

        Raises:
            StopRequested: a stop was asked of the run.
        """
        store.set_config({**store.config(), experiment.kind: experiment.section()})
        experiment.run_stage(store, resume)
        if experiment.stopping:
            raise StopRequested(f"{self.directory}: stopped on request in stage 2")

    def _reseeds(self) -> bool:
        """Returns whether stage 2's evaluator trains otherwise from another seed (the
        confirmation needs it), saying so once when it does not."""
        if self.evaluator.reseeded(1) is not None:
            return True
        if self.confirm > 1:
            log.info("stage 2's evaluator (%s) cannot train from another seed (it defines no "
                     "`reseeded`): its finalists are not confirmed",
                     type(self.evaluator).__name__)  # fmt: skip
        return False

    def _confirmed(self, store: Store, confirmed: set[str]) -> list[TrialRecord]:
        """Returns the trials of the ``confirmed`` architectures (arch ids), best first by the
        mean of the objective's metric over each one's finished trainings, one (its best
        training) per architecture; the means are a run note."""
        o = self.objective
        sign = 1.0 if o.mode == "max" else -1.0
        runs: dict[str, list[TrialRecord]] = {}
        for t in rank_trials(store.trials("done"), o.metric, o.mode, o.constraints,
                             unique=False):  # fmt: skip
            if t.arch_id in confirmed:
                runs.setdefault(t.arch_id, []).append(t)
        means = {a: statistics.mean((t.metrics or {})[o.metric] for t in ts)
                 for a, ts in runs.items()}  # fmt: skip
        order = sorted(runs, key=lambda a: (-sign * means[a], runs[a][0].id))
        text = "; ".join(
            f"trial {runs[a][0].id}: " + ", ".join(f"{(t.metrics or {})[o.metric]:.4g}"
                                                  for t in runs[a]) + f" (mean {means[a]:.4g})"
            for a in order
        )  # fmt: skip
        store.add_note("two-stage", "confirm",
                       f"stage 2's best {len(order)} trained again from another seed; the pick "
                       f"is the best mean of {o.metric}: {text}",
                       means={runs[a][0].id: means[a] for a in order})  # fmt: skip
        return [runs[a][0] for a in order]

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


def _ended(store: Store, n: int) -> bool:
    """Returns whether the record holds ``n`` trials or more, none of the first ``n`` running:
    a round of stage 2 that trains ``n`` in all has ended."""
    trials = store.trials()
    return len(trials) >= n and all(t.status != "running" for t in trials[:n])
