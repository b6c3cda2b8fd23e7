"""The one exception hierarchy of nasforge.

Every error the library raises on purpose derives from :class:`NasforgeError`, mixed with the
builtin it refines, so that ``except ValueError`` in user code keeps working. A message about
an unknown name suggests the closest known ones through :func:`did_you_mean`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = [
    "NasforgeError",
    "SpaceError",
    "ArchitectureError",
    "ConfigError",
    "StoreError",
    "TrialError",
    "ScheduleError",
    "WorkerError",
    "DivergenceError",
    "LockError",
    "StopRequested",
    "ExportError",
    "did_you_mean",
]


class NasforgeError(Exception):
    """Base class of every error raised by nasforge."""


class SpaceError(NasforgeError, ValueError):
    """A model space is ill-formed: bad candidates, conflicting tied labels, no decisions."""


class ArchitectureError(NasforgeError, ValueError):
    """An architecture does not fit its space: unknown or missing label, value not a candidate,
    or a value whose arithmetic yields a model that cannot be built."""


class ConfigError(NasforgeError, ValueError):
    """An experiment, strategy or evaluator is configured wrongly."""


class StoreError(NasforgeError, RuntimeError):
    """An experiment store is missing, corrupted, or was written by an incompatible run."""


class TrialError(NasforgeError, RuntimeError):
    """A trial failed: raised, returned no or non-finite metrics, timed out, or its worker died."""


class ScheduleError(NasforgeError, ValueError):
    """A pipeline schedule cannot be built for the given subnets and stages."""


class WorkerError(NasforgeError, RuntimeError):
    """A worker process of a multi-process run failed; carries the worker's traceback."""


class DivergenceError(NasforgeError, FloatingPointError):
    """A training loss became NaN or infinite; the run stops and exports nothing."""

    #: what the raiser knows, for the run record's event (None: not known)
    step: int | None = None
    subnet: list[int] | None = None
    loss: float | None = None
    stage: int | None = None


class ExportError(NasforgeError, RuntimeError):
    """A model cannot be written in a deployment format (ONNX, TorchScript, an exported
    program): an operator the format lacks, or an export whose outputs differ from the
    model's beyond the tolerance."""


class LockError(NasforgeError, RuntimeError):
    """A run directory is being written by another process (one writer per run directory)."""


class StopRequested(NasforgeError):
    """A run was asked to stop (``nasforge stop``, the dashboard) and has reached a boundary
    where everything it did is saved. Raised inside a run's loop; its runner records the run
    ``stopped`` (resumable) and returns, so it reaches a caller only from the loop functions
    themselves (``nasforge.oneshot.search(..., boundary=...)`` and the like)."""


def did_you_mean(name: str, names: Sequence[str], n: int = 3) -> str:
    """Returns ``"did you mean 'a' or 'b'?"`` for the ``names`` closest to ``name`` (difflib,
    cutoff 0.6), or ``""`` when none is close; the one way nasforge suggests a name."""
    close = difflib.get_close_matches(str(name), list(names), n=n, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
