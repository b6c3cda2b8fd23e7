"""The typed records of a run, as plain data: a trial, its statuses, how it was measured.

Pure (no torch, no database): the store returns these, and strategies, status tables, plots
and the dashboard read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nasforge.errors import StoreError

__all__ = [
    "TrialRecord",
    "TrialOutcome",
    "STATUSES",
    "FINISHED",
    "INTERRUPTED",
    "EVALUATIONS",
    "check_compatible",
]

#: ``running`` (asked, in flight), then one of the finished ones; ``cached``: the same
#: architecture was already evaluated, its metrics are copied; ``pruned``: a rung rule
#: (successive halving, ASHA, Hyperband) stopped it, its metrics are its last report's;
#: ``interrupted``: what a reader is shown for a trial stored ``running`` when no writer
#: works on the run (never stored)
STATUSES = (
    "running",
    "done",
    "failed",
    "early_stopped",
    "cached",
    "pruned",
    "interrupted",
    "cancelled",
)
#: a ``cancelled`` trial was stopped by ``nasforge stop`` (docs/engine.md), not by its code
FINISHED = ("done", "failed", "early_stopped", "cached", "pruned", "cancelled")
INTERRUPTED = "interrupted"
#: how a trial's metrics were measured: trained standalone, with weights inherited from a
#: supernet, or predicted by a model
EVALUATIONS = ("trained", "inherited", "predicted")


@dataclass
class TrialRecord:
    """One trial as stored: plain data. ``metrics`` is None unless the trial finished well."""

    id: int
    arch_id: str
    arch: dict[str, Any]
    status: str
    metrics: dict[str, float] | None = None
    intermediates: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None
    started: float | None = None
    finished: float | None = None
    duration: float | None = None
    checkpoint: str | None = None
    cached_from: int | None = None
    evaluation: str = "trained"
    #: where it ran: ``{"node": host or Ray node address, "devices": [GPU ids], "gpus": share,
    #: "node_id": Ray node id}``
    #: (see :mod:`nasforge.runtime.devices`); None when not recorded
    placement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns the record as a JSON-able dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class TrialOutcome:
    """Returns nothing; how one trial ended, as a writer hands it to
    :meth:`Store.finish_trial <nasforge.run.store.Store.finish_trial>`: its status (one of
    :data:`FINISHED`), final ``metrics`` (None unless it finished well), the values it reported
    on the way, its error text, seconds, weight file (relative to the run directory), the
    earlier trial a ``cached`` one copies, how it was measured (:data:`EVALUATIONS`) and where
    it ran (``placement``).

    Invariants: ``status`` is a finished status and ``evaluation`` a known one (checked when
    it is built).
    """

    status: str
    metrics: Mapping[str, float] | None = None
    intermediates: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None
    duration: float | None = None
    checkpoint: str | None = None
    cached_from: int | None = None
    evaluation: str = "trained"
    placement: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        assert self.status in FINISHED, self.status
        assert self.evaluation in EVALUATIONS, self.evaluation


def check_compatible(
    directory: Path, stored: Mapping[str, Any], current: Mapping[str, Any], keys: tuple[str, ...]
) -> None:
    """Returns None if the stored configuration agrees with the current one on ``keys``.

    Raises:
        StoreError: a key differs (the message shows both values and the fix).
    """
    for key in keys:
        if stored.get(key) != current.get(key):
            raise StoreError(
                f"{directory}: the stored run has a different {key} "
                f"({stored.get(key)!r:.200}) than this one ({current.get(key)!r:.200}); resume "
                "with the same settings, or run in a new directory"
            )
