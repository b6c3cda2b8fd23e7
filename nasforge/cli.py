"""The ``nasforge`` command line.

The shared commands (``run``, ``resume``, ``status``, ``export``, ``plot``) come from
:mod:`nasforge.run.cli` and work on every kind of run. ``nasforge ofa ...`` and
``nasforge train-supernet`` are thin aliases that build a run of their kind from flags.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import select
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from nasforge import runners
from nasforge._version import __version__
from nasforge.dashboard import cli as dashboard_cli
from nasforge.errors import NasforgeError
from nasforge.ofa import cli as ofa_cli
from nasforge.parallel import cli as parallel_cli
from nasforge.run import cli as run_cli
from nasforge.run import control as control_cli
from nasforge.run.files import RecordedRun, read_recorded
from nasforge.run.runner import BaseRunner

__all__ = ["main", "build_parser"]


#: The commands whose parser takes the run kinds' own flags (each runner's ``add_arguments``);
#: building those imports the kinds' runner modules, which the reading commands (``plot``,
#: ``status``, ``export``) skip.
KIND_FLAG_COMMANDS = frozenset({"run", "resume"})


def _command(argv: Sequence[str] | None) -> str | None:
    """Returns the subcommand ``argv`` names (its first word that is no option), or None."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    return words[0] if words else None


def _recorded_run(argv: Sequence[str] | None) -> RecordedRun | None:
    """Returns what resuming needs from the run that ``nasforge resume ... DIR`` names (the
    first word after ``resume`` that is a run directory), or None when none is found or it
    cannot be read (``resume`` then reads it again and reports why)."""
    from nasforge.run.store import DB_NAME

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    for word in words[1:]:
        if (Path(word) / DB_NAME).is_file():
            try:
                return read_recorded(word)
            except NasforgeError:
                return None
    return None


def _no_kinds() -> list[type[BaseRunner]]:
    """Returns no runner class: ``run`` and ``resume`` get only their shared flags."""
    return []


def _flag_kinds(
    argv: Sequence[str] | None, recorded: RecordedRun | None
) -> Callable[[], list[type[BaseRunner]]]:
    """Returns what lists the kinds whose flags ``run`` and ``resume`` take, for the command
    ``argv`` names: every built-in kind for ``run``; for ``resume`` the kind that wrote the run
    (``recorded``, so resuming imports no other family), every kind when the run is not found;
    else the kinds whose runner modules import no torch."""
    command = _command(argv)
    if command == "resume" and recorded is not None:

        def own_kind() -> list[type[BaseRunner]]:
            runners.load(recorded.kind)
            return runners.flag_kinds()

        return own_kind
    every = command in KIND_FLAG_COMMANDS
    return lambda: runners.flag_kinds(every=every)


def build_parser(
    argv: Sequence[str] | None = None, kind_flags: bool = True
) -> argparse.ArgumentParser:
    """Returns the parser with every subcommand. When ``argv`` (default: the process's
    arguments) names ``run``, every built-in kind is loaded first so that their flags
    (``nasforge run --help``) are all there, and for ``resume`` the kind that wrote the run;
    any other command loads only the kinds whose runner modules import no torch (the
    multi-trial one). Without ``kind_flags``, ``run`` and ``resume`` lack the kinds' own flags:
    a parser for a reading command, built without importing any runner."""
    parser = argparse.ArgumentParser(
        prog="nasforge", description="Neural architecture search on PyTorch."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument(
        "--version", action="version", version=f"nasforge {__version__}", help="show the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # the record `resume` names is read once, here: its kind picks the flags, and the command
    # rebuilds the run from what was read
    recorded = _recorded_run(argv) if kind_flags and _command(argv) == "resume" else None
    run_cli.register(
        sub,
        load_runners=runners.load,
        flag_kinds=_flag_kinds(argv, recorded) if kind_flags else _no_kinds,
        recorded=recorded,
    )
    control_cli.register(sub)
    parallel_cli.register(sub)
    ofa_cli.register(sub)
    dashboard_cli.register(sub)
    return parser


#: the exit status of a command whose standard output was closed under it (``... | head -1``):
#: 128 + SIGPIPE, what a shell reports for ``ls`` or ``git`` stopped the same way
CLOSED_STDOUT = 141


def _stdout_fd() -> int | None:
    """Returns the file descriptor of standard output, or None when it has none (a test's
    capture)."""
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _stdout_closed() -> bool:
    """Returns whether the reader of standard output has gone (the pipe reports an error),
    which tells a closed ``| head`` from a broken pipe of a worker or a socket."""
    fd = _stdout_fd()
    if fd is None:
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(ev & select.POLLERR for _, ev in poll.poll(0))


def _quiet_stdout() -> None:
    """Points standard output at /dev/null, so that the interpreter's last flush of what is
    still buffered does not fail on the closed pipe again ("Exception ignored ...")."""
    fd = _stdout_fd()
    if fd is not None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (2 for a usage or nasforge error, 1 when
    a run failed, 130 when interrupted, 141 when standard output was closed under it)."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, where it can still end quietly
        return code
    except BrokenPipeError:
        if not _stdout_closed():  # a worker's or a socket's pipe: a real error
            raise
        _quiet_stdout()
        return CLOSED_STDOUT


def _main(argv: Sequence[str] | None) -> int:
    """Returns the exit code of the command ``argv`` names (see :func:`main`)."""
    command = _command(argv)
    parser = build_parser(argv, kind_flags=command is None or command in KIND_FLAG_COMMANDS)
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose + 1, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "needs_runners", False):
        runners.load()
    try:
        return int(args.func(args) or 0)
    except NasforgeError as exc:
        logging.getLogger("nasforge").error("%s", exc)
        return 2
    except KeyboardInterrupt:
        return 130
    except (OSError, sqlite3.Error) as exc:
        full = _disk_full(exc)
        if full is None:
            raise
        where = getattr(args, "dir", None)
        logging.getLogger("nasforge").error(
            "the disk holding %s is full (%s); free space there, then `nasforge resume %s` "
            "continues the run (every finished trial is saved)",
            where or "the run directory",
            full,
            where or "DIR",
        )
        return 2


#: errno values that mean the disk (or the user's quota on it) has no room left
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: SQLite's result code for a full database or disk (sqlite3.SQLITE_FULL, from Python 3.11)
_SQLITE_FULL = 13


def _disk_full(exc: BaseException) -> BaseException | None:
    """Returns the error in ``exc``'s chain that says the disk is full (an OSError with
    ENOSPC or EDQUOT, SQLite's SQLITE_FULL), or None."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return e
        if isinstance(e, sqlite3.Error) and (
            getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL
            or "database or disk is full" in str(e)
        ):
            return e
        e = e.__cause__ or e.__context__
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
