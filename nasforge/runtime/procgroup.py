"""Starting a group of ranks on this machine: N processes that meet in a ``torch.distributed``
process group over loopback, and a parent that collects their results or re-raises the first
failure with its traceback. The one way every family starts a local group (the pipeline's
stages, consecutive model parallelism's partitions, the cross-model engine's replicas).

Each rank runs :func:`run_rank` around the caller's function: it joins the group with
:func:`join_group` (a file store in the group's private folder and gloo's sockets pinned to
loopback, so no socket of the group listens on another interface), and leaves behind in that
folder either its result (``rank<R>.pt``), or its traceback (``rank<R>.err``) and, on a NaN or
infinite loss, the :class:`~nasforge.errors.DivergenceError` it raised (``rank<R>.diverged``).
The parent's :class:`LocalGroup` watches the exit codes and turns those files back into errors.

Invariants:
    * On leaving a :class:`LocalGroup` (return or raise), none of its processes is alive.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import DivergenceError, WorkerError
from nasforge.runtime.deathsig import die_with_parent
from nasforge.runtime.distributed import Ranks
from nasforge.runtime.loopback import pin_to_loopback

__all__ = [
    "DIVERGED_EXIT",
    "LocalGroup",
    "file_rendezvous",
    "join_group",
    "raise_failures",
    "run_rank",
]

#: Exit code of a rank that stopped on a NaN or infinite loss.
DIVERGED_EXIT = 3
#: What a DivergenceError carries across the process boundary besides its message.
_DIVERGENCE_KEYS = ("step", "subnet", "loss")


def file_rendezvous(folder: str | Path) -> str:
    """Returns the ``init_method`` of a file store in ``folder`` (no rendezvous socket at all:
    torch's TCP store listens on every interface whatever host it is given)."""
    return f"file://{Path(folder) / 'rendezvous'}"


def join_group(
    rank: int,
    world: int,
    init_method: str,
    *,
    backend: str = "gloo",
    timeout_s: float = 600.0,
    loopback: bool = True,
) -> Ranks:
    """Returns this process's :class:`~nasforge.runtime.distributed.Ranks` (the one rank
    object of every family: what a data-parallel search takes as ``ranks``) once it is rank
    ``rank`` of a ``world``-rank process group.

    ``loopback`` pins gloo's (and NCCL's bootstrap) sockets to the loopback interface first;
    ``False`` is the explicit multi-node opt-in of a caller whose ranks live on other hosts.
    """
    import torch.distributed as dist

    if loopback:
        pin_to_loopback()
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
    )
    return Ranks(rank, world, rank, backend)


def run_rank(fn: Callable[..., Any], rank: int, folder: str, *args: Any) -> None:
    """Returns None after running ``fn(rank, *args)`` in a rank process and saving a result
    that is not None as ``rank<R>.pt`` in ``folder``; leaves the process group if ``fn``
    joined one.

    A failure never propagates: the traceback goes to ``rank<R>.err`` and the process exits
    with code 1 (:data:`DIVERGED_EXIT` for a :class:`DivergenceError`, whose message and
    attributes go to ``rank<R>.diverged`` first, before any neighbour can fail on its absence).
    """
    import torch.distributed as dist

    out = Path(folder)
    die_with_parent()
    try:
        result = fn(rank, *args)
        if result is not None:
            torch.save(result, out / f"rank{rank}.pt")
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except DivergenceError as exc:
        record = {"message": str(exc), **{k: getattr(exc, k, None) for k in _DIVERGENCE_KEYS}}
        (out / f"rank{rank}.diverged").write_text(json.dumps(record))
        (out / f"rank{rank}.err").write_text(traceback.format_exc())
        os._exit(DIVERGED_EXIT)
    except BaseException:
        (out / f"rank{rank}.err").write_text(traceback.format_exc())
        os._exit(1)


