"""The ``nasforge`` command line.

The shared commands (``run``, ``resume``, ``status``, ``export``, ``plot``) come from
:mod:`nasforge.run.cli` and work on every kind of run. ``nasforge ofa ...`` and
``nasforge train-supernet`` are thin aliases that build a run of their kind from flags.

The line is parsed in two phases (:func:`build_parser`): the first, with no kind's flags,
finds the command and the run it names; the second adds that run's kind's flags and parses
the whole line, so an unknown flag is argparse's usual error (status 2), and a reading
command (``status``, ``export``, ``plot``, ``logs``) imports no runner.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import select
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from nasforge import runners
from nasforge._version import __version__
from nasforge.dashboard import cli as dashboard_cli
from nasforge.errors import NasforgeError
from nasforge.ofa import cli as ofa_cli
from nasforge.parallel import cli as parallel_cli
from nasforge.run import cli as run_cli
from nasforge.run import control as control_cli
from nasforge.run.runner import BaseRunner
from nasforge.runtime.distributed import from_env, rank_error_file

__all__ = ["main", "build_parser"]


class _Unparsed(Exception):
    """Raised by a :class:`_Quiet` parser where argparse would print and exit."""


class _Quiet(argparse.ArgumentParser):
    """Returns nothing; a parser that raises :class:`_Unparsed` where argparse would print
    an error, a help or the version and exit: a phase that only looks ahead stays silent,
    and the parser the command line is then parsed with says it once."""

    def error(self, message: str) -> NoReturn:
        raise _Unparsed(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Unparsed(message or "")

    def _print_message(self, message: str, file: Any = None) -> None:
        pass


def _parser(
    kinds: Sequence[type[BaseRunner]] | None = None,
    opened: tuple[str, Any] | None = None,
    quiet: bool = False,
) -> argparse.ArgumentParser:
    """Returns the parser with every subcommand; ``run`` and ``resume`` take the flags of
    ``kinds`` (None: the first phase, see :func:`nasforge.run.cli.register`)."""
    parser = (_Quiet if quiet else argparse.ArgumentParser)(
        prog="nasforge", description="Neural architecture search on PyTorch."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument(
        "--version", action="version", version=f"nasforge {__version__}", help="show the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_cli.register(sub, kinds, opened)
    control_cli.register(sub)
    parallel_cli.register(sub)
    ofa_cli.register(sub)
    dashboard_cli.register(sub)
    return parser


def _target(args: argparse.Namespace) -> str | None:
    """Returns the run file ``run`` names, or the directory ``resume`` names, in ``args``."""
    return getattr(args, "file" if args.command == "run" else "dir", None)


def _kinds(command: str, target: str | None) -> tuple[list[type[BaseRunner]], Any]:
    """Returns the kinds whose flags ``command`` takes for ``target`` and what was read of it:
    its own kind and the RunFile or RecordedRun (:func:`nasforge.run.cli.open_target`); every
    kind and the error when it cannot be read (the command reports that error); every kind
    and None without a target (``nasforge run --help`` lists every kind's flags)."""
    read: Any = None
    if target is not None:
        try:
            read = run_cli.open_target(command, target)
            return [run_cli.kind_of(read)], read
        except NasforgeError as exc:
            read = exc
    return runners.every_kind(), read


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Returns the parser of the command line ``argv``, built in two phases.

    Phase 1 parses ``argv`` with no kind's flags (``parse_known_args``) to find the command
    and, for ``run`` and ``resume``, its FILE or DIR. Phase 2 reads that run once (the run
    file, its kind resolved through the registry; the record and its recorded kind) and
    returns the parser whose ``run`` and ``resume`` take that kind's flags (its runner's
    ``add_arguments``) and hand what was read to the command. Without a run (``nasforge run
    --help``), or with one that cannot be read (the command then reports why), they take
    every kind's flags. For any other command, or without ``argv``, it is the phase-1
    parser, which loads no runner. Should the whole line name another FILE than phase 1
    found (a kind's flag before it, whose value phase 1 took for the FILE), phase 2 runs again
    for that one.
    """
    if argv is None:
        return _parser()
    try:
        found = _parser(quiet=True).parse_known_args(argv)[0]
    except _Unparsed:  # the phase-1 parser says what is wrong, or prints the help asked for
        return _parser()
    command = found.command
    if command not in run_cli.RUN_COMMANDS:
        return _parser()
    target, tried = _target(found), []
    while True:
        kinds, read = _kinds(command, target)
        parser = _parser(kinds, None if target is None else (target, read))
        tried.append(target)
        try:
            named = _target(_parser(kinds, quiet=True).parse_known_args(argv)[0])
        except _Unparsed:  # the parser returned says what is wrong, or prints the help
            return parser
        if named == target or named in tried:
            return parser
        target = named


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
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    args.argv = argv
    rank = from_env()
    level = logging.WARNING - 10 * min(args.verbose + 1, 2)
    if rank is not None and rank.rank:  # rank 0 speaks for a data-parallel job
        level = max(level, logging.WARNING)
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=level, format=fmt if rank is None else f"[rank {rank.rank}] {fmt}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except NasforgeError as exc:
        logging.getLogger("nasforge").error("%s", exc)
        _rank_error(exc)
        return 2
    except KeyboardInterrupt:
        return 130
    except (OSError, sqlite3.Error) as exc:
        full = _disk_full(exc)
        if full is None:
            _rank_error(exc)
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
    except Exception as exc:
        _rank_error(exc)
        raise


def _rank_error(exc: BaseException) -> None:
    """Leaves this rank's error where the ``--nproc`` job that started it reads it (its one
    line names the rank and this error); nothing outside such a job."""
    rank = from_env()
    path = None if rank is None else rank_error_file(rank.rank)
    if path is not None:
        text = str(exc) if isinstance(exc, NasforgeError) else f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(OSError):
            path.write_text(" ".join(text.split())[:1000])


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
