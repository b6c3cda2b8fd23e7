"""The run record: one SQLite database per run directory, written by every kind of search.

Every kind of run (multi-trial, one-shot, once-for-all, pipeline training, and whatever comes
next) records through this one contract. The command line, export, loaders and a dashboard read
it without asking which kind wrote it.

Contracts
    layout      ``<dir>/run.db`` (this database), ``<dir>/.writer.lock`` (held by the writer),
                ``<dir>/artifacts/`` and ``<dir>/checkpoints/`` (tensor files the record names,
                by paths relative to ``<dir>``, so a run can be moved or copied)
    format      table ``meta`` names the format (``nasforge-run``), its version
                (:data:`FORMAT_VERSION`) and the nasforge that wrote it; a database without
                them, of another format, or unreadable, raises StoreError and is never written
                to. Versions: a record of a NEWER format is refused, naming the nasforge that
                wrote it and asking to upgrade; one of an OLDER format is refused too, naming
                its version and the nasforge to open it with (format 1, ``experiment.db`` of
                nasforge 0.1, is the only older one: ``nasforge migrate OLD NEW``,
                :mod:`nasforge.run.migrate`, writes a format-2 copy of it into a new
                directory). Neither is changed by the attempt. Within one format version a
                record only gains: a writer adds what an earlier build of the same format
                lacked (an empty ``placement`` column), and readers of either read both
    one writer  a writer holds an OS file lock on ``.writer.lock`` for its whole life
                (:mod:`nasforge.run.lock`); a second writer is refused at once with a LockError
                naming the holder; the OS drops the lock when the holder dies, even by kill -9
    readers     open the database read-only (``mode=ro``): they never block the writer, are
                never blocked by it (WAL), and never change a byte of ``run.db``
    durability  WAL journal; every state change is one transaction, so ``kill -9`` at any
                moment loses nothing that was committed
    plain data  config, progress rows, architectures and metrics are JSON text; weights are
                tensor files beside the database, never pickled Python objects
    validation  a row that does not decode (corrupt JSON, wrong type) raises StoreError naming
                the run, the table and the row; nothing else escapes a read

Tables
    meta        format, version, ``nasforge_version`` (the nasforge that last wrote the run;
                a writer sets it on opening), ``created_by`` (the nasforge that created it;
                both absent in records made before 0.2.0), created, ``kind``, ``config``
                (JSON, see below), ``state``
                (``running`` while a writer works, then ``finished`` or ``failed``; a run whose
                state says ``running`` but whose lock is free was interrupted; a writer that
                ends without :meth:`Store.finish` or :meth:`Store.end`, such as a deployment
                search on a trained run, puts back the state and error it found), ``error``,
                ``migrated_from`` (only in a copy of a nasforge 0.1 run made by ``nasforge
                migrate``: JSON ``{"path", "format", "at", "source"}``), ``notes`` (JSON
                list: what a run did beyond its trials, e.g. which cross-model optimization
                the engine applied or reverted; rows ``{"source", "event", "detail", "time",
                ...numbers}`` appended by :meth:`Store.add_note`)
    progress    rows of one run's progress in order: an epoch or a step, with its numbers
                (losses, accuracies, the current architecture, seconds); ``step`` is the
                writer's own counter and ``(step)`` is unique, so a resumed run that writes a
                step again replaces the row
    trials      every architecture measured: its id (``TrialRecord.id``: 1, 2, 3, ... in
                ask order), arch, arch id, status, metrics, intermediate
                metrics, error text, timings, checkpoint (None again once a run that keeps only
                its best weights deleted the file: its ``checkpoints`` note says so),
                ``evaluation`` (``trained``: trained standalone; ``inherited``: measured with
                supernet weights; ``predicted``: by a model), ``cached_from`` (an earlier
                trial of the same architecture) and ``placement`` (JSON ``{"node", "devices",
                "gpus"}``: the host or Ray node and the GPU ids the trial ran on, ``devices:
                []`` on CPU; NULL when the writer did not say; a record made before this
                column existed gains it, empty, when a writer opens it, and readers of such a
                record see None)
    events      every ask and tell of a strategy in happening order; replaying them rebuilds
                the strategy exactly (see ``nasforge.engine.replay``)
    artifacts   named files of the run (supernet weights, exported models): name, relative
                path, kind, time, JSON metadata (``"export": true``: every exported model
                needs this file beside its weights, e.g. a tokenizer; export copies it)

The config is ``{"kind": K, "objective": {"metric", "mode", "constraints", "second"}, K:
{the kind's own section}, "space": ref or None, "source": ref or None}``: the objective ranks
trials for every kind; the space and source references rebuild the space and the runner (see
:mod:`nasforge.run.refs`).

Trial statuses: ``running`` (asked, in flight), ``done``, ``failed``, ``early_stopped``,
``cached`` (the same architecture was already evaluated; its metrics are copied), ``pruned``
(stopped by a rung rule; the number of its intermediate rows is the resource it reached). A
reader of a run that no writer works on (interrupted, finished or failed) gets
``interrupted`` for a trial stored ``running``: nothing runs it any more (``nasforge resume``
restarts it); the writer gets the stored ``running``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasforge._version import __version__
from nasforge.errors import NasforgeError, StoreError

# the heavy steps behind Store: _schema (format names, SQL schema, format and version checks,
# migrations) and _rows (JSON rows; RowReader: checked decoding, trial rows and queries)
from nasforge.run import _schema
from nasforge.run._rows import RowReader
from nasforge.run._rows import dumps as _dumps
from nasforge.run._schema import DB_NAME, FORMAT, FORMAT_VERSION, OLD_DB_NAME
from nasforge.run.lock import LOCK_NAME, WriterLock
from nasforge.run.preflight import check_folder, folder_entries, make_folder, remove_new
from nasforge.run.records import (
    EVALUATIONS,
    FINISHED,
    INTERRUPTED,
    STATUSES,
    TrialOutcome,
    TrialRecord,
    check_compatible,
)

__all__ = [
    "Store",
    "TrialRecord",
    "TrialOutcome",
    "check_compatible",
    "FORMAT",
    "FORMAT_VERSION",
    "DB_NAME",
    "OLD_DB_NAME",
    "STATUSES",
    "FINISHED",
    "INTERRUPTED",
    "EVALUATIONS",
    "is_run",
]


def is_run(directory: str | Path) -> bool:
    """Returns whether ``directory`` holds a run record (of any kind)."""
    return (Path(directory) / DB_NAME).exists()


class Store:
    """Returns and records a run's configuration, progress, trials, events and artifacts.

    :meth:`create` makes a new run and :meth:`open` an existing one; both take the writer lock
    unless ``readonly``. Use it as a context manager or call :meth:`close`.

    Invariants: trial ids are 1, 2, 3, ... in ask order; events are in happening order; the
    database is written only by the holder of the writer lock, and only after its format and
    version were checked.
    """

    def __init__(
        self, path: Path, conn: sqlite3.Connection, lock: WriterLock | None, readonly: bool
    ) -> None:
        self.path = path
        self._conn = conn
        self._lock = lock
        self.readonly = readonly
        self._config: dict[str, Any] | None = None
        # every read of rows (trials, meta, notes) goes through this one reader
        self._rows = RowReader(path, conn, writer=not readonly)
        # the (state, error) a writer found when it opened the run (None: it created the run),
        # put back by close() unless the writer ended its work with finish() or end()
        self._found: tuple[str, str] | None = None
        self._ended = False
        # what hears each progress row and finished trial as it is committed (live tracking)
        self._listeners: list[Any] = []
        # the folder's entries before create() made the run (None: no folder), for discard()
        self._before: frozenset[str] | None = frozenset()

    # -- opening -------------------------------------------------------------------------------
    @staticmethod
    def check_new(directory: str | Path) -> Path:
        """Returns ``directory`` (nothing created) when a new run can be recorded there.

        Raises:
            ConfigError: it, or a folder above it, is a file, or it cannot be written.
            StoreError: it already holds a run (resume it, or pick a new directory).
        """
        directory = check_folder(directory, "run directory")
        for existing in (directory / DB_NAME, directory / OLD_DB_NAME):
            if existing.exists():
                raise StoreError(
                    f"{directory} already holds a run ({existing.name}); resume it with "
                    f"`nasforge resume {directory}` or choose an empty directory (nothing "
                    "was overwritten)"
                )
        return directory

    @classmethod
    def create(cls, directory: str | Path, config: Mapping[str, object], holder: str = "") -> Store:
        """Returns a new run record in ``directory`` holding ``config`` (JSON-able), as writer.

        Raises:
            ConfigError: the directory, or a folder above it, is a file or cannot be made.
            StoreError: the directory already holds a run (resume it, or pick a new
                directory), or ``config`` is not JSON-serialisable.
            LockError: another process is writing there.
        """
        directory = cls.check_new(directory)
        config_json = _dumps("the run config", dict(config))
        before = folder_entries(directory)
        make_folder(directory, "run directory")
        lock = WriterLock(directory, holder)
        try:
            path = directory / DB_NAME
            cls.check_new(directory)  # again, holding the lock: no run was made meanwhile
            conn = _schema.create(path, str(config.get("kind", "")), config_json)
        except BaseException:
            lock.release()
            raise
        store = cls(path, conn, lock, readonly=False)
        store._before = before
        return store

    @classmethod
    def open(cls, directory: str | Path, readonly: bool = True, holder: str = "") -> Store:
        """Returns the record of an existing run; read-only unless ``readonly=False``, in which
        case this process becomes its one writer.

        Raises:
            StoreError: no run there; the file is not SQLite or is corrupted; it was written
                by something else or by an incompatible format version.
            LockError: ``readonly=False`` and another process is writing the run.
        """
        directory = Path(directory)
        if directory.name == DB_NAME:
            directory = directory.parent
        path = directory / DB_NAME
        if directory.exists() and not directory.is_dir():
            raise StoreError(
                f"{directory} is a file, not a run directory; give the folder `nasforge run` "
                "recorded the run in"
            )
        if not path.exists():
            if (directory / OLD_DB_NAME).exists():
                raise StoreError(
                    f"{directory} holds a run recorded by nasforge 0.1 ({OLD_DB_NAME}, store "
                    "format 1), which this nasforge does not read in place; copy it into this "
                    f"format with `nasforge migrate {directory} NEW_DIR` (the original is left "
                    "unchanged), or open it with nasforge 0.1"
                )
            raise StoreError(f"no run record at {path}; start one with `nasforge run FILE`")
        lock = None if readonly else WriterLock(directory, holder)
        try:
            conn = _schema.connect(path, readonly)
            _schema.check(path, conn)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        store = cls(path, conn, lock, readonly)
        try:
            store.config()  # a corrupt config is an error now, before anything is written
        except StoreError:
            store.close()
            raise
        if not readonly:
            store._found = (
                store.get_meta("state", "running") or "running",
                store.get_meta("error", "") or "",
            )
            store._migrate()
            store.set_meta("nasforge_version", __version__)
            store.set_meta("state", "running")
            store.set_meta("error", "")
        return store

    def _migrate(self) -> None:
        """Adds the columns a record made by an earlier nasforge lacks (empty), as writer."""
        if _schema.migrate(self._write(), self._rows.columns()):
            self._rows.forget_columns()

    def close(self) -> None:
        """Closes the database and releases the writer lock (if held). A writer that opened
        an existing run and did not end its work (:meth:`finish`, :meth:`end`) puts back the
        state and error it found: a search on a finished run leaves it finished."""
        try:
            if self._lock is not None and not self._ended and self._found is not None:
                with self._conn as conn:
                    conn.executemany(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [("state", self._found[0]), ("error", self._found[1])],
                    )
                self._ended = True
        finally:
            try:
                self._conn.close()
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

    def discard(self) -> None:
        """Returns None after closing the store and removing the run this writer created,
        with all that appeared in its folder since (the folder itself when create() made it):
        the folder is as it was before, and a new run can start there. The writer lock is
        held until the last file is gone (its own file included), so no other writer sees a
        half-removed run."""
        assert self._lock is not None and self._found is None, "a writer of a run it created"
        lock, self._lock, self._ended = self._lock, None, True
        try:
            self._conn.close()
            remove_new(self.directory, self._before, last=LOCK_NAME)
        finally:
            lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def directory(self) -> Path:
        """Returns the run directory."""
        return self.path.parent

    def _write(self) -> sqlite3.Connection:
        assert not self.readonly, "a read-only store is never written"
        return self._conn

    # -- meta ----------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Returns the stored run configuration (a copy).

        Raises:
            StoreError: the stored config does not decode.
        """
        if self._config is None:
            rows = self._rows.query("SELECT value FROM meta WHERE key='config'")
            if not rows:
                raise StoreError(f"{self.directory}: the record has no config row; it is damaged")
            self._config = self._rows.decode(rows[0][0], "meta", "'config'", dict)
        copied: dict[str, Any] = json.loads(json.dumps(self._config))
        return copied

    def objective(self) -> dict[str, Any]:
        """Returns the objective that ranks the trials: ``metric``, ``mode``, ``constraints``,
        ``second``.

        Raises:
            StoreError: the config has no well-formed objective.
        """
        return self._rows.objective(self.config().get("objective"))

    @property
    def kind(self) -> str:
        """Returns the kind of run (the runner that wrote it)."""
        return str(self.config().get("kind", ""))

    def controls(self) -> frozenset[str] | None:
        """Returns the controls the run's kind declared when it started (what ``nasforge
        stop``/``set`` may ask it; :mod:`nasforge.run.requests`), or None for a record written
        before runs declared them."""
        text = self.get_meta("controls")
        if text is None:
            return None
        value = self._rows.decode(text, "meta", "controls", list)
        return frozenset(str(c) for c in value)

    def set_controls(self, controls: frozenset[str] | set[str]) -> None:
        """Records the controls the writer's kind honours (see :meth:`controls`)."""
        self.set_meta("controls", json.dumps(sorted(controls)))

    def picks(self) -> list[int]:
        """Returns the trials the run's kind chose (its exported result: a one-shot search's
        architecture, a deployment search's one per target), in order; empty for a kind that
        ranks its trials by the objective alone (multi-trial search)."""
        text = self.get_meta("picks")
        if text is None:
            return []
        return [int(t) for t in self._rows.decode(text, "meta", "picks", list)]

    def set_picks(self, trial_ids: list[int]) -> None:
        """Records the trials the run's kind chose (see :meth:`picks`)."""
        self.set_meta("picks", json.dumps([int(t) for t in trial_ids]))

    def listen(self, listener: Any) -> None:
        """Returns None after adding ``listener``, which hears each progress row
        (``on_progress(step, row)``) and each finished trial (``on_trial_end(record)``) once it
        is committed (live tracking: :class:`nasforge.run.tracking.Trackers`). A listener's
        error does not reach the writer's caller: it is the listener's to handle."""
        self._listeners.append(listener)

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """Returns one meta value (text), or ``default``."""
        return self._rows.meta(key, default)

    def set_meta(self, key: str, value: str) -> None:
        """Sets one meta value (text)."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def add_note(self, source: str, event: str, detail: str, **data: object) -> None:
        """Appends a note of what the run did (``source``: the part that did it; ``event``:
        what happened; ``detail``: one sentence for people; ``data``: plain numbers or text)."""
        row = {"source": source, "event": event, "detail": detail, "time": time.time(), **data}
        text = _dumps("a note", row)
        with self._write() as conn:
            got = conn.execute("SELECT value FROM meta WHERE key = 'notes'").fetchone()
            rows = self._rows.decode_notes(got[0] if got else None)
            rows.append(json.loads(text))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('notes', ?)", (json.dumps(rows),))

    def notes(self, source: str | None = None) -> list[dict[str, Any]]:
        """Returns the run's notes in order (those of ``source`` only, when given).

        Raises:
            StoreError: the notes do not decode.
        """
        rows = self._rows.decode_notes(self.get_meta("notes"))
        return [r for r in rows if source is None or r.get("source") == source]

    def set_config(self, config: Mapping[str, object]) -> None:
        """Replaces the stored config (a resume that extends a budget records the new one)."""
        text = _dumps("the run config", dict(config))
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('config', ?)", (text,))
        self._config = None

    def state(self) -> str:
        """Returns ``running`` (a writer holds the lock), ``finished``, ``failed``,
        ``stopped`` (``nasforge stop``: resumable) or ``interrupted`` (the record says running
        but no writer holds it)."""
        return self._rows.state()

    def finish(self, state: str = "finished", error: str = "") -> None:
        """Records the end of the writer's work: ``finished``, ``stopped`` (on request, and
        resumable) or ``failed`` with ``error``."""
        assert state in ("finished", "failed", "stopped"), state
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (state,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('error', ?)", (error,))
        self._ended = True

    def end(self, exc: BaseException | None = None) -> None:
        """Records how the writer's work ended: ``finished`` (no exception), ``failed`` with
        the error's text (any ``Exception``), or left ``running`` for a ``KeyboardInterrupt``
        or ``SystemExit``, which readers see as interrupted and ``nasforge resume``
        continues."""
        if exc is None:
            self.finish("finished")
        elif isinstance(exc, Exception):
            text = str(exc) if isinstance(exc, NasforgeError) else f"{type(exc).__name__}: {exc}"
            self.finish("failed", text)
        else:
            self.set_meta("state", "running")
            self._ended = True

    def set_plan(self, unit: str, total: int | None) -> None:
        """Records what the run will do: ``total`` units (``trials``, ``epochs``, ``steps``),
        which ``nasforge status`` compares with what is done."""
        self.set_meta("plan", json.dumps({"unit": unit, "total": total}))

    # -- progress ------------------------------------------------------------------------------
    def add_progress(self, step: int, row: Mapping[str, object]) -> None:
        """Records progress row ``step`` (replacing an earlier row of that step) in one
        transaction."""
        text = _dumps(f"progress row {step}", dict(row))
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO progress VALUES (?, ?, ?)", (int(step), time.time(), text)
            )
        for listener in self._listeners:
            listener.on_progress(int(step), dict(row))

    def truncate_progress(self, after: int) -> None:
        """Deletes the progress rows of steps greater than ``after`` (a resume from an earlier
        checkpoint rewrites them)."""
        with self._write() as conn:
            conn.execute("DELETE FROM progress WHERE step > ?", (int(after),))

    def progress(self, last: int | None = None) -> list[dict[str, Any]]:
        """Returns the progress rows in step order (only the ``last`` ones if given), each with
        its ``step``.

        Raises:
            StoreError: a row does not decode.
        """
        if last is None:
            rows = self._rows.query("SELECT step, data FROM progress ORDER BY step")
        else:
            rows = self._rows.query(
                "SELECT step, data FROM (SELECT step, data FROM progress ORDER BY step DESC "
                "LIMIT ?) ORDER BY step",
                (int(last),),
            )
        return [dict(self._rows.decode(d, "progress", s, dict), step=s) for s, d in rows]

    def n_progress(self) -> int:
        """Returns the number of progress rows."""
        return int(self._rows.query("SELECT COUNT(*) FROM progress")[0][0])

    # -- trials --------------------------------------------------------------------------------
    def add_trial(self, arch_id: str, arch: Mapping[str, object], event: bool = True) -> int:
        """Returns the id of a new ``running`` trial; records its ask event (unless ``event``
        is False: trials no strategy asked for) atomically."""
        text = _dumps("an architecture", dict(arch))
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO trials (arch_id, arch, status, started) VALUES (?, ?, 'running', ?)",
                (arch_id, text, time.time()),
            )
            tid = cur.lastrowid
            assert tid is not None, "an INSERT sets lastrowid"
            if event:
                conn.execute("INSERT INTO events (kind, trial) VALUES ('ask', ?)", (tid,))
        return tid

    def restart_trial(self, trial_id: int) -> None:
        """Marks an in-flight trial as started again (after a resume)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE trials SET started=?, intermediates='[]', error=NULL WHERE id=?",
                (time.time(), trial_id),
            )

    def finish_trial(
        self,
        trial_id: int,
        outcome: TrialOutcome,
        event: bool = True,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        """Records how trial ``trial_id`` ended (``outcome``), (unless ``event`` is False) its
        tell event and the ``meta`` values given (the engine's elapsed time), in one
        transaction; then the listeners hear the finished record."""
        o = outcome
        m = None if o.metrics is None else _dumps("metrics", dict(o.metrics))
        inter = _dumps("intermediate metrics", list(o.intermediates or []))
        where = None if o.placement is None else _dumps("a placement", dict(o.placement))
        with self._write() as conn:
            conn.execute(
                "UPDATE trials SET status=?, metrics=?, intermediates=?, error=?, finished=?, "
                "duration=?, checkpoint=?, cached_from=?, evaluation=?, placement=? WHERE id=?",
                (o.status, m, inter, o.error, time.time(), o.duration, o.checkpoint,
                 o.cached_from, o.evaluation, where, trial_id),
            )  # fmt: skip
            if event:
                conn.execute("INSERT INTO events (kind, trial) VALUES ('tell', ?)", (trial_id,))
            if meta:
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
        if self._listeners:
            record = self.trial(trial_id)
            for listener in self._listeners:
                listener.on_trial_end(record)

    def clear_checkpoints(self, trial_ids: list[int]) -> None:
        """Records that the trials have no weight file any more (their checkpoint becomes
        None), in one transaction; call it before deleting the file."""
        with self._write() as conn:
            conn.executemany(
                "UPDATE trials SET checkpoint=NULL WHERE id=?", [(int(t),) for t in trial_ids]
            )

    def record_trial(self, arch_id: str, arch: Mapping[str, object], outcome: TrialOutcome) -> int:
        """Returns the id of a trial recorded finished in one call (no strategy events): an
        architecture a one-shot search found, or one an evolution scored with inherited
        weights or a predictor."""
        tid = self.add_trial(arch_id, arch, event=False)
        self.finish_trial(tid, outcome, event=False)
        return tid

    def trials(self, status: str | None = None, light: bool = False) -> list[TrialRecord]:
        """Returns the trials in id order, optionally only those with ``status``; ``light``
        leaves the architecture and intermediate metrics out (empty), which is what ranking
        and plotting a large run need. A reader gets ``interrupted`` for the trials stored
        ``running`` when no writer works on the run.

        Raises:
            StoreError: a row does not decode.
        """
        return self._rows.trials(status, light)

    def trial_metrics(self) -> list[TrialRecord]:
        """Returns every trial in id order with only its id, arch id, status and metrics (the
        other fields empty or None): what ranking and plotting a long run read, at a fraction
        of :meth:`trials`' cost. Statuses are those :meth:`trials` shows.

        Raises:
            StoreError: a row does not decode (every row's columns are checked, as by
                :meth:`trials`).
        """
        return self._rows.trial_metrics()

    def trial(self, trial_id: int) -> TrialRecord:
        """Returns one trial.

        Raises:
            StoreError: no trial has that id, or it does not decode.
        """
        return self._rows.trial(trial_id)

    def counts(self) -> dict[str, int]:
        """Returns the number of trials per status (one aggregate query), with the trials
        :meth:`trials` shows ``interrupted`` counted so."""
        return self._rows.counts()

    def events(self) -> list[tuple[str, int]]:
        """Returns every (kind, trial id) event in happening order."""
        rows = self._rows.query("SELECT kind, trial FROM events ORDER BY seq")
        return [(r[0], r[1]) for r in rows]

    # -- artifacts -----------------------------------------------------------------------------
    def add_artifact(
        self, name: str, path: str | Path, kind: str, meta: Mapping[str, object] | None = None
    ) -> None:
        """Records (or replaces) the artifact ``name``: a file at ``path`` (stored relative to
        the run directory) of ``kind`` (e.g. ``supernet``, ``checkpoint``)."""
        p = Path(path)
        rel = str(p.relative_to(self.directory)) if p.is_absolute() else str(p)
        text = _dumps(f"artifact {name!r} metadata", dict(meta or {}))
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                (name, rel, kind, time.time(), text),
            )

    def artifacts(self, kind: str | None = None) -> dict[str, dict[str, Any]]:
        """Returns ``name -> {"path" (absolute), "kind", "time", "meta"}`` of the artifacts."""
        rows = self._rows.query("SELECT * FROM artifacts ORDER BY time")
        return {
            r["name"]: {
                "path": self.directory / r["path"],
                "kind": r["kind"],
                "time": r["time"],
                "meta": self._rows.decode(r["meta"], "artifacts", repr(r["name"]), dict),
            }
            for r in rows
            if kind is None or r["kind"] == kind
        }

    def artifact(self, name: str) -> Path | None:
        """Returns the absolute path of artifact ``name``, or None when not recorded."""
        a = self.artifacts().get(name)
        return None if a is None else a["path"]
