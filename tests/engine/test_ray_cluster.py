"""A real three-node Ray cluster on 127.0.0.1: trials spread over its nodes, a killed node's
trial is retried once elsewhere, a killed driver's run resumes on the same cluster. Every test
that starts the cluster is in the slow set (a cluster starts in seconds; the fast set checks
the Ray executor on one local node, tests/engine/test_ray_executor.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nasforge.engine import Experiment
from nasforge.engine.ray_cluster import LocalRayCluster
from nasforge.engine.ray_executor import RayExecutor, _keep_loopback
from nasforge.errors import StoreError
from nasforge.run.status import trial_table
from nasforge.run.store import Store
from nasforge.space.search_space import Decision, SearchSpace
from tests.engine import sockets

ray = pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")

ROOT = Path(__file__).resolve().parents[2]
GPUS_PER_NODE = 2


@pytest.fixture(scope="module")
def cluster():
    """Three nodes (the head and two workers), 1 CPU and 2 logical GPUs each, torn down after
    the module, even when a test failed; no process of it may outlive it."""
    c = LocalRayCluster(3, cpus=1, gpus=GPUS_PER_NODE, object_store_mb=100)
    try:
        c.start()
        yield c
    finally:
        c.shutdown()
        assert c.pids() == [], "Ray processes of the test cluster outlived it"


def _marking_evaluator(marks: Path, sleep: float, fail_on: int | None = None, die_on=None):
    """Returns an evaluator that writes one file per run of a trial (its node, GPU ids and
    process as it starts, its end once it slept), sleeps, and returns ``x``; it raises for
    ``x == fail_on`` and kills its own process for ``x == die_on``."""

    def evaluate(arch, report):
        import os
        import time
        import uuid

        import ray

        x = arch["x"]
        info = {"x": x, "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}
        info["t0"] = time.monotonic()  # one clock for every node: they share this machine
        info["gpus"] = [str(g) for g in ray.get_gpu_ids()]
        name = f"x{x}-{uuid.uuid4().hex[:8]}.json"
        (marks / f"tmp-{name}").write_text(json.dumps(info))
        os.replace(marks / f"tmp-{name}", marks / name)  # whole, for a reader polling it
        if x == die_on:
            os._exit(1)  # the worker dies: a system failure that Ray retries
        time.sleep(sleep)
        info["t1"] = time.monotonic()  # its end: two runs overlapped if each began before
        (marks / f"tmp-{name}").write_text(json.dumps(info))  # the other ended
        os.replace(marks / f"tmp-{name}", marks / name)
        if x == fail_on:
            raise RuntimeError(f"x={x} is broken on purpose")
        return float(x)

    return evaluate


def _runs(marks: Path) -> dict[int, list[dict]]:
    """Returns x -> the runs its evaluator recorded."""
    out: dict[int, list[dict]] = {}
    for f in marks.glob("x*.json"):
        info = json.loads(f.read_text())
        out.setdefault(info["x"], []).append(info)
    return out


def _space(n: int) -> SearchSpace:
    return SearchSpace([Decision("x", "value", tuple(range(n)))])


def _told_once(store: Store) -> bool:
    tells = [tid for kind, tid in store.events() if kind == "tell"]
    return sorted(tells) == sorted(t.id for t in store.trials())


@pytest.mark.slow
def test_every_node_and_server_stays_on_loopback(cluster):
    """Each node's address is 127.0.0.1 and declares its CPU and logical GPUs; every server
    of the cluster listens on 127.0.0.1 only."""
    with _keep_loopback(ray, cluster.address):
        ray.init(address=cluster.address, log_to_driver=False)
    try:
        nodes = [n for n in ray.nodes() if n["Alive"]]
        assert ray.get_runtime_context().gcs_address == cluster.address
    finally:
        ray.shutdown()
    assert len(nodes) == 3
    assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
    assert all(n["Resources"]["GPU"] == GPUS_PER_NODE for n in nodes)
    assert all(n["Resources"]["CPU"] == 1 for n in nodes)
    listening = sockets.listening(cluster.pids())
    assert listening and listening <= {"127.0.0.1"}, listening
    # its address file is in its own folder, where no other ray.init() looks
    own = Path(cluster.temp_dir, "ray", "ray_current_cluster")
    assert own.read_text().strip() == cluster.address


def test_a_cluster_needs_a_node_and_sane_resources():
    """Sizes that Ray cannot run are refused before anything starts."""
    from nasforge.errors import ConfigError

    with pytest.raises(ConfigError, match="n_nodes must be an int >= 1"):
        LocalRayCluster(0)
    with pytest.raises(ConfigError, match="object_store_mb"):
        LocalRayCluster(2, object_store_mb=10)


@pytest.mark.slow
def test_trials_spread_over_the_nodes_and_evaluator_errors_are_not_retried(cluster, tmp_path):
    """Trials run on all three nodes; a trial whose evaluator raises ran once and is failed;
    the record holds each trial once and the cluster's address."""
    marks = tmp_path / "marks"
    marks.mkdir()
    exp = Experiment(
        _space(6),
        _marking_evaluator(marks, 1.0, fail_on=4),
        "grid",
        directory=tmp_path / "run",
        executor=RayExecutor(3, address=cluster.address, init_kwargs={"log_to_driver": False}),
        progress="off",
    ).run()
    runs = _runs(marks)
    assert {r["node"] for rs in runs.values() for r in rs} == {
        cluster.head_node_id(),
        *cluster.worker_node_ids(),
    }
    assert {x: len(rs) for x, rs in runs.items()} == dict.fromkeys(range(6), 1)
    with Store.open(tmp_path / "run") as store:
        trials = store.trials()
        assert sorted(t.arch["x"] for t in trials) == list(range(6))
        # each trial's location names the node that ran it, though all share 127.0.0.1
        ran_on = {x: rs[0]["node"] for x, rs in runs.items()}
        assert {t.arch["x"]: t.placement["node_id"] for t in trials} == ran_on
        header, rows, _ = trial_table(store)
        shown = {row[header.index("where")] for row in rows}
        assert shown == {f"127.0.0.1 node {n[:8]} cpu" for n in ran_on.values()}
        assert len(shown) == 3
        assert {t.arch["x"]: t.status for t in trials if t.status != "done"} == {4: "failed"}
        assert "broken on purpose" in next(t.error for t in trials if t.arch["x"] == 4)
        assert store.notes("executor") == []
        assert _told_once(store)
        recorded = store.config()["multitrial"]["executor"]
    assert recorded == {**recorded, "name": "ray", "address": cluster.address, "max_retries": 3}
    assert exp.best(1)[0].arch == {"x": 5}


