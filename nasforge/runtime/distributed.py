"""Data parallelism across processes, on the distributed engine PyTorch users already run:
``torch.distributed`` ranks started by ``torchrun`` (any topology, several machines included)
or by ``nasforge run FILE --nproc N`` (N processes on this machine).

Both start every rank as ``python -m nasforge run FILE`` with torchrun's environment (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``, ``TORCHELASTIC_*``), so a rank
runs one code path whoever started it. :func:`join` turns that environment into a process
group and a :class:`Ranks`, the one object a training loop asks: which rank it is, its shard of
a batch, the gradient all-reduce, broadcasts from rank 0, and agreement on a flag (a stop)::

    ranks = join("cpu")              # gloo on CPU, NCCL on CUDA (one GPU per rank: LOCAL_RANK)
    x, y = ranks.shard(batch)        # this rank's rows of the global batch
    loss = ranks.scaled(loss_sum)    # its share of the global batch's mean
    ranks.all_reduce_grads(params)   # every rank now holds the global batch's gradient
    if ranks.agree(stop_asked()):    # rank 0 polls; every rank stops at the same step
        ...

:func:`launch_local` is ``--nproc``: it hosts torchrun's rendezvous store itself, bound to
127.0.0.1 (torchrun's own store, like every ``torch.distributed.TCPStore`` server, listens on
every interface), and starts the ranks with ``TORCHELASTIC_USE_AGENT_STORE`` set, exactly as
torchrun's agent does; a failing rank ends the others, and its error is one line. Gloo's (and
NCCL's bootstrap) sockets are pinned to loopback whenever the rendezvous address is a loopback
one; a rendezvous on another address is the user's multi-node opt-in.

Invariants:
    * A :class:`Ranks` of one process (no ``torchrun`` environment) does nothing collective:
      ``shard`` returns the batch, ``all_reduce_grads`` leaves the gradients, ``agree``
      returns its flag.
    * ``shard`` splits every batch the same way on every rank (contiguous rows, the first
      ``len % world`` ranks one row more); the shards of one batch cover it exactly once.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError
from nasforge.runtime.loopback import pin_to_loopback

__all__ = [
    "Ranks",
    "ONE",
    "from_env",
    "join",
    "leave",
    "current",
    "launch_local",
    "rank_error_file",
    "is_loopback_address",
]

log = logging.getLogger("nasforge.runtime")

#: the variable naming the folder where ``--nproc``'s ranks leave their errors
ERRORS_ENV = "NASFORGE_RANK_ERRORS"
#: the variable that sets how long a rank waits for the others, in seconds (default 300)
TIMEOUT_ENV = "NASFORGE_RENDEZVOUS_TIMEOUT"
#: seconds a rank's peers get to end after it failed, before they are killed
GRACE_S = 10.0


@dataclass(frozen=True)
class Ranks:
    """Returns nothing; this process's place among the ranks of a data-parallel job: its
    ``rank`` of ``world``, its ``local_rank`` on its machine, the collective ``backend``
    (``gloo``, ``nccl``; ``""`` for one process) and how many times the job was restarted
    (``restarts``: torchrun's ``TORCHELASTIC_RESTART_COUNT``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str = ""
    restarts: int = 0

    @property
    def distributed(self) -> bool:
        """Returns whether there is more than one rank."""
        return self.world > 1

    @property
    def writer(self) -> bool:
        """Returns whether this rank writes the run's record and checkpoints (rank 0)."""
        return self.rank == 0

    def device(self, device: str) -> str:
        """Returns the device this rank trains on for a run set to ``device``: ``cuda`` and
        ``cuda:N`` become ``cuda:LOCAL_RANK`` (one GPU per rank), the CPU stays the CPU."""
        if self.distributed and device.startswith("cuda"):
            return f"cuda:{self.local_rank}"
        return device

    # -- data ------------------------------------------------------------------------------------
    def bounds(self, n: int) -> tuple[int, int]:
        """Returns the rows ``[start, stop)`` of an ``n``-row batch that are this rank's (every
        row when the batch has fewer rows than there are ranks: each then takes a
        ``1 / world`` share of it, so no rank is left with an empty batch)."""
        if n < self.world:
            return 0, n
        base, extra = divmod(n, self.world)
        start = self.rank * base + min(self.rank, extra)
        return start, start + base + (1 if self.rank < extra else 0)

    def shard(self, batch: Any) -> Any:
        """Returns this rank's rows of ``batch`` (a tensor, or a tuple/list of tensors with
        the same first dimension); the whole batch for one process."""
        if not self.distributed:
            return batch
        if isinstance(batch, (tuple, list)):
            n = len(batch[0])
            start, stop = self.bounds(n)
            return type(batch)(t[start:stop] for t in batch)
        start, stop = self.bounds(len(batch))
        return batch[start:stop]

    def share(self, n: int) -> float:
        """Returns this rank's share of an ``n``-row batch (its rows over ``n``; ``1 / world``
        when every rank takes the whole batch): what a mean over its shard is multiplied by so
        that the ranks' gradients sum to the gradient of the mean over the whole batch."""
        if not n:
            return 0.0
        if n < self.world:
            return 1.0 / self.world
        start, stop = self.bounds(n)
        return (stop - start) / n

    def split(self, items: Sequence[Any]) -> list[Any]:
        """Returns this rank's items of ``items`` (every ``world``-th, from its rank): work
        that is split across ranks and gathered back with :meth:`gather`."""
        return list(items[self.rank :: self.world])

    def gather(self, mine: Sequence[Any], n: int) -> list[Any]:
        """Returns the ``n`` results of items split by :meth:`split`, in the items' order,
        from every rank's ``mine`` (its results, in its items' order)."""
        if not self.distributed:
            return list(mine)
        parts = self.all_gather(list(mine))
        out: list[Any] = [None] * n
        for rank, part in enumerate(parts):
            for i, value in enumerate(part):
                out[rank + i * self.world] = value
        return out

    # -- collectives -----------------------------------------------------------------------------
    def all_reduce_tensors(self, tensors: Sequence[Any], *extra: float) -> list[float]:
        """Returns ``extra`` (numbers, e.g. a loss) summed across ranks, after summing
        ``tensors`` across ranks in place: one flat buffer (float64 for the numbers), one
        collective. Every rank must give tensors of the same shapes in the same order."""
        if not self.distributed:
            return [float(e) for e in extra]
        import torch
        import torch.distributed as dist

        parts = [t.detach().reshape(-1).to(torch.float64) for t in tensors]
        device = tensors[0].device if tensors else "cpu"
        parts.append(torch.tensor([float(e) for e in extra], dtype=torch.float64, device=device))
        flat = torch.cat(parts)
        dist.all_reduce(flat)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset : offset + t.numel()].view_as(t).to(t.dtype))
            offset += t.numel()
        return [float(v) for v in flat[offset:].tolist()]

    def all_reduce_grads(self, params: Iterable[Any], *extra: float) -> list[float]:
        """Returns ``extra`` summed across ranks, after summing the gradients of ``params``
        across ranks in place (:meth:`all_reduce_tensors`). Every rank must hold gradients for
        the same parameters, in the same order (the same path of a supernet); a parameter
        without a gradient is left out on every rank alike."""
        return self.all_reduce_tensors([p.grad for p in params if p.grad is not None], *extra)

    def average_buffers(self, module: Any) -> None:
        """Returns None after averaging ``module``'s floating-point buffers across ranks (batch
        norm's running statistics, each estimated on a rank's shards); counters are left."""
        if not self.distributed:
            return
        floats = [b for b in module.buffers() if b.is_floating_point()]
        if floats:
            self.all_reduce_tensors(floats)
            for b in floats:
                b.div_(self.world)

    def sync_module(self, module: Any) -> None:
        """Returns None once every rank holds rank 0's parameters and buffers of ``module``."""
        if not self.distributed:
            return
        import torch.distributed as dist

        for t in [*module.parameters(), *module.buffers()]:
            dist.broadcast(t.data, src=0)

    def all_reduce_sum(self, values: Sequence[float]) -> list[float]:
        """Returns ``values`` summed across ranks (float64), e.g. a validation pass's loss
        sum and count over each rank's shard."""
        if not self.distributed:
            return [float(v) for v in values]
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(v) for v in values], dtype=torch.float64)
        dist.all_reduce(t)
        return [float(v) for v in t.tolist()]

    def agree(self, flag: bool) -> bool:
        """Returns True on every rank when any rank's ``flag`` is True (a stop that rank 0
        took from the run's control folder reaches every rank at the same step)."""
        if not self.distributed:
            return bool(flag)
        return any(self.all_gather(bool(flag)))

    def broadcast(self, obj: Any = None) -> Any:
        """Returns rank 0's ``obj`` on every rank (any picklable value: a resume state, an
        architecture, an error message)."""
        if not self.distributed:
            return obj
        import torch.distributed as dist

        box = [obj if self.writer else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj: Any) -> list[Any]:
        """Returns every rank's ``obj``, in rank order."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        """Returns None once every rank reached it."""
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()


#: the one process of a job that is not distributed
ONE = Ranks()
_current: Ranks = ONE


def current() -> Ranks:
    """Returns the ranks this process joined with :func:`join` (:data:`ONE` before, or when it
    runs alone)."""
    return _current


def is_loopback_address(host: str) -> bool:
    """Returns whether ``host`` (a name or an address) is this machine's loopback."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        try:
            return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
        except OSError:
            return False


