"""What a running run can be asked, and the requests that ask it.

Every kind of run declares the controls it honours (:attr:`BaseRunner.controls
<nasforge.run.runner.BaseRunner.controls>`, recorded in the run's meta when it starts). A
command (``nasforge stop``, ``nasforge set``, the dashboard's panel) never writes the record: it
leaves a request file in ``DIR/control/`` (:func:`nasforge.run.control.request`), which the
running writer takes at its next boundary (:func:`take_requests`), checks against what its kind
declares, and applies through one hook (:meth:`BaseRunner.apply_request
<nasforge.run.runner.BaseRunner.apply_request>`).

    control           what it asks                                        who honours it
    stop              no new work; stop at the next boundary (an epoch,   every kind that
                      a checkpoint, a trial), keep what finished, record  trains
                      the run ``stopped``; ``nasforge resume`` continues
    stop:cancel       the same, cancelling the work in flight             multitrial
    cancel            cancel one running trial; the run goes on           multitrial
    set:n_trials      the trial budget                                    multitrial
    set:concurrency   how many trials run at once                         multitrial

A request file is read defensively: only a regular file in ``DIR/control/`` itself (no symlink,
no FIFO), at most :data:`MAX_REQUEST_BYTES`, a JSON object with a known action and typed fields;
anything else becomes a ``bad`` request, which the writer records as ignored and never acts on.
This module imports no torch and nothing of nasforge but its errors.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError

__all__ = [
    "CONTROLS",
    "CONTROL",
    "SETTABLE",
    "MAX_REQUEST_BYTES",
    "BOUND_META",
    "Request",
    "check_controls",
    "describe",
    "take_requests",
]

#: the folder of a run directory where commands leave requests for the running writer
CONTROL = "control"
#: every control a kind may declare, with what it does (the one list the docs table follows)
CONTROLS: dict[str, str] = {
    "stop": "stop at the next boundary, keeping what finished (resumable)",
    "stop:cancel": "stop now, cancelling the trials in flight",
    "cancel": "cancel one running trial",
    "set:n_trials": "change n_trials",
    "set:concurrency": "change concurrency",
}
#: the settings ``nasforge set`` can change in a running run (each ``set:<name>`` above)
SETTABLE = ("n_trials", "concurrency")
#: the largest request file a writer reads (a request is a few dozen bytes)
MAX_REQUEST_BYTES = 4096
#: the record's meta key where a running multi-trial search states, when it starts, the most
#: trials its executor runs at once here and why (JSON ``{"most": N, "why": "..."}``, ``{}``
#: where it knows no bound), so that ``nasforge set`` refuses more in one line
BOUND_META = "concurrency_bound"


@dataclass(frozen=True)
class Request:
    """Returns nothing; one request to a running run: ``stop`` (``mode`` ``finish`` or
    ``cancel``), ``cancel`` (one ``trial``), ``set`` (``settings``), or ``bad`` (a file that
    did not decode; ``error`` says why). ``via`` names who asked (``cli``, ``dashboard``).

    Invariants: a request built by :meth:`from_data` has typed fields (a positive int trial,
    positive int settings of :data:`SETTABLE`) or is ``bad``.
    """

    action: str
    via: str = "cli"
    mode: str = "finish"
    trial: int | None = None
    settings: dict[str, int] = field(default_factory=dict)
    error: str = ""

    def needs(self) -> list[str]:
        """Returns the controls (keys of :data:`CONTROLS`) a run must declare to take it."""
        if self.action == "stop":
            return ["stop:cancel" if self.mode == "cancel" else "stop"]
        if self.action == "cancel":
            return ["cancel"]
        if self.action == "set":
            return [f"set:{k}" for k in self.settings]
        return []

    def to_data(self) -> dict[str, Any]:
        """Returns the request as the JSON object a request file holds."""
        data: dict[str, Any] = {"action": self.action, "via": self.via}
        if self.action == "stop":
            data["mode"] = self.mode
        if self.trial is not None:
            data["trial"] = self.trial
        data.update(self.settings)
        return data

    @classmethod
    def from_data(cls, data: Any) -> Request:
        """Returns the request a decoded request file holds; a ``bad`` one when it is not a
        JSON object of a known action with fields of the right types."""
        if not isinstance(data, Mapping):
            return cls("bad", error=f"not a JSON object: {str(data)[:80]!r}")
        via = data.get("via", "cli")
        via = via[:40] if isinstance(via, str) else "cli"
        action = data.get("action")
        if action == "stop":
            mode = data.get("mode", "finish")
            if mode not in ("finish", "cancel"):
                return cls("bad", via, error=f"stop mode {str(mode)[:40]!r}")
            return cls("stop", via, mode=str(mode))
        if action == "cancel":
            trial = data.get("trial")
            if not isinstance(trial, int) or not _positive_int(trial):
                return cls("bad", via, error=f"cancel of trial {str(trial)[:40]!r}")
            return cls("cancel", via, trial=trial)
        if action == "set":
            settings = {k: v for k, v in data.items() if k not in ("action", "via")}
            wrong = [k for k, v in settings.items() if k not in SETTABLE or not _positive_int(v)]
            if wrong or not settings:
                return cls("bad", via, error=f"set of {sorted(settings)[:5]} (bad: {wrong[:5]})")
            return cls("set", via, settings={k: int(v) for k, v in settings.items()})
        return cls("bad", via, error=f"unknown action {str(action)[:40]!r}")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def describe(controls: Any) -> str:
    """Returns what a run declaring ``controls`` can be asked, for a refusal's message."""
    known = [c for c in CONTROLS if c in set(controls or ())]
    if not known:
        return "it takes no requests while it runs"
    return "it can be asked to " + "; ".join(CONTROLS[c] for c in known)


def check_controls(controls: Any, owner: str) -> frozenset[str]:
    """Returns ``controls`` as a frozenset after checking each is a key of :data:`CONTROLS`.

    Raises:
        ConfigError: an unknown control (the message lists the known ones).
    """
    out = frozenset(controls)
    unknown = sorted(out - set(CONTROLS))
    if unknown:
        raise ConfigError(f"{owner} declares unknown controls {unknown}; known: {list(CONTROLS)}")
    return out


def _read(path: Path) -> Any:
    """Returns the JSON a request file holds, read without following a link or blocking on
    a FIFO, and bounded.

    Raises:
        OSError: the file cannot be opened, is not a regular file, or is too long.
        ValueError: it is not JSON.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"not a regular file (mode {stat.filemode(info.st_mode)})")
        if info.st_size > MAX_REQUEST_BYTES:
            raise OSError(f"{info.st_size} bytes, more than {MAX_REQUEST_BYTES}")
        data = os.read(fd, MAX_REQUEST_BYTES + 1)
    finally:
        os.close(fd)
    return json.loads(data.decode("utf-8"))


def take_requests(directory: str | Path) -> list[Request]:
    """Returns the requests left in ``directory``'s control folder, oldest first, deleting
    each; an unreadable one (not a regular file, too long, not JSON, a symlink) is returned as
    a ``bad`` request naming the file. Files whose names do not end in ``.json`` are left (a
    request being written is ``.<name>.tmp``)."""
    folder = os.path.join(directory, CONTROL)  # a string: this runs at every pass of the loop
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):  # a symlinked folder is not read
            return []
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    out = []
    for name in names:
        path = Path(folder, name)
        try:
            out.append(Request.from_data(_read(path)))
        except (OSError, ValueError) as exc:
            out.append(Request("bad", error=f"{name[:60]}: {exc}"[:200]))
        try:
            os.unlink(path)  # unlinks a link itself, never its target
        except OSError:
            pass
    return out
