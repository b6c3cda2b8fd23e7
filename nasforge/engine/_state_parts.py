"""The parts of a pool worker's process state that the interpreter and the operating system
hold (environment, working directory, signals, logging, limits, descriptors, ...), each with
how to read it and, where it can be, how to put it back: :class:`Part` and
:data:`PROCESS_PARTS`, for :mod:`nasforge.engine.worker_state`.
"""

from __future__ import annotations

import builtins
import faulthandler
import gc
import importlib
import locale
import logging
import os
import random
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__: list[str] = []  # internal: worker_state's parts

MISSING = object()  # a value a part cannot have: an attribute this process lacks


@dataclass(frozen=True)
class Part:
    """Returns nothing; one part of a worker's process state: ``read`` it, and ``write`` a
    value ``read`` gave to put it back (None: it cannot be put back, a change replaces the
    worker). ``same`` says whether a later reading is still the first one; ``always`` writes
    it back without comparing (random generators: cheaper than comparing); ``needs`` names a
    module without which the part is not taken; ``say`` words a change for the log."""

    name: str
    read: Callable[[], Any]
    write: Callable[[Any], object] | None = None
    same: Callable[[Any, Any], bool] = lambda now, saved: bool(now == saved)
    always: bool = False
    needs: str = ""
    say: Callable[[Any, Any], str] | None = None


def _put_environ(saved: dict[str, str]) -> None:
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value
    if hasattr(time, "tzset"):  # a changed TZ reaches time.localtime only through tzset
        time.tzset()


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the trial removed the folder it moved into
        return None


def _import_paths() -> tuple[tuple[Any, ...], ...]:
    return tuple(sys.path), tuple(sys.meta_path), tuple(sys.path_hooks)


def _put_import_paths(saved: tuple[tuple[Any, ...], ...]) -> None:
    sys.path[:], sys.meta_path[:], sys.path_hooks[:] = (list(s) for s in saved)
    importlib.invalidate_caches()


def _found_again(name: str, origin: str) -> bool:
    """Returns whether the import system as it is now finds top-level module ``name`` at
    ``origin`` (past the import cache: each finder asked)."""
    for finder in sys.meta_path:
        try:
            spec = finder.find_spec(name, None)
        except Exception:  # noqa: BLE001 - a finder that cannot answer finds nothing
            continue
        if spec is not None:
            return bool(spec.origin == origin)
    return False


def _outsiders(now: frozenset[str], saved: frozenset[str]) -> list[str]:
    """Returns the top-level modules imported since ``saved`` from a file the import system,
    with its path put back, finds no more (a folder the trial put on ``sys.path``, a file it
    loaded by its path): the next trial would still get them from the import cache."""
    out = []
    for name in now - saved:
        spec = getattr(sys.modules.get(name), "__spec__", None)
        origin = getattr(spec, "origin", None)
        located = "." not in name and getattr(spec, "has_location", False)
        if located and isinstance(origin, str) and not _found_again(name, origin):
            out.append(name)
    return sorted(out)


def _same_namespace(now: dict[str, Any], saved: dict[str, Any]) -> bool:
    return now.keys() == saved.keys() and all(now[k] is saved[k] for k in saved)


def _put_builtins(saved: dict[str, Any]) -> None:
    for name in [n for n in vars(builtins) if n not in saved]:
        delattr(builtins, name)
    for name, value in saved.items():
        if getattr(builtins, name, MISSING) is not value:
            setattr(builtins, name, value)


def _loggers() -> dict[str, logging.Logger]:
    found = {"": logging.getLogger()}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):  # not a PlaceHolder
            found[name] = logger
    return found


def _logging() -> tuple[Any, ...]:
    loggers = {
        name: (lg.level, tuple(lg.handlers), lg.propagate, lg.disabled, tuple(lg.filters))
        for name, lg in _loggers().items()
    }
    handlers = {h for held in loggers.values() for h in held[1]}
    styles = {h: (h.level, h.formatter, tuple(h.filters)) for h in handlers}
    manager = logging.Logger.manager
    return manager.disable, logging.getLoggerClass(), logging.getLogRecordFactory(), loggers, styles


def _same_logging(now: tuple[Any, ...], saved: tuple[Any, ...]) -> bool:
    # loggers made during a trial belong to modules it imported, which stay imported
    loggers = {name: now[3].get(name) for name in saved[3]}
    styles = {h: now[4].get(h) for h in saved[4]}
    return bool(now[:3] == saved[:3] and loggers == saved[3] and styles == saved[4])