def from_env(env: Mapping[str, str] | None = None) -> Ranks | None:
    """Returns the ranks torchrun's environment describes (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``TORCHELASTIC_RESTART_COUNT``), or None when this process was not
    started as a rank (no ``WORLD_SIZE``, or a world of one).

    Raises:
        ConfigError: the variables are there but not integers, or a rank outside the world.
    """
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env or "RANK" not in env:
        return None
    try:
        world, rank = int(env["WORLD_SIZE"]), int(env["RANK"])
        local = int(env.get("LOCAL_RANK", rank))
        restarts = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError as exc:
        raise ConfigError(f"torchrun's environment does not parse: {exc}") from exc
    if not 0 <= rank < world:
        raise ConfigError(f"RANK={rank} is outside WORLD_SIZE={world}")
    if world == 1:
        return None
    return Ranks(rank, world, local, "", restarts)


def join(device: str = "cpu", timeout_s: float = 300.0) -> Ranks:
    """Returns this process's :class:`Ranks` after joining the job's process group (gloo on
    the CPU; NCCL for CUDA, with this rank's GPU ``LOCAL_RANK`` made current), or :data:`ONE`
    when the environment names no job. Joining again returns the group already joined.
    ``timeout_s`` (or the variable ``NASFORGE_RENDEZVOUS_TIMEOUT``) bounds how long the
    rendezvous, and later every collective, waits for the other ranks.

    Raises:
        ConfigError: the rendezvous could not form within ``timeout_s`` (a wrong endpoint, a
            port in use, a rank missing) or the environment does not parse; the message names
            the address and the fix. Nothing of the run is written before this returns.
    """
    global _current
    found = from_env()
    if found is None:
        return ONE
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return _current
    backend = "nccl" if device.startswith("cuda") else "gloo"
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    if is_loopback_address(address):
        pin_to_loopback()  # gloo's pair sockets on loopback too, not on the LAN address
    if backend == "nccl":
        import torch

        torch.cuda.set_device(found.local_rank)
    timeout_s = float(os.environ.get(TIMEOUT_ENV, timeout_s))
    timeout = timedelta(seconds=timeout_s)
    try:
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # the agent's store outlives a restart of the ranks, and torch adds no prefix per
            # attempt: a restarted rank would read the dead ranks' addresses (gloo's
            # "Connection refused"), so each attempt gets keys of its own
            client = dist.TCPStore(address, int(os.environ.get("MASTER_PORT", "0")),
                                   found.world, False, timeout)  # fmt: skip
            store = dist.PrefixStore(f"/nasforge/attempt_{found.restarts}", client)
            dist.init_process_group(backend, store=store, rank=found.rank,
                                    world_size=found.world, timeout=timeout)  # fmt: skip
        else:
            dist.init_process_group(backend, init_method="env://", timeout=timeout)
    except Exception as exc:  # a DistNetworkError, a timeout, a refused connection
        where = os.environ.get("MASTER_PORT", "?")
        raise ConfigError(
            f"rank {found.rank} of {found.world} could not join the job's rendezvous at "
            f"{address}:{where} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); check "
            "the --rdzv-endpoint (host:port reachable from every node, the port free on the "
            "first), and that every rank was started"
        ) from exc
    _current = Ranks(found.rank, found.world, found.local_rank, backend, found.restarts)
    return _current