@pytest.mark.slow
def test_gpu_trials_spread_over_the_nodes_and_never_share_a_gpu(cluster, tmp_path):
    """With one logical GPU per trial and two trials per node at a time, every trial gets one
    GPU id from Ray, records its node (127.0.0.1) and GPU, and no two trials that overlap in
    time hold the same GPU of the same node."""
    marks = tmp_path / "marks"
    marks.mkdir()
    Experiment(
        _space(9),
        # 3 s a trial: with 1 s, trials that Ray started a second apart on a loaded machine
        # never overlapped on one node and the test failed for want of a pair to compare
        _marking_evaluator(marks, 3.0),
        "grid",
        directory=tmp_path / "run",
        executor=RayExecutor(
            6, address=cluster.address, cpus_per_trial=0.5, init_kwargs={"log_to_driver": False}
        ),
        gpus_per_trial=1,
        progress="off",
    ).run()
    runs = [r for rs in _runs(marks).values() for r in rs]
    assert len(runs) == 9 and all(len(r["gpus"]) == 1 for r in runs)
    assert len({r["node"] for r in runs}) == 3
    together = [  # pairs of runs on one node whose times overlapped (one clock: one machine)
        (a, b)
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a["node"] == b["node"] and a["t0"] < b["t1"] and b["t0"] < a["t1"]
    ]
    assert together  # two trials ran at once on one node...
    assert all(a["gpus"] != b["gpus"] for a, b in together), together  # ...each on its GPU
    with Store.open(tmp_path / "run") as store:
        trials = store.trials()
    assert all(t.status == "done" for t in trials) and len(trials) == 9
    for t in trials:
        assert t.placement["node"] == "127.0.0.1"
        assert len(t.placement["devices"]) == 1 and t.placement["gpus"] == 1
        (run,) = [r for r in runs if r["x"] == t.arch["x"]]
        assert [str(d) for d in t.placement["devices"]] == run["gpus"]


@pytest.mark.slow
def test_a_trial_that_kills_its_worker_is_retried_max_retries_times(cluster, tmp_path):
    """A trial whose process dies each time runs 1 + max_retries times, then is failed."""
    marks = tmp_path / "marks"
    marks.mkdir()
    Experiment(
        _space(3),
        _marking_evaluator(marks, 0.2, die_on=1),
        "grid",
        directory=tmp_path / "run",
        executor=RayExecutor(
            2, address=cluster.address, max_retries=1, init_kwargs={"log_to_driver": False}
        ),
        progress="off",
    ).run()
    assert {x: len(rs) for x, rs in _runs(marks).items()} == {0: 1, 1: 2, 2: 1}
    with Store.open(tmp_path / "run") as store:
        status = {t.arch["x"]: t.status for t in store.trials()}
        assert status == {0: "done", 1: "failed", 2: "done"}
        error = next(t.error for t in store.trials() if t.status != "done")
        assert "after up to 1 retries" in error
        assert _told_once(store)


