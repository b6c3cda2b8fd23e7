"""Starting and watching the stage processes of a pipeline run: spawned by nasforge on one
machine (:func:`launch`) or started by ``torchrun`` (``python -m nasforge.parallel.launcher``).

Network exposure: by default (``RunConfig.bind`` loopback) a run opens no socket on any
interface but loopback: spawned stages meet through a file store, and gloo's pair sockets are
pinned to the loopback interface. Another ``bind`` address is the explicit multi-node opt-in.

Invariants:
    * :func:`launch` either returns every stage's results or raises :class:`WorkerError` or
      :class:`DivergenceError`; in every case no stage process is left alive.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.parallel.config import POLICIES, RunConfig, check_config, set_determinism
from nasforge.parallel.runtime import StageWorker
from nasforge.parallel.segments import BoundaryWatcher
from nasforge.runtime.loopback import loopback_interface
from nasforge.runtime.procgroup import (
    DIVERGED_EXIT,
    LocalGroup,
    file_rendezvous,
    join_group,
    raise_failures,
    run_rank,
)
from nasforge.runtime.weights import save_state

__all__ = ["launch", "collect", "is_loopback", "loopback_interface", "rank_device", "DIVERGED_EXIT"]


# -- processes ---------------------------------------------------------------------------------


def is_loopback(addr: str) -> bool:
    """Returns True when ``addr`` ("127.0.0.1", "::1", "localhost") names this machine only."""
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def _rendezvous(cfg: RunConfig, out_dir: str) -> str:
    """Returns the ``init_method`` of a spawned run.

    Loopback (the default): a file store in the run's private temporary directory, so no
    rendezvous socket exists at all (torch's TCPStore server listens on every interface
    whatever host it is given). Otherwise ``cfg.bind`` is the explicit opt-in to other hosts:
    a TCP store at ``cfg.bind`` on a free port.
    """
    if is_loopback(cfg.bind):
        return file_rendezvous(out_dir)
    try:
        with socket.socket() as s:
            s.bind((cfg.bind, 0))
            port = s.getsockname()[1]
    except OSError as exc:
        raise ConfigError(
            f"RunConfig.bind={cfg.bind!r} cannot be bound on this host ({exc}); give an address "
            "of this host, or 127.0.0.1 (the default) for a run that stays on this machine"
        ) from exc
    return f"tcp://{cfg.bind}:{port}"


def rank_device(device: str, local_rank: int) -> str:
    """Returns the device of the stage with ``local_rank`` on its machine: a bare ``"cuda"`` is
    that machine's GPU ``local_rank`` (NCCL needs one GPU per process; stages beyond the
    machine's GPU count share them round-robin); any other device is kept as given."""
    if device != "cuda":
        return device
    return f"cuda:{local_rank % max(1, torch.cuda.device_count())}"


def _stage(
    rank: int,
    cfg: RunConfig,
    init: str,
    local_rank: int | None = None,
    start_path: str | None = None,
    parts_dir: str | None = None,
) -> dict[str, Any]:
    cfg = replace(cfg, device=rank_device(cfg.device, rank if local_rank is None else local_rank))
    if cfg.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(cfg.device))
    set_determinism(cfg.seed)
    join_group(
        rank,
        cfg.n_stages,
        init,
        backend="nccl" if cfg.device.startswith("cuda") else "gloo",
        timeout_s=cfg.timeout_s,
        loopback=is_loopback(cfg.bind),
    )
    # mmap: a stage reads only its own layers of the state
    state = None if start_path is None else torch.load(start_path, weights_only=True, mmap=True)
    return StageWorker(rank, cfg, state, parts_dir).run()


