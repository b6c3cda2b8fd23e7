# nasforge 0.1's own format-1 store, verbatim from `git show 7c285fe^:nasforge/engine/store.py`:
# tests/run/test_migrate.py writes real format-1 records with it. Do not edit it to fit 0.2.
"""The experiment store: one SQLite database per experiment directory, plain data only.

Contracts
    format      table ``meta`` names the format (``nasforge-experiment``) and its version; a
                database without it, of another format or version, or unreadable, raises
                StoreError and is never written to
    durability  WAL journal; every state change is one transaction, so ``kill -9`` at any
                moment loses no committed trial
    plain data  architectures, metrics and configuration are JSON text; weights live beside the
                database as tensor files (never pickled Python objects), so a store stays
                readable across library upgrades
    history     table ``events`` lists every ask and tell in the order they happened; replaying
                it rebuilds a strategy exactly (see ``experiment.py``)
    records     table ``records`` (created on first use, so older stores stay valid) holds
                append-only rows of JSON data by kind, for runs that are not trial lists (e.g.
                a supernet's per-epoch progress); each row is committed in one transaction

Trial statuses: ``running`` (asked, in flight), ``done``, ``failed``, ``early_stopped``,
``cached`` (the same architecture was already evaluated; its metrics are copied).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nasforge.errors import StoreError

__all__ = [
    "Store",
    "TrialRecord",
    "check_compatible",
    "read_trials",
    "FORMAT",
    "FORMAT_VERSION",
    "DB_NAME",
    "STATUSES",
]

FORMAT = "nasforge-experiment"
FORMAT_VERSION = 1
DB_NAME = "experiment.db"
STATUSES = ("running", "done", "failed", "early_stopped", "cached")
FINISHED = ("done", "failed", "early_stopped", "cached")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY,
    arch_id TEXT NOT NULL,
    arch TEXT NOT NULL,
    status TEXT NOT NULL,
    metrics TEXT,
    intermediates TEXT NOT NULL DEFAULT '[]',
    error TEXT,
    started REAL,
    finished REAL,
    duration REAL,
    checkpoint TEXT,
    cached_from INTEGER
);
CREATE INDEX trials_arch ON trials (arch_id);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
                     trial INTEGER NOT NULL);
"""


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
                f"{directory}: the stored experiment has a different {key} "
                f"({stored.get(key)!r:.200}) than this one ({current.get(key)!r:.200}); resume "
                "with the same settings, or run in a new directory"
            )


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

    def to_dict(self) -> dict[str, Any]:
        """Returns the record as a JSON-able dict."""
        return dict(self.__dict__)


