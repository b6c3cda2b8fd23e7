"""Numeric series found in a run's progress rows and artifact metadata, whatever wrote them.

A progress row is a mapping of plain data. This module sorts its values by shape, never by
the kind of run:

========================  =====================================================================
value in a row            becomes
========================  =====================================================================
number                    one line ``key`` over steps (losses, accuracies, seconds), unless
                          it only repeats the step number
mapping of numbers        one chart ``key`` with a line per inner name (e.g. a hit rate per
                          stage, an accuracy per probe)
list of numbers           one chart ``key`` with a line per position
mapping of number lists   one chart per inner name, a line per position: e.g. architecture
                          weights (the softmax of alpha per decision, per epoch)
``arch`` mapping          the decisions over steps (the current architecture, its argmax)
anything else             left out (text such as a checkpoint path)
========================  =====================================================================

Artifact metadata is read the same way, as one row per artifact: its numbers form a table and
its lists of numbers a bar chart per position (e.g. a cache hit rate per pipeline stage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.run.store import Store

__all__ = ["progress_series", "artifact_series", "is_number"]

#: a chart with more lines than this shows only the first ones
MAX_LINES = 32


def is_number(v: Any) -> bool:
    """Returns whether ``v`` is a plain number (a bool is not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numbers(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(is_number(x) or x is None for x in v)


def progress_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Returns the series of the progress rows: ``steps``; ``scalars`` (key -> values, None
    where a row lacks it); ``groups`` (chart title -> line name -> values); ``decisions``
    (step, arch) pairs from rows that carry an ``arch`` mapping.

    Invariants: every value list has one entry per row, in step order.
    """
    n = len(rows)
    steps = [r.get("step", i + 1) for i, r in enumerate(rows)]
    scalars: dict[str, list[Any]] = {}
    groups: dict[str, dict[str, list[Any]]] = {}
    decisions: list[tuple[Any, dict[str, Any]]] = []

    def put(title: str, line: str, i: int, v: Any) -> None:
        lines = groups.setdefault(title, {})
        if line in lines or len(lines) < MAX_LINES:
            lines.setdefault(line, [None] * n)[i] = v

    for i, row in enumerate(rows):
        for k, v in row.items():
            if k == "step":
                continue
            if k == "arch" and isinstance(v, Mapping):
                decisions.append((steps[i], dict(v)))
            elif is_number(v):
                scalars.setdefault(k, [None] * n)[i] = v
            elif _numbers(v):
                for j, x in enumerate(v):
                    put(k, str(j), i, x)
            elif isinstance(v, Mapping) and v:
                if all(is_number(x) or x is None for x in v.values()):
                    for name, x in v.items():
                        put(k, str(name), i, x)
                elif all(_numbers(x) for x in v.values()):
                    for name, xs in v.items():
                        for j, x in enumerate(xs):
                            put(f"{k}: {name}", str(j), i, x)
    # a counter that only repeats the step (an epoch number per epoch) draws nothing new
    scalars = {k: v for k, v in scalars.items() if v != steps or n < 2}
    return {"steps": steps, "scalars": scalars, "groups": groups, "decisions": decisions}


def artifact_series(store: Store) -> list[dict[str, Any]]:
    """Returns the run's artifacts: ``name``, ``kind``, ``path`` (relative to the run),
    ``numbers`` (metadata name -> number) and ``lists`` (metadata name -> numbers)."""
    out = []
    for name, a in store.artifacts().items():
        meta = a["meta"]
        try:
            rel = str(a["path"].relative_to(store.directory))
        except ValueError:
            rel = str(a["path"])
        out.append(
            {
                "name": name,
                "kind": a["kind"],
                "path": rel,
                "numbers": {k: v for k, v in meta.items() if is_number(v)},
                "lists": {k: v for k, v in meta.items() if _numbers(v)},
            }
        )
    return out
