"""Returns copies of nasforge 0.1 run records in this nasforge's format: ``nasforge migrate OLD
NEW`` and :func:`migrate`.

nasforge 0.1 recorded a multi-trial search in store format 1 (``<dir>/experiment.db``, format
name ``nasforge-experiment``). This nasforge reads format 2 (``run.db``) and refuses format 1;
:func:`migrate` writes a format-2 copy into a new directory and never writes to the old one.

    reads       ``OLD/experiment.db`` (and its ``-wal`` journal, if 0.1 left one: a regular
                file, never a link or device) are copied into a private hidden folder beside
                NEW and read there with ``mode=ro``: SQLite opens even a read-only WAL database
                by creating ``-wal`` and ``-shm`` files beside it, so reading in place would
                leave files in OLD. Weight files are copied, only those inside OLD (a stored
                path or a link that leads outside it counts as gone). Nothing in OLD is
                written, renamed or touched. Every value is checked by type (a text metric,
                a BLOB error, a text event trial): such a row is refused, naming it
    writes      the copy is built in a hidden folder beside NEW and renamed to NEW at the end,
                so NEW is either absent or complete; NEW must not exist or be empty, and not
                be a symbolic link. The hidden folders of a migration that was killed (its
                process is gone) are removed by the next migration into the same NEW
    config      0.1's keys become the ``multitrial`` config: ``metric``, ``mode``,
                ``constraints``, ``second_objective`` -> the objective; ``search_space``,
                ``strategy``, the budgets and executor settings -> the section (settings 0.1
                did not have get their 0.1 behaviour: every checkpoint kept, no cross-model
                plan, CPU); ``space_class`` (or the ``space`` of a ``.py`` run file that still
                exists) -> the space reference that ``load_model`` rebuilds; the 0.1
                evaluator's description is kept as 0.1 wrote it (``{"type", ...}``)
    trials      every row, ids kept, ``evaluation`` ``trained``, ``placement`` empty; a
                checkpoint becomes ``checkpoints/<file>`` relative to NEW (0.1 stored the path
                it was given, absolute or relative to its working directory); a trial whose
                weight file is gone keeps no checkpoint, and a note counts them
    events      every ask and tell, in order (``seq`` kept)
    progress    the rows of 0.1's ``records`` table (a table 0.1 made on first use), in order,
                as progress rows: step = the row's sequence number, data = the row plus
                ``"record": <its kind>``, time kept
    meta        ``created`` and ``elapsed`` of the 0.1 run; ``migrated_from`` (JSON: the
                absolute path of OLD, ``format`` 1, ``at`` the time of the migration, the
                0.1 ``source``) and a note from ``migrate`` say where the copy came from. The
                state is ``finished`` (the copy cannot be resumed); a trial still running when
                0.1 stopped reads as interrupted

What the copy supports: ``nasforge status``, ``export``, ``plot``, ``nasforge.load_model`` on an
export, and :class:`~nasforge.run.store.Store` reads. ``nasforge resume`` is
refused with a message (:func:`resume_problem`): 0.1 recorded its evaluator by a description,
not by a reference this nasforge can rebuild. Only multi-trial records migrate; a 0.1 one-shot
or once-for-all record (``kind`` in its config) is refused.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, StoreError
from nasforge.run._rows import check_scalars
from nasforge.run._schema import read_meta
from nasforge.run.runner import Objective
from nasforge.run.store import DB_NAME, OLD_DB_NAME, STATUSES, Store

__all__ = [
    "migrate",
    "resume_problem",
    "OLD_FORMAT",
    "OLD_FORMAT_VERSION",
    "MIGRATED_KEY",
    "MIGRATE_NOTE",
]

log = logging.getLogger("nasforge.run")

OLD_FORMAT = "nasforge-experiment"
OLD_FORMAT_VERSION = 1
#: the meta key of a migrated record: JSON ``{"path", "format", "at", "source"}``
MIGRATED_KEY = "migrated_from"
#: the ``source`` of the note a migration adds
MIGRATE_NOTE = "migrate"

_TABLES = {"meta", "trials", "events"}
_TRIAL_COLUMNS = ("id", "arch_id", "arch", "status", "metrics", "intermediates", "error",
                  "started", "finished", "duration", "checkpoint", "cached_from")  # fmt: skip


def resume_problem(directory: Path, meta: str | None) -> str:
    """Returns why ``nasforge resume`` cannot continue the run in ``directory`` whose
    ``migrated_from`` meta is ``meta`` ('' when it is None: not a migrated run)."""
    if meta is None:
        return ""
    return (
        f"{directory} is a copy of a nasforge 0.1 run (store format 1, migrated by `nasforge "
        "migrate`); 0.1 recorded its evaluator by a description this nasforge cannot rebuild, "
        "so `nasforge resume` cannot continue it. Its trials are kept: read them with "
        f"`nasforge status {directory}` or `nasforge export {directory}`, and run the search "
        "again into a new directory with `nasforge run FILE` to go on"
    )


def migrate(old: str | Path, new: str | Path) -> Path:
    """Returns ``new`` after writing there a format-2 copy of the nasforge 0.1 run record in
    ``old`` (see the module docstring for what is copied and how); ``old`` is only read.

    Raises:
        StoreError: ``old`` holds no format-1 record (missing, not SQLite, corrupted, of
            another format or version, or not a multi-trial run); ``new`` already holds a
            run, is not empty, or lies inside ``old``.
        ConfigError: ``new``, or a folder above it, is a file or cannot be written.
    """
    old, new = Path(old), Path(new)
    if new.is_symlink():
        raise StoreError(
            f"{new} is a symbolic link; migrate writes its copy into a new directory of its "
            "own: give a path that is not a link (nothing was written)"
        )
    if old.name == OLD_DB_NAME:
        old = old.parent
    db = old / OLD_DB_NAME
    if not db.is_file():
        if (old / DB_NAME).exists():
            raise StoreError(
                f"{old} holds a run of this nasforge ({DB_NAME}, format 2), not a nasforge "
                "0.1 record; there is nothing to migrate, open it as it is"
            )
        raise StoreError(
            f"no nasforge 0.1 record at {db}; give the directory nasforge 0.1 recorded the "
            f"run in (it holds {OLD_DB_NAME})"
        )
    _check_new(old, new)
    _remove_leftovers(new)
    # unique per call: two migrations in one process never share a folder
    work = new.parent / f".{new.name}.migrating-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        meta, trials, events, records = _read(db, work.with_name(work.name + ".read"))
        config = _config(db, meta)
        _write(work, old, config, meta, trials, events, records)
        try:
            if new.exists():
                new.rmdir()  # empty, checked above
            os.replace(work, new)
        except OSError as exc:  # filled meanwhile: another migration into the same NEW
            raise StoreError(
                f"{new} was filled by another migration while this one ran ({exc.strerror}); "
                "the other copy is kept: use it, or migrate into another directory"
            ) from exc
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    log.info("migrated the nasforge 0.1 run %s into %s (format 2)", old, new)
    return new


#: the hidden folders of a migration into NEW: ``.NEW.migrating-<pid>-<token>[.read]``
_WORK = re.compile(r"\.migrating-(\d+)-[0-9a-f]+(\.read)?$")


def _remove_leftovers(new: Path) -> None:
    """Removes the hidden folders beside ``new`` of migrations into it whose process is gone
    (killed: nothing else removes them); those of a live process are left to it."""
    prefix = f".{new.name}.migrating-"
    try:
        found = [p for p in new.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return  # no parent yet: nothing left
    for p in found:
        m = _WORK.search(p.name[len(new.name) + 1 :])
        if m is None or p.is_symlink():
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue  # alive (or not ours to signal): its own folder
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        log.info("removing %s, left by a migration that was stopped", p)
        shutil.rmtree(p, ignore_errors=True)


def _check_new(old: Path, new: Path) -> None:
    """Returns None when ``new`` may receive the copy of the run in ``old``."""
    for name in (DB_NAME, OLD_DB_NAME):
        if (new / name).exists():
            raise StoreError(
                f"{new} already holds a run ({name}); migrate writes its copy into a new or "
                "empty directory: choose another (nothing was overwritten)"
            )
    Store.check_new(new)  # a file where the folder belongs
    o, n = old.resolve(), new.resolve()
    if n == o or o in n.parents:
        raise StoreError(
            f"{new} lies in {old}; migrate never writes to the old run's directory, give a "
            "directory outside it"
        )
    if new.exists() and any(new.iterdir()):
        raise StoreError(
            f"{new} is not empty; give a new or empty directory for the migrated copy "
            "(nothing was written)"
        )


def _read(db: Path, scratch: Path) -> tuple[dict[str, str], list[dict[str, Any]],
                                            list[tuple[int, str, int]],
                                            list[tuple[int, str, str, float]]]:  # fmt: skip
    """Returns (meta, trials, events, records rows) of the format-1 database ``db``, read from
    a private copy in the new folder ``scratch`` (removed at the end; see ``reads`` in the
    module docstring).

    Raises:
        StoreError: it is not a readable format-1 record of a multi-trial run, or its ``-wal``
            is not a regular file.
        ConfigError: the folder of ``scratch`` cannot be written.
    """
    wal = db.with_name(db.name + "-wal")
    if wal.is_symlink() or (os.path.lexists(wal) and not wal.is_file()):
        raise StoreError(
            f"{wal} is not a regular file (a link or a device); a nasforge 0.1 journal is a "
            "plain file: remove it if the record is otherwise whole (nothing was copied)"
        )
    try:
        scratch.mkdir(parents=True)
    except OSError as exc:
        raise ConfigError(f"cannot write beside the new directory: {scratch}: {exc}") from exc
    try:
        copy = scratch / OLD_DB_NAME
        shutil.copyfile(db, copy)
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        try:
            conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        except sqlite3.Error as exc:  # pragma: no cover - a copy in a fresh folder opens
            raise StoreError(f"{db} cannot be opened: {exc}") from exc
        try:
            conn.row_factory = sqlite3.Row
            tables, meta = read_meta(
                db, conn, _TABLES, "a nasforge 0.1 record",
                "give the directory nasforge 0.1 recorded the run in",
            )  # fmt: skip
            _check_format(db, meta)
            cols = ", ".join(_TRIAL_COLUMNS)
            trials = [dict(r) for r in conn.execute(f"SELECT {cols} FROM trials ORDER BY id")]
            events = _typed(db, "events", conn.execute(
                "SELECT seq, kind, trial FROM events ORDER BY seq"), (int, str, int))  # fmt: skip
            records = []
            if "records" in tables:
                records = _typed(db, "records", conn.execute(
                    "SELECT seq, kind, data, time FROM records ORDER BY seq"),
                    (int, str, str, (int, float)))  # fmt: skip
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{db} is not a readable nasforge 0.1 record: {exc}") from exc
        finally:
            conn.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return meta, trials, events, records


def _typed(db: Path, table: str, rows: Any, types: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Returns ``rows`` of ``table`` as tuples when each value has its column's type.

    Raises:
        StoreError: one has another (text where a number belongs), naming the row.
    """
    out = []
    for r in rows:
        for v, want in zip(r, types):
            if type(v) is bool or not isinstance(v, want):
                raise StoreError(
                    f"{db}: {table} row {r[0]!r:.40} holds {type(v).__name__} {v!r:.40} where "
                    f"{getattr(want, '__name__', 'a number')} belongs; the record is damaged "
                    "there: restore a copy, or delete that row"
                )
        out.append(tuple(float(v) if want == (int, float) else v for v, want in zip(r, types)))
    return out


