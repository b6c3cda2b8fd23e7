"""A Ray cluster of several nodes on this machine, every node bound to 127.0.0.1: for trying a
cluster run on one computer, for the tests and for ``benchmarks/cluster.py``.

It is Ray's own ``ray.cluster_utils.Cluster`` (one head, worker nodes added to it), kept to
this machine and to itself:

    loopback    every node's address is 127.0.0.1, so each of its servers (GCS, raylets,
                agents) listens on 127.0.0.1 only. ``ray start --node-ip-address=127.0.0.1``
                cannot do this in Ray 2.x: the CLI rewrites a loopback address to the machine's
                interface address and then listens on every interface (ray-project/ray#59110)
    private     its files, sockets and ``ray_current_cluster`` live in its own temporary
                folder (``RAY_TMPDIR``), so ``ray.init()`` elsewhere on the machine never finds
                it by accident and ``ray stop`` is never needed
    small       each node declares explicit resources (``cpus``, logical ``gpus``) and a capped
                object store; no dashboard, no autoscaler monitor
    no leftovers :meth:`LocalRayCluster.shutdown` stops every node, then kills by process id
                whatever it started that is still alive (found by its private folder)

Run one from a shell: ``up`` starts it in the background (the address in ``DIR/address``,
its log in ``DIR/log``) and returns once it answers; ``down`` stops it; ``--stop-after``
seconds, a safety net, stops it anyway::

    python -m nasforge.engine.ray_cluster up ray-local --nodes 3 --cpus 2 --gpus 1
    python -m nasforge.engine.ray_cluster down ray-local
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, NasforgeError
from nasforge.runtime.loopback import pids_marked

__all__ = ["LocalRayCluster", "FAST_FAILURE_DETECTION", "main"]

log = logging.getLogger("nasforge.engine")

#: GCS settings that notice a dead node within about 2 s instead of Ray's default ~30 s
#: (health checks every 500 ms, 3 misses), so a killed node's trials are retried promptly.
FAST_FAILURE_DETECTION = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


class LocalRayCluster:
    """Returns nothing; a running Ray cluster of ``n_nodes`` nodes on 127.0.0.1 (the head is
    one of them), each with ``cpus`` CPUs and ``gpus`` logical GPUs, after :meth:`start`.

    Invariants: every node's address is 127.0.0.1; the cluster's files and its address file
    stay in its own folder; after :meth:`shutdown` no process it started is alive.

    Raises:
        ConfigError: a bad size (fewer than 1 node, negative resources).
    """

    def __init__(
        self,
        n_nodes: int = 3,
        cpus: float = 1,
        gpus: int = 0,
        object_store_mb: int = 100,
        system_config: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(n_nodes, int) or n_nodes < 1:
            raise ConfigError(f"n_nodes must be an int >= 1 (the head counts), got {n_nodes!r}")
        if cpus < 0 or gpus < 0 or object_store_mb < 50:
            raise ConfigError(
                f"cpus and gpus must be >= 0 and object_store_mb >= 50 (Ray's minimum), got "
                f"cpus={cpus!r}, gpus={gpus!r}, object_store_mb={object_store_mb!r}"
            )
        self.n_nodes, self.cpus, self.gpus = n_nodes, cpus, gpus
        self.object_store_mb = object_store_mb
        fast = FAST_FAILURE_DETECTION
        self.system_config = dict(fast if system_config is None else system_config)
        self.temp_dir = ""  # its own Ray folder, made by start()
        self._cluster: Any = None

    # -- life --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _private_tmpdir(self) -> Iterator[None]:
        """Within the block, Ray's default folder (and ``ray_current_cluster``) is ours."""
        before = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = self.temp_dir
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("RAY_TMPDIR", None)
            else:
                os.environ["RAY_TMPDIR"] = before

    def _node_args(self) -> dict[str, Any]:
        return {
            "node_ip_address": "127.0.0.1",
            "num_cpus": self.cpus,
            "num_gpus": self.gpus,
            "object_store_memory": self.object_store_mb * 2**20,
            "include_log_monitor": False,
        }

    def start(self) -> str:
        """Returns the head's address (``127.0.0.1:port``) once all nodes are up."""
        from ray.cluster_utils import Cluster

        if self._cluster is not None:
            raise NasforgeError(f"the cluster is running already, at {self.address}")
        # short: Ray's socket paths under it must stay below the 107-byte Unix limit
        self.temp_dir = tempfile.mkdtemp(prefix="nfray-", dir="/tmp")
        head = {**self._node_args(), "include_dashboard": False, "no_monitor": True}
        head["_system_config"] = self.system_config
        with self._private_tmpdir():
            self._cluster = Cluster(initialize_head=True, head_node_args=head)
            for _ in range(self.n_nodes - 1):
                self.add_node()
        log.info("Ray cluster of %d nodes at %s", self.n_nodes, self.address)
        return self.address

    def add_node(self) -> str:
        """Returns the Ray node id of a new worker node of the same size."""
        with self._private_tmpdir():
            node = self._cluster.add_node(**self._node_args())
        return str(node.node_id)

    @property
    def address(self) -> str:
        """Returns the head's GCS address, what drivers and ``RayExecutor(address=)`` take."""
        if self._cluster is None:
            raise NasforgeError("the cluster is not started; call start() first")
        return str(self._cluster.address)

    def worker_node_ids(self) -> list[str]:
        """Returns the Ray node ids of the live worker nodes (every node but the head)."""
        return [str(n.node_id) for n in self._cluster.worker_nodes]

    def head_node_id(self) -> str:
        """Returns the Ray node id of the head."""
        return str(self._cluster.head_node.node_id)

    def kill_node(self, node_id: str) -> None:
        """Kills a worker node at once (SIGKILL to its raylet and workers), as a machine that
        dies would, and returns when its processes are gone.

        Raises:
            NasforgeError: ``node_id`` is not a live worker node (the head cannot be killed).
        """
        for node in list(self._cluster.worker_nodes):
            if str(node.node_id) == node_id:
                with self._private_tmpdir():
                    self._cluster.remove_node(node, allow_graceful=False)
                return
        raise NasforgeError(f"{node_id!r} is not a live worker node: {self.worker_node_ids()}")

    def pids(self) -> list[int]:
        """Returns the ids of live processes this cluster started (found by its folder in
        their environment or command line)."""
        if not self.temp_dir:
            return []
        return pids_marked(self.temp_dir)

    def shutdown(self) -> None:
        """Stops every node; kills whatever it started that is still alive; removes its
        folder."""
        import ray

        if self._cluster is not None:
            if ray.is_initialized() and ray.get_runtime_context().gcs_address == self.address:
                ray.shutdown()  # this process is a driver of the cluster
            with self._private_tmpdir():
                self._cluster.shutdown()
            self._cluster = None
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)  # agents and workers exit shortly after their raylet
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