def raise_failures(
    folder: str | Path,
    bad: Sequence[tuple[int, Any]],
    what: str,
    pids: Sequence[Any] | None = None,
    ending: str = "every process was ended",
) -> None:
    """Returns None when ``bad`` (rank, exit code) is empty.

    Raises:
        DivergenceError: a failed rank recorded one (its message, ``step``, ``subnet``,
            ``loss``, and ``stage`` = the rank).
        WorkerError: otherwise; the message has each failed rank's exit code and traceback.
    """
    out = Path(folder)
    for rank, _ in bad:
        rec = out / f"rank{rank}.diverged"
        if rec.exists():
            record = json.loads(rec.read_text())
            err = DivergenceError(f"{what} {rank}: {record['message']}; {ending}")
            for key in _DIVERGENCE_KEYS:
                setattr(err, key, record.get(key))
            err.stage = rank
            raise err
    parts = []
    for rank, code in bad:
        tb = out / f"rank{rank}.err"
        detail = tb.read_text() if tb.exists() else "no traceback (it died before writing one)"
        pid = f" (pid {pids[rank]})" if pids is not None else ""
        parts.append(f"{what} {rank}{pid} exited with code {code}:\n{detail}")
    if parts:
        raise WorkerError("\n".join(parts) + f"\n{ending}")


class LocalGroup:
    """``world`` rank processes on this machine, each running ``run_rank(fn, rank, folder,
    *args)``; a context manager that starts them and ends every one on exit.

    ``start_method`` "spawn" (the default; ``fn`` and ``args`` must be picklable) or "fork"
    (closures allowed, CPU only). ``what`` names a rank in messages ("pipeline stage").
    """

    def __init__(
        self,
        world: int,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        *,
        folder: str | Path,
        what: str = "worker",
        timeout_s: float = 600.0,
        start_method: str = "spawn",
        hint: str = "",
        ending: str = "every process was ended",
    ) -> None:
        self.world, self.fn, self.args = world, fn, tuple(args)
        self.folder, self.what, self.timeout_s = str(folder), what, timeout_s
        self.start_method, self.hint, self.ending = start_method, hint, ending
        self.procs: list[Any] = []

    def __enter__(self) -> LocalGroup:
        return self.start()

    def start(self) -> LocalGroup:
        """Returns this group once its processes are started.

        Raises:
            WorkerError: a process could not be started (those already started are ended).
        """
        import torch.multiprocessing as mp

        Path(self.folder).mkdir(parents=True, exist_ok=True)  # the rendezvous file lives there
        ctx: Any = mp.get_context(self.start_method)
        try:
            for rank in range(self.world):
                p = ctx.Process(
                    target=run_rank, args=(self.fn, rank, self.folder, *self.args), daemon=True
                )
                try:
                    p.start()
                except Exception as exc:
                    raise WorkerError(
                        f"{self.what} {rank} could not be started: {type(exc).__name__}: {exc}"
                        + (f"; {self.hint}" if self.hint else "")
                    ) from exc
                self.procs.append(p)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Returns None once no process of the group is alive (terminated, then killed)."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()

    def check(self) -> None:
        """Returns None while no rank has exited with a non-zero code.

        Raises:
            DivergenceError, WorkerError: see :func:`raise_failures` (the first failure).
        """
        bad = [(r, p.exitcode) for r, p in enumerate(self.procs) if p.exitcode not in (None, 0)]
        raise_failures(self.folder, bad, self.what, [p.pid for p in self.procs], self.ending)

    def _deadline_passed(self, deadline: float, waiting_for: str) -> None:
        if time.monotonic() > deadline:
            raise WorkerError(
                f"{self.what}s exceeded timeout_s={self.timeout_s}s waiting for {waiting_for}; "
                f"{self.ending}"
            )

    def wait(self, poll: Callable[[], None] | None = None) -> None:
        """Returns None once every rank exited with code 0; ``poll()`` runs between two looks
        at the ranks (every 50 ms), in this process, while they run.

        Raises:
            DivergenceError, WorkerError: a rank failed (see :meth:`check`) or the group ran
                past ``timeout_s``.
            Exception: whatever ``poll`` raises (the caller's ``with`` ends the ranks).
        """
        deadline = time.monotonic() + self.timeout_s
        while True:
            if poll is not None:  # first: what ranks finished before one failed is handed on
                poll()
            self.check()
            running = [r for r, p in enumerate(self.procs) if p.exitcode is None]
            if not running:
                return
            self._deadline_passed(deadline, f"ranks {running}")
            self.procs[running[0]].join(0.05)

    def results(
        self, weights_only: bool = True, poll: Callable[[], None] | None = None
    ) -> list[Any]:
        """Returns each rank's result (``None`` for a rank that returned none) once all exited
        (``poll``: see :meth:`wait`).

        Raises:
            DivergenceError, WorkerError: see :meth:`wait`.
        """
        self.wait(poll)
        paths = [Path(self.folder) / f"rank{r}.pt" for r in range(self.world)]
        return [torch.load(p, weights_only=weights_only) if p.exists() else None for p in paths]
