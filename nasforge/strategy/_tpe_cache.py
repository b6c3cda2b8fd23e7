"""Optuna's ``TPESampler`` with its history's conversion cached: the same proposals, each ask
still linear in the history but with a smaller constant: no Python conversion of every
parameter of every trial. Pure (no torch); Optuna
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

Only the conversion hook is overridden: the split into "below" and "above" and the rest of
an ask are Optuna's own code, untouched (no part of it is reproduced here, so a new Optuna
changes nothing but what it changes itself). Tests compare the proposals with Optuna's own
sampler and ``study.optimize`` (tests/strategy/test_tpe.py).
"""

from __future__ import annotations

import functools
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
    """Returns the subclass of Optuna's ``TPESampler`` (``base``) that caches each finished
    trial's converted row."""
    import numpy as np

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

        def _caches_for(self, study: Any) -> None:
            """Empties the caches when ``study`` is not the one they were filled from."""
            key = (study._storage, study._study_id)
            if self._cached_for is None or (
                self._cached_for[0] is not key[0] or self._cached_for[1] != key[1]
            ):
                self._cached_for, self._rows = key, {}

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

    CachedTPESampler.__qualname__ = CachedTPESampler.__name__ = "CachedTPESampler"
    return CachedTPESampler
