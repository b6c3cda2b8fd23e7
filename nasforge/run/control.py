"""Watching and steering a running run from any shell: ``nasforge logs``, ``nasforge stop``
and ``nasforge set``.

A command never writes the run's record (the running writer is its one writer): it drops a
request file into ``DIR/control/`` (:mod:`nasforge.run.requests`), which the writer takes at
its next boundary, applies, records as a run note and deletes. What a run can be asked depends
on its kind, which declares its controls when it starts (the record's meta ``controls``): a
request the run's kind does not take is refused here, in one line, before any file is left.

    stop            the run starts no new work; ``--finish`` (the default) lets what is in
                    flight finish (a multi-trial run's trials; a one-shot or once-for-all run
                    stops after its epoch, a DARTSformer search at its next step), ``--cancel``
                    cancels the trials in flight (multi-trial); the run is recorded
                    ``stopped``: resumable, not failed
    stop --trial N  cancels that running trial (recorded ``cancelled``); the search goes on
    set K=V ...     ``n_trials`` and ``concurrency`` of a running multi-trial search; the change
                    is written into the run's settings (a resume keeps it) and shown by
                    ``nasforge status``; a concurrency above what the run's executor runs at
                    once here (this machine's usable cores, its GPU slots, 1 in-process) is
                    refused in one line naming the bound
    logs DIR [N]    the run's log, or trial N's (``--follow`` goes on showing what is
                    appended until the trial, or the run, ends); for a trial that ran
                    in-process or on Ray, printed nothing and did not fail (it has no log
                    file), one line saying so, with its status and duration
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, NasforgeError, StoreError
from nasforge.run._schema import DB_NAME
from nasforge.run.lock import HOLDER_NAME, LOCK_NAME, WriterLock
from nasforge.run.requests import BOUND_META, CONTROL, SETTABLE, Request, describe
from nasforge.run.store import Store
from nasforge.run.trial_logs import (
    SHOWN_LIMIT,
    read_from,
    read_log,
    run_log,
    shown_log,
    trial_log,
)

__all__ = [
    "CONTROL",
    "SETTABLE",
    "request",
    "run_controls",
    "stop",
    "cancel",
    "change",
    "concurrency_bound",
    "parse_settings",
    "register",
]


def run_controls(directory: str | Path) -> tuple[str, frozenset[str]]:
    """Returns the kind of the run in ``directory`` and the controls it declared when it
    started (a record written before runs declared them: the controls its kind's runner
    declares now).

    Raises:
        StoreError: no readable run there.
    """
    from nasforge.run.runner import get_runner
    from nasforge.run.store import Store

    with Store.open(directory) as store:
        kind, declared = store.kind, store.controls()
    if declared is None:
        try:
            declared = get_runner(kind).controls
        except ConfigError:
            declared = frozenset()
    return kind, frozenset(declared)


def request(directory: str | Path, asked: Request) -> Path:
    """Returns the path of the request ``asked`` left for the writer running in ``directory``.

    Raises:
        StoreError: no run is recorded there, or none is running (nothing would read it), or
            the writer lock is held by another program than nasforge.
        ConfigError: the run's kind does not take this request (the message says what it
            takes), or it asks a concurrency above the run's stated bound
            (:func:`concurrency_bound`); nothing is left.
    """
    directory = Path(directory)
    if not (directory / DB_NAME).exists():
        raise StoreError(f"{directory} holds no nasforge run; give the run's directory")
    what = {"stop": "stop", "cancel": "cancel a trial of", "set": "change"}.get(asked.action)
    if not WriterLock.held(directory):
        raise StoreError(
            f"no run is running in {directory}, so there is nothing to {what}; "
            f"`nasforge resume {directory}` continues a stopped run"
        )
    if not WriterLock.held_by_nasforge(directory):
        raise StoreError(
            f"{directory / LOCK_NAME} is locked, but not by a nasforge run ({HOLDER_NAME} names "
            f"no live process on this host), so nothing would read a request; nothing was "
            f"asked: find the program that holds the lock (`fuser {directory / LOCK_NAME}`), "
            "or, if a run is just starting there, ask again in a moment"
        )
    kind, controls = run_controls(directory)
    missing = [c for c in asked.needs() if c not in controls]
    if missing:
        raise ConfigError(f"a {kind} run cannot take `{' '.join(missing)}`: {describe(controls)}")
    bound, asked_for = concurrency_bound(directory), asked.settings.get("concurrency", 0)
    if bound is not None and asked_for > bound[0]:
        raise ConfigError(
            f"concurrency={asked_for} is more than this run can run at once: {bound[1]}; "
            f"give concurrency={bound[0]} or fewer (nothing was asked)"
        )
    folder = directory / CONTROL
    folder.mkdir(exist_ok=True)
    # the folder itself, never a link put in its place: opened without following one, and the
    # request written relative to that descriptor
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        dir_fd = os.open(folder, flags)
    except OSError as exc:
        raise StoreError(f"{folder} is not a folder of the run ({exc}); nothing was asked") from exc
    name = f"{time.time_ns()}-{os.getpid()}.json"
    try:
        fd = os.open(f".{name}.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asked.to_data()))
        # the writer never reads a half-written request
        os.replace(f".{name}.tmp", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return folder / name


def stop(directory: str | Path, mode: str = "finish", via: str = "cli") -> str:
    """Returns a sentence saying what was asked, after asking the run in ``directory`` to
    stop: ``mode`` ``finish`` lets what is in flight finish, ``cancel`` cancels its running
    trials (multi-trial); ``via`` names who asked (kept in the run note).

    Raises:
        ConfigError: ``mode`` is neither ``finish`` nor ``cancel``, or the run's kind cannot
            take it.
        StoreError: no run is running there.
    """
    if mode not in ("finish", "cancel"):
        raise ConfigError(f"stop mode {mode!r}: give 'finish' or 'cancel'")
    request(directory, Request("stop", via, mode=mode))
    what = "cancel its running trials" if mode == "cancel" else "finish what is in flight"
    return (
        f"asked the run in {directory} to stop: it starts no new work and will {what}; "
        f"it is then recorded as stopped (`nasforge resume {directory}` continues it)"
    )


def cancel(directory: str | Path, trial: int, via: str = "cli") -> str:
    """Returns a sentence saying what was asked, after asking the run in ``directory`` to
    cancel its running trial ``trial``.

    Raises:
        ConfigError: ``trial`` is not a positive int, or the run's kind cannot cancel a trial.
        StoreError: no run is running there.
    """
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 1:
        raise ConfigError(f"trial {trial!r}: give a trial id, a positive int")
    request(directory, Request("cancel", via, trial=trial))
    return f"asked the run in {directory} to cancel trial {trial}"


def change(directory: str | Path, pairs: list[str], via: str = "cli") -> str:
    """Returns a sentence saying what was asked, after asking the run in ``directory`` to
    take the settings ``pairs`` (``n_trials=N``, ``concurrency=N``).

    Raises:
        ConfigError: a pair is malformed (:func:`parse_settings`), the run's kind cannot
            change that setting while it runs, or ``concurrency`` is more than the run can
            run at once here (:func:`concurrency_bound`); nothing is asked then.
        StoreError: no run is running there.
    """
    settings = parse_settings(pairs)
    request(directory, Request("set", via, settings=settings))
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    return f"asked the run in {directory} to take {shown}"


def concurrency_bound(directory: str | Path) -> tuple[int, str] | None:
    """Returns the most trials at once the search running in ``directory`` can take, and
    why, as it stated when it started (:data:`~nasforge.run.requests.BOUND_META`: this
    machine's usable cores for CPU trials on the pool, its GPU slots, 1 in-process); None
    where it stated no bound (Ray's cluster decides, or a record from before runs stated
    one: the running engine then lowers what it cannot run and records a note)."""
    from nasforge.run.store import Store

    with Store.open(directory) as store:
        text = store.get_meta(BOUND_META) or "{}"
    try:
        bound = json.loads(text)
        most, why = bound.get("most"), str(bound.get("why") or "")
    except (ValueError, AttributeError):  # a damaged value states no bound
        return None
    if isinstance(most, bool) or not isinstance(most, int) or most < 1:
        return None
    return most, why


def parse_settings(pairs: list[str]) -> dict[str, int]:
    """Returns ``n_trials=…`` / ``concurrency=…`` pairs as ints.

    Raises:
        ConfigError: a pair without ``=``, another key, or a value that is not a positive int.
    """
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in SETTABLE:
            raise ConfigError(f"set takes {'=…, '.join(SETTABLE)}=…, got {pair!r}")
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number < 1:
            raise ConfigError(f"{key} must be a positive int, got {value!r}")
        out[key] = number
    if not out:
        raise ConfigError("give at least one setting, e.g. `nasforge set DIR n_trials=50`")
    return out


def _follow(where: Callable[[], Path], done: Callable[[], bool]) -> None:
    """Prints what is appended to the file ``where()`` names until ``done()`` says it is
    over, read as :func:`~nasforge.run.trial_logs.read_log` reads (never through a link, only
    a regular file), a bounded chunk at a time. The file may change (an in-process trial's
    scratch log, then its log, which begins with the same text): reading goes on at the same
    offset.

    Raises:
        StoreError: the log is, or becomes, something else than a regular file (a link
            swapped in, a FIFO).
    """
    pos = 0
    while True:
        over = done()  # read before the file: what is written before the end is shown
        path = where()
        while True:
            data = read_from(path, pos)
            pos += len(data)
            if data:
                sys.stdout.write(data.decode("utf-8", "replace"))
                sys.stdout.flush()
            if len(data) < SHOWN_LIMIT:
                break
        if over:
            return
        time.sleep(0.5)


def _cmd_logs(args: argparse.Namespace) -> int:
    directory, trial = Path(args.directory), args.trial
    path = run_log(directory) if trial is None else shown_log(directory, trial)
    if not os.path.lexists(path) and not args.follow:
        said = None if trial is None else _printed_nothing(directory, trial)
        if said is not None:
            sys.stdout.write(said + "\n")
            return 0
        what = "the run" if trial is None else f"trial {trial}"
        raise StoreError(
            f"{path} does not exist: {what} has no log (a run made before nasforge kept logs, "
            "a trial not started yet, or a wrong directory)"
        )
    if not args.follow:
        # bounded, the run's own log too: its last bytes, saying how many were dropped
        sys.stdout.write(read_log(path))
        return 0

    def done() -> bool:
        if not WriterLock.held(directory):
            return True
        if trial is None:
            return False
        log = trial_log(directory, trial)
        if os.path.lexists(log):
            return _ended(log, trial)
        # no log and not in the scratch log: ended having printed nothing, or not started
        return shown_log(directory, trial) == log and _printed_nothing(directory, trial) is not None

    _follow(lambda: path if trial is None else shown_log(directory, trial), done)
    return 0


def _printed_nothing(directory: Path, trial: int) -> str | None:
    """Returns the line saying that trial ``trial`` ended having printed nothing (so it has
    no log file), from the run's record; None when the record has no such ended trial."""
    try:
        with Store.open(directory) as store:
            rec = store.trial(trial)
    except NasforgeError:
        return None
    if rec.status == "running":
        return None
    seconds = "?" if rec.duration is None else f"{rec.duration:.2f} s"
    return (
        f"trial {trial} printed nothing: {rec.status} after {seconds} (a trial run in-process "
        "or on Ray keeps a log file only when it printed something or failed)"
    )


def _ended(path: Path, trial: int) -> bool:
    """Returns whether the trial's log ends with its footer (the engine wrote it), from its
    last bytes."""
    text = read_log(path)
    starts = text.count(f"--- trial {trial}: pid ")
    return text.count(f"--- trial {trial}: ") > starts


def _cmd_stop(args: argparse.Namespace) -> int:
    if args.trial is not None:
        sys.stdout.write(cancel(args.directory, args.trial) + "\n")
    else:
        sys.stdout.write(stop(args.directory, "cancel" if args.cancel else "finish") + "\n")
    return 0


def _cmd_set(args: argparse.Namespace) -> int:
    sys.stdout.write(change(args.directory, args.settings) + "\n")
    return 0


def register(subparsers: Any) -> None:
    """Adds the ``logs``, ``stop`` and ``set`` commands to the command line."""
    p = subparsers.add_parser("logs", help="a run's log, or one trial's output")
    p.add_argument("directory", type=Path)
    p.add_argument("trial", type=int, nargs="?", help="trial id (default: the run's own log)")
    p.add_argument("--follow", "-f", action="store_true", help="go on until it ends")
    p.set_defaults(func=_cmd_logs)
    p = subparsers.add_parser("stop", help="stop a running search (resumable), or one trial")
    p.add_argument("directory", type=Path)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--finish", action="store_true", help="let running trials finish (default)")
    how.add_argument("--cancel", action="store_true", help="cancel the running trials")
    how.add_argument("--trial", type=int, help="cancel only this running trial")
    p.set_defaults(func=_cmd_stop)
    p = subparsers.add_parser("set", help="change n_trials / concurrency of a running search")
    p.add_argument("directory", type=Path)
    p.add_argument("settings", nargs="+", metavar="KEY=VALUE", help="n_trials=N concurrency=N")
    p.set_defaults(func=_cmd_set)
