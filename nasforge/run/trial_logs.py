"""Per-trial logs: each trial's standard output, standard error and ``logging`` output, kept
with the run record in ``DIR/logs/trial_N.log``, and the run's own log ``DIR/logs/run.log``.

    capture   while a trial runs, its process's file descriptors 1 and 2 point at the trial's
              log (so C-level output and ``print`` alike land there); in a pool child
              ``faulthandler`` writes there too, so a segfault leaves its Python traceback; a
              first line names the worker (host, process id). On the pool the child writes
              the file as it goes (``nasforge logs DIR N --follow`` shows it live); a Ray
              worker captures into a local file and sends its text back with the result,
              which the engine writes
    scratch   the in-process executor captures every trial into one file,
              ``logs/inprocess.log`` (:class:`ScratchLog`), rewritten in place per trial:
              creating a file per trial cost 0.01-0.3 ms on this project's disk, as much as
              the rest of a no-op trial. When the trial ends its text goes to the engine like
              a Ray worker's (``--follow`` reads the scratch file while it names the trial)
    silent    a trial run in-process or on Ray that printed nothing and did not fail keeps no
              log file: its status, duration and placement are in the record, and ``nasforge
              logs`` says it printed nothing. A pool child writes its trial's log itself, so
              every pool trial has one
    bounded   when the trial ends, the engine keeps the last ``LOG_LIMIT`` bytes (64 KiB) and
              appends a footer: the trial's status, its duration, where it ran and, when it
              failed, the error with its traceback
    run log   the engine's own lines (warnings, and progress lines when the run has no
              terminal) go to ``DIR/logs/run.log``
    reading   ``nasforge logs`` and the dashboard read a log as :func:`read_log` does: only a
              regular file directly in the run's own ``logs/`` folder, opened without
              following a link (neither the file nor ``logs/`` may be one), never a FIFO or a
              device, and only its last :data:`SHOWN_LIMIT` bytes; anything else is refused
              in one line (a folder others can write must not make a reader show the
              reader's own files, or hang it). Writers do not write through a link either

The engine's process is the only writer of a trial's log once the trial has ended.
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import logging
import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nasforge.errors import StoreError
from nasforge.run.progress import show_unconfigured

__all__ = [
    "LOG_LIMIT",
    "LOGS",
    "trial_log",
    "trial_log_name",
    "run_log",
    "captured",
    "crash_traceback",
    "finish_log",
    "tail",
    "read_log",
    "read_from",
    "dropped_bytes",
    "SHOWN_LIMIT",
    "RunLog",
    "ScratchLog",
    "SCRATCH",
    "shown_log",
    "silent",
]

#: bytes of a trial's output kept, the last ones (64 KiB)
LOG_LIMIT = 64 * 1024
#: the run record's folder of logs
LOGS = "logs"
#: bytes of a log shown (``nasforge logs``, the dashboard): a finished trial's whole log (its
#: kept output and a footer with the traceback), the last ones of a longer running one
SHOWN_LIMIT = 2 * LOG_LIMIT
#: the in-process executor's file of the running trial's output, in the run's ``logs/``
SCRATCH = "inprocess.log"
#: how a log is opened for reading: never through a link, never waiting on a FIFO
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: how the folder of logs is opened: a real folder, not a link to one
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: how a log is opened for appending: never through a link (a planted link would make the
#: writer append to a file of its own elsewhere)
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def trial_log(directory: str | Path, trial: int) -> Path:
    """Returns the path of trial ``trial``'s log in the run directory."""
    return Path(directory, LOGS, trial_log_name(trial))


def trial_log_name(trial: int) -> str:
    """Returns the file name of trial ``trial``'s log in the run's ``logs/`` folder."""
    return f"trial_{trial}.log"


def run_log(directory: str | Path) -> Path:
    """Returns the path of the run's own log (engine warnings and progress lines)."""
    return Path(directory) / LOGS / "run.log"


@contextlib.contextmanager
def captured(path: str | Path | None, trial: int, where: str = "") -> Iterator[None]:
    """Returns a context in which this process's stdout, stderr, ``logging`` to them and a
    fatal signal's traceback go to ``path`` (appended; nothing is captured for None)."""
    if path is None:
        yield
        return
    fd = _open_append(path)
    os.write(fd, _head(trial, where))
    try:
        with _redirected(fd):
            yield
    finally:
        os.close(fd)