def _check_format(db: Path, meta: dict[str, str]) -> None:
    """Returns None when ``meta`` names format 1 of nasforge 0.1.

    Raises:
        StoreError: another format or version.
    """
    if meta.get("format") != OLD_FORMAT:
        raise StoreError(
            f"{db} has format {meta.get('format')!r}, expected {OLD_FORMAT!r} (nasforge 0.1); "
            "it is not a nasforge 0.1 record"
        )
    if meta.get("version") != str(OLD_FORMAT_VERSION):
        raise StoreError(
            f"{db} has store format version {meta.get('version')!r}; migrate reads nasforge "
            f"0.1's version {OLD_FORMAT_VERSION}"
        )


def _config(db: Path, meta: dict[str, str]) -> dict[str, Any]:
    """Returns the format-2 ``multitrial`` config for the 0.1 config in ``meta``.

    Raises:
        StoreError: the config does not decode, names another kind of run, or has no
            well-formed objective.
    """
    try:
        old = json.loads(meta.get("config", ""))
    except ValueError as exc:
        raise StoreError(f"{db}: meta 'config' does not decode ({exc}); it is damaged") from exc
    if not isinstance(old, dict):
        raise StoreError(f"{db}: meta 'config' is not a JSON object; it is damaged")
    if old.get("kind") is not None:
        raise StoreError(
            f"{db} holds a nasforge 0.1 {old['kind']!r} run; migrate copies multi-trial runs "
            "only: read it with nasforge 0.1, or run the search again with this nasforge"
        )
    try:
        objective = Objective(
            old.get("metric", "accuracy"),
            old.get("mode", "max"),
            old.get("constraints"),
            old.get("second_objective"),
        )
    except ConfigError as exc:
        raise StoreError(f"{db}: the 0.1 config's objective is malformed: {exc}") from exc
    section = {
        "search_space": old.get("search_space"),
        "strategy": old.get("strategy"),
        "evaluator": old.get("evaluator"),  # 0.1's description, not a reference
        "n_trials": old.get("n_trials"),
        "time_budget": old.get("time_budget"),
        "executor": old.get("executor"),
        "concurrency": old.get("concurrency"),
        "trial_timeout": old.get("trial_timeout"),
        "stopper": old.get("stopper"),
        "retrain_duplicates": old.get("retrain_duplicates", False),
        "save_weights": True,
        "keep_checkpoints": None,  # 0.1 kept every weight file
        "max_duplicates": 200,
        "threads": None,
        "crossmodel": False,  # 0.1 had no cross-model plan
        "gpus_per_trial": 0,
        "devices": None,
    }
    return {
        "kind": "multitrial",
        "objective": objective.to_dict(),
        "multitrial": section,
        "space": _space_ref(old.get("space_class"), old.get("source")),
        "source": None,
    }


