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
import time
import traceback
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from nasforge.errors import ConfigError, DivergenceError, WorkerError
from nasforge.parallel.config import POLICIES, RunConfig, check_config, set_determinism
from nasforge.parallel.runtime import StageWorker
from nasforge.run.loopback import loopback_interface, pin_to_loopback

__all__ = ["launch", "collect", "is_loopback", "loopback_interface", "rank_device", "DIVERGED_EXIT"]

#: Exit code of a stage process that stopped on a NaN or infinite loss.
DIVERGED_EXIT = 3
#: What a DivergenceError carries across the process boundary besides its message.
_DIVERGENCE_KEYS = ("step", "subnet", "loss")


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
        return f"file://{Path(out_dir) / 'rendezvous'}"
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


def _worker(
    rank: int, cfg: RunConfig, init: str, out_dir: str, local_rank: int | None = None
) -> None:
    try:
        cfg = replace(
            cfg, device=rank_device(cfg.device, rank if local_rank is None else local_rank)
        )
        if cfg.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(cfg.device))
        set_determinism(cfg.seed)
        if is_loopback(cfg.bind):
            pin_to_loopback()
        backend = "nccl" if cfg.device.startswith("cuda") else "gloo"
        dist.init_process_group(
            backend,
            init_method=init,
            rank=rank,
            world_size=cfg.n_stages,
            timeout=timedelta(seconds=cfg.timeout_s),
        )
        result = StageWorker(rank, cfg).run()
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
        dist.destroy_process_group()
    except DivergenceError as exc:
        # A record the parent turns back into a DivergenceError (not a generic WorkerError);
        # written before exiting, so it exists before any neighbour can fail on our absence.
        record = {"message": str(exc), **{k: getattr(exc, k, None) for k in _DIVERGENCE_KEYS}}
        (Path(out_dir) / f"rank{rank}.diverged").write_text(json.dumps(record))
        (Path(out_dir) / f"rank{rank}.err").write_text(traceback.format_exc())
        os._exit(DIVERGED_EXIT)
    except BaseException:
        (Path(out_dir) / f"rank{rank}.err").write_text(traceback.format_exc())
        os._exit(1)


def launch(cfg: RunConfig) -> list[dict[str, Any]]:
    """Returns each stage's results after running the pipeline in ``cfg.n_stages`` processes.

    Processes are spawned on this machine. With the default ``cfg.bind`` (127.0.0.1) they meet
    through a file store and talk over loopback only: no socket of the run listens on another
    interface. The parent watches them: the first one that exits non-zero stops the run.

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
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="nasforge-pipe-") as out:
        init = _rendezvous(cfg, out)
        procs = [
            ctx.Process(target=_worker, args=(r, cfg, init, out), daemon=True)
            for r in range(cfg.n_stages)
        ]
        started: list[Any] = []
        try:
            for r, p in enumerate(procs):
                try:
                    p.start()
                except Exception as exc:
                    raise WorkerError(
                        f"pipeline stage {r} could not be started: {type(exc).__name__}: {exc}; "
                        "the run's config must be picklable (a module-level space class, "
                        "arrays as data) and a script that launches must guard its entry "
                        "point with `if __name__ == '__main__':`"
                    ) from exc
                started.append(p)
            _watch(cfg, procs, out)
        finally:
            for p in started:
                if p.is_alive():
                    p.terminate()
            for p in started:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join()
        return [torch.load(Path(out) / f"rank{r}.pt") for r in range(cfg.n_stages)]


def _watch(cfg: RunConfig, procs: list, out: str) -> None:
    """Returns None once every stage exited 0; raises on the first failure or the timeout."""
    deadline = time.monotonic() + cfg.timeout_s
    while True:
        codes = [p.exitcode for p in procs]
        bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if bad:
            _raise_divergence(out, len(procs))
            raise WorkerError(_failure_message(bad, procs, out))
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            raise WorkerError(
                f"pipeline run exceeded timeout_s={cfg.timeout_s}s; stages still "
                f"running: {[r for r, c in enumerate(codes) if c is None]}; raise "
                "timeout_s or lower steps"
            )
        procs[0].join(0.05)


def _raise_divergence(out: str | Path, n_stages: int) -> None:
    """Returns None when no stage recorded a divergence in ``out``.

    Raises:
        DivergenceError: a stage did; the message is the stage's own (step, subnet, lr).
    """
    for rank in range(n_stages):
        rec = Path(out) / f"rank{rank}.diverged"
        if rec.exists():
            record = json.loads(rec.read_text())
            err = DivergenceError(
                f"pipeline stage {rank}: {record['message']}; every stage process was ended"
            )
            for key in _DIVERGENCE_KEYS:
                setattr(err, key, record.get(key))
            err.stage = rank
            raise err


def _failure_message(bad: list[tuple[int, int]], procs: list, out: str) -> str:
    parts = []
    for rank, code in bad:
        err = Path(out) / f"rank{rank}.err"
        detail = err.read_text() if err.exists() else "no traceback (it died before writing one)"
        parts.append(
            f"pipeline stage {rank} (pid {procs[rank].pid}) exited with code {code}:\n{detail}"
        )
    return "\n".join(parts) + "\nthe run was stopped and every stage process ended"


# -- torchrun ------------------------------------------------------------------------------------


def collect(out_dir: str | Path, n_stages: int) -> list[dict[str, Any]]:
    """Returns each stage's results saved by a torchrun run in ``out_dir``.

    Raises:
        DivergenceError: a stage stopped on a NaN or infinite loss (``step``, ``subnet``,
            ``loss`` and ``stage`` attributes as from :func:`launch`).
        WorkerError: a stage left a traceback or no result.
    """
    out = Path(out_dir)
    _raise_divergence(out, n_stages)
    bad = [(r, 1) for r in range(n_stages) if not (out / f"rank{r}.pt").exists()]
    if bad:
        raise WorkerError(_failure_message(bad, [_NoPid()] * n_stages, str(out)))
    return [torch.load(out / f"rank{r}.pt") for r in range(n_stages)]


class _NoPid:
    pid = "?"


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
    _worker(rank, cfg, "env://", args.out, local_rank=int(os.environ.get("LOCAL_RANK", rank)))
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through torchrun in the slow test
    raise SystemExit(_torchrun_main())
