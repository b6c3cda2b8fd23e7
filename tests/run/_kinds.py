"""A minimal kind of run for tests of the shared floor: subclasses give ``kind`` and
``_execute`` (and, to steer it, ``controls``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nasforge.run.runner import BaseRunner, Objective


class MinimalRun(BaseRunner):
    """Returns a run with no settings of its own, recording what ``_execute`` does."""

    kind = "test-minimal"

    def __init__(self, directory: Path) -> None:
        super().__init__(Objective("accuracy", "max"), directory)

    @classmethod
    def from_section(cls, settings: Any, *, base: Any = None, **overrides: Any) -> MinimalRun:
        return cls(settings["directory"])

    def section(self) -> dict:
        return {}

    def _execute(self, store: Any, resume: bool) -> None:
        raise NotImplementedError