def _space_ref(space_class: Any, source: Any) -> dict[str, Any] | None:
    """Returns the reference that rebuilds the space as 0.1's ``load_model`` did: the
    ``space`` of the ``.py`` run file ``source`` when it still exists, else ``space_class``
    called without arguments; None when neither can (a class of a script's ``__main__``)."""
    if isinstance(source, str) and source.endswith(".py") and Path(source).is_file():
        return {"object": "__main__:space", "file": str(Path(source).resolve())}
    if isinstance(space_class, str):
        module, _, qual = space_class.rpartition(".")
        if module and module != "__main__":
            return {"object": f"{module}:{qual}", "args": [], "kwargs": {}}
    return None


def _checkpoint(old: Path, stored: str | None) -> tuple[Path, str] | None:
    """Returns (the file, its path relative to the new run) of a 0.1 trial's checkpoint
    ``stored``, or None when it has none or the file is gone."""
    if not stored:
        return None
    p = Path(stored)
    candidates = [old / "checkpoints" / p.name]  # where 0.1 always wrote them
    candidates.append(p if p.is_absolute() else old / p)
    root = old.resolve()
    for c in candidates:
        try:  # only a file inside OLD: a path or a link leading out is not the run's
            rel = c.resolve().relative_to(root)
        except (ValueError, OSError, RuntimeError):
            continue
        if c.is_file():
            return c, rel.as_posix()
    return None


