"""The Ray executor (``pip install nasforge[ray]``): trials as Ray tasks on a local Ray instance
or on a cluster given its address.

The space and evaluator are put into Ray's object store once (cloudpickle, which sends classes
and functions of the user's ``__main__`` by value, so nothing needs wrapping); if that fails the
error is a ConfigError before the first trial. Each Ray worker process fetches and warms them
once (``nasforge.engine.warm``), before its first trial of the run, then takes trial after
trial. A task that runs past the timeout (cancelled with
force) is a failed trial.

    retries   a system failure (the task's worker process or its whole node died) is retried by
              Ray itself (``max_retries`` of the task, default 3), on any live node; an
              exception raised by the evaluator is never retried (``retry_exceptions=False``;
              ``run_trial`` turns it into a failed result anyway). Each result carries Ray's own
              attempt number as ``retries``; a trial still failing after ``max_retries``
              retries is a failed trial. A retried trial ran more than once on the cluster but
              its result reaches the engine, and the record, once.
    loopback  a local Ray that this executor starts (no address, none found) listens on
              127.0.0.1 only: its node address is 127.0.0.1, so the GCS (which has no
              authentication of its own), the raylet, the object manager and the workers bind
              loopback instead of every interface, and the dashboard stays off. Ray's own
              ``ray.init()`` binds every interface; ``init_kwargs={"_node_ip_address": ADDR}``
              (and ``"include_dashboard": True``) opt back in
    address   None starts (or joins an already initialised) local Ray; ``"host:port"`` or
              ``"auto"`` joins a running cluster, and :meth:`RayExecutor.spec` then records the
              address it connected to; on resume, ``"auto"`` becomes that recorded address
              (:meth:`RayExecutor.resume_from`), so the run goes on on the same cluster. A loopback
              address (``127.0.0.1:port``) is kept as given: Ray 2.x rewrites it to the
              machine's interface address (ray-project/ray#59110), where a cluster bound to
              127.0.0.1 does not listen.
    writer    workers never touch the run record: a task returns its result to the driver (the
              process running the experiment), which alone writes the run directory.

GPUs are Ray resources: each task asks for ``num_gpus=gpus_per_trial`` (a share like 0.5 lets
two trials use one GPU); Ray picks them, sets ``CUDA_VISIBLE_DEVICES`` for the task, and the
trial records Ray's node address, its node id (nodes on one machine share the address) and
``ray.get_gpu_ids()``. Asking for more GPUs per trial than any Ray node has is a ConfigError
before the first trial.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from nasforge.engine._executor_base import BaseExecutor, register_executor
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.trial import (
    TrialResult,
    TrialTask,
    cancelled_result,
    failed_result,
    run_trial,
)
from nasforge.engine.warm import warm_up
from nasforge.errors import ConfigError
from nasforge.run.trial_logs import tail
from nasforge.runtime.devices import Placement, check_gpu_amount, placed

__all__ = ["RayExecutor"]

log = logging.getLogger("nasforge.engine")


#: Addresses Ray would rewrite to the machine's interface address (ray-project/ray#59110).
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: ray.init settings of a local Ray this executor starts: it listens on 127.0.0.1 only.
_LOCAL_INIT: dict[str, Any] = {"_node_ip_address": "127.0.0.1", "include_dashboard": False}
#: Seconds to wait for a cluster's head to accept a TCP connection before calling ray.init.
_CONNECT_TIMEOUT = 5.0


def _attempt_number() -> int:
    """Returns Ray's attempt number of the running task (0: first run), or 0 if unknown."""
    import ray

    try:
        # Any: Ray sets core_worker on its Worker at connect time and does not declare it.
        worker: Any = ray._private.worker.global_worker
        return int(worker.core_worker.get_current_task_attempt_number())
    except Exception:  # noqa: BLE001 - a Ray without it: retries are not counted
        return 0


#: This worker process's copy of each run's (space, evaluator), warmed, by payload id: a Ray
#: worker takes trial after trial, so it deserialises and warms a run's payload once.
_WARM: dict[str, tuple[Any, BaseEvaluator]] = {}


