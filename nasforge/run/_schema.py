"""Returns connections to run records and says whether they can be opened: the format names,
the SQL schema, the format and version checks, and the migrations within one format version.

Private to :mod:`nasforge.run.store`, whose docstring states the contract these steps keep
(``format``, ``durability`` and the tables); import the names from there.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path

from nasforge._version import __version__
from nasforge.errors import StoreError

__all__: list[str] = []

FORMAT = "nasforge-run"
FORMAT_VERSION = 2
DB_NAME = "run.db"
OLD_DB_NAME = "experiment.db"  # format 1 (nasforge 0.1): refused; `nasforge migrate` copies it

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE progress (step INTEGER PRIMARY KEY, time REAL NOT NULL, data TEXT NOT NULL);
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
    cached_from INTEGER,
    evaluation TEXT NOT NULL DEFAULT 'trained',
    placement TEXT
);
CREATE INDEX trials_arch ON trials (arch_id);
CREATE INDEX trials_status ON trials (status);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
                     trial INTEGER NOT NULL);
CREATE TABLE artifacts (name TEXT PRIMARY KEY, path TEXT NOT NULL, kind TEXT NOT NULL,
                        time REAL NOT NULL, meta TEXT NOT NULL DEFAULT '{}');
"""
TABLES = {"meta", "progress", "trials", "events", "artifacts"}


def version_problem(meta: Mapping[str, str]) -> str:
    """Returns why a record with this ``meta`` cannot be opened by this nasforge (its store
    format version is newer, older or not a number), or '' when it can."""
    version = meta.get("version")
    writer = meta.get("nasforge_version")
    by = f"nasforge {writer}" if writer else "a nasforge before 0.2.0"
    try:
        number = int(version or "")
    except ValueError:
        return (
            f"has store format version {version!r}, not a number; this nasforge {__version__} "
            f"reads version {FORMAT_VERSION}; the record is damaged or not nasforge's"
        )
    if number > FORMAT_VERSION:
        return (
            f"was written by {by} in store format version {number}; this nasforge "
            f"{__version__} reads version {FORMAT_VERSION} and older; upgrade nasforge "
            f"(pip install -U 'nasforge>={writer or __version__}') to open it"
        )
    if number < FORMAT_VERSION:
        return (
            f"was written by {by} in store format version {number}; this nasforge "
            f"{__version__} reads version {FORMAT_VERSION}; open it with the nasforge that "
            "wrote it, or run the search again into a new directory"
        )
    return ""


def create(path: Path, kind: str, config_json: str) -> sqlite3.Connection:
    """Returns a connection to a new run record at ``path``: WAL journal, the schema, and the
    meta rows of a running run of ``kind`` holding ``config_json``, in one transaction."""
    conn = sqlite3.connect(str(path), timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA)
    with conn:
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("format", FORMAT),
                ("version", str(FORMAT_VERSION)),
                ("nasforge_version", __version__),
                ("created_by", __version__),
                ("created", repr(time.time())),
                ("kind", kind),
                ("config", config_json),
                ("state", "running"),
                ("elapsed", "0.0"),
            ],
        )
    return conn


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """Returns a connection to the existing record at ``path`` (``mode=ro`` when
    ``readonly``), with rows readable by column name.

    Raises:
        StoreError: SQLite cannot open the file.
    """
    try:
        if readonly:
            conn = _connect_readonly(path)
        else:
            conn = sqlite3.connect(str(path), timeout=30)
    except sqlite3.Error as exc:
        raise StoreError(f"{path} cannot be opened: {exc}") from exc
    conn.row_factory = sqlite3.Row
    return conn


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """Returns a read-only connection to ``path``, for a reader who may not write its folder
    too: SQLite's reader of a WAL database makes a ``-shm`` file beside it, which such a
    reader cannot; when no ``-wal`` file is there (no writer works on the run, and the
    database file holds the whole record), the file is read as ``immutable`` instead.

    Raises:
        sqlite3.Error: SQLite cannot open it.
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        wal = path.with_name(path.name + "-wal")
        if wal.exists() or os.access(path.parent, os.W_OK):
            return conn  # another reason: the first real read words it
        conn.close()
        return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=30)
    except sqlite3.DatabaseError:
        pass  # not a database: the first real read words it
    return conn


def read_meta(
    path: Path, conn: sqlite3.Connection, required: set[str], what: str, fix: str
) -> tuple[set[str], dict[str, str]]:
    """Returns the tables and the ``meta`` table of the intact SQLite record on ``conn`` that
    holds at least the ``required`` tables (``what`` names such a record, ``fix`` says where
    to find one).

    Raises:
        StoreError: sqlite's quick check fails, or a required table is missing.
        sqlite3.DatabaseError: the file is not SQLite (the caller words that).
    """
    ok = conn.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        raise StoreError(f"{path} is corrupted (sqlite quick_check: {ok}); restore a copy")
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    if not required <= tables:
        raise StoreError(
            f"{path} is an SQLite database but not {what} (tables {sorted(tables)}); {fix}"
        )
    return tables, {str(r[0]): str(r[1]) for r in conn.execute("SELECT key, value FROM meta")}


def check(path: Path, conn: sqlite3.Connection) -> None:
    """Returns None when ``conn`` holds an intact run record of this format and version;
    otherwise closes ``conn`` (nothing written) and raises.

    Raises:
        StoreError: the file is corrupted, not SQLite, not a nasforge run, of another format,
            or of a newer or older format version.
    """
    try:
        _, meta = read_meta(
            path, conn, TABLES, "a nasforge run", "point to the directory `nasforge run` created"
        )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path} is not a readable run record: {exc}") from exc
    except StoreError:
        conn.close()
        raise
    if meta.get("format") != FORMAT:
        conn.close()
        raise StoreError(f"{path} has format {meta.get('format')!r}, expected {FORMAT!r}")
    problem = version_problem(meta)
    if problem:
        conn.close()
        raise StoreError(f"{path} {problem} (the record was not changed)")


def migrate(conn: sqlite3.Connection, columns: set[str]) -> bool:
    """Returns whether it added a column: the ones a record made by an earlier build of this
    format lacks (given its trials table's ``columns``), empty, in one transaction."""
    if "placement" in columns:
        return False
    with conn:
        conn.execute("ALTER TABLE trials ADD COLUMN placement TEXT")
    return True