def _write(
    work: Path,
    old: Path,
    config: dict[str, Any],
    meta: dict[str, str],
    trials: list[dict[str, Any]],
    events: list[tuple[int, str, int]],
    records: list[tuple[int, str, str, float]],
) -> None:
    """Writes the format-2 record into the new folder ``work``: weight files first, then
    trials, events and progress in one transaction, then the meta and a note."""
    store = Store.create(work, config)
    try:
        copied: dict[str, str] = {}  # 0.1 path -> relative path in the copy
        missing = 0
        rows = []
        for t in trials:
            _check_trial(old, t)
            found = _checkpoint(old, t["checkpoint"])
            if t["checkpoint"] and found is None:
                missing += 1
            rel = None
            if found is not None:
                src, rel = found
                if t["checkpoint"] not in copied:
                    (work / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, work / rel)
                    copied[t["checkpoint"]] = rel
            rows.append(tuple(t[c] for c in _TRIAL_COLUMNS[:-2]) + (rel, t["cached_from"]))
        progress = []
        for seq, kind, data, at in records:
            try:
                row = json.loads(data)
            except ValueError as exc:
                raise StoreError(
                    f"{old / OLD_DB_NAME}: records row {seq} does not decode ({exc})"
                ) from exc
            if isinstance(row, dict):  # "where that maps": a row of named values
                progress.append((seq, at, json.dumps({"record": kind, **row}, sort_keys=True)))
        cols = ", ".join(_TRIAL_COLUMNS)
        marks = ", ".join("?" * len(_TRIAL_COLUMNS))
        # one transaction through the store's own connection: the copy has all or nothing
        with store._write() as conn:
            conn.executemany(f"INSERT INTO trials ({cols}) VALUES ({marks})", rows)
            conn.executemany("INSERT INTO events (seq, kind, trial) VALUES (?, ?, ?)", events)
            conn.executemany("INSERT INTO progress VALUES (?, ?, ?)", progress)
        for key in ("created", "elapsed"):
            if key in meta:
                store.set_meta(key, meta[key])
        now = time.time()
        section = config["multitrial"]
        store.set_plan("trials", section.get("n_trials"))
        source = json.loads(meta["config"]).get("source")
        where = str(old.resolve())
        store.set_meta(
            MIGRATED_KEY,
            json.dumps({"path": where, "format": OLD_FORMAT_VERSION, "at": now, "source": source}),
        )
        detail = (
            f"copied from the nasforge 0.1 record at {where} (store format "
            f"{OLD_FORMAT_VERSION}) on {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}"
        )
        if missing:
            detail += f"; {missing} trials' weight files were gone and are not in the copy"
        if config["space"] is None:
            detail += "; no importable space class was recorded: pass space= to load_model"
        inflight = sum(t["status"] == "running" for t in trials)
        if inflight:
            detail += f"; {inflight} trials in flight when 0.1 stopped read as interrupted"
        store.add_note(
            MIGRATE_NOTE, "migrated", detail, format=OLD_FORMAT_VERSION, trials=len(rows),
            weights=len(copied), missing_weights=missing,
        )  # fmt: skip
        # finished, even when 0.1 was stopped: the copy cannot be resumed (resume_problem)
        store.finish("finished")
    finally:
        store.close()