# -- the command line: up (in the background), down -------------------------------------------
def _serve(args: argparse.Namespace) -> int:
    """Runs a cluster until SIGTERM, SIGINT or ``--stop-after`` seconds, its address in
    ``DIR/address``."""
    folder = Path(args.dir)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    cluster = LocalRayCluster(args.nodes, args.cpus, args.gpus, args.object_store_mb)
    try:
        address = cluster.start()
        (folder / "address.tmp").write_text(address + "\n")
        (folder / "address.tmp").rename(folder / "address")
        deadline = time.monotonic() + args.stop_after if args.stop_after else math.inf
        while not stop and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        (folder / "address").unlink(missing_ok=True)
        cluster.shutdown()
    return 0


def _up(args: argparse.Namespace) -> int:
    """Starts ``serve`` in the background; returns when the cluster answers (prints its
    address) or fails (prints its log)."""
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "pid").exists():
        raise ConfigError(f"{folder} already holds a cluster; stop it with `down {folder}`")
    cmd = [sys.executable, "-m", "nasforge.engine.ray_cluster", "serve", str(folder)]
    cmd += ["--nodes", str(args.nodes), "--cpus", str(args.cpus), "--gpus", str(args.gpus)]
    cmd += ["--object-store-mb", str(args.object_store_mb), "--stop-after", str(args.stop_after)]
    with (folder / "log").open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    (folder / "pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if (folder / "address").exists():
            sys.stdout.write((folder / "address").read_text())
            return 0
        time.sleep(0.2)
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)
    (folder / "pid").unlink(missing_ok=True)
    sys.stderr.write((folder / "log").read_text(errors="replace")[-4000:])
    return 1


def _down(args: argparse.Namespace) -> int:
    """Stops the cluster ``up`` started in DIR and waits until it is gone."""
    folder = Path(args.dir)
    pid_file = folder / "pid"
    if not pid_file.exists():
        raise ConfigError(f"{folder} holds no running cluster (no {pid_file})")
    pid = int(pid_file.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            pid_file.unlink()
            return 0
        time.sleep(0.2)
    raise NasforgeError(f"the cluster of {folder} (process {pid}) did not stop in time")


def main(argv: list[str] | None = None) -> int:
    """Returns the exit status of ``python -m nasforge.engine.ray_cluster up|down|serve DIR``."""
    p = argparse.ArgumentParser(prog="python -m nasforge.engine.ray_cluster")
    sub = p.add_subparsers(dest="command", required=True)
    for name, func in (("up", _up), ("serve", _serve)):
        q = sub.add_parser(name, help="start a cluster on 127.0.0.1, its address in DIR/address")
        q.add_argument("dir")
        q.add_argument("--nodes", type=int, default=3, help="nodes, the head included")
        q.add_argument("--cpus", type=float, default=1, help="CPUs each node declares")
        q.add_argument("--gpus", type=int, default=0, help="logical GPUs each node declares")
        q.add_argument("--object-store-mb", type=int, default=100)
        q.add_argument("--timeout", type=float, default=120, help="seconds to wait for it")
        q.add_argument(
            "--stop-after", type=float, default=0, help="seconds after which it stops itself"
        )
        q.set_defaults(func=func)
    q = sub.add_parser("down", help="stop the cluster `up` started in DIR")
    q.add_argument("dir")
    q.add_argument("--timeout", type=float, default=60)
    q.set_defaults(func=_down)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
