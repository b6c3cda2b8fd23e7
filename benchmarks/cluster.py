"""Trials on a local Ray cluster (every node on 127.0.0.1): the speed-up of 3 nodes over 1,
the per-trial overhead of Ray and of the process pool, and a run in which a node is killed.

The evaluator sleeps 1 s (it stands in for training and uses no CPU), so each node declares
``--cpus`` logical CPUs (default 4) whatever the machine has; 1 node and 3 nodes have the same
slots per node (4 and 12 trials at a time). Each search is a grid over 60 architectures (60
trials, none repeated).

    overhead per trial = wall * c / N - s

for N trials of s = 1 s each run c at a time: the wall time each trial held one of the c
slots, minus its sleep. It counts everything the engine and the executor add per trial
(submission, Ray's scheduling and object transfer, the driver's recording, idle slots at the
end), normalised by concurrency, so 0 ms means the slots never waited. Ray's figure is that of
the 1-node cluster, at the pool's concurrency (``--cpus``); the 3-node one is printed above.
Ray's workers are started, and have imported nasforge, before the timed runs (a short search
of 0.3-s trials on the same connection), as they would be during a long search.

node_kill: the 3-node cluster runs the 60 trials again and one worker node is killed
(SIGKILL) ``--kill-after`` seconds in. ``lost`` counts architectures missing from the record,
``duplicated`` trials recorded twice, ``retried`` the retries Ray made (the record's notes).

Targets (issue 25): speedup_3_nodes_vs_1 >= 2.4; ray_overhead_ms_per_trial <= 50.
Last line: one JSON object with speedup_3_nodes_vs_1, ray_overhead_ms_per_trial,
pool_overhead_ms_per_trial and node_kill {lost, duplicated, retried}.
Run: PYTHONPATH=. python benchmarks/cluster.py  (about 2 minutes; uses ~1.5 GB)
``--quick`` (the slow test set's smoke run): 12 trials, 2 CPUs a node, the kill at 1 s.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

from nasforge.engine import Experiment
from nasforge.engine.ray_cluster import LocalRayCluster
from nasforge.engine.ray_executor import RayExecutor, _keep_loopback
from nasforge.run.store import Store
from nasforge.space.search_space import Decision, SearchSpace

SLEEP = 1.0


def sleep_evaluator(arch, report):
    """Sleeps SLEEP seconds (a stand-in for training) and returns the architecture's value."""
    import time

    time.sleep(SLEEP)
    return float(arch["x"])


def _space(n: int) -> SearchSpace:
    return SearchSpace([Decision("x", "value", tuple(range(n)))])


def timed_run(executor, concurrency: int, n: int, directory: Path) -> float:
    """Returns the wall seconds of a grid search of n sleeping trials; checks each ran once."""
    exp = Experiment(
        _space(n),
        sleep_evaluator,
        "grid",
        directory=directory,
        executor=executor,
        concurrency=concurrency,
        progress="off",
        crossmodel=False,
    )
    start = time.perf_counter()
    exp.run()
    wall = time.perf_counter() - start
    done = [t for t in exp.trials() if t.status == "done"]
    assert len(done) == n, f"{len(done)} of {n} trials done"
    return wall


def overhead_ms(wall: float, concurrency: int, n: int) -> float:
    """Returns the per-trial overhead in ms (see the module docstring)."""
    return 1000 * (wall * concurrency / n - SLEEP)


def connect(address: str) -> None:
    """Joins the cluster from this process, so that the executor reuses its warm workers."""
    import ray

    with _keep_loopback(ray, address):
        ray.init(address=address, log_to_driver=False)


def warm_evaluator(arch, report):
    """Sleeps 0.3 s: keeps every slot busy at once while the workers start."""
    import time

    time.sleep(0.3)
    return 0.0


def warm(address: str, slots: int, directory: Path) -> None:
    """Runs a short search first, so that one Ray worker per slot is started and has
    imported nasforge, as during a long search (workers stay with this driver's job)."""
    Experiment(
        _space(2 * slots),
        warm_evaluator,
        "grid",
        directory=directory,
        executor=RayExecutor(slots, address=address),
        concurrency=slots,
        progress="off",
        crossmodel=False,
    ).run()


def on_cluster(n_nodes: int, cpus: int, n: int, root: Path, kill_after: float | None) -> dict:
    """Returns the wall time of the 60 trials on a fresh cluster of n_nodes, and with
    ``kill_after`` also the counts of a second run in which a worker node is killed."""
    import ray

    slots = n_nodes * cpus
    with LocalRayCluster(n_nodes, cpus=cpus, object_store_mb=100) as cluster:
        connect(cluster.address)
        warm(cluster.address, slots, root.with_name(root.name + "-warm"))
        out = {"wall": timed_run(RayExecutor(slots, address=cluster.address), slots, n, root)}
        if kill_after is not None:
            victim = cluster.worker_node_ids()[0]
            timer = threading.Timer(kill_after, cluster.kill_node, args=(victim,))
            directory = root.with_name(root.name + "-kill")
            timer.start()
            try:
                out["kill_wall"] = timed_run(
                    RayExecutor(slots, address=cluster.address), slots, n, directory
                )
            finally:
                timer.join()
            with Store.open(directory) as store:
                trials = store.trials()
                notes = store.notes("executor")
            archs = [t.arch["x"] for t in trials if t.status == "done"]
            out["node_kill"] = {
                "lost": len(set(range(n)) - set(archs)),
                "duplicated": len(archs) - len(set(archs)),
                "retried": sum(int(note["retries"]) for note in notes),
            }
        ray.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs (slots) per node")
    parser.add_argument("--kill-after", type=float, default=2.5, help="seconds into the run")
    parser.add_argument("--quick", action="store_true", help="12 trials, 2 CPUs, kill at 1 s")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.cpus, args.kill_after = 12, 2, 1.0
    logging.basicConfig(level=logging.WARNING)
    n, cpus = args.trials, args.cpus
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pool = timed_run("pool", cpus, n, root / "pool")
        print(f"pool, {cpus} at a time: {pool:.2f} s", flush=True)
        one = on_cluster(1, cpus, n, root / "ray1", None)
        print(f"ray, 1 node x {cpus} CPUs: {one['wall']:.2f} s", flush=True)
        three = on_cluster(3, cpus, n, root / "ray3", args.kill_after)
        print(f"ray, 3 nodes x {cpus} CPUs: {three['wall']:.2f} s", flush=True)
        print(
            f"ray, 3 nodes, one killed at {args.kill_after} s: {three['kill_wall']:.2f} s, "
            f"{three['node_kill']}",
            flush=True,
        )
        ray1, ray3 = overhead_ms(one["wall"], cpus, n), overhead_ms(three["wall"], 3 * cpus, n)
        print(
            f"overhead ms/trial: ray 1 node {ray1:.1f}, ray 3 nodes {ray3:.1f}, "
            f"pool {overhead_ms(pool, cpus, n):.1f}",
            flush=True,
        )
    result = {
        "speedup_3_nodes_vs_1": round(one["wall"] / three["wall"], 2),
        "ray_overhead_ms_per_trial": round(overhead_ms(one["wall"], cpus, n), 1),
        "pool_overhead_ms_per_trial": round(overhead_ms(pool, cpus, n), 1),
        "node_kill": three["node_kill"],
    }
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