def _put_logging(saved: tuple[Any, ...]) -> None:
    disable, logger_class, factory, loggers, styles = saved
    ours = set(styles)
    for name, (level, handlers, propagate, disabled, filters) in loggers.items():
        logger = logging.getLogger(name or None)
        for handler in logger.handlers:
            if handler not in ours:  # the trial's: its file would stay open
                handler.close()
        logger.handlers[:] = handlers
        logger.filters[:] = filters
        logger.propagate, logger.disabled = propagate, disabled
        logger.setLevel(level)
    for handler, (level, formatter, filters) in styles.items():
        handler.setLevel(level)
        handler.setFormatter(formatter)
        handler.filters[:] = filters
    logging.setLoggerClass(logger_class)
    logging.setLogRecordFactory(factory)
    logging.disable(disable)  # also clears the loggers' cached levels


def _signals() -> dict[int, Any]:
    catchable = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    return {int(s): signal.getsignal(s) for s in sorted(catchable)}


def _put_signals(saved: dict[int, Any]) -> None:
    for number, handler in saved.items():
        if signal.getsignal(number) != handler:
            # None (a handler set from C before the first trial) raises TypeError: replaced
            signal.signal(number, handler)


# none on Windows (where the pool spawns and never reuses a worker): the part is not taken
_TIMERS = tuple(
    getattr(signal, n)
    for n in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
    if hasattr(signal, n)
)


def _put_timers(saved: tuple[tuple[float, float], ...]) -> None:
    for which, (delay, interval) in zip(_TIMERS, saved, strict=True):
        signal.setitimer(which, delay, interval)


def _put_faulthandler(enabled: bool) -> None:
    faulthandler.cancel_dump_traceback_later()  # a watchdog that would end the next trial
    faulthandler.disable()  # closes the file the trial's log pointed it at
    if enabled:
        faulthandler.enable(sys.stderr)


def _streams() -> tuple[Any, ...]:
    return sys.stdin, sys.stdout, sys.stderr


def _put_streams(saved: tuple[Any, ...]) -> None:
    sys.stdin, sys.stdout, sys.stderr = saved


_HOOKS = ("excepthook", "displayhook", "unraisablehook", "breakpointhook")


def _hooks() -> tuple[Any, ...]:
    traces = (sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile())
    return (*(getattr(sys, h) for h in _HOOKS), threading.excepthook, *traces)


def _put_hooks(saved: tuple[Any, ...]) -> None:
    for name, hook in zip(_HOOKS, saved, strict=False):
        setattr(sys, name, hook)
    threading.excepthook = saved[4]
    if sys.gettrace() is not saved[5]:
        sys.settrace(saved[5])
    if sys.getprofile() is not saved[6]:
        sys.setprofile(saved[6])
    threading.settrace(saved[7])
    threading.setprofile(saved[8])


def _limits() -> tuple[Any, ...]:
    digits = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    return sys.getrecursionlimit(), sys.getswitchinterval(), digits, sys.dont_write_bytecode


def _put_limits(saved: tuple[Any, ...]) -> None:
    sys.setrecursionlimit(saved[0])
    sys.setswitchinterval(saved[1])
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(saved[2])
    sys.dont_write_bytecode = saved[3]


def _put_gc(saved: tuple[Any, ...]) -> None:
    (gc.enable if saved[0] else gc.disable)()
    gc.set_threshold(*saved[1])
    gc.set_debug(saved[2])


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WARNINGS: Any = warnings  # its filters and registry are lists and dicts, typeshed aside


def _warnings() -> tuple[Any, ...]:
    once = dict(_WARNINGS.onceregistry)
    return tuple(warnings.filters), warnings.showwarning, warnings.formatwarning, once


def _put_warnings(saved: tuple[Any, ...]) -> None:
    _WARNINGS.filters[:] = saved[0]
    warnings.showwarning, warnings.formatwarning = saved[1], saved[2]
    _WARNINGS.onceregistry.clear()
    _WARNINGS.onceregistry.update(saved[3])
    # forget which warnings each module has shown, so that each trial's log shows its own
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()


def _put_tempdir(saved: str | None) -> None:
    tempfile.tempdir = saved


def _put_locale(saved: str) -> None:
    locale.setlocale(locale.LC_ALL, saved)


def _rlimits() -> dict[str, tuple[int, int]]:
    import resource

    names = [n for n in dir(resource) if n.startswith("RLIMIT_")]
    return {n: resource.getrlimit(getattr(resource, n)) for n in sorted(names)}


def _put_rlimits(saved: dict[str, tuple[int, int]]) -> None:
    import resource

    for name, limits in saved.items():
        if resource.getrlimit(getattr(resource, name)) != limits:
            # raising a hard limit back needs root: ValueError, and the worker is replaced
            resource.setrlimit(getattr(resource, name), limits)


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def _put_priority(saved: int) -> None:
    os.setpriority(os.PRIO_PROCESS, 0, saved)  # lowering it back needs root: replaced