class Store:
    """Returns and records an experiment's configuration and trials in ``<dir>/experiment.db``.

    Use :meth:`create` for a new experiment and :meth:`open` for an existing one.

    Invariants: trial ids are 1, 2, 3, ... in ask order; events are in happening order; the
    database is only written after its format and version were checked.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    # -- opening -------------------------------------------------------------------------------
    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=30)  # implicit transactions; `with` commits
        conn.row_factory = sqlite3.Row
        return conn

    @classmethod
    def create(cls, directory: str | Path, config: Mapping[str, Any]) -> Store:
        """Returns a new store in ``directory`` holding ``config`` (JSON-able).

        Raises:
            StoreError: the directory already holds an experiment (resume it, or pick a new
                directory), or ``config`` is not JSON-serialisable.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / DB_NAME
        if path.exists():
            raise StoreError(
                f"{path} already exists; resume it with `nasforge resume {directory}` or "
                "choose an empty directory (nothing was overwritten)"
            )
        try:
            config_json = json.dumps(config, sort_keys=True)
        except TypeError as exc:
            raise StoreError(f"the experiment config must be JSON-able: {exc}") from exc
        conn = cls._connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        with conn:
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("format", FORMAT),
                    ("version", str(FORMAT_VERSION)),
                    ("created", repr(time.time())),
                    ("config", config_json),
                    ("elapsed", "0.0"),
                ],
            )
        return cls(path, conn)

    @classmethod
    def open(cls, directory: str | Path) -> Store:
        """Returns the store of an existing experiment directory.

        Raises:
            StoreError: no database there; the file is not SQLite or is corrupted; it was
                written by something else or by an incompatible format version.
        """
        directory = Path(directory)
        path = directory / DB_NAME if directory.is_dir() or not directory.exists() else directory
        if not path.exists():
            raise StoreError(f"no experiment database at {path}; start one with `nasforge run`")
        conn = cls._connect(path)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                raise StoreError(f"{path} is corrupted (sqlite quick_check: {ok}); restore a copy")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if not {"meta", "trials", "events"} <= tables:
                raise StoreError(
                    f"{path} is an SQLite database but not a nasforge experiment (tables "
                    f"{sorted(tables)}); point to the directory `nasforge run` created"
                )
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path} is not a readable experiment database: {exc}") from exc
        except StoreError:
            conn.close()
            raise
        if meta.get("format") != FORMAT:
            conn.close()
            raise StoreError(f"{path} has format {meta.get('format')!r}, expected {FORMAT!r}")
        if meta.get("version") != str(FORMAT_VERSION):
            conn.close()
            raise StoreError(
                f"{path} has store format version {meta.get('version')!r}; this nasforge reads "
                f"version {FORMAT_VERSION}; open it with the nasforge that wrote it"
            )
        conn.execute("PRAGMA journal_mode=WAL")
        return cls(path, conn)

    def close(self) -> None:
        """Closes the database connection."""
        self._conn.close()

    @property
    def directory(self) -> Path:
        """Returns the experiment directory."""
        return self.path.parent

    # -- meta ----------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Returns the stored experiment configuration."""
        row = self._conn.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        return json.loads(row[0])

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """Returns one meta value (text), or ``default``."""
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        """Sets one meta value (text)."""
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- trials --------------------------------------------------------------------------------
    def add_trial(self, arch_id: str, arch: Mapping[str, Any]) -> int:
        """Returns the id of a new ``running`` trial; records its ask event atomically."""
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO trials (arch_id, arch, status, started) VALUES (?, ?, 'running', ?)",
                (arch_id, json.dumps(dict(arch), sort_keys=True), time.time()),
            )
            tid = int(cur.lastrowid)
            self._conn.execute("INSERT INTO events (kind, trial) VALUES ('ask', ?)", (tid,))
        return tid

    def restart_trial(self, trial_id: int) -> None:
        """Marks an in-flight trial as started again (after a resume)."""
        with self._conn:
            self._conn.execute(
                "UPDATE trials SET started=?, intermediates='[]', error=NULL WHERE id=?",
                (time.time(), trial_id),
            )

    def finish_trial(
        self,
        trial_id: int,
        status: str,
        metrics: Mapping[str, float] | None = None,
        intermediates: list[dict[str, float]] | None = None,
        error: str | None = None,
        duration: float | None = None,
        checkpoint: str | None = None,
        cached_from: int | None = None,
    ) -> None:
        """Records the outcome of a trial and its tell event in one transaction."""
        assert status in FINISHED, status
        now = time.time()
        with self._conn:
            self._conn.execute(
                "UPDATE trials SET status=?, metrics=?, intermediates=?, error=?, finished=?, "
                "duration=?, checkpoint=?, cached_from=? WHERE id=?",
                (
                    status,
                    None
                    if metrics is None
                    else json.dumps({k: _finite_or_none(v) for k, v in metrics.items()}),
                    json.dumps(intermediates or []),
                    error,
                    now,
                    duration,
                    checkpoint,
                    cached_from,
                    trial_id,
                ),
            )
            self._conn.execute("INSERT INTO events (kind, trial) VALUES ('tell', ?)", (trial_id,))

    def _row(self, r: sqlite3.Row) -> TrialRecord:
        return TrialRecord(
            id=r["id"],
            arch_id=r["arch_id"],
            arch=json.loads(r["arch"]),
            status=r["status"],
            metrics=None if r["metrics"] is None else json.loads(r["metrics"]),
            intermediates=json.loads(r["intermediates"]),
            error=r["error"],
            started=r["started"],
            finished=r["finished"],
            duration=r["duration"],
            checkpoint=r["checkpoint"],
            cached_from=r["cached_from"],
        )

    def trials(self, status: str | None = None) -> list[TrialRecord]:
        """Returns the trials in id order, optionally only those with ``status``."""
        if status is None:
            rows = self._conn.execute("SELECT * FROM trials ORDER BY id").fetchall()
        else:
            rows = self._conn.execute(
                "SELECT * FROM trials WHERE status=? ORDER BY id", (status,)
            ).fetchall()
        return [self._row(r) for r in rows]

    def trial(self, trial_id: int) -> TrialRecord:
        """Returns one trial.

        Raises:
            StoreError: no trial has that id.
        """
        r = self._conn.execute("SELECT * FROM trials WHERE id=?", (trial_id,)).fetchone()
        if r is None:
            raise StoreError(f"no trial {trial_id} in {self.path}")
        return self._row(r)

    def events(self) -> list[tuple[str, int]]:
        """Returns every (kind, trial id) event in happening order."""
        return [
            (r[0], r[1]) for r in self._conn.execute("SELECT kind, trial FROM events ORDER BY seq")
        ]

    # -- records: append-only plain-data rows by kind ------------------------------------------
    def add_record(self, kind: str, data: Mapping[str, Any]) -> int:
        """Returns the sequence number of a new row ``data`` (JSON-able) of ``kind``, committed
        in one transaction.

        Raises:
            StoreError: ``data`` is not JSON-serialisable.
        """
        try:
            text = json.dumps({k: _finite_or_none(v) for k, v in data.items()}, sort_keys=True)
        except TypeError as exc:
            raise StoreError(f"a {kind!r} record must be JSON-able: {exc}") from exc
        with self._conn:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                "kind TEXT NOT NULL, data TEXT NOT NULL, time REAL NOT NULL)"
            )
            cur = self._conn.execute(
                "INSERT INTO records (kind, data, time) VALUES (?, ?, ?)", (kind, text, time.time())
            )
        return int(cur.lastrowid)

    def records(self, kind: str) -> list[dict[str, Any]]:
        """Returns the rows of ``kind`` in the order they were added (empty if none)."""
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master")}
        if "records" not in tables:
            return []
        rows = self._conn.execute(
            "SELECT data FROM records WHERE kind=? ORDER BY seq", (kind,)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]


def read_trials(directory: str | Path) -> tuple[dict[str, Any], list[TrialRecord]]:
    """Returns (config, trials) of the experiment in ``directory``, opened and closed at once.

    Raises:
        StoreError: see :meth:`Store.open`.
    """
    store = Store.open(directory)
    try:
        return store.config(), store.trials()
    finally:
        store.close()
