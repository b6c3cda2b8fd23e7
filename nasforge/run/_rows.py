"""Returns the run record's rows as plain data and plain data as rows: JSON text without
NaN or infinity, checked decoding (the config's objective too), and the trials table read as
:class:`TrialRecord` with the statuses a reader sees.

:class:`RowReader` is the part of :class:`~nasforge.run.store.Store` that reads: the store
composes one over its connection, and every read of trials (query, statuses, decoding) runs
here, in one object, without calling back into the store. Private to
:mod:`nasforge.run.store`, whose docstring states the contract these steps keep (``plain
data``, ``validation``, and the trial statuses a reader sees); the
:class:`~nasforge.run.store.Store` methods of the same names are the way in.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasforge.errors import StoreError
from nasforge.run.lock import WriterLock
from nasforge.run.records import INTERRUPTED, TrialRecord

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


#: SQLite's ``typeof`` names of the Python types a scalar column may hold
_SQL_TYPES = {str: ("text",), int: ("integer",), (int, float): ("integer", "real")}

#: the WHERE clause that finds a trials row whose scalar column holds another type (what
#: :func:`check_scalars` refuses), checked in one scan rather than row by row in Python
_BAD_SCALARS = " OR ".join(
    [
        f"typeof({column}) NOT IN ('null', {', '.join(repr(t) for t in _SQL_TYPES[want])})"
        for column, want in _SCALARS.items()
    ]
    + ["status IS NULL"]
)


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


@functools.lru_cache(maxsize=64)
def _placement_cached(text: str) -> Any:
    return json.loads(text)


class RowReader:
    """Returns rows of one run's database, decoded and checked: meta values, the objective,
    notes, and trials with the statuses a reader sees.

    ``writer``: whether the store that owns this reader holds the run's writer lock (a writer
    sees what it stored; a reader of a run no writer works on sees ``interrupted``).

    Invariants: it only reads (``SELECT``/``PRAGMA``); every row it returns decoded or raised
    StoreError naming the run, the table and the row.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, writer: bool) -> None:
        self.path = path
        self.directory = path.parent
        self._conn = conn
        self.writer = writer
        self._trial_columns: set[str] | None = None

    # -- plain reads ---------------------------------------------------------------------------
    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Returns the rows of one read.

        Raises:
            StoreError: the database cannot be read (it is damaged).
        """
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: reading failed ({exc}); the file is damaged") from exc

    def columns(self) -> set[str]:
        """Returns the names of the trials table's columns (older records lack some)."""
        if self._trial_columns is None:
            self._trial_columns = {r[1] for r in self.query("PRAGMA table_info(trials)")}
        return self._trial_columns

    def forget_columns(self) -> None:
        """Drops the remembered columns (after a writer added one)."""
        self._trial_columns = None

    def meta(self, key: str, default: str | None = None) -> str | None:
        """Returns one meta value (text), or ``default``."""
        rows = self.query("SELECT value FROM meta WHERE key=?", (key,))
        return default if not rows else rows[0][0]

    def state(self) -> str:
        """Returns ``running`` (a writer holds the lock), ``finished``, ``failed`` or
        ``interrupted`` (the record says running but no writer holds it)."""
        state = self.meta("state", "running") or "running"
        if state == "running" and not self.writer and not WriterLock.held(self.directory):
            return "interrupted"
        return state

    # -- decoding ------------------------------------------------------------------------------
    def decode(self, text: Any, table: str, row: Any, want: type | tuple[type, ...]) -> Any:
        """Returns the JSON ``text`` of ``row`` in ``table``, decoded.

        Raises:
            StoreError: it does not decode, or is not of type ``want``.
        """
        try:
            value = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"{self.directory}: {table} row {row} does not decode ({exc}); the record is "
                "damaged there: restore a copy, or delete that row"
            ) from exc
        if not isinstance(value, want):
            raise StoreError(
                f"{self.directory}: {table} row {row} holds {type(value).__name__}, expected "
                f"{want}; the record is damaged there"
            )
        return value

    def decode_notes(self, text: str | None) -> list[dict[str, Any]]:
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
            raise StoreError(f"{self.directory}: meta 'notes' is not a JSON list of objects")
        return rows

    def objective(self, obj: Any) -> dict[str, Any]:
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
            and all(
                isinstance(v, list) and len(v) == 2 for v in obj.get("constraints", {}).values()
            )
            and (
                obj.get("second") is None
                or (isinstance(obj["second"], list) and len(obj["second"]) == 2)
            )
        )
        if not ok:
            raise StoreError(
                f"{self.directory}: the config's objective is missing or malformed "
                f"({obj!r:.200}); the record is damaged there"
            )
        return {"metric": obj["metric"], "mode": obj["mode"],
                "constraints": obj.get("constraints", {}), "second": obj.get("second")}  # fmt: skip

    # -- trials --------------------------------------------------------------------------------
    def trial_row(
        self, r: sqlite3.Row, light: bool = False, abandoned: bool = False, checked: bool = False
    ) -> TrialRecord:
        """Returns trials row ``r`` as a record (architecture and intermediates empty when
        ``light``; ``interrupted`` for a stored ``running`` when ``abandoned``; its scalar
        columns' types are taken as checked already when ``checked``).

        Raises:
            StoreError: a JSON column does not decode, or a column holds a value of another type
                (a text metric or duration, a BLOB error); the message names the row and column.
        """
        tid = r["id"]
        if not checked:
            check_scalars(self.directory, r)
        metrics = r["metrics"]
        if metrics is not None:
            metrics = self.decode(metrics, "trials", tid, dict)
            _numbers(self.directory, tid, "metrics", metrics)
        where = r["placement"] if "placement" in r.keys() else None
        intermediates: list[Any] = []
        if not light:
            intermediates = self.decode(r["intermediates"], "trials", tid, list)
            for step in intermediates:
                if not isinstance(step, dict):
                    raise _damaged(self.directory, tid, "intermediates", step, "a list of objects")
                _numbers(self.directory, tid, "intermediates", step)
        status = r["status"]
        return TrialRecord(
            id=tid,
            arch_id=r["arch_id"],
            arch={} if light else self.decode(r["arch"], "trials", tid, dict),
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
            placement=None if where is None else self._placement(where, tid),
        )

    def _placement(self, text: Any, tid: Any) -> dict[str, Any]:
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
            value = self.decode(text, "trials", tid, dict)  # raises, naming the row
        assert isinstance(value, dict)
        return {k: list(v) if type(v) is list else v for k, v in value.items()}

    def abandoned(self, statuses: Any) -> bool:
        """Returns whether the trials stored ``running`` among ``statuses`` run nowhere: this
        is a reader and no writer works on the run (it was interrupted, or it finished or
        failed). Asked only when one is there; a lock that cannot be probed (a read-only copy
        of a run) leaves them as stored."""
        if self.writer or "running" not in statuses:
            return False
        try:
            return self.state() != "running"
        except OSError:
            return False

    def trials(self, status: str | None, light: bool) -> list[TrialRecord]:
        """Returns the trials in id order (see :meth:`Store.trials`).

        Raises:
            StoreError: a row does not decode.
        """
        cols = "id, arch_id, status, metrics, error, started, finished, duration, checkpoint, "
        cols += "cached_from, evaluation" + ("" if light else ", arch, intermediates")
        cols += ", placement" if "placement" in self.columns() else ""
        if status is None:
            rows = self.query(f"SELECT {cols} FROM trials ORDER BY id")
            gone = self.abandoned({r["status"] for r in rows})
            bad = self.query(f"SELECT 1 FROM trials WHERE {_BAD_SCALARS} LIMIT 1")
        else:
            if status in ("running", INTERRUPTED) and self.abandoned({"running"}):
                status = "" if status == "running" else "running"
            elif status == INTERRUPTED:  # a writer works on it: no trial is interrupted
                status = ""
            rows = self.query(f"SELECT {cols} FROM trials WHERE status=? ORDER BY id", (status,))
            gone = status == "running" and self.abandoned({"running"})
            where = f"status=? AND ({_BAD_SCALARS})"
            bad = self.query(f"SELECT 1 FROM trials WHERE {where} LIMIT 1", (status,))
        # one scan in SQLite finds a damaged scalar; only then is every row checked in Python,
        # which names the first bad one
        return [self.trial_row(r, light, gone, checked=not bad) for r in rows]

    def trial_metrics(self) -> list[TrialRecord]:
        """Returns the trials in id order with their id, arch id, status and metrics only (see
        :meth:`Store.trial_metrics`).

        Raises:
            StoreError: a row does not decode.
        """
        if self.query(f"SELECT 1 FROM trials WHERE {_BAD_SCALARS} LIMIT 1"):
            return self.trials(None, light=True)  # checks every row, naming the first bad one
        rows = self.query("SELECT id, arch_id, status, metrics FROM trials ORDER BY id")
        gone = self.abandoned({r[2] for r in rows})
        out = []
        for tid, arch_id, status, text in rows:
            metrics = None
            if text is not None:
                metrics = _numbers(
                    self.directory, tid, "metrics", self.decode(text, "trials", tid, dict)
                )
            if gone and status == "running":
                status = INTERRUPTED
            out.append(TrialRecord(id=tid, arch_id=arch_id, arch={}, status=status,
                                   metrics=metrics))  # fmt: skip
        return out

    def trial(self, trial_id: int) -> TrialRecord:
        """Returns one trial (see :meth:`Store.trial`).

        Raises:
            StoreError: no trial has that id, or it does not decode.
        """
        rows = self.query("SELECT * FROM trials WHERE id=?", (trial_id,))
        if not rows:
            raise StoreError(f"no trial {trial_id} in {self.directory}")
        return self.trial_row(rows[0], abandoned=self.abandoned({rows[0]["status"]}))

    def counts(self) -> dict[str, int]:
        """Returns the number of trials per status (see :meth:`Store.counts`)."""
        rows = self.query("SELECT status, COUNT(*) FROM trials GROUP BY status")
        gone = self.abandoned({r[0] for r in rows})
        return {INTERRUPTED if gone and r[0] == "running" else r[0]: int(r[1]) for r in rows}
