"""Optuna's ``TPESampler`` with its history's conversion cached: the same proposals, each ask
still linear in the history but with a smaller constant: no Python conversion of every
parameter of every trial, no re-reading of every trial's constraints. Pure (no torch); Optuna
is imported by the caller, at setup.

Why. Each TPE ask splits the finished trials into "below" and "above" and converts every
parameter of every one of them to its internal representation (a candidate's index, a number
as a float) through ``distribution.to_internal_repr``: two Python calls per parameter per trial
per ask, so a run of n trials does O(n² × parameters) of them. At 2,000 trials on a space of
twelve decisions that conversion was about half of the sampler's time. A finished trial's
parameters never change, so its converted row is computed once and kept.

What is kept. For each search space (its parameter names, in order, and their distributions)
one row per finished trial: the tuple of internal values, or None when the trial lacks one of
the parameters (Optuna skips such a trial too). Rows are keyed by the trial's storage id within
one study; running trials (read through ``_get_params``, whose relative parameters may still
be written) are converted afresh each time, as Optuna does. The arrays handed to the Parzen
estimator are built by ``np.asarray`` over the same Python values in the same order as
Optuna's, so they are equal, dtype included, and the sampler's random stream is untouched.

The split. Each ask also sorts the history into feasible and infeasible trials by reading
every trial's constraints from its system attributes (a quarter of the sampler's remaining
time at 2,000 trials). A finished trial's constraints cannot change, so its infeasibility score
is kept too. This needs ``_sample`` and ``_split_trials`` reproduced here; they are used only
where Optuna's own are the code they reproduce (the hashes of their sources, ``_SOURCES``),
otherwise Optuna's own ``_sample`` runs and only the rows are cached. Tests compare the
proposals with Optuna's own sampler and ``study.optimize`` (tests/strategy/test_tpe.py).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # optuna and numpy are imported at setup, not at import
    import numpy as np
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler

__all__ = ["tpe_sampler"]

log = logging.getLogger("nasforge.strategy")

#: a converted row: the internal values of one trial's parameters in search-space order, or
#: None when the trial lacks one of them
Row = tuple[Any, ...] | None
#: not converted yet (a row may be None)
_MISSING = object()


def tpe_sampler(optuna: Any, **options: Any) -> BaseSampler:
    """Returns Optuna's ``TPESampler(**options)`` whose history conversion is cached (module
    doc): the same proposals as the plain sampler for the same seed and history.

    Raises:
        TypeError: an option ``TPESampler`` does not take (Optuna's own error).
    """
    return _cached_class(optuna.samplers.TPESampler)(**options)  # type: ignore[no-any-return]


@functools.cache
def _cached_class(base: type[Any]) -> type[Any]:
    """Returns the subclass of Optuna's ``TPESampler`` (``base``) that caches converted rows
    and, where Optuna's ``_sample`` and ``_split_trials`` are the code this module was written
    against (:data:`_SOURCES`), each finished trial's feasibility too."""
    import numpy as np
    from optuna.samplers._tpe import sampler as tpe_module
    from optuna.trial import TrialState

    running = TrialState.RUNNING

    class CachedTPESampler(base):  # type: ignore[misc]
        """Returns TPE's proposals, as ``TPESampler`` does, converting each finished trial's
        parameters once (module doc of ``nasforge.strategy._tpe_cache``)."""

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            #: (storage, study id) the caches belong to (a sampler may move to another study)
            self._cached_for: tuple[Any, int] | None = None
            #: parameter names -> (their distributions, storage trial id -> row)
            self._rows: dict[tuple[str, ...], tuple[dict[str, BaseDistribution], dict[int, Row]]]
            self._rows = {}
            #: the search space last converted (held, so its id is not reused)
            self._space: dict[str, BaseDistribution] | None = None
            #: storage trial id -> Optuna's infeasibility score of that finished trial
            self._infeasible: dict[int, float] = {}

        def _caches_for(self, study: Any) -> None:
            """Empties the caches when ``study`` is not the one they were filled from."""
            key = (study._storage, study._study_id)
            if self._cached_for is None or (
                self._cached_for[0] is not key[0] or self._cached_for[1] != key[1]
            ):
                self._cached_for, self._rows, self._infeasible = key, {}, {}

        def _get_internal_repr(
            self, trials: list[Any], search_space: dict[str, BaseDistribution], study: Any
        ) -> dict[str, np.ndarray]:
            self._caches_for(study)
            names = tuple(search_space)
            held = self._rows.get(names)
            # TPE converts "below" and "above" with the same space: compare it once
            if held is None or (search_space is not self._space and held[0] != search_space):
                held = (dict(search_space), {})  # a changed distribution converts anew
                self._rows[names] = held
            self._space = search_space
            rows = held[1]
            present: list[tuple[Any, ...]] = []
            for trial in trials:
                if trial.state.is_finished():
                    row = rows.get(trial._trial_id, _MISSING)
                    if row is _MISSING:
                        row = rows[trial._trial_id] = self._row(trial, search_space, study)
                else:  # its relative parameters may still be written: convert afresh
                    row = self._row(trial, search_space, study)
                if isinstance(row, tuple):  # None: it lacks a parameter
                    present.append(row)
            if not present:
                return {name: np.asarray([]) for name in names}
            return {name: np.asarray(column) for name, column in zip(names, zip(*present))}

        def _row(self, trial: Any, search_space: dict[str, BaseDistribution], study: Any) -> Row:
            """Returns the internal values of ``trial``'s parameters in search-space order,
            or None when it lacks one (Optuna's ``_get_internal_repr`` for one trial)."""
            params = self._get_params(trial, study)
            if not search_space.keys() <= params.keys():
                return None
            return tuple(d.to_internal_repr(params[n]) for n, d in search_space.items())

        def _split(self, study: Any, trials: list[Any]) -> tuple[list[Any], list[Any]]:
            """Returns Optuna's ``_split_trials(study, trials, gamma(n))`` (n: the trials not
            running), each finished trial's infeasibility score computed once."""
            self._caches_for(study)
            scores = self._infeasible
            complete, pruned, waiting, infeasible = [], [], [], []
            for trial in trials:
                state = trial.state
                if state == running:
                    waiting.append(trial)
                    continue
                score = scores.get(trial._trial_id)
                if score is None:
                    score = tpe_module._get_infeasible_trial_score(trial)
                    if state.is_finished():  # its constraints can no longer change
                        scores[trial._trial_id] = score
                if score > 0:
                    infeasible.append(trial)
                elif state == TrialState.COMPLETE:
                    complete.append(trial)
                elif state == TrialState.PRUNED:
                    pruned.append(trial)
                else:
                    raise AssertionError(f"a trial in state {state} in TPE's history")
            optuna_sampler: Any = self  # TPESampler's own attributes, as its _sample reads them
            gamma = optuna_sampler._gamma
            if gamma is None:
                single = len(study.directions) <= 1
                gamma = (
                    tpe_module.default_gamma if single else tpe_module.default_gamma_multiobjective
                )
                optuna_sampler._gamma = gamma
            n_below = gamma(len(trials) - len(waiting))
            # as in Optuna's _split_trials from here on
            below_complete, above_complete = tpe_module._split_complete_trials(
                complete, study, n_below
            )
            n_below = max(0, n_below - len(below_complete))
            below_pruned, above_pruned = tpe_module._split_pruned_trials(pruned, study, n_below)
            n_below = max(0, n_below - len(below_pruned))
            below_infeasible, above_infeasible = tpe_module._split_infeasible_trials(
                infeasible, n_below
            )
            below = below_complete + below_pruned + below_infeasible
            above = above_complete + above_pruned + above_infeasible + waiting
            below.sort(key=_number)  # numbers are unique: the order of sorting by .number
            above.sort(key=_number)
            return below, above

        def _sample(
            self, study: Any, trial: Any, search_space: dict[str, BaseDistribution]
        ) -> dict[str, Any]:
            """Returns Optuna's ``TPESampler._sample`` with the split of :meth:`_split`."""
            if self._constant_liar:
                states = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING]
            else:
                states = [TrialState.COMPLETE, TrialState.PRUNED]
            use_cache = not self._constant_liar
            trials = study._get_trials(deepcopy=False, states=states, use_cache=use_cache)
            if self._constant_liar:
                trials = [t for t in trials if trial.number != t.number]
            below_trials, above_trials = self._split(study, trials)
            mpe_below = self._build_parzen_estimator(
                study, search_space, below_trials, handle_below=True
            )
            mpe_above = self._build_parzen_estimator(
                study, search_space, above_trials, handle_below=False
            )
            samples_below = mpe_below.sample(self._rng.rng, self._n_ei_candidates)
            acq_func_vals = self._compute_acquisition_func(samples_below, mpe_below, mpe_above)
            ret = base._compare(samples_below, acq_func_vals)
            for param_name, dist in search_space.items():
                ret[param_name] = dist.to_external_repr(ret[param_name])
            return ret  # type: ignore[no-any-return]

    if not _written_against(base, tpe_module):
        del CachedTPESampler._sample  # another Optuna: its own _sample, rows still cached
        log.debug("TPE: Optuna's _sample or _split_trials changed; its own split is used")
    CachedTPESampler.__qualname__ = CachedTPESampler.__name__ = "CachedTPESampler"
    return CachedTPESampler


def _number(trial: Any) -> int:
    """Returns a frozen trial's number (what its ``number`` property returns)."""
    return trial._number  # type: ignore[no-any-return]


#: SHA-256 of the source of Optuna's ``TPESampler._sample`` and ``_split_trials`` that
#: ``_sample`` and ``_split`` above reproduce (Optuna 5.0)
_SOURCES = {
    "_sample": "412acdfded738af3dc23f7b7ed07349bb4ba396556a8adda419281688e8b7c2c",
    "_split_trials": "b0395b33672605d366b933906ace72cacf10eda217284ccc5704c11fd701c4bf",
}


def _written_against(base: type, tpe_module: Any) -> bool:
    """Returns whether Optuna's ``TPESampler._sample`` and ``_split_trials`` are the code that
    ``CachedTPESampler`` reproduces (their sources' hashes are in :data:`_SOURCES`)."""
    try:
        sources = {
            "_sample": inspect.getsource(base._sample),  # type: ignore[attr-defined]
            "_split_trials": inspect.getsource(tpe_module._split_trials),
        }
    except (OSError, TypeError):  # no source installed: assume it changed
        return False
    return all(
        hashlib.sha256(source.encode()).hexdigest() == _SOURCES[name]
        for name, source in sources.items()
    )