@pytest.mark.slow
def test_a_killed_node_s_trial_is_retried_on_another_node_and_recorded_once(cluster, tmp_path):
    """A worker node killed mid-trial: Ray runs that trial again on a live node; every trial
    ends done exactly once, and the retry is counted in the record."""
    marks = tmp_path / "marks"
    marks.mkdir()
    victim = cluster.worker_node_ids()[0]
    killed = threading.Event()

    def kill_when_busy():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed.is_set():
            if any(r["node"] == victim for rs in _runs(marks).values() for r in rs):
                cluster.kill_node(victim)  # mid-trial: its mark is written, 2 s of sleep follow
                killed.set()
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    try:
        Experiment(
            _space(9),
            _marking_evaluator(marks, 2.0),
            "grid",
            directory=tmp_path / "run",
            executor=RayExecutor(3, address=cluster.address, init_kwargs={"log_to_driver": False}),
            progress="off",
        ).run()
    finally:
        killer.join()
        if killed.is_set():
            cluster.add_node()  # the next tests get three nodes again
    assert killed.is_set()
    runs = _runs(marks)
    twice = {x for x, rs in runs.items() if len(rs) > 1}
    assert twice and all(len(runs[x]) == 2 for x in twice)
    for x in twice:  # first on the killed node, then on a live one
        assert [r["node"] == victim for r in runs[x]].count(True) == 1
    with Store.open(tmp_path / "run") as store:
        trials = store.trials()
        assert sorted(t.arch["x"] for t in trials) == list(range(9))  # none lost, none twice
        assert {t.status for t in trials} == {"done"}
        assert _told_once(store)
        notes = store.notes("executor")
    assert {n["trial"] for n in notes} == {t.id for t in trials if t.arch["x"] in twice}
    assert {n["retries"] for n in notes} == {1}


RUN_FILE = """
import json, os, time, uuid
from pathlib import Path
import ray
from nasforge.space.search_space import Decision, SearchSpace
from tests.engine import sockets

space = SearchSpace([Decision("x", "value", tuple(range(8)))])
strategy = "grid"
config = {{"executor": {{"name": "ray", "address": "auto"}}, "concurrency": 3, "progress": "off"}}

def evaluate(arch, report):
    node = ray.get_runtime_context().get_node_id()
    info = {{"x": arch["x"], "node": node, "pid": os.getpid(), "gpus": []}}
    name = f"x{{arch['x']}}-{{uuid.uuid4().hex[:8]}}.json"
    Path({marks!r}, "tmp-" + name).write_text(json.dumps(info))
    os.replace(Path({marks!r}, "tmp-" + name), Path({marks!r}, name))
    time.sleep(1.5)
    return float(arch["x"])
"""


@pytest.mark.slow
def test_a_killed_driver_s_run_resumes_on_the_same_cluster(cluster, tmp_path):
    """`nasforge run` killed with SIGKILL mid-run; `nasforge resume DIR` joins the cluster
    whose address the record holds (the environment now points elsewhere) and finishes: every
    trial done once, only the ones in flight ran twice."""
    marks = tmp_path / "marks"
    marks.mkdir()
    run_file = tmp_path / "cluster_run.py"
    run_file.write_text(RUN_FILE.format(marks=str(marks)))
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": cluster.address}
    cmd = [sys.executable, "-m", "nasforge.cli"]
    log = tmp_path / "driver.log"
    with log.open("wb") as out:  # a file, not a pipe: Ray's logs would fill a pipe and block
        driver = subprocess.Popen(
            [*cmd, "run", str(run_file), "--dir", str(run_dir)], env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 90
        ready = False  # 3 trials done, and one running whose evaluator started
        while time.monotonic() < deadline and driver.poll() is None and not ready:
            time.sleep(0.1)
            try:
                with Store.open(run_dir) as store:
                    trials = store.trials()
            except StoreError:  # not created yet, or its tables not yet written
                continue
            done = sum(t.status == "done" for t in trials)
            started = {t.arch["x"] for t in trials if t.status == "running"} & set(_runs(marks))
            ready = done >= 3 and bool(started)
        assert driver.poll() is None, log.read_text(errors="replace")[-3000:]
        assert ready, log.read_text(errors="replace")[-3000:]
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    with Store.open(run_dir) as store:
        assert store.state() == "interrupted"
        in_flight = {t.arch["x"] for t in store.trials() if t.status == "interrupted"}
    assert in_flight
    env["RAY_ADDRESS"] = "127.0.0.1:1"  # nothing listens there: only the record can help
    resumed = subprocess.run(
        [*cmd, "resume", str(run_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with Store.open(run_dir) as store:
        trials = store.trials()
        assert store.state() == "finished"
        assert sorted(t.arch["x"] for t in trials) == list(range(8))  # none lost, none twice
        assert {t.status for t in trials} == {"done"}
        assert _told_once(store)
        assert store.config()["multitrial"]["executor"]["address"] == cluster.address
    runs = _runs(marks)
    twice = {x for x, rs in runs.items() if len(rs) == 2}
    assert set(runs) == set(range(8)) and all(len(rs) <= 2 for rs in runs.values())
    assert twice and twice <= in_flight  # ran again after the kill, recorded once