def _warm_payload(boxed: list[Any]) -> tuple[Any, BaseEvaluator]:
    """Returns the (space, evaluator) of the boxed object ref, fetched and warmed (the
    evaluator's ``prepare``, torch's optimizer machinery) once per worker process."""
    import ray

    key = boxed[0].hex()
    if key not in _WARM:
        space, evaluator = ray.get(boxed[0])
        warm_up(space, evaluator)
        _WARM.clear()  # one run at a time per worker: drop an earlier run's data
        _WARM[key] = (space, evaluator)
    return _WARM[key]


class _RungBoard:
    """Returns fresh stopper snapshots to running Ray trials: a Ray actor (no CPU of its own)
    holding a copy of the engine's stopper, which counts the rung values that running trials
    report to it and the curves of the trials the engine received (as the pool's engine
    does), so that a trial decides at each report from every trial that reached its rung."""

    def __init__(self, stopper: Any) -> None:
        self._stopper = stopper

    def report(self, trial: int, value: float, resource: int) -> dict[str, Any] | None:
        """Returns the newest snapshot of ``trial`` after counting its ``value``."""
        self._stopper.add_running(value, trial, resource)
        return self._stopper.snapshot(trial)  # type: ignore[no-any-return]

    def finished(self, curve: list[float], trial: int, status: str) -> None:
        """Returns nothing; counts a finished trial's (maximised) curve."""
        self._stopper.add_finished(curve, trial, status)


class _RayLive:
    """Returns nothing; a Ray trial's :class:`~nasforge.engine.trial.LiveStopper`: its value
    goes to the run's :class:`_RungBoard`, which answers with the trial's newest snapshot
    (one round trip per report, no waiting on the engine)."""

    def __init__(self, board: Any, trial: int) -> None:
        self._board, self._trial = board, trial
        self._pending: tuple[float, int] | None = None

    def publish(self, value: float, resource: int) -> None:
        """Returns nothing; keeps the value for :meth:`latest` to send."""
        self._pending = (value, resource)

    def latest(self) -> dict[str, Any] | None:
        """Returns the board's snapshot after sending the published value (None: nothing)."""
        import ray

        if self._pending is None:
            return None
        value, resource = self._pending
        self._pending = None
        return ray.get(self._board.report.remote(self._trial, value, resource))  # type: ignore[no-any-return]


def _ray_trial(
    boxed: list[Any], task: TrialTask, threads: int, gpus: float = 0.0, board: Any = None
) -> Any:
    import ray

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    space, evaluator = _warm_payload(boxed)
    ids = tuple(_as_id(i) for i in ray.get_gpu_ids()) if gpus else ()
    # Ray has set CUDA_VISIBLE_DEVICES to exactly these ids: torch numbers them 0..k-1 here
    node_id = str(ray.get_runtime_context().get_node_id())
    torch_ids = tuple(range(len(ids)))
    where = Placement(ray.util.get_node_ip_address(), ids, gpus, torch_ids, node_id)
    # the worker may be on another machine than the run's record: it captures the trial's
    # output into a file of its own and sends the text back for the engine to write
    fd, local = tempfile.mkstemp(prefix=f"nasforge-trial{task.trial}-", suffix=".log")
    os.close(fd)
    try:
        with placed(where):
            live = None if board is None or task.stopper is None else _RayLive(board, task.trial)
            result = run_trial(space, evaluator, replace(task.without_timeout(), log=local), live)
        result.log_text = tail(local)
    finally:
        os.unlink(local)
    result.retries = _attempt_number()
    return result


def _as_id(gpu: Any) -> Any:
    try:
        return int(gpu)
    except (TypeError, ValueError):
        return str(gpu)  # a GPU named by UUID


