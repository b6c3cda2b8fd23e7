"""Live progress of an experiment: trials done/running/failed, best so far, ETA.

On a terminal it draws a ``rich`` status line; otherwise (or with ``progress="log"``) it logs a
line through ``logging`` at most every few seconds. A program that configured no logging (a
script run as ``python my_search.py > out.txt``) still sees those lines on standard error, as
Optuna's users see its trials, and the run's warnings (:func:`show_unconfigured`): they go
through a handler of this module's own when no handler of the program would show them. Never
prints from library code otherwise.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

__all__ = ["Progress", "fmt_time", "fmt_number", "show_unconfigured"]

log = logging.getLogger("nasforge.engine")
#: shows progress lines on standard error when the program configured no logging
_FALLBACK = logging.StreamHandler(sys.stderr)
_FALLBACK.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))


def _unconfigured(logger: logging.Logger) -> bool:
    """Returns whether no handler of the program would show ``logger``'s INFO lines (only
    nasforge's own run-log file handlers, or none at all, on its way to the root)."""
    if logger.isEnabledFor(logging.INFO) and logging.getLogger().handlers:
        return False
    current: logging.Logger | None = logger
    while current is not None:
        if any(type(h).__name__ != "RunLog" for h in current.handlers):
            return False
        if not current.propagate:
            break
        current = current.parent
    return True


def show_unconfigured(record: logging.LogRecord) -> None:
    """Returns None after showing ``record`` (a warning or error) on standard error when no
    handler of the program would show it. While a run runs, its own log's handler sits on the
    ``nasforge`` logger, and its presence keeps Python's last-resort handler from printing a
    warning (``trial 3 failed: ...``) that a script without logging would otherwise see."""
    if record.levelno >= logging.WARNING and _unconfigured(logging.getLogger(record.name)):
        _FALLBACK.handle(record)


def fmt_time(seconds: float | None) -> str:
    """Returns seconds as ``1m05s`` or ``2h03m`` (``?`` for None)."""
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else (f"{seconds // 60}m{seconds % 60:02d}s")
    )


def fmt_number(value: float | int | None) -> str:
    """Returns a metric as a table shows it: a whole number as an integer (a parameter count
    ``157030``, not ``1.5703e+05`` or ``157030.0``), a large one without decimals, any other
    to 5 significant digits; ``nan``/``inf`` as such; ``""`` for None."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1e5:
        return f"{value:.0f}"
    return f"{value:.5g}"


class Progress:
    """Returns nothing; shows experiment progress on a terminal (rich) or in the log.

    ``mode``: ``"auto"`` (rich on a terminal, log otherwise), ``"rich"``, ``"log"`` or ``"off"``;
    ``logger`` (default ``nasforge.engine``) receives the lines in log mode, at INFO.
    """

    def __init__(
        self,
        total: int | None,
        time_budget: float | None,
        mode: str = "auto",
        every: float = 5.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self.total, self.time_budget, self.every = total, time_budget, every
        self._log = logger or log
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "log"
        self.mode = mode
        #: also gets each line shown in log mode that the logger would drop (below its
        #: level): the run's own log file, so a run without a terminal still records them
        self.sink: Any = None
        self._last = 0.0
        self._start = time.monotonic()
        self._live: Any = None
        if mode == "rich":
            try:
                from rich.console import Console
                from rich.live import Live

                self._live = Live(
                    "", console=Console(stderr=True), refresh_per_second=4, transient=False
                )
                self._live.start()
            except ImportError:  # pragma: no cover - rich is optional
                self.mode = "log"

    def line(
        self,
        done: int,
        running: int,
        failed: int,
        best: float | None,
        elapsed: float,
        cached: int = 0,
    ) -> str:
        """Returns the one-line summary (``done`` counts trained trials, failed included)."""
        eta = None
        if self.total and done:
            eta = elapsed / done * max(self.total - done, 0)
        if self.time_budget:
            left = max(self.time_budget - elapsed, 0.0)
            eta = left if eta is None else min(eta, left)
        total = f"/{self.total}" if self.total else ""
        best_s = "-" if best is None else f"{best:.4g}"
        dup = f", {cached} duplicates skipped" if cached else ""
        return (
            f"trials {done}{total} done, {running} running, {failed} failed{dup} | best "
            f"{best_s} | elapsed {fmt_time(elapsed)} | ETA {fmt_time(eta)}"
        )

    def update(
        self,
        done: int,
        running: int,
        failed: int,
        best: float | None,
        elapsed: float,
        force: bool = False,
        cached: int = 0,
    ) -> None:
        """Shows the current state (rate-limited in log mode)."""
        self.show(self.line(done, running, failed, best, elapsed, cached), force)

    def show(self, text: str, force: bool = False) -> None:
        """Shows one status line (rate-limited in log mode unless ``force``; ``force`` draws a
        live line at once, so no forced line is skipped)."""
        if self.mode == "off":
            return
        if self._live is not None:  # forced: drawn now, not at the next refresh tick
            self._live.update(text, refresh=force)
            return
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            self._log.info("%s", text)
            if self.sink is not None and not self._log.isEnabledFor(logging.INFO):
                self.sink(text)
            if _unconfigured(self._log):
                _FALLBACK.handle(logging.makeLogRecord({"msg": text, "levelno": logging.INFO,
                                                        "levelname": "INFO"}))  # fmt: skip

    def close(self) -> None:
        """Stops the live display."""
        if self._live is not None:
            self._live.stop()
            self._live = None
