"""Returns the run record's rows as plain data and plain data as rows: JSON text without
NaN or infinity, checked decoding (the config's objective too), and the trials table read as
:class:`TrialRecord` with the statuses a reader sees.

Private to :mod:`nasforge.run.store`, whose docstring states the contract these steps keep
(``plain data``, ``validation``, and the trial statuses a reader sees); the
:class:`~nasforge.run.store.Store` methods of the same names are the way in.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import StoreError
from nasforge.run.records import INTERRUPTED, TrialRecord

if TYPE_CHECKING:
    from nasforge.run.store import Store

__all__: list[str] = []


def finite_or_none(x: Any) -> Any:
    """Returns ``x`` with every non-finite float in it (nested too) replaced by None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_or_none(v) for v in x]
    return x


def dumps(what: str, data: Any) -> str:
    """Returns ``data`` as JSON text (keys sorted, NaN and infinity as null).

    Raises:
        StoreError: ``data`` (called ``what`` in the message) is not plain data.
    """
    try:
        return json.dumps(finite_or_none(data), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be JSON-able plain data: {exc}") from exc


def decode(directory: Path, text: Any, table: str, row: Any, want: type | tuple[type, ...]) -> Any:
    """Returns the JSON ``text`` of ``row`` in ``table`` of the run in ``directory``, decoded.

    Raises:
        StoreError: it does not decode, or is not of type ``want``.
    """
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{directory}: {table} row {row} does not decode ({exc}); the record is "
            "damaged there: restore a copy, or delete that row"
        ) from exc
    if not isinstance(value, want):
        raise StoreError(
            f"{directory}: {table} row {row} holds {type(value).__name__}, expected "
            f"{want}; the record is damaged there"
        )
    return value


def decode_notes(directory: Path, text: str | None) -> list[dict[str, Any]]:
    """Returns the notes in meta text ``text`` (none when it is empty or absent).

    Raises:
        StoreError: it is not a JSON list of objects.
    """
    if not text:
        return []
    try:
        rows = json.loads(text)
    except ValueError:
        rows = None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise StoreError(f"{directory}: meta 'notes' is not a JSON list of objects")
    return rows


def objective(directory: Path, obj: Any) -> dict[str, Any]:
    """Returns the config's objective ``obj`` checked and complete: ``metric``, ``mode``,
    ``constraints``, ``second``.

    Raises:
        StoreError: it is missing or malformed.
    """
    ok = (
        isinstance(obj, dict)
        and isinstance(obj.get("metric"), str)
        and obj.get("mode") in ("max", "min")
        and isinstance(obj.get("constraints", {}), dict)
        and all(isinstance(v, list) and len(v) == 2 for v in obj.get("constraints", {}).values())
        and (
            obj.get("second") is None
            or (isinstance(obj["second"], list) and len(obj["second"]) == 2)
        )
    )
    if not ok:
        raise StoreError(
            f"{directory}: the config's objective is missing or malformed ({obj!r:.200}); "
            "the record is damaged there"
        )
    return {"metric": obj["metric"], "mode": obj["mode"],
            "constraints": obj.get("constraints", {}), "second": obj.get("second")}  # fmt: skip


#: trials columns read as scalars -> the types a reader accepts besides NULL (SQLite keeps
#: whatever type was written: a damaged or migrated record can hold text where a number
#: belongs, or a BLOB)
_SCALARS: dict[str, type | tuple[type, ...]] = {
    "arch_id": str,
    "status": str,
    "error": str,
    "started": (int, float),
    "finished": (int, float),
    "duration": (int, float),
    "checkpoint": str,
    "cached_from": int,
    "evaluation": str,
}


def _damaged(directory: Path, tid: Any, column: str, value: Any, expected: str) -> StoreError:
    return StoreError(
        f"{directory}: trials row {tid} column {column} holds {type(value).__name__} "
        f"{value!r:.60}, expected {expected}; the record is damaged there: restore a copy, "
        "or delete that row"
    )


def _numbers(directory: Path, tid: Any, column: str, values: dict[str, Any]) -> dict[str, Any]:
    """Returns ``values`` (a metrics mapping) when every value is a number or null.

    Raises:
        StoreError: one is not (a text metric).
    """
    for k, v in values.items():
        if v is not None and (type(v) is bool or not isinstance(v, (int, float))):
            raise _damaged(directory, tid, column, v, f"numbers (metric {k!r})")
    return values