@register_executor("ray")
class RayExecutor(BaseExecutor):
    """Returns results of trials run as Ray tasks, ``concurrency`` at a time.

    ``address``: None starts (or joins an already initialised) local Ray; ``"host:port"`` (the
    head's GCS address), ``"auto"`` or ``"ray://host:10001"`` joins a cluster. ``max_retries``:
    how many times Ray runs a trial again after its worker or node died (see the module
    docstring). ``init_kwargs`` go to ``ray.init`` (for example ``{"num_cpus": 2}``). Ray is
    shut down at the end only if this executor started it.

    Raises:
        ConfigError: a bad setting, Ray is not installed, the cluster at ``address`` does not
            answer, or the space/evaluator cannot be serialised.
    """

    name = "ray"

    def __init__(
        self,
        concurrency: int = 2,
        address: str | None = None,
        cpus_per_trial: float = 1,
        threads_per_trial: int = 1,
        init_kwargs: dict[str, Any] | None = None,
        max_retries: int = 3,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ConfigError(
                f"max_retries must be an int >= 0 (Ray's retries after a worker or node died), "
                f"got {max_retries!r}"
            )
        self.concurrency = concurrency
        self.address = address
        self.max_retries = max_retries
        self.cpus_per_trial = cpus_per_trial
        self.threads_per_trial = threads_per_trial
        self.init_kwargs = dict(init_kwargs or {})
        self._owns_ray = False
        self._checked_gpus = False
        self._cancelled: list[TrialResult] = []  # cancelled on request, for the next poll
        # ObjectRef -> (trial id, deadline or None, timeout)
        self._running: dict[Any, tuple[int, float | None, float | None]] = {}
        self._board: Any = None  # the run's _RungBoard actor, with a stopper
        self._signs: dict[int, tuple[str, int]] = {}  # running trial -> (metric, sign)

    def use_gpus(self, gpus_per_trial: float = 0, devices: Sequence[int] | None = None) -> None:
        """Gives each task ``num_gpus=gpus_per_trial``; checked against Ray's nodes now if Ray
        is running, else when :meth:`start` connects.

        Raises:
            ConfigError: a bad amount, ``devices`` (Ray picks the GPUs), or more GPUs per
                trial than any Ray node has.
        """
        if devices is not None:
            raise ConfigError(
                f"devices {list(devices)!r} do not apply to executor 'ray': Ray picks each "
                "trial's GPUs; limit them with CUDA_VISIBLE_DEVICES before Ray starts, or with "
                "init_kwargs={'num_gpus': N}"
            )
        self.gpus_per_trial = check_gpu_amount(gpus_per_trial)
        self._checked_gpus = False
        ray = sys.modules.get("ray")
        if self.gpus_per_trial and ray is not None and ray.is_initialized():
            self._check_ray_gpus(ray)

    def _check_ray_gpus(self, ray: Any) -> None:
        """Raises ConfigError when no Ray node has ``gpus_per_trial`` GPUs."""
        per_node = [n.get("Resources", {}).get("GPU", 0) for n in ray.nodes() if n.get("Alive")]
        most = max(per_node, default=0)
        if self.gpus_per_trial > most:
            raise ConfigError(
                f"gpus_per_trial {self.gpus_per_trial:g} asks each trial for more GPUs than any "
                f"Ray node has (at most {most:g} per node, {sum(per_node):g} in all); lower "
                "gpus_per_trial, or add GPU nodes (a machine without GPUs can declare logical "
                "ones: init_kwargs={'num_gpus': N})"
            )
        self._checked_gpus = True

    def check_cluster(self) -> None:
        """Returns None when Ray is already initialised in this process, or the cluster the
        address names (itself, or for ``"auto"`` the one Ray would find) accepts a TCP
        connection, or no address is given (a local Ray starts).

        Raises:
            ConfigError: ``"auto"`` finds no running cluster, or nothing answers at the
                address (one line: the address and the fix).
        """
        import ray

        if ray.is_initialized():
            return
        target = _bootstrap_address(ray, self.address)
        if self.address == "auto" and target is None:
            raise ConfigError(
                "executor 'ray' with address 'auto' finds no running Ray cluster (no "
                "RAY_ADDRESS, no `ray start` on this machine); start one (docs/cluster.md), "
                "give its address (HOST:PORT), or leave the address out to start a local Ray"
            )
        _check_reachable(target)

    def start(self, space: Any, evaluator: BaseEvaluator) -> None:
        """Connects to Ray, checks its GPUs against ``gpus_per_trial``, and uploads the space
        and evaluator once."""
        try:
            import ray
        except ImportError as exc:
            raise ConfigError(
                "executor 'ray' needs Ray: pip install 'nasforge[ray]' (or pip install ray)"
            ) from exc
        self._ray = ray
        if not ray.is_initialized():
            target = _bootstrap_address(ray, self.address)
            _check_reachable(target)
            if target == "local" or (target is None and self.address is None):
                kwargs = {**_LOCAL_INIT, **self.init_kwargs}  # a Ray of our own: loopback only
                with _loopback_node(ray, kwargs["_node_ip_address"]):
                    ray.init(address=target, **kwargs)
            else:
                with _keep_loopback(ray, target):
                    ray.init(address=target or self.address, **self.init_kwargs)
            self._owns_ray = True
        if self.address is not None and not self.address.startswith("ray://"):
            self.address = ray.get_runtime_context().gcs_address  # "auto" -> host:port
        if self.gpus_per_trial and not self._checked_gpus:
            try:
                self._check_ray_gpus(ray)
            except ConfigError:
                self.shutdown()  # the engine calls shutdown only after a successful start
                raise
        _send_experiment_files_by_value(ray, space, evaluator)
        try:
            self._payload = ray.put((space, evaluator))
        except Exception as exc:  # noqa: BLE001 - any serialisation failure means the same
            raise ConfigError(
                f"the space or evaluator cannot be sent to Ray workers ({type(exc).__name__}: "
                f"{exc}); keep them free of open files, locks and live processes, or use "
                "executor='pool'"
            ) from exc
        if self.live_stopper is not None:  # rung values of running trials, as on the pool
            self._board = ray.remote(num_cpus=0)(_RungBoard).remote(self.live_stopper)
        self._remote = ray.remote(
            num_cpus=self.cpus_per_trial,
            num_gpus=self.gpus_per_trial,
            max_retries=self.max_retries,
            retry_exceptions=False,
        )(_ray_trial)

    def spec(self) -> dict[str, Any]:
        """Returns the settings that rebuild this executor (after :meth:`start`: with the
        address of the cluster it joined), as a run file's ``executor`` mapping."""
        return {
            "name": self.name,
            "address": self.address,
            "max_retries": self.max_retries,
            "cpus_per_trial": self.cpus_per_trial,
            "threads_per_trial": self.threads_per_trial,
        }

    def resume_from(self, spec: Any) -> None:
        """On resume, an executor told to find its cluster (``address="auto"``) joins the one
        the run's record names instead: the cluster the run started on."""
        if self.address != "auto" or not isinstance(spec, Mapping) or spec.get("name") != "ray":
            return
        address = spec.get("address")
        if isinstance(address, str) and address != "auto":
            log.info("joining the Ray cluster at %s, where the run started (its record)", address)
            self.address = address

    @property
    def n_running(self) -> int:
        """Returns the number of submitted Ray tasks not yet polled."""
        return len(self._running) + len(self._cancelled)

    def submit(self, task: TrialTask) -> None:
        """Starts the trial as a Ray task."""
        # boxed in a list, so that Ray passes the reference and the worker fetches (and warms)
        # the payload once, not once per trial
        ref = self._remote.remote(
            [self._payload], task, self.threads_per_trial, self.gpus_per_trial, self._board
        )
        self._signs[task.trial] = (task.metric, task.sign)
        timeout = task.timeout
        deadline = time.monotonic() + timeout if timeout else None
        self._running[ref] = (task.trial, deadline, timeout)

    def cancel(self, trial: int) -> bool:
        """Returns True after cancelling the running ``trial``'s task (with force: its worker
        process is killed; recorded ``cancelled``)."""
        for ref, (tid, _, _) in list(self._running.items()):
            if tid == trial:
                self._ray.cancel(ref, force=True)
                del self._running[ref]
                self._cancelled.append(cancelled_result(trial))
                self._tell_board(self._cancelled[-1])
                return True
        return False

    def _tell_board(self, result: TrialResult) -> None:
        """Returns nothing; hands the board a finished trial's curve (no waiting)."""
        metric, sign = self._signs.pop(result.trial, ("", 1))
        if self._board is not None:
            curve = [sign * m[metric] for m in result.intermediates if metric in m]
            self._board.finished.remote(curve, result.trial, result.status)

    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns the results of tasks that finished, failed, timed out or were cancelled."""
        if self._cancelled:
            out, self._cancelled = self._cancelled, []
            return out
        if not self._running:
            return []
        ray = self._ray
        refs = list(self._running)
        deadlines = [d for _, d, _ in self._running.values() if d is not None]
        if deadlines:
            timeout = max(0.0, min(timeout, min(deadlines) - time.monotonic()))
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out = []
        for ref in ready:
            tid, _, _ = self._running.pop(ref)
            try:
                out.append(ray.get(ref))
            except Exception as exc:  # noqa: BLE001 - a dead worker or a Ray error
                why = f"the Ray task failed (after up to {self.max_retries} retries by Ray)"
                out.append(failed_result(tid, f"{why}: {type(exc).__name__}: {exc}"))
        now = time.monotonic()
        for ref, (tid, deadline, limit) in list(self._running.items()):
            if deadline is not None and now >= deadline:
                ray.cancel(ref, force=True)
                del self._running[ref]
                out.append(failed_result(tid, f"timed out after {limit} s (trial_timeout)"))
        for result in out:
            self._tell_board(result)
        return out

    def shutdown(self) -> None:
        """Cancels running tasks; shuts Ray down if this executor started it."""
        ray = getattr(self, "_ray", None)
        if ray is None:
            return
        for ref in self._running:
            ray.cancel(ref, force=True)
        self._running.clear()
        if self._board is not None:
            ray.kill(self._board)
            self._board = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def _host_port(address: str | None) -> tuple[str, int] | None:
    """Returns (host, port) of a ``host:port`` address, or None for None, ``auto``, ``local``,
    ``ray://...`` and anything else Ray resolves itself."""
    if not address or "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if host and port.isdigit() else None


def _bootstrap_address(ray: Any, address: str | None) -> str | None:
    """Returns the address Ray will join for ``address``: itself, or for None and ``"auto"``
    the one Ray finds (``RAY_ADDRESS``, else the file of the last ``ray start``); None when
    Ray will start a local instance (or for ``"auto"``, search running ones itself)."""
    if address not in (None, "auto"):
        return address
    found = os.environ.get("RAY_ADDRESS")
    if not found:
        with contextlib.suppress(Exception):  # a Ray without this helper: Ray decides
            found = ray._private.utils.read_ray_address()
    return found or None


def _check_reachable(address: str | None) -> None:
    """Returns None if the head at a ``host:port`` address accepts a TCP connection.

    Raises:
        ConfigError: nothing answers there (a stopped cluster, a wrong address).
    """
    hp = _host_port(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=_CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {address!r} ({exc}); start it (`ray start --head ...`, "
            "docs/cluster.md) or give the address of a running head, e.g. --set "
            'executor=\'{"name": "ray", "address": "HOST:PORT"}\''
        ) from exc


@contextlib.contextmanager
def _keep_loopback(ray: Any, address: str | None) -> Iterator[None]:
    """Within the block, Ray keeps a loopback ``host:port`` address as given, and this driver
    takes 127.0.0.1 as its node's address, instead of both being rewritten to the machine's
    interface address (ray-project/ray#59110); any other address is left to Ray."""
    hp = _host_port(address)
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if (
        hp is None
        or hp[0] not in _LOOPBACK
        or constants is None
        or not hasattr(constants, "ENABLE_RAY_CLUSTER")
    ):
        yield
        return
    before = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False  # Ray then takes 127.0.0.1 as this node's address
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = before


@contextlib.contextmanager
def _loopback_node(ray: Any, node_ip: str) -> Iterator[None]:
    """Within the block, a local Ray started with a loopback ``node_ip`` keeps it (and so
    binds its servers to it) instead of rewriting it to the machine's interface address
    (ray-project/ray#59110); any other address is left to Ray."""
    with _keep_loopback(ray, f"{node_ip}:0" if node_ip in _LOOPBACK else None):
        yield


def _send_experiment_files_by_value(ray: Any, *objs: Any) -> None:
    """Makes cloudpickle send experiment files (imported by ``nasforge run`` under a private
    module name that workers cannot import) by value, as it does for ``__main__``."""
    from nasforge.run.refs import SCRIPT_PREFIX as EXPERIMENT_MODULE_PREFIX

    seen = set()
    for obj in (*objs, *(getattr(o, "fn", None) for o in objs)):
        for mod_name in (getattr(obj, "__module__", None), type(obj).__module__):
            if mod_name and mod_name.startswith(EXPERIMENT_MODULE_PREFIX) and mod_name not in seen:
                seen.add(mod_name)
                ray.cloudpickle.register_pickle_by_value(sys.modules[mod_name])
