"""Consecutive model parallel (CMP) search: a DARTS or NASB supernet split into M consecutive
partitions, one per device, the bilevel step's four phases issued in CMP's order (NASB-CMP §2.2,
Algorithm 1, Appendix B), optionally times R data-parallel replicas.

``cmp_search(space, "nasb", data, CMPSettings(model_parallel=2, schedule="cmp"))`` returns the same
:class:`~nasforge.oneshot.common.SearchResult` as :func:`~nasforge.oneshot.search.search` with
``order="consecutive"``, and with one replica the same result bit for bit (same thread count):
it is the same computation, only spread over partitions. Schedules (pure, in
:mod:`nasforge.oneshot.cmp_schedule`):

    mp    plain model parallel: F_A, B_A, F_w, B_w one after another
    cmp   F_A and F_w sub-tasks back to back, then B_w and B_A; both updates after all four

Workers: ``"thread"`` (one thread per partition in this process, as the paper's Appendix B;
the default, see docs/cmp.md for the measurement) or ``"process"`` (``torch.distributed``
processes: gloo on CPU, NCCL on CUDA, on 127.0.0.1). ``replicas=R`` adds data parallelism:
partition k of every replica is one process or thread, each replica takes a 1/R shard of each
batch, and gradients are summed over replicas (the architecture gradient still sees the whole
batch); batch norm then normalises per shard, as in any data-parallel run.

The coordinator (this process) keeps the full supernet in host memory: after each epoch the
workers write their slices, which it assembles into exactly the state a one-device search
checkpoints (so progress rows, checkpoints, resume and export are those of a one-device run),
and it computes the epoch's validation accuracy and architecture from it.

Invariants:
    * on return or raise, no worker process or thread is left running;
    * with ``replicas=1`` the result equals a one-device consecutive search bitwise.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError, DivergenceError, WorkerError
from nasforge.oneshot._cmp_transport import DistTransport, ThreadTransport
from nasforge.oneshot._cmp_worker import Job, PartitionWorker
from nasforge.oneshot.algorithms import config_for, with_settings
from nasforge.oneshot.cmp_partition import owned_names, partition, unit_costs, units
from nasforge.oneshot.cmp_schedule import SCHEDULES
from nasforge.oneshot.common import (
    SearchConfig,
    SearchResult,
)
from nasforge.oneshot.search import SearchState, epoch_row, get_algorithm, initial_state
from nasforge.oneshot.supernet import Supernet
from nasforge.run.settings import kind_settings
from nasforge.runtime.devices import check_device
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group
from nasforge.runtime.threads import threads_for
from nasforge.space import ModelSpace

__all__ = [
    "cmp_search",
    "CMPSettings",
    "profile_steps",
    "check_parallel",
    "WORKERS",
    "DEFAULT_WORKERS",
]

logger = logging.getLogger(__name__)

WORKERS = ("thread", "process")
#: Measured faster on CPU (docs/cmp.md): threads share one address space, so activations pass
#: between partitions without serialisation or copies.
DEFAULT_WORKERS = "thread"


def check_parallel(
    model_parallel: Any, replicas: Any, schedule: Any, workers: Any, cfg: Any, algorithm: str
) -> None:
    """Returns None when the parallel settings can run.

    Raises:
        ConfigError: a setting out of range, settings the algorithm cannot run in parallel
            (``order='alternate'``: :meth:`~nasforge.oneshot.supernet.Algorithm.parallel_problem`),
            or an algorithm without architecture gradients (SPOS), or a ``budget``.
    """
    algo = get_algorithm(algorithm)
    if not (algo.uses_val and algo.learns_arch and algo.model_parallel):
        raise ConfigError(
            f"model parallel search needs architecture gradients from the generic pass pair "
            f"(darts, nasb, nasp); got {algo.name!r}: run it with model_parallel=1"
        )
    for name, v in (("model_parallel", model_parallel), ("replicas", replicas)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
    if schedule not in SCHEDULES:
        raise ConfigError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    if workers not in WORKERS:
        raise ConfigError(f"workers must be one of {list(WORKERS)}, got {workers!r}")
    problem = algo.parallel_problem(with_settings(algo, cfg))
    if problem:
        raise ConfigError(problem)
    if getattr(cfg, "budget", None) is not None:
        raise ConfigError(
            f"model parallel search does not take a budget yet (got budget {cfg.budget}); run "
            "the budgeted search with model_parallel=1 and replicas=1"
        )


@dataclass
class CMPSettings:
    """Returns nothing; how :func:`cmp_search` spreads a search, each setting with its
    default, written once (the search's own settings are its
    :class:`~nasforge.oneshot.common.SearchConfig`).

    ``device``: ``"cpu"``, or ``"cuda"``: threads share one GPU, each partition on its own CUDA
    stream; processes take one GPU each (NCCL) when there are several.
    ``defer_arch_grads`` (NASB): in B_A a partition first passes its input gradients upstream
    and only then recomputes the inactive operations for Eq. 6, so all partitions recompute at
    once; the architecture gradients are then summed in the one-device order (bitwise equal).
    ``bounds`` fixes the partitions as unit ranges ``[(start, stop), ...]``; by default they are
    balanced by each unit's measured time (:func:`~nasforge.oneshot.cmp_partition.unit_costs`).
    ``threads``: torch's thread count per worker, chosen as :func:`search` chooses it (default
    :func:`~nasforge.runtime.threads.default_threads`; the caller's is restored after).
    """

    model_parallel: int = 2  # consecutive partitions
    schedule: str = "cmp"  # cmp or mp (SCHEDULES)
    replicas: int = 1  # data-parallel replicas of the partitions
    workers: str = DEFAULT_WORKERS  # thread or process
    bounds: list[tuple[int, int]] | None = None
    device: str = "cpu"
    defer_arch_grads: bool = True
    timeout_s: float = 3600.0  # a worker silent this long is ended (WorkerError)
    threads: int | None = None


def cmp_search(
    space: ModelSpace,
    algorithm: str,
    data: Any,
    parallel: CMPSettings | Mapping[str, Any] | None = None,
    *,
    config: SearchConfig | None = None,
    on_epoch: Callable[[dict[str, Any]], None] | None = None,
    checkpoint: Callable[[dict[str, Any], SearchState], None] | None = None,
    resume_from: Mapping[str, Any] | None = None,
    weights: Mapping[str, torch.Tensor] | None = None,
    **settings: Any,
) -> SearchResult:
    """Returns what :func:`~nasforge.oneshot.search.search` returns, computed by
    ``parallel.model_parallel`` consecutive partitions (times ``parallel.replicas``) under
    ``parallel.schedule``.

    ``parallel`` is a :class:`CMPSettings` (or a mapping of its fields); ``settings`` are the
    loop's :class:`~nasforge.oneshot.common.SearchConfig` fields and the algorithm's own when no
    ``config`` is given, as for :func:`~nasforge.oneshot.search.search`. A :class:`CMPSettings`
    field given as a keyword (``model_parallel=2``) still works until nasforge 0.4.0 and warns
    (DeprecationWarning).

    Raises:
        ConfigError: a bad setting (also ``order='alternate'``, an algorithm without
            architecture gradients such as SPOS), or more partitions than units.
        SpaceError: the space does not split into units (see :mod:`.cmp_partition`).
        DivergenceError: a loss became NaN or infinite.
        WorkerError: a worker raised (its traceback is in the message), died or timed out;
            every worker is ended first.
    """
    names = {f.name for f in fields(CMPSettings)}
    old = {k: settings.pop(k) for k in list(settings) if k in names}
    p = kind_settings(CMPSettings, parallel, old, "cmp_search")
    model_parallel, schedule, replicas, workers = (
        p.model_parallel,
        p.schedule,
        p.replicas,
        p.workers,
    )
    bounds, device, defer_arch_grads, timeout_s, threads = (
        p.bounds, p.device, p.defer_arch_grads, p.timeout_s, p.threads
    )  # fmt: skip
    with threads_for(threads):  # as search() does, so both run at the same count
        algo, cfg, split, state, bounds = _prepare(
            space, algorithm, data, model_parallel, schedule, replicas, workers, config,
            resume_from, weights, bounds, settings,
        )  # fmt: skip
        net = state.net
        dev = _check_device(device, workers, model_parallel * replicas)
        history: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="nasforge-cmp-") as out:
            init = str(Path(out) / "init.pt")
            torch.save(state.state_dict(), init)
            job = Job(space, algo, split, cfg, list(bounds), schedule, replicas, init, out,
                      torch.get_num_threads(), dev, defer_arch_grads=defer_arch_grads)  # fmt: skip
            with _Workers(job, workers, timeout_s) as pool:
                t0 = time.perf_counter()
                while state.epoch < cfg.epochs:
                    pieces = pool.wait_epoch(state.epoch + 1)
                    row = _assemble(state, pieces, split, algo, time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    history.append(row)
                    logger.info(
                        "%s-%s epoch %d/%d: train loss %.4f, val loss %.4f, val acc %.4f, %.1fs, "
                        "arch %s", algo.name, schedule, row["epoch"], cfg.epochs, row["train_loss"],
                        row["val_loss"], row["val_acc"], row["seconds"], row["arch_id"],
                    )  # fmt: skip
                    if checkpoint is not None:
                        checkpoint(row, state)
                    if on_epoch is not None:
                        on_epoch(row)
        arch, evaluated = algo.finish(net, split, cfg)
        return SearchResult(arch=arch, history=history, supernet=net, evaluated=evaluated)


def _prepare(
    space: ModelSpace,
    algorithm: str,
    data: Any,
    model_parallel: int,
    schedule: str,
    replicas: int,
    workers: str,
    config: SearchConfig | None,
    resume_from: Any,
    weights: Any,
    bounds: Any,
    settings: Mapping[str, Any],
) -> tuple[Any, SearchConfig, Any, SearchState, list[tuple[int, int]]]:
    """Returns the algorithm, config, split, the one-device search state (as ``search`` builds
    it) and the partitions' unit ranges."""  # fmt: skip
    algo = get_algorithm(algorithm)
    cfg = with_settings(algo, config) if config is not None else config_for(algo, settings)
    cfg.check(allow_no_epochs=weights is not None)
    check_parallel(model_parallel, replicas, schedule, workers, cfg, algorithm)
    split, state = initial_state(space, algo, data, cfg, weights, resume_from)  # the CPU's
    net = state.net
    all_units = units(net)
    _check_cover(net, all_units)
    if bounds is None:
        x, y = split.train
        example = (x[: cfg.batch_size], y[: cfg.batch_size])
        costs = unit_costs(net, example)
        bounds = [(r.start, r.stop) for r in partition(costs, model_parallel)]
        logger.info("cmp: unit costs %s -> partitions %s", [f"{c:.4f}" for c in costs], bounds)
    elif len(bounds) != model_parallel:
        raise ConfigError(f"bounds {bounds} name {len(bounds)} partitions, not {model_parallel}")
    return algo, cfg, split, state, list(bounds)


