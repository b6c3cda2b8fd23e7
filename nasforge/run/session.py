"""A run's working time across resumes: :class:`Session` records when a writer's session
starts and how long the run has worked in all, so that a reader (``nasforge status``, the
dashboard) tells a run's working time from the time its files sat idle."""

from __future__ import annotations

import logging
import time

from nasforge.run.store import Store

__all__ = ["Session"]

log = logging.getLogger("nasforge.run")


class Session:
    """Returns nothing; records how long the run has worked, across resumes: ``elapsed``
    (seconds, written when a session ends, and by kinds as they go), ``elapsed_before`` and
    ``session_started`` (wall clock) while a session runs, so that a reader (``nasforge
    status``, the dashboard) tells a run's working time from the time its files sat idle."""

    def __init__(self, store: Store) -> None:
        self.store = store
        try:
            self.before = float(store.get_meta("elapsed", "0") or 0)
        except ValueError:
            self.before = 0.0
        self.t0 = time.monotonic()
        store.set_meta("elapsed_before", repr(self.before))
        store.set_meta("session_started", repr(time.time()))

    def end(self) -> None:
        """Records the session's end: ``elapsed`` = before + this session's seconds."""
        try:
            self.store.set_meta("elapsed", repr(self.before + time.monotonic() - self.t0))
        except Exception:  # noqa: BLE001 - a full disk must not hide the run's own error
            log.debug("could not record the elapsed time", exc_info=True)