def leave() -> None:
    """Returns None after leaving the process group :func:`join` joined (if any)."""
    global _current
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _current = ONE


def rank_error_file(rank: int) -> Path | None:
    """Returns where rank ``rank`` of a ``--nproc`` job leaves its error (None under
    torchrun, whose agent reports failures itself)."""
    folder = os.environ.get(ERRORS_ENV)
    return None if not folder else Path(folder) / f"rank{rank}.err"


def _loopback_store(world: int) -> tuple[Any, int]:
    """Returns (a rendezvous store server bound to 127.0.0.1 only, its port)."""
    import torch.distributed as dist

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(max(128, 2 * world))
    port = sock.getsockname()[1]
    store = dist.TCPStore(
        "127.0.0.1", port, world, True, timedelta(seconds=300), wait_for_workers=False,
        master_listen_fd=sock.detach(), use_libuv=True,
    )  # fmt: skip
    return store, port


def launch_local(nproc: int, argv: Sequence[str], *, grace_s: float = GRACE_S) -> int:
    """Returns the exit code of a job of ``nproc`` ranks on this machine, each running
    ``python -m nasforge <argv>`` with torchrun's environment: 0 when every rank ended well,
    else the first failing rank's code, after ending the others (within ``grace_s`` seconds)
    and logging one line that names the rank and its error.

    The rendezvous store is hosted here on 127.0.0.1; ranks bind nothing beyond loopback.

    Raises:
        ConfigError: ``nproc`` is not a positive int.
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ConfigError(f"--nproc must be a positive number of processes, got {nproc!r}")
    store, port = _loopback_store(nproc)
    errors = Path(tempfile.mkdtemp(prefix="nasforge-ranks-"))
    procs: list[subprocess.Popen[bytes]] = []
    # a SIGTERM to this launcher ends its ranks too (Python's default would skip `finally`)
    previous = _on_sigterm(lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        for rank in range(nproc):
            env = {
                **os.environ,
                "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
                "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0",
                "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": f"nasforge-{port}",
                ERRORS_ENV: str(errors),
            }  # fmt: skip
            procs.append(subprocess.Popen([sys.executable, "-m", "nasforge", *argv], env=env,
                                          preexec_fn=_die_with_launcher))  # fmt: skip
        return _watch(procs, errors, grace_s)
    except KeyboardInterrupt:
        _end(procs, grace_s, signal.SIGINT)
        return 130
    finally:
        _end(procs, grace_s)
        if previous is not None:
            _on_sigterm(previous)
        del store
        for f in errors.glob("*"):
            f.unlink(missing_ok=True)
        errors.rmdir()


def _on_sigterm(handler: Any) -> Any:
    """Returns SIGTERM's previous handler after installing ``handler`` (only the main thread
    may; elsewhere nothing changes and None is returned)."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


def _die_with_launcher() -> None:
    """Asks Linux to SIGKILL this rank when its launcher dies (a launcher killed with SIGKILL
    runs no cleanup), so no rank trains on as an orphan; elsewhere it does nothing."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _watch(procs: list[subprocess.Popen[bytes]], errors: Path, grace_s: float) -> int:
    """Returns 0 once every rank ended well, or the first failure's code after ending the
    rest and logging its one line."""
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            rank, code = failed[0]
            _end(procs, grace_s)
            log.error("rank %d of %d failed (exit code %d): %s; every rank was ended", rank,
                      len(procs), code, _last_line(errors / f"rank{rank}.err"))  # fmt: skip
            return code if code > 0 else 1
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.05)


def _last_line(path: Path) -> str:
    """Returns the one line a failed rank left (its error), or why there is none."""
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "it left no error (killed, or it died before it could write one)"
    return lines[-1][:500] if lines else "it left an empty error"


def _end(procs: list[subprocess.Popen[bytes]], grace_s: float, sig: int = signal.SIGTERM) -> None:
    """Returns None once none of ``procs`` is alive: ``sig``, then SIGKILL after ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