def _check_device(device: str, workers: str = "thread", world: int = 1) -> str:
    if device.startswith("cuda") and workers == "process" and torch.cuda.device_count() < world:
        raise ConfigError(
            f"workers='process' on CUDA runs one NCCL process per GPU: {world} processes need "
            f"{world} GPUs, this machine has {torch.cuda.device_count()}; use workers='thread' "
            "(partitions on CUDA streams of one GPU)"
        )
    check_device(device)  # the GPU exists (one shared check for every kind of run)
    if device == "cpu" or device.startswith("cuda"):
        return device
    raise ConfigError(f"device {device!r} is not usable here; use 'cpu', 'cuda' or 'cuda:N'")


def profile_steps(
    space: ModelSpace,
    algorithm: str,
    data: Any,
    *,
    model_parallel: int = 2,
    schedule: str = "cmp",
    replicas: int = 1,
    workers: str = DEFAULT_WORKERS,
    warmup: int = 2,
    steps: int = 5,
    bounds: list[tuple[int, int]] | None = None,
    device: str = "cpu",
    defer_arch_grads: bool = True,
    variants: list[tuple[str, bool]] | None = None,
    timeout_s: float = 600.0,
    **settings: Any,
) -> dict[str, Any]:
    """Returns the timed steps of a model/data-parallel search (trained, then thrown away):
    ``step_s`` (median wall time of a step, worker 0), ``idle_fraction`` (per worker, the
    median share of a step spent waiting on others), ``bounds``, and the raw per-step lists.

    ``variants=[("mp", False), ("cmp", True)]`` runs those (schedule, defer_arch_grads) in
    turn, step by step, in one launch, so that they meet the same machine load; ``step_s``,
    ``idle_fraction`` and ``times`` are then lists with one entry per variant, and ``paired``
    holds, per variant, the median over rounds of its step time over the first variant's.

    Raises:
        ConfigError, SpaceError, WorkerError: as :func:`cmp_search`.
    """
    algo, cfg, split, state, bounds = _prepare(
        space, algorithm, data, model_parallel, schedule, replicas, workers, None, None, None,
        bounds, settings,
    )  # fmt: skip
    dev = _check_device(device, workers, model_parallel * replicas)
    with tempfile.TemporaryDirectory(prefix="nasforge-cmp-") as out:
        init = str(Path(out) / "init.pt")
        torch.save(state.state_dict(), init)
        job = Job(space, algo, split, cfg, bounds, schedule, replicas, init, out,
                  torch.get_num_threads(), dev, (warmup, steps), defer_arch_grads,
                  variants)  # fmt: skip
        with _Workers(job, workers, timeout_s) as pool:
            profs = pool.wait_files([f"prof{r}.pt" for r in range(pool.world)])
    med = statistics.median
    # per worker, per variant: lists of step times and waits
    times = [p["times"] for p in profs]
    waits = [p["waits"] for p in profs]
    per = [
        {
            "step_s": med(times[0][v]),
            "idle_fraction": [
                med(w / t for w, t in zip(waits[r][v], times[r][v])) for r in range(len(profs))
            ],
            "times": times[0][v],
        }
        for v in range(len(times[0]))
    ]
    if variants is None:
        return {**per[0], "bounds": bounds}
    return {
        "step_s": [p["step_s"] for p in per],
        "idle_fraction": [p["idle_fraction"] for p in per],
        "times": [p["times"] for p in per],
        "paired": [med(t / b for t, b in zip(p["times"], per[0]["times"])) for p in per],
        "bounds": bounds,
    }