def _head(trial: int, where: str = "") -> bytes:
    """Returns the first line of a trial's log: the trial and the worker (host, process)."""
    return f"--- trial {trial}: pid {os.getpid()} on {socket.gethostname()}{where}\n".encode()


@contextlib.contextmanager
def _redirected(fd: int) -> Iterator[None]:
    """Returns a context in which this process's file descriptors 1 and 2, ``sys.stdout`` and
    ``sys.stderr`` write to ``fd`` (which stays open)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    streams = sys.stdout, sys.stderr
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        # line-buffered streams on the descriptors: a print reaches the log at once (before a
        # crash, and for ``--follow``), whatever sys.stdout was (a test's capture, a pipe)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")  # noqa: SIM115
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if stream not in streams:  # ours: flushed and closed, the descriptor kept
                with contextlib.suppress(Exception):
                    stream.close()
        sys.stdout, sys.stderr = streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in saved:
            os.close(f)


def _open_append(path: str | Path) -> int:
    """Returns a descriptor of the log at ``path`` opened for appending (never through a
    link), its folder made first when missing (tried after the open: the folder exists for
    every trial but the first)."""
    try:
        return os.open(path, _APPEND, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, _APPEND, 0o644)


class ScratchLog:
    """Returns nothing; the in-process executor's one file of the running trial's output,
    ``logs/inprocess.log`` in the folder of logs, rewritten in place for each trial (the
    module's docstring, ``in-process``): :meth:`captured` points this process's output at it,
    :meth:`output` returns what the trial printed."""

    def __init__(self, folder: str | Path) -> None:
        self.path = os.path.join(folder, SCRATCH)
        self._fd: int | None = None
        self._head = 0  # the length of the running trial's first line
        self._size = 0  # the file's length

    @contextlib.contextmanager
    def captured(self, trial: int) -> Iterator[None]:
        """Returns a context in which this process's output goes to the file, after a first
        line naming ``trial`` (the earlier trial's text is replaced)."""
        fd = self._open()
        head = _head(trial)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, head)
        if self._size > len(head):  # the earlier trial printed: drop its text (a block kept)
            os.ftruncate(fd, len(head))
        self._head = self._size = len(head)
        try:
            with _redirected(fd):
                yield
        finally:
            self._size = os.lseek(fd, 0, os.SEEK_CUR)

    def output(self) -> str:
        """Returns the last trial's log text (its first line and its output, the last
        :data:`LOG_LIMIT` bytes), or '' when it printed nothing."""
        if self._size <= self._head:
            return ""
        return tail(self.path)

    def close(self) -> None:
        """Closes the file and removes it: the trials' texts went to their logs."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _open(self) -> int:
        """Returns the file's descriptor, opened at the first trial; a file left by an engine
        killed during a trial first has its text appended to that trial's log."""
        if self._fd is None:
            _keep_left_text(self.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # whatever is there (a link planted): never written through
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._fd = os.open(self.path, flags, 0o644)
            self._size = 0
        return self._fd


def _keep_left_text(path: str) -> None:
    """Returns None after appending the text of the scratch file at ``path``, left by an
    engine killed during a trial, to that trial's log (named by its first line)."""
    text = tail(path)
    first = text.split("\n", 1)[0]
    if not first.startswith("--- trial ") or ":" not in first or "\n" not in text:
        return
    number = first[len("--- trial ") :].split(":", 1)[0]
    if not number.isdigit() or silent(text):
        return
    with contextlib.suppress(OSError):
        fd = _open_append(os.path.join(os.path.dirname(path), f"trial_{number}.log"))
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)


def silent(text: str) -> bool:
    """Returns whether a trial's log text holds nothing the trial printed: only the first
    lines naming its workers ('' too)."""
    return all(line.startswith("--- trial ") for line in text.splitlines())


def shown_log(directory: str | Path, trial: int) -> Path:
    """Returns the file that holds trial ``trial``'s output now: its log, or the in-process
    executor's scratch file while that names the trial (the trial runs in-process and has no
    log yet); the log's path when neither exists."""
    path = trial_log(directory, trial)
    if os.path.lexists(path):
        return path
    scratch = path.with_name(SCRATCH)
    try:
        first = read_from(scratch, 0, 256)
    except StoreError:
        return path
    return scratch if first.startswith(f"--- trial {trial}: pid ".encode()) else path


def crash_traceback(path: str | Path | None) -> None:
    """Returns None after pointing ``faulthandler`` at ``path`` (appended), so that a fatal
    signal (a segfault) leaves the Python traceback in the trial's log; for a process that
    runs one trial and ends (a pool child), never for the engine's own process."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # disable first: enabling an enabled faulthandler only changes its file and keeps
        # whatever handler replaced its own since (a library's), so no traceback was written
        faulthandler.disable()
        # open until the process ends
        faulthandler.enable(os.fdopen(os.open(path, _APPEND, 0o644), "ab"))


def _kind(path: Path) -> str:
    """Returns what ``path`` is, for a refusal: a symbolic link, a FIFO, a device, ..."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "unreadable"
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refused(path: Path, exc: OSError | None = None) -> StoreError:
    """Returns the error for a log at ``path`` that is not read (``exc``: why opening it
    failed, None when it opened as something else than a regular file)."""
    if exc is not None and exc.errno in (errno.EACCES, errno.EPERM):
        return StoreError(f"{path} cannot be read: permission denied")
    return StoreError(
        f"{path} is {_kind(path)}, not a log nasforge wrote: a log is shown only from a "
        "regular file in the run's own logs/ folder (never through a link, never a FIFO or a "
        "device); remove it, or ask whoever put it there"
    )


def _open(path: Path) -> tuple[int, int]:
    """Returns (a read-only descriptor, its size) of the log at ``path``, a file directly in
    a run's ``logs/`` folder, opened as the module's docstring says (``reading``).

    Raises:
        FileNotFoundError: there is no such log (or no ``logs/`` folder).
        StoreError: it, or its folder, is a link, or it is not a regular file, or it cannot
            be read.
    """
    try:
        folder = os.open(path.parent, _FOLDER)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refused(path.parent, exc) from None
    try:
        fd = os.open(path.name, _READ, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refused(path, exc) from None
    finally:
        os.close(folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _refused(path)
    return fd, info.st_size


def _read(fd: int, start: int, limit: int) -> bytes:
    """Returns at most ``limit`` bytes of ``fd`` from offset ``start``."""
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.pread(fd, min(limit - got, 1 << 20), start + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _tail(path: str | Path, limit: int, note: str) -> str:
    """Returns the last ``limit`` bytes of the log at ``path`` as text ('' when missing),
    after a first line saying how many were dropped before them (``note`` says why).

    Raises:
        StoreError: the log is refused (see :func:`_open`).
    """
    try:
        fd, size = _open(Path(path))
    except FileNotFoundError:
        return ""
    try:
        data = _read(fd, max(0, size - limit), limit)
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if size > limit:
        text = f"[... {size - limit} bytes dropped: {note}]\n" + text.split("\n", 1)[-1]
    return text


def tail(path: str | Path, limit: int = LOG_LIMIT) -> str:
    """Returns the last ``limit`` bytes of the trial log at ``path`` as text ('' if missing
    or refused: a link, a FIFO), with a first line saying how much was dropped before them."""
    try:
        return _tail(path, limit, f"a trial's log keeps its last {limit} bytes")
    except (OSError, StoreError):
        return ""


def read_log(path: str | Path, limit: int = SHOWN_LIMIT) -> str:
    """Returns the log at ``path`` (``DIR/logs/NAME``: :func:`trial_log`, :func:`run_log`)
    as ``nasforge logs`` and the dashboard show it: its last ``limit`` bytes, the first line
    saying how many were dropped when some were ('' when there is no such file).

    Raises:
        StoreError: the log is not a regular file in the run's own ``logs/`` folder (a link,
            a FIFO, a device, or ``logs/`` itself a link), or cannot be read; nothing of it
            was read.
    """
    note = f"only its last {limit} bytes are shown"
    try:
        return _tail(path, limit, note)
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}") from None


def read_from(path: str | Path, start: int, limit: int = SHOWN_LIMIT) -> bytes:
    """Returns at most ``limit`` bytes of the log at ``path`` from byte ``start`` on (b''
    when there is no such file yet), read as :func:`read_log` reads.

    Raises:
        StoreError: the log is refused (as by :func:`read_log`).
    """
    try:
        fd, _ = _open(Path(path))
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        return _read(fd, start, limit)
    finally:
        os.close(fd)


def dropped_bytes(text: str) -> int:
    """Returns how many bytes of a log were dropped before ``text`` (a log's text as
    :func:`read_log` returns it), from its first line; 0 when none were."""
    first = text.split("\n", 1)[0]
    if not first.startswith("[... ") or " bytes dropped" not in first:
        return 0
    number = first[len("[... ") :].split(" ", 1)[0]
    return int(number) if number.isdigit() else 0


def finish_log(
    path: str | Path, trial: int, result: Any, text: str | None = None, limit: int = LOG_LIMIT
) -> None:
    """Returns None after bounding the log at ``path`` to its last ``limit`` bytes (or writing
    ``text``, the output a Ray worker or the in-process executor captured) and appending the
    trial's footer: status, duration, placement, and the error with its traceback when it
    failed. A ``text`` of a trial that printed nothing (:func:`silent`) and did not fail
    writes no file."""
    if text is not None and result.status != "failed" and silent(text):
        return  # it printed nothing: no file (the record has its status and duration)
    if text is not None and os.path.lexists(path):
        # an earlier attempt's log (a trial resumed after its engine was killed): the new
        # text follows it, and the bounding below keeps the last bytes of both
        with contextlib.suppress(OSError):
            fd = _open_append(path)
            try:
                os.write(fd, text.encode("utf-8", "replace"))
            finally:
                os.close(fd)
        text = None
    where = result.placement or {}
    seconds = "?" if result.duration is None else f"{result.duration:.2f} s"
    footer = f"--- trial {trial}: {result.status} after {seconds} on {where.get('node', '?')}"
    if where.get("devices"):
        footer += f" (GPUs {where['devices']})"
    footer += "\n"
    if result.error:
        footer += result.error.rstrip() + "\n"
    if text is None and _append_within(path, footer, limit):
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = text if text is not None else tail(path, limit)
    tmp = path.with_suffix(".log.tmp")
    text = body + ("" if not body or body.endswith("\n") else "\n") + footer
    try:
        tmp.unlink(missing_ok=True)  # a link planted there is removed, never written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # a full disk: the log keeps what it had; no half-written copy is left
        tmp.unlink(missing_ok=True)


def _append_within(path: str | Path, footer: str, limit: int) -> bool:
    """Returns whether ``footer`` was appended to the log at ``path`` in place: only when the
    log is a regular file of at most ``limit`` bytes ending in a newline (most trials' logs),
    so nothing of it needs dropping; False leaves the log as it was (missing, a link, longer,
    or the write failed) for :func:`finish_log` to rewrite."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not 0 < info.st_size <= limit:
            return False
        if os.pread(fd, 1, info.st_size - 1) != b"\n":
            return False
        data = footer.encode("utf-8", "replace")
        if os.write(fd, data) == len(data):
            return True
        os.ftruncate(fd, info.st_size)  # a short write (a full disk): the log as it was
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


class RunLog(logging.Handler):
    """Returns nothing; a handler that appends the engine's records (and progress lines) to
    the run's log ``DIR/logs/run.log`` while the run goes on (:meth:`attach`/:meth:`detach`)."""

    def __init__(self, directory: str | Path) -> None:
        super().__init__(logging.INFO)
        self.path = run_log(directory)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # closed by detach
        self._file = os.fdopen(os.open(self.path, _APPEND, 0o644), "a", encoding="utf-8")
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        """Appends one record (and shows a warning on standard error when the program
        configured no logging, as Python would have without this handler)."""
        show_unconfigured(record)
        if self._file.closed:
            return
        try:
            self._file.write(self.format(record) + "\n")
            self._file.flush()
        except OSError:  # a full disk: stop writing this log; stderr still says what happened
            with contextlib.suppress(OSError):
                self._file.close()
        except Exception:  # noqa: BLE001 - logging must never fail the run
            self.handleError(record)

    def line(self, text: str) -> None:
        """Appends a progress line, stamped like a record."""
        self.emit(logging.makeLogRecord({"msg": text, "name": "nasforge.progress", "levelno": 20,
                                         "levelname": "INFO"}))  # fmt: skip

    def attach(self) -> RunLog:
        """Returns self, after attaching to the ``nasforge`` logger."""
        logging.getLogger("nasforge").addHandler(self)
        return self

    def detach(self) -> None:
        """Detaches and closes the file."""
        logging.getLogger("nasforge").removeHandler(self)
        with contextlib.suppress(OSError):  # a full disk: what it had is kept
            self._file.close()