def launch(
    cfg: RunConfig,
    init: Mapping[str, Any] | None = None,
    on_parts: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Returns each stage's results after running the pipeline in ``cfg.n_stages`` processes.

    Processes are spawned on this machine. With the default ``cfg.bind`` (127.0.0.1) they meet
    through a file store and talk over loopback only: no socket of the run listens on another
    interface. The parent watches them: the first one that exits non-zero stops the run.

    ``init`` is a training state to start from (:mod:`nasforge.parallel.segments`; checked
    by the caller). ``on_parts(parts)`` is called in this process, in step order, with every
    stage's part of each segment boundary before ``cfg.steps`` while the stages train on;
    whatever it raises ends every stage and propagates.

    Invariants:
        * On return or raise, no stage process is alive; only started processes are joined.

    Raises:
        ConfigError, ScheduleError: see :func:`check_config`; also a ``cfg.bind`` that is not
            an address of this host (before any process starts).
        DivergenceError: a stage saw a NaN or infinite loss (its message names the step and
            the subnet; attributes ``step``, ``subnet``, ``loss`` and ``stage``); every stage
            process is ended and no results are returned.
        WorkerError: a stage could not be started, raised (its traceback is in the message),
            died, or the run exceeded ``cfg.timeout_s``; every stage process is ended before it
            propagates.
    """
    check_config(cfg)
    with tempfile.TemporaryDirectory(prefix="nasforge-pipe-") as out:
        start_path = None if init is None else save_state(dict(init), Path(out) / "start.pt")
        parts_dir = None if on_parts is None else out
        group = LocalGroup(
            cfg.n_stages,
            _stage,
            (cfg, _rendezvous(cfg, out), None, start_path, parts_dir),
            folder=out,
            what="pipeline stage",
            timeout_s=cfg.timeout_s,
            hint="the run's config must be picklable (a module-level space class, arrays as "
            "data) and a script that launches must guard its entry point with "
            "`if __name__ == '__main__':`",
            ending="the run was stopped and every stage process ended",
        )
        with group:
            if on_parts is None:
                return group.results(weights_only=False)
            start = 0 if init is None else int(init["step"])
            watch = BoundaryWatcher(out, cfg.n_stages, start, cfg, on_parts)
            results = group.results(weights_only=False, poll=watch.poll)
            watch.poll()  # boundaries the stages wrote after the last poll
            return results


# -- torchrun ------------------------------------------------------------------------------------


def collect(out_dir: str | Path, n_stages: int) -> list[dict[str, Any]]:
    """Returns each stage's results saved by a torchrun run in ``out_dir``.

    Raises:
        DivergenceError: a stage stopped on a NaN or infinite loss (``step``, ``subnet``,
            ``loss`` and ``stage`` attributes as from :func:`launch`).
        WorkerError: a stage left a traceback or no result.
    """
    out = Path(out_dir)
    bad = [(r, 1) for r in range(n_stages) if not (out / f"rank{r}.pt").exists()]
    raise_failures(out, bad, "pipeline stage", ending="the run was stopped")
    return [torch.load(out / f"rank{r}.pt") for r in range(n_stages)]


def _torchrun_main(argv: list[str] | None = None) -> int:
    """Returns 0 after running this process's stage under ``torchrun`` (env:// rendezvous).

    ``torchrun --nproc-per-node D -m nasforge.parallel.launcher --space pkg.mod:Class
    --space-kwargs '{"n_blocks": 4}' --steps 32 --out DIR``; then :func:`collect` (DIR, D).
    """
    import argparse
    import importlib

    ap = argparse.ArgumentParser(prog="python -m nasforge.parallel.launcher")
    ap.add_argument("--space", default="nasforge.parallel.supernet:ChoiceSupernet")
    ap.add_argument("--space-kwargs", default="{}")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--policy", choices=POLICIES, default="csp")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-subnets", type=float, default=3.0)
    ap.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address gloo listens on: loopback (default) for one machine; this host's address "
        "for multi-node runs",
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    module, qual = args.space.split(":")
    cls: Any = importlib.import_module(module)
    for part in qual.split("."):
        cls = getattr(cls, part)
    cfg = RunConfig(
        cls,
        json.loads(args.space_kwargs),
        steps=args.steps,
        batch_size=args.batch_size,
        policy=args.policy,
        seed=args.seed,
        cache_subnets=args.cache_subnets,
        n_stages=int(os.environ["WORLD_SIZE"]),
        device="cuda" if torch.cuda.is_available() else "cpu",
        bind=args.bind,
    )
    rank = int(os.environ["RANK"])
    if rank == 0:
        check_config(cfg)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    run_rank(_stage, rank, args.out, cfg, "env://", int(os.environ.get("LOCAL_RANK", rank)))
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through torchrun in the slow test
    raise SystemExit(_torchrun_main())