def _check_cover(net: Supernet, all_units: list) -> None:
    covered = owned_names(net, all_units)
    missing = [k for k in net.state_dict() if k not in covered and not k.startswith("arch_")]
    if missing:
        raise ConfigError(
            f"the units of {type(net.model).__name__} leave out {missing[:5]}; its chain() must "
            "return every module the forward uses"
        )


def _assemble(state: SearchState, pieces: list[dict], split: Any, algo: Any, secs: float) -> dict:
    """Returns the epoch's progress row after loading the workers' slices into ``state``."""
    full = state.state_dict()
    full["epoch"] = state.epoch + 1
    opt_state: dict[int, Any] = {}
    for piece in pieces:
        full["net"].update(piece["net"])
        for j, st in piece["opt_w"]["state"].items():
            opt_state[piece["owned"][int(j)]] = st
    first = pieces[0]
    groups = [{**pg, "params": list(range(len(state.net.weights())))}
              for pg in first["opt_w"]["param_groups"]]  # fmt: skip
    full["opt_w"] = {"state": opt_state, "param_groups": groups}
    full["opt_a"], full["sched"], full["g"] = first["opt_a"], first["sched"], first["g"]
    state.load_state_dict(full)
    last = pieces[-1]
    lt, lv = last["train_losses"], last["val_losses"]
    return epoch_row(algo, state, split, lt, lv, secs)