def _check_trial(old: Path, t: dict[str, Any]) -> None:
    """Returns None when 0.1 trial row ``t`` decodes as this format's readers expect.

    Raises:
        StoreError: a status this format lacks, or JSON that does not decode.
    """
    where = f"{old / OLD_DB_NAME}: trial {t['id']}"
    try:
        check_scalars(old / OLD_DB_NAME, {**t, "evaluation": None})
    except StoreError as exc:
        raise StoreError(str(exc).replace("trials row", "trial")) from exc
    if t["status"] not in STATUSES:
        raise StoreError(f"{where} has status {t['status']!r}, expected one of {STATUSES}")
    for key, want in (("arch", dict), ("metrics", (dict, type(None))), ("intermediates", list)):
        try:
            value = json.loads(t[key]) if t[key] is not None else None
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: {key} does not decode ({exc}); it is damaged") from exc
        if not isinstance(value, want):
            raise StoreError(f"{where}: {key} is {type(value).__name__}; it is damaged")
        rows: list[Any] = []
        if key == "metrics" and value is not None:
            rows = [value]
        elif key == "intermediates" and isinstance(value, list):
            rows = value
        for row in rows:
            bad = [
                k
                for k, v in (row.items() if isinstance(row, dict) else [("", row)])
                if v is not None and (type(v) is bool or not isinstance(v, (int, float)))
            ]
            if bad:
                raise StoreError(f"{where}: {key} holds a value that is not a number ({bad[0]!r}); "
                                 "it is damaged")  # fmt: skip
