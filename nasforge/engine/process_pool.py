"""The process pool: trials in child processes, ``concurrency`` at a time, and workers that
take trial after trial.

On Linux children are *forked*, so a space, evaluator or dataset defined in the user's
``__main__`` reaches them without pickling; a child that dies (segfault, OOM kill) or runs past
the timeout is recorded as failed and the experiment goes on. Before the first fork the
engine's process is warmed once (``nasforge.engine.warm``: the evaluator's data, torch's
optimizer machinery), and a spare child per concurrent trial is forked ahead, while trials run:
a trial starts training within milliseconds of its dispatch. A worker whose trial succeeded
takes the next one (``reuse_workers``, CPU trials): no fork, exit or copy-on-write faults per
trial; a worker whose trial failed, died or timed out is replaced, so a crash, a memory limit
or a timeout still fails that trial only. A child that sent its result is reaped later, never
waited for. Where fork is missing (macOS/Windows default to spawn), everything sent is pickled
up front and a failure is a ConfigError before the first trial.

The child's side (what a forked child runs: trial after trial, the live-stopper pipe) is
:mod:`nasforge.engine.pool_child`; this module is the engine's side
(:class:`ProcessPoolExecutor`). The executor registers as ``pool``; its public
home is :mod:`nasforge.engine.executor` (and :mod:`nasforge.engine`), which imports this module.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

from nasforge.engine._executor_base import BaseExecutor, register_executor
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.pool_child import child_main
from nasforge.engine.trial import (
    TrialResult,
    TrialTask,
    cancelled_result,
    failed_result,
)
from nasforge.engine.warm import warm_up
from nasforge.errors import ConfigError
from nasforge.runtime.devices import (
    Placement,
    cuda_visible_devices,
    gpu_slots,
    local_placement,
)
from nasforge.runtime.threads import usable_cores

__all__ = ["ProcessPoolExecutor"]

log = logging.getLogger("nasforge.engine")


def _default_start_method() -> str:
    """Returns fork where the platform has it (not macOS, where it is unsafe), else spawn."""
    fork = "fork" in mp.get_all_start_methods() and sys.platform != "darwin"
    return "fork" if fork else "spawn"


@register_executor("pool", "process", "processpool")
class ProcessPoolExecutor(BaseExecutor):
    """Returns results of trials run in child processes, ``concurrency`` at a time: a child
    whose trial succeeded takes the next one (``reuse_workers``, CPU trials), any other trial
    gets a fresh child (module docstring).

    Raises:
        ConfigError: ``concurrency`` < 1, an unknown start method, or (without fork) a space or
            evaluator that cannot be pickled; the message names the object and the fix.
    """

    name = "pool"

    def __init__(
        self,
        concurrency: int = 2,
        start_method: str | None = None,
        threads_per_trial: int = 1,
        reuse_workers: bool = True,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
        methods = mp.get_all_start_methods()
        if start_method is None:
            start_method = _default_start_method()
        if start_method not in methods:
            raise ConfigError(f"start_method {start_method!r} is not one of {methods}")
        self.concurrency = concurrency
        self.start_method = start_method
        self.threads_per_trial = threads_per_trial
        #: a forked worker whose trial succeeded takes the next trial (CPU trials only): no
        #: fork, exit and copy-on-write faults per trial; a failed trial's worker is replaced
        self.reuse_workers = reuse_workers
        self._ctx = mp.get_context(start_method)
        # trial id -> (process, connection, deadline or None)
        self._running: dict[int, tuple[Any, Any, float | None]] = {}
        self._timeouts: dict[int, float] = {}
        #: called with the task in each trial's process before the trial runs (a hook for the
        #: cross-model plan: e.g. installing a shared data feed); must be fork-inheritable
        self.child_setup: Callable[[TrialTask], None] | None = None
        self._requested = concurrency
        self._slots: list[tuple[int, ...]] = []  # GPU ids per concurrent trial slot
        self._slot_of: dict[int, int] = {}  # trial id -> its slot
        self._exiting: list[Any] = []  # children that reported and are ending on their own
        self._cancelled: list[int] = []  # trials killed on request, reported by poll
        #: forked children waiting for a trial: (process, task pipe, result pipe)
        self._spares: list[tuple[Any, Any, Any]] = []
        #: running trial -> the pipe its newer stopper snapshots go to (spares only)
        self._updates: dict[int, Any] = {}
        #: running trial on a reusable worker -> (task pipe, result pipe) of that worker
        self._pipes: dict[int, tuple[Any, Any]] = {}
        #: trials whose worker said it cannot run another (worker_state): why
        self._replace: dict[int, list[str]] = {}
        self._replaced_why: set[str] = set()  # parts already logged at INFO

    def spec(self) -> str | dict[str, Any]:
        """Returns ``"pool"``, or with the settings that differ from the defaults a mapping
        ``{"name": "pool", "reuse_workers": False, ...}``, so that a resume from the record
        runs its trials as this pool did."""
        defaults = {"start_method": _default_start_method(), "threads_per_trial": 1,
                    "reuse_workers": True}  # fmt: skip
        changed = {k: getattr(self, k) for k, v in defaults.items() if getattr(self, k) != v}
        return {"name": self.name, **changed} if changed else self.name

    def use_gpus(self, gpus_per_trial: float = 0, devices: Sequence[int] | None = None) -> None:
        """Gives each child a slot of GPUs (:func:`~nasforge.runtime.devices.gpu_slots`) and
        bounds the concurrency by the number of slots (2 GPUs at 0.5 per trial: 4 slots).

        Raises:
            ConfigError: as :meth:`BaseExecutor.use_gpus`.
        """
        super().use_gpus(gpus_per_trial, devices)
        self._slots = gpu_slots(self.devices, self.gpus_per_trial)
        self.concurrency = self._requested
        if self._slots and len(self._slots) < self._requested:
            log.info("concurrency %d lowered to %d: %d GPUs at %g per trial", self._requested,
                     len(self._slots), len(self.devices), self.gpus_per_trial)  # fmt: skip
            self.concurrency = len(self._slots)

    def set_concurrency(self, n: int) -> int:
        """Returns the concurrency from now on after asking for ``n``, at most
        :meth:`most_concurrency` (the base's rule); GPU slots taken later bound ``n`` again.

        Raises:
            ConfigError: ``n`` is not a positive int.
        """
        now = super().set_concurrency(n)
        self._requested = n
        return now

    def most_concurrency(self) -> int:
        """Returns the GPU slots of GPU trials, else this machine's usable cores (each child
        trains with its own threads; more children than cores only slows every trial)."""
        return len(self._slots) if self._slots else usable_cores()

    def concurrency_limit(self) -> str:
        """Returns what bounds the pool: its GPU slots, or this machine's cores."""
        if self._slots:
            return f"{len(self._slots)} GPU slots ({self.gpus_per_trial:g} GPU per trial)"
        return f"this machine has {usable_cores()} usable cores"

    def _placement(self, trial: int) -> Placement:
        """Returns the placement of ``trial`` as the engine records it (its slot's GPUs)."""
        node = local_placement(0, ()).node
        if trial not in self._slot_of:
            return Placement(node)
        ids = self._slots[self._slot_of[trial]]
        return Placement(node, ids, self.gpus_per_trial, tuple(range(len(ids))))

    def start(self, space: Any, evaluator: BaseEvaluator) -> None:
        """Checks that the space and evaluator can reach a child process (and, for GPU trials
        in forked children, that this process has not initialised CUDA)."""
        super().start(space, evaluator)
        torch = sys.modules.get("torch")
        if (
            self._slots
            and self.start_method == "fork"
            and torch is not None
            and torch.cuda.is_initialized()
        ):
            raise ConfigError(
                "CUDA is already initialised in the engine's process, so forked trial workers "
                "cannot use their GPUs; do not touch CUDA before run() (build models on the "
                "CPU), or use ProcessPoolExecutor(start_method='spawn')"
            )
        if self.start_method == "fork":
            # once here: every forked child inherits it; GPU children skip the optimizer warm-up
            warm_up(space, evaluator, optimizers=not self._slots)
            torch = sys.modules.get("torch")  # prepare() may have imported it
            if self._slots and torch is not None and torch.cuda.is_initialized():
                raise ConfigError(
                    "the evaluator's prepare() initialised CUDA in the engine's process, so "
                    "forked trial workers cannot use their GPUs; load data on the CPU there, or "
                    "use ProcessPoolExecutor(start_method='spawn')"
                )
            self._top_up()  # the first trials, too, start in a worker forked ahead
            return
        from nasforge.run.refs import SCRIPT_PREFIX as EXPERIMENT_MODULE_PREFIX

        for obj in (space, evaluator, getattr(evaluator, "fn", None)):
            mod = getattr(obj, "__module__", None) or type(obj).__module__
            if mod.startswith(EXPERIMENT_MODULE_PREFIX):
                raise ConfigError(
                    f"{obj!r} comes from an experiment file, which {self.start_method!r} worker "
                    "processes cannot import; move it into an importable module, or use "
                    "executor='inprocess' or 'ray'"
                )
        for what, obj in (("space", space), ("evaluator", evaluator)):
            try:
                pickle.dumps(obj)
            except Exception as exc:  # noqa: BLE001 - any pickling failure means the same
                raise ConfigError(
                    f"the {what} {obj!r} cannot be sent to a worker process with the "
                    f"{self.start_method!r} start method ({type(exc).__name__}: {exc}); define "
                    "it at module level of an importable file, or use executor='inprocess'"
                ) from exc

    @property
    def n_running(self) -> int:
        """Returns the number of live trial processes."""
        return len(self._running)

    def _child_args(self, send: Any, task: TrialTask | None) -> tuple[Any, ...]:
        """Returns the arguments of :func:`~nasforge.engine.pool_child.child_main` for a child
        running ``task`` (None: a spare, which gets its task, placement and visible GPUs
        later)."""
        return (send, self._space, self._evaluator, task, self.threads_per_trial, self.child_setup)

    def _prefork(self) -> bool:
        """Returns whether spare children are forked ahead of their trials: with fork and no
        ``child_setup`` (a hook may need state the engine sets up when it submits)."""
        return self.start_method == "fork" and self.child_setup is None

    def _fork_spare(self) -> None:
        """Starts a child that waits for its trial, so that a submitted trial need not wait
        for a fork: it runs one trial and exits, as a child started for it would."""
        tasks_recv, tasks_send = self._ctx.Pipe(duplex=False)
        recv, send = self._ctx.Pipe(duplex=False)
        args = (*self._child_args(send, None), None, None, tasks_recv)
        proc = self._ctx.Process(target=child_main, args=args, daemon=True)  # type: ignore[attr-defined]
        proc.start()
        send.close()
        tasks_recv.close()
        self._spares.append((proc, tasks_send, recv))

    def _reuses(self) -> bool:
        """Returns whether workers take trial after trial: forked spares, no GPU slots (a
        worker's visible GPUs are fixed once CUDA starts in it)."""
        return self.reuse_workers and self._prefork() and not self._slots

    def _top_up(self) -> None:
        """Keeps a spare child ready for each concurrent trial (with fork, no child_setup):
        one per trial slot, or, where workers are reused, one per slot without a worker."""
        if self._prefork() and hasattr(self, "_space"):
            busy = len(self._running) if self._reuses() else 0
            while len(self._spares) + busy < self.concurrency:
                self._fork_spare()

    def _start_child(self, task: TrialTask, visible: str | None) -> tuple[Any, Any]:
        """Returns (process, result pipe) of the child that runs ``task``: a spare when one
        is alive (its task pipe then carries newer stopper snapshots), else one forked (or
        spawned) now."""
        placement = self._placement(task.trial)
        while self._prefork() and self._spares:
            proc, tasks, recv = self._spares.pop(0)
            try:
                tasks.send((task, placement, visible, self._reuses()))
                if self._reuses():
                    self._pipes[task.trial] = (tasks, recv)
                elif task.stopper is None:
                    tasks.close()
                if task.stopper is not None:
                    self._updates[task.trial] = tasks
                return proc, recv
            except OSError:  # the spare died waiting (killed from outside): try the next
                tasks.close()
                recv.close()
                self._exiting.append(proc)
        recv, send = self._ctx.Pipe(duplex=False)
        updates_recv = None
        if task.stopper is not None:  # newer stopper snapshots go to the child on this pipe
            updates_recv, self._updates[task.trial] = self._ctx.Pipe(duplex=False)
        # get_context(str) is typed BaseContext, which lacks Process; each concrete context
        # (fork, spawn, forkserver: start_method is one of them) has it.
        proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=child_main,
            args=(*self._child_args(send, task), placement, visible, updates_recv),
            daemon=True,
        )
        proc.start()
        send.close()
        if updates_recv is not None:
            updates_recv.close()
        return proc, recv

    def submit(self, task: TrialTask) -> None:
        """Hands the trial to a spare child (or starts one for it), on a free GPU slot when
        trials use GPUs."""
        assert len(self._running) < self.concurrency
        visible = None
        if self._slots:
            used = set(self._slot_of.values())
            self._slot_of[task.trial] = min(i for i in range(len(self._slots)) if i not in used)
            visible = cuda_visible_devices(self._slots[self._slot_of[task.trial]])
        proc, recv = self._start_child(task, visible)
        timeout = task.timeout
        deadline = time.monotonic() + timeout if timeout else None
        self._running[task.trial] = (proc, recv, deadline)
        if timeout:
            self._timeouts[task.trial] = timeout

    def cancel(self, trial: int) -> bool:
        """Returns True after killing the running ``trial``'s child (recorded ``cancelled``);
        False when it is not running or was cancelled already (its one result is pending)."""
        if trial not in self._running or trial in self._cancelled:
            return False
        proc, conn, _ = self._running[trial]
        self._close_updates(trial)
        self._retire(trial)
        proc.kill()
        proc.join()
        self._cancelled.append(trial)
        return True

    def _retire(self, trial: int) -> None:
        """Closes the task pipe of ``trial``'s reusable worker: it exits after this trial."""
        pipes = self._pipes.pop(trial, None)
        if pipes is not None:
            with contextlib.suppress(OSError):  # a dead worker needs no word
                pipes[0].send(None)
            pipes[0].close()

    def _release(self, tid: int, proc: Any, conn: Any, result: TrialResult, sent: bool) -> None:
        """Frees ``tid``'s worker at once: back among the spares when it is reusable and its
        trial succeeded (it ``sent`` its result), else its pipes closed and (when it sent its
        result and is ending on its own) reaped later, never waited for."""
        reusable = tid in self._pipes and sent and result.status not in ("failed", "cancelled")
        reasons = self._replace.pop(tid, None)
        if reusable and reasons:
            self._note_replaced(tid, reasons)
        if reusable and not reasons and proc.is_alive():
            self._updates.pop(tid, None)
            tasks, recv = self._pipes.pop(tid)
            self._spares.append((proc, tasks, recv))
            return
        conn.close()
        self._close_updates(tid)
        self._retire(tid)
        if sent:
            self._exiting.append(proc)

    def _note_replaced(self, tid: int, reasons: list[str]) -> None:
        """Logs why ``tid``'s worker runs no further trial: at INFO the first time a part of
        the process state is the reason, at DEBUG after that."""
        parts = {r.split(":", 1)[0] for r in reasons}
        level = logging.DEBUG if parts <= self._replaced_why else logging.INFO
        self._replaced_why |= parts
        log.log(level, "trial %d's worker is replaced, its process state cannot be put back "
                "for the next trial: %s", tid, "; ".join(reasons))  # fmt: skip

    def _close_updates(self, trial: int) -> None:
        """Closes the snapshot pipe of ``trial``, if it has one."""
        pipe = self._updates.pop(trial, None)
        if pipe is not None:
            pipe.close()

    def _receive(self, tid: int, conn: Any) -> TrialResult | None:
        """Returns the trial's result if it sent it; feeds the values it reported meanwhile
        to ``live_stopper``, pushing fresh snapshots to the other running trials when a rung
        value changed them.

        Raises:
            EOFError, OSError: the child's end of the pipe closed (it died).
        """
        changed = False
        while conn.poll():
            message = conn.recv()
            if isinstance(message, TrialResult):
                break
            if message[0] == "replace":  # the worker cannot run another trial (worker_state)
                self._replace[tid] = message[1]
                continue
            _, value, resource = message
            if self.live_stopper is not None:
                changed |= bool(self.live_stopper.add_running(value, tid, resource))
        else:
            message = None
        if changed:
            self.push_snapshots()
        return message

    def push_snapshots(self) -> None:
        """Sends each running trial that takes them its stopper's current snapshot."""
        if self.live_stopper is None:
            return
        for tid, pipe in list(self._updates.items()):
            try:
                pipe.send(self.live_stopper.snapshot(tid))
            except OSError:  # the child is gone; its result (or death) comes from poll
                self._close_updates(tid)

    def _reap(self) -> None:
        """Joins the children that reported and have exited since (no zombies are left)."""
        alive = []
        for proc in self._exiting:
            if proc.is_alive():
                alive.append(proc)
            else:
                proc.join()
        self._exiting = alive

    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns the results of trials that finished, died or timed out."""
        self._reap()
        self._top_up()  # forks now, while trials run, not when the next one is submitted
        if not self._running:
            return []
        deadlines = [d for _, _, d in self._running.values() if d is not None]
        if deadlines:
            timeout = max(0.0, min(timeout, min(deadlines) - time.monotonic()))
        handles = [c for _, c, _ in self._running.values()]
        handles += [p.sentinel for p, _, _ in self._running.values()]
        wait(handles, timeout)
        out = []
        now = time.monotonic()
        for tid, (proc, conn, deadline) in list(self._running.items()):
            result, sent = None, False
            if tid in self._cancelled:
                self._cancelled.remove(tid)
                result = cancelled_result(tid)
            elif conn.poll():
                try:
                    result = self._receive(tid, conn)
                except (EOFError, OSError):
                    result = None
                sent = result is not None
            if result is None and not proc.is_alive():
                proc.join()
                code = proc.exitcode
                why = (
                    f"signal {signal.Signals(-code).name}"
                    if code and code < 0
                    else f"exit code {code}"
                )
                result = failed_result(tid, f"the worker process died ({why}) before reporting")
            elif result is None and deadline is not None and now >= deadline:
                proc.kill()
                proc.join()
                limit = self._timeouts[tid]
                result = failed_result(tid, f"timed out after {limit} s (trial_timeout)")
            if result is not None:
                self._release(tid, proc, conn, result, sent)
                del self._running[tid]
                self._timeouts.pop(tid, None)
                if result.placement is None:  # died or killed: the engine knows where
                    result.placement = self._placement(tid).to_dict()
                self._slot_of.pop(tid, None)
                out.append(result)
        if out:  # a worker not taken back leaves a slot: fork its spare now, so that the
            self._top_up()  # next submit finds one (else each later trial got a lone child)
        return out

    def shutdown(self) -> None:
        """Kills every running child and waits for it; waits for reporting ones to end."""
        for proc in self._exiting:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._exiting.clear()
        for proc, _, _ in self._spares:  # idle: nothing of theirs to lose; all killed first,
            proc.kill()  # so that they end together
        for proc, tasks, recv in self._spares:
            proc.join()
            tasks.close()
            recv.close()
        self._spares.clear()
        for proc, conn, _ in self._running.values():
            if proc.is_alive():
                proc.kill()
            proc.join()
            conn.close()
        self._running.clear()
        self._slot_of.clear()
        for tid in list(self._updates):
            self._close_updates(tid)
        for tid in list(self._pipes):
            self._retire(tid)