def _identity() -> tuple[Any, ...]:
    ids = os.getresuid(), os.getresgid(), tuple(sorted(os.getgroups()))
    return (*ids, os.getpgid(0), os.getsid(0))


def _descriptors() -> dict[int, tuple[int, int]]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(name))
        except OSError:  # the listing's own descriptor, closed by now
            continue
        out[int(name)] = (st.st_dev, st.st_ino)
    return out


def _say_descriptors(now: dict[int, Any], saved: dict[int, Any]) -> str:
    def where(fd: int) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return "?"

    opened = [f"{fd} ({where(fd)})" for fd in sorted(now) if saved.get(fd) != now[fd]]
    closed = [str(fd) for fd in sorted(saved) if fd not in now]
    return "; ".join(
        (["left open or redirected: " + ", ".join(opened)] if opened else [])
        + (["closed: " + ", ".join(closed)] if closed else [])
    )


def _threads() -> dict[int, str]:
    return {
        t.ident: t.name
        for t in threading.enumerate()
        if t.ident is not None and t.is_alive() and not isinstance(t, threading._DummyThread)
    }


def _children() -> tuple[int, ...]:
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        pids += map(int, Path(f"/proc/self/task/{task}/children").read_text().split())
    return tuple(sorted(pids))


def resident() -> int:
    """Returns the bytes of anonymous memory this process has resident (Linux)."""
    # anonymous memory only: the pages of torch's libraries that a first trial faults in
    # count in the resident size too, and cost nothing to keep
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) << 10
    raise OSError("no RssAnon in /proc/self/status")


def _same_object(a: Any, b: Any) -> bool:
    return a is b or a == b  # a method read twice is a new object, equal to the first


def _subset(now: Any, saved: Any) -> bool:
    return set(now) <= set(saved)


def _new(now: Any, saved: Any) -> str:
    extra = [f"{k} ({now[k]})" if isinstance(now, dict) else str(k) for k in now if k not in saved]
    return ", ".join(extra)


#: the interpreter's and the process's parts, in the order they are put back: warnings first
#: (putting the others back may warn, e.g. an unclosed file), the standard streams before
#: faulthandler (which writes to sys.stderr), timers before the handlers of their signals
#: (SIGALRM's default ends the process)
PROCESS_PARTS = [
    Part("environment variables", lambda: dict(os.environ), _put_environ),
    Part("working directory", _cwd, os.chdir),
    Part("sys.path, sys.meta_path and sys.path_hooks", _import_paths, _put_import_paths),
    Part("builtins", lambda: dict(vars(builtins)), _put_builtins, _same_namespace),
    # modules imported from the import path stay (the import cache); one from elsewhere would
    # be found by a next trial that cannot import it
    Part(
        "modules imported from outside the import path",
        lambda: frozenset(sys.modules),
        same=lambda now, saved: not _outsiders(now, saved),
        say=lambda now, saved: ", ".join(_outsiders(now, saved)),
    ),
    Part("Python's random generator", random.getstate, random.setstate, always=True),
    Part("warnings", _warnings, _put_warnings, always=True),
    Part("standard streams", _streams, _put_streams, lambda a, b: all(map(_same_object, a, b))),
    Part("interpreter hooks", _hooks, _put_hooks, lambda a, b: all(map(_same_object, a, b))),
    Part("logging", _logging, _put_logging, _same_logging),
    Part("faulthandler", faulthandler.is_enabled, _put_faulthandler, always=True),
    Part("interval timers", lambda: tuple(signal.getitimer(w) for w in _TIMERS), _put_timers),
    Part("signal handlers", _signals, _put_signals),
    Part(
        "signal mask",
        lambda: signal.pthread_sigmask(signal.SIG_BLOCK, []),
        lambda saved: signal.pthread_sigmask(signal.SIG_SETMASK, saved),
    ),
    Part("interpreter limits", _limits, _put_limits),
    Part(
        "garbage collector", lambda: (gc.isenabled(), gc.get_threshold(), gc.get_debug()), _put_gc
    ),
    Part("umask", _umask, os.umask),
    Part("tempfile.tempdir", lambda: tempfile.tempdir, _put_tempdir),
    Part("locale", lambda: locale.setlocale(locale.LC_ALL), _put_locale),
    Part("CPU affinity", lambda: os.sched_getaffinity(0), lambda s: os.sched_setaffinity(0, s)),
    Part("scheduling priority", _priority, _put_priority),
    Part("resource limits", _rlimits, _put_rlimits),
    Part("credentials, session and process group", _identity),
    # after logging, faulthandler and the streams: putting those back closes their files
    Part("file descriptors", _descriptors, say=_say_descriptors),
    Part("threads", _threads, same=_subset, say=_new),
    Part("child processes", _children, same=_subset, say=_new),
]