# -- workers ------------------------------------------------------------------------------------


def _process_main(rank: int, job: Job, world: int) -> None:
    torch.set_num_threads(job.threads)
    backend = "nccl" if job.device.startswith("cuda") else "gloo"
    join_group(rank, world, file_rendezvous(job.out), backend=backend)
    groups = _groups(job, world)
    device = torch.device(job.device)
    if device.type == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    PartitionWorker(job, rank, DistTransport(groups, device)).run()


def _groups(job: Job, world: int) -> dict[Any, Any]:
    """Returns the process groups every rank creates in the same order: the partitions of
    each replica (the global norm) and the replicas of each partition (gradient sums)."""
    import torch.distributed as dist

    m, r = job.m, job.replicas
    groups: dict[Any, Any] = {}
    if m > 1:
        for j in range(r):
            groups[("rep", j)] = dist.new_group([j * m + k for k in range(m)])
    if r > 1:
        for k in range(m):
            groups[("part", k)] = dist.new_group([j * m + k for j in range(r)])
    return groups


class _Workers:
    """Returns nothing; starts the workers, hands the parent each epoch's slices, and ends every
    worker on exit (also on an error)."""

    def __init__(self, job: Job, kind: str, timeout_s: float, target: Any = None) -> None:
        self.job, self.kind, self.timeout_s = job, kind, timeout_s
        self.target = target or (_process_main, (job.m * job.replicas,))  # (function, extra args)
        self.world = job.m * job.replicas
        self.group: LocalGroup | None = None
        self.threads: list[threading.Thread] = []
        self.errors: dict[int, BaseException] = {}
        self.abort = threading.Event()

    def __enter__(self) -> _Workers:
        if self.kind == "process":
            fn, extra = self.target
            self.group = LocalGroup(
                self.world,
                fn,
                (self.job, *extra),
                folder=self.job.out,
                what="cmp worker",
                timeout_s=self.timeout_s,
                hint="the space must be picklable (a module-level class) and a launching script "
                "must guard its entry point with `if __name__ == '__main__':`",
                ending="the search was stopped and every worker ended",
            ).start()
        else:
            transport = ThreadTransport(self.world, self.abort)
            workers = [PartitionWorker(self.job, r, transport) for r in range(self.world)]
            for rank, w in enumerate(workers):
                t = threading.Thread(target=self._thread_main, args=(rank, w), daemon=True)
                self.threads.append(t)
                t.start()
        return self

    def _thread_main(self, rank: int, worker: PartitionWorker) -> None:
        try:
            if worker.device.type == "cuda":  # one stream per partition (Appendix B)
                with torch.cuda.stream(torch.cuda.Stream(worker.device)):
                    worker.run()
            else:
                worker.run()
        except BaseException as exc:  # handed to the parent, which re-raises it
            # the traceback travels on the exception to the parent thread, which prints it;
            # mypy knows no such attribute on BaseException
            exc.__nasforge_tb__ = traceback.format_exc()  # type: ignore[attr-defined]
            self.errors[rank] = exc
            self.abort.set()

    def __exit__(self, *exc: Any) -> None:
        self.abort.set()
        for t in self.threads:
            t.join()
        if self.group is not None:
            self.group.stop()

    def wait_epoch(self, epoch: int) -> list[dict[str, Any]]:
        """Returns the slices (one per partition, in order) of replica 0 after ``epoch``.

        Raises:
            DivergenceError: a worker saw a NaN or infinite loss.
            WorkerError: a worker raised, died, or the run timed out.
        """
        return self.wait_files([f"e{epoch}_k{k}.pt" for k in range(self.job.m)])

    def wait_files(self, names: list[str]) -> list[dict[str, Any]]:
        """Returns the contents of the files ``names`` in the job's folder once all exist.

        Raises:
            DivergenceError, WorkerError: see :meth:`wait_epoch`.
        """
        paths = [Path(self.job.out) / n for n in names]
        deadline = time.monotonic() + self.timeout_s
        while not all(p.exists() for p in paths):
            self._raise_failures()
            if time.monotonic() > deadline:
                raise WorkerError(
                    f"model parallel search exceeded timeout_s={self.timeout_s}s waiting for "
                    f"{names}; raise timeout_s or lower epochs"
                )
            time.sleep(0.02)
        return [torch.load(p, weights_only=True, map_location="cpu") for p in paths]

    def _raise_failures(self) -> None:
        for rank, exc in sorted(self.errors.items()):
            if isinstance(exc, DivergenceError):
                raise exc
            if not isinstance(exc, WorkerError) or len(self.errors) == 1:
                tb = getattr(exc, "__nasforge_tb__", "")
                raise WorkerError(
                    f"cmp worker {rank} (thread) raised {type(exc).__name__}: {exc}\n{tb}the "
                    "search was stopped and every worker ended"
                ) from exc
        if self.group is not None:
            self.group.check()