def check_scalars(directory: Path, r: Any) -> None:
    """Returns None when every scalar column of trials row ``r`` (a mapping) holds its type.

    Raises:
        StoreError: one holds another (text in a number column, a BLOB), naming row and column.
    """
    for column, want in _SCALARS.items():
        v = r[column]
        if v is not None and (type(v) is bool or not isinstance(v, want)):
            names = want.__name__ if isinstance(want, type) else "number"
            raise _damaged(directory, r["id"], column, v, f"{names} or NULL")
    if r["status"] is None:
        raise _damaged(directory, r["id"], "status", None, "a status")


def trial(
    directory: Path, r: sqlite3.Row, light: bool = False, abandoned: bool = False
) -> TrialRecord:
    """Returns trials row ``r`` as a record (architecture and intermediates empty when
    ``light``; ``interrupted`` for a stored ``running`` when ``abandoned``).

    Raises:
        StoreError: a JSON column does not decode, or a column holds a value of another type
            (a text metric or duration, a BLOB error); the message names the row and column.
    """
    tid = r["id"]
    check_scalars(directory, r)
    metrics = r["metrics"]
    if metrics is not None:
        metrics = decode(directory, metrics, "trials", tid, dict)
        _numbers(directory, tid, "metrics", metrics)
    try:
        where = r["placement"]
    except IndexError:  # a query that did not ask for it
        where = None
    intermediates: list[Any] = []
    if not light:
        intermediates = decode(directory, r["intermediates"], "trials", tid, list)
        for step in intermediates:
            if not isinstance(step, dict):
                raise _damaged(directory, tid, "intermediates", step, "a list of objects")
            _numbers(directory, tid, "intermediates", step)
    status = r["status"]
    return TrialRecord(
        id=tid,
        arch_id=r["arch_id"],
        arch={} if light else decode(directory, r["arch"], "trials", tid, dict),
        status=INTERRUPTED if abandoned and status == "running" else status,
        metrics=metrics,
        intermediates=intermediates,
        error=r["error"],
        started=r["started"],
        finished=r["finished"],
        duration=r["duration"],
        checkpoint=r["checkpoint"],
        cached_from=r["cached_from"],
        evaluation=r["evaluation"],
        placement=None if where is None else _placement(directory, where, tid),
    )


@functools.lru_cache(maxsize=64)
def _placement_cached(text: str) -> Any:
    return json.loads(text)


def _placement(directory: Path, text: Any, tid: Any) -> dict[str, Any]:
    """Returns the placement JSON ``text`` of trial ``tid`` decoded (a fresh copy: a run's
    trials share a few placements, decoded once each).

    Raises:
        StoreError: it does not decode to an object.
    """
    try:
        value = _placement_cached(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        value = decode(directory, text, "trials", tid, dict)  # raises, naming the row
    assert isinstance(value, dict)
    return {k: list(v) if type(v) is list else v for k, v in value.items()}


def abandoned(store: Store, statuses: Any) -> bool:
    """Returns whether the trials stored ``running`` among ``statuses`` run nowhere: ``store``
    is a reader and no writer works on the run (it was interrupted, or it finished or failed).
    Asked only when one is there; a lock that cannot be probed (a read-only copy of a run)
    leaves them as stored."""
    if not store.readonly or "running" not in statuses:
        return False
    try:
        return store.state() != "running"
    except OSError:
        return False


def trials(store: Store, status: str | None, light: bool) -> list[TrialRecord]:
    """Returns the trials of ``store`` in id order (see :meth:`Store.trials`).

    Raises:
        StoreError: a row does not decode.
    """
    cols = "id, arch_id, status, metrics, error, started, finished, duration, checkpoint, "
    cols += "cached_from, evaluation" + ("" if light else ", arch, intermediates")
    cols += ", placement" if "placement" in store._columns() else ""
    if status is None:
        rows = store._query(f"SELECT {cols} FROM trials ORDER BY id")
        gone = abandoned(store, {r["status"] for r in rows})
    else:
        if status in ("running", INTERRUPTED) and abandoned(store, {"running"}):
            status = "" if status == "running" else "running"
        elif status == INTERRUPTED:  # a writer works on it: no trial is interrupted
            status = ""
        rows = store._query(f"SELECT {cols} FROM trials WHERE status=? ORDER BY id", (status,))
        gone = status == "running" and abandoned(store, {"running"})
    return [store._row(r, light, gone) for r in rows]


def counts(store: Store) -> dict[str, int]:
    """Returns the number of trials of ``store`` per status (see :meth:`Store.counts`)."""
    rows = store._query("SELECT status, COUNT(*) FROM trials GROUP BY status")
    gone = abandoned(store, {r[0] for r in rows})
    return {INTERRUPTED if gone and r[0] == "running" else r[0]: int(r[1]) for r in rows}
