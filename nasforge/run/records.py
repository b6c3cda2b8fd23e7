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
