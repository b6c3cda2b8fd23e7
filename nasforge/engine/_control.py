"""The engine's side of steering a running search (``nasforge stop``, ``nasforge set``): the
requests left in ``DIR/control/`` (``nasforge.run.control``) are applied between the loop's
polls and each one is recorded as a run note (source ``control``), which ``nasforge status``
shows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from nasforge.run.control import CONTROL, take_requests

__all__ = ["apply_requests", "cancel_marker", "discard_requests"]

log = logging.getLogger("nasforge.engine")


def cancel_marker(directory: Path, trial: int) -> Path:
    """Returns the file whose existence cancels ``trial`` at its next report (in-process)."""
    return Path(directory).resolve() / CONTROL / f"trial_{trial}.cancel"


def _note(exp: Any, event: str, detail: str, **data: Any) -> None:
    log.warning("%s", detail)
    exp.store.add_note("control", event, detail, **data)


def _cancel(exp: Any, trial: int, via: str) -> None:
    """Cancels a running trial: the executor kills its worker, or (in-process) the trial
    stops at its next report."""
    if trial not in exp._running.values():
        _note(exp, "ignored", f"trial {trial} is not running; nothing cancelled", trial=trial,
              via=via)  # fmt: skip
        return
    marker = cancel_marker(exp.directory, trial)
    marker.parent.mkdir(exist_ok=True)
    marker.touch()
    how = "killed" if exp.executor.cancel(trial) else "stops at its next report"
    _note(exp, "cancel", f"trial {trial} cancelled on request ({how})", trial=trial, via=via)


def _set(exp: Any, request: dict[str, Any], via: str) -> None:
    """Applies ``n_trials`` and ``concurrency`` and records them in the run's config."""
    changed: dict[str, Any] = {}
    n = request.get("n_trials")
    if isinstance(n, int) and n >= 1:
        exp.n_trials = n
        exp._progress.total = n
        exp.store.set_plan("trials", n)
        changed["n_trials"] = n
    c = request.get("concurrency")
    if isinstance(c, int) and c >= 1:
        if exp.executor.name == "inprocess" and c != 1:
            _note(exp, "ignored", "the in-process executor runs one trial at a time; "
                  "concurrency stays 1", concurrency=c, via=via)  # fmt: skip
        else:
            slots = getattr(exp.executor, "_slots", None)
            exp.executor.concurrency = min(c, len(slots)) if slots else c
            if hasattr(exp.executor, "_requested"):
                exp.executor._requested = c
            changed["concurrency"] = exp.executor.concurrency
    if not changed:
        return
    config = dict(exp.store.config())
    section = dict(config[exp.kind])
    section.update(changed)
    exp.store.set_config({**config, exp.kind: section})
    shown = ", ".join(f"{k}={v}" for k, v in changed.items())
    _note(exp, "set", f"settings changed while running: {shown}", **changed, via=via)


def apply_requests(exp: Any) -> None:
    """Returns None after applying, in order, the requests left for the running experiment
    ``exp``: stop (finish or cancel the running trials; the run ends ``stopped``), cancel one
    trial, set ``n_trials``/``concurrency``; each note names who asked (``via``: ``cli``, or
    ``dashboard``)."""
    for request in take_requests(exp.directory):
        action = request.get("action")
        via = str(request.get("via", "cli"))[:40]
        if action == "stop":
            mode = "cancel" if request.get("mode") == "cancel" else "finish"
            exp._stopping = mode
            exp.store.stopped = True
            _note(exp, "stop", f"stop requested: no more trials; running ones {mode}", mode=mode,
                  via=via)  # fmt: skip
            if mode == "cancel":
                for trial in sorted(exp._running.values()):
                    _cancel(exp, trial, via)
        elif action == "cancel" and isinstance(request.get("trial"), int):
            _cancel(exp, request["trial"], via)
        elif action == "set":
            _set(exp, request, via)
        else:
            _note(exp, "ignored", f"an unreadable request was ignored: {request}")


def discard_requests(directory: Path) -> None:
    """Returns None after deleting requests left from before this run started (a ``stop``
    that came as the last session ended must not stop the resumed one)."""
    for request in take_requests(directory):
        log.info("ignoring a request left from before this run started: %s", request)
