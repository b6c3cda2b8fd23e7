"""The Ray executor against a real local Ray instance (two CPUs, on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from nasforge.engine import Experiment
from nasforge.engine.ray_executor import RayExecutor
from tests.engine.local_ray import loopback_ray

ray = pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("kill_experiment", HERE / "kill_experiment.py")
kx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kx)


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance with two CPUs on 127.0.0.1, shut down after the module."""
    with loopback_ray(num_cpus=2):
        yield


def _flaky(model, report):
    width = model.inp.out_features
    if width == 4:
        raise RuntimeError("width 4 is broken on purpose")
    return {"default": float(width), "params": float(sum(p.numel() for p in model.parameters()))}


# -- settings and connection, before the module's Ray instance starts (file order) ----------


def test_run_file_executor_mapping_builds_a_ray_executor_and_round_trips():
    """`executor: {name: ray, address, max_retries}` builds the executor; its spec rebuilds it."""
    from nasforge.engine.executor import get_executor

    ex = get_executor({"name": "ray", "address": "127.0.0.1:6379", "max_retries": 5}, 3)
    assert isinstance(ex, RayExecutor)
    assert (ex.concurrency, ex.address, ex.max_retries) == (3, "127.0.0.1:6379", 5)
    again = get_executor(ex.spec(), 3)
    assert again.spec() == ex.spec()
    assert get_executor("pool").spec() == "pool"  # the other executors keep their plain name


def test_bad_executor_settings_are_config_errors():
    """An unknown setting or a negative max_retries is refused before anything starts."""
    from nasforge.engine.executor import get_executor
    from nasforge.errors import ConfigError

    with pytest.raises(ConfigError, match="does not take the settings"):
        get_executor({"name": "ray", "adress": "127.0.0.1:6379"})
    with pytest.raises(ConfigError, match="max_retries must be an int >= 0"):
        RayExecutor(max_retries=-1)


def test_a_cluster_that_does_not_answer_is_a_config_error_at_once(tmp_path):
    """An address where nothing listens fails fast with the address and the fix, before Ray
    spends minutes retrying."""
    import socket

    from nasforge.errors import ConfigError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    ex = RayExecutor(address=f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=f"no Ray cluster answers at '127.0.0.1:{port}'"):
        ex.start(kx.TinyNet(), _flaky)
    assert not ray.is_initialized()


def test_an_address_with_no_cluster_is_one_line_before_any_record(tmp_path, monkeypatch):
    """`address: auto` with no cluster running, or an address where nothing listens: the run
    stops in check(), before the record exists, with one line and exit 2 (not a 30-line
    ConnectionError, not a failed run directory)."""
    import socket

    from nasforge.cli import main
    from nasforge.engine.ray_executor import _bootstrap_address
    from nasforge.errors import ConfigError

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    cases = [(f"127.0.0.1:{port}", "no Ray cluster answers")]
    if _bootstrap_address(ray, "auto") is None:  # no `ray start` cluster on this machine
        cases.append(("auto", "finds no running Ray cluster"))
    f = tmp_path / "exp.py"
    f.write_text(
        "from tests.engine.kill_experiment import TinyNet\n"
        "space = TinyNet()\n"
        "def evaluate(model, report):\n    return 1.0\n"
    )
    for i, (address, words) in enumerate(cases):
        d = tmp_path / f"run{i}"
        exp = Experiment(
            kx.TinyNet(), _flaky, "random", n_trials=1, directory=d, progress="off",
            executor=RayExecutor(address=address),
        )  # fmt: skip
        with pytest.raises(ConfigError, match=words) as info:
            exp.run()
        assert "\n" not in str(info.value) and not d.exists()
        executor = f'{{"name": "ray", "address": "{address}"}}'
        argv = ["run", str(f), "--dir", str(d), "--set", f"executor={executor}"]
        assert main(argv) == 2 and not d.exists()
        assert not ray.is_initialized()


def test_resume_joins_the_recorded_cluster_only_when_told_to_find_one():
    """On resume, address 'auto' becomes the recorded address; an explicit one or None stays."""
    recorded = {"name": "ray", "address": "127.0.0.1:41234", "max_retries": 3}
    auto, explicit, local = RayExecutor(address="auto"), RayExecutor(address="h:1"), RayExecutor()
    for ex in (auto, explicit, local):
        ex.resume_from(recorded)
    assert (auto.address, explicit.address, local.address) == ("127.0.0.1:41234", "h:1", None)
    other = RayExecutor(address="auto")
    other.resume_from("pool")  # a run recorded on another executor: nothing to join
    assert other.address == "auto"


def test_loopback_addresses_are_kept_and_the_switch_is_restored():
    """Within `_keep_loopback` Ray resolves 127.0.0.1 to itself, not to the interface address;
    outside it, and for other addresses, Ray's setting is untouched."""
    from ray._private import ray_constants, services

    from nasforge.engine.ray_executor import _bootstrap_address, _keep_loopback

    before = ray_constants.ENABLE_RAY_CLUSTER
    with _keep_loopback(ray, "127.0.0.1:6379"):
        assert services.canonicalize_bootstrap_address("127.0.0.1:6379") == "127.0.0.1:6379"
    with _keep_loopback(ray, "10.1.2.3:6379"):
        assert ray_constants.ENABLE_RAY_CLUSTER == before
    assert ray_constants.ENABLE_RAY_CLUSTER == before
    assert _bootstrap_address(ray, "10.1.2.3:6379") == "10.1.2.3:6379"


def test_the_experiment_records_the_executor_settings(tmp_path):
    """The run's config holds the Ray executor's settings, so `nasforge resume` rebuilds it."""
    exp = Experiment(
        kx.TinyNet(),
        _flaky,
        "grid",
        directory=tmp_path / "x",
        executor={"name": "ray", "address": "127.0.0.1:6379", "max_retries": 2},
        concurrency=3,
    )
    section = exp.section()
    assert section["executor"]["address"] == "127.0.0.1:6379"
    assert section["executor"]["max_retries"] == 2 and section["concurrency"] == 3


def test_a_local_ray_of_its_own_listens_on_loopback_only(tmp_path, monkeypatch):
    """With no address and no cluster to find, the executor starts a local Ray whose servers
    (GCS, raylet, object manager, workers) listen on 127.0.0.1 only, not on every interface;
    its trials run there, and shutdown leaves no process of it."""
    import tempfile

    from nasforge.engine.evaluator import get_evaluator
    from nasforge.engine.trial import TrialTask
    from tests.engine import sockets

    assert not ray.is_initialized()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    folder = tempfile.mkdtemp(prefix="nfr-", dir="/tmp")  # short: Ray's socket path limit
    monkeypatch.setenv("RAY_TMPDIR", folder)  # no other Ray of this machine is found
    ex = RayExecutor(concurrency=1, init_kwargs={"num_cpus": 1, "log_to_driver": False})
    try:
        ex.start(kx.TinyNet(), get_evaluator(_flaky))
        assert ex._owns_ray
        ex.submit(TrialTask(1, {"width": 8, "act": "relu", "depth": 1}, "default"))
        results = []
        while not results:
            results = ex.poll(5.0)
        assert results[0].status == "done", results[0].error
        assert results[0].placement["node"] == "127.0.0.1"
        pids = sockets.pids_marked(folder)
        listening = sockets.listening(pids)
        nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
    finally:
        ex.shutdown()
        assert not ray.is_initialized()
        deadline = time.monotonic() + 15
        while sockets.pids_marked(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = sockets.pids_marked(folder)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
    assert nodes == ["127.0.0.1"]
    assert len(pids) >= 2 and listening and listening <= {"127.0.0.1"}, listening
    assert left == [], "Ray processes outlived the executor's shutdown"


@pytest.mark.slow
def test_ray_runs_trials_and_records_failures(local_ray, tmp_path):
    """Trials run as Ray tasks; a raising trial is failed and the experiment goes on."""
    exp = Experiment(
        kx.TinyNet(),
        _flaky,
        "grid",
        directory=tmp_path / "x",
        executor=RayExecutor(concurrency=2),
        progress="off",
        save_weights=False,
    )
    exp.run()
    trials = exp.trials()
    assert len(trials) == 18
    assert all(
        t.status == "failed" and "broken on purpose" in t.error
        for t in trials
        if t.arch["width"] == 4
    )
    assert all(t.status == "done" for t in trials if t.arch["width"] != 4)
    assert exp.best(1)[0].metrics["default"] == 16.0
    assert ray.is_initialized()  # the executor did not own this Ray instance


@pytest.mark.slow
def test_ray_same_trials_as_in_process_for_grid(local_ray, tmp_path):
    """A deterministic strategy gives the same metrics per architecture on Ray and in-process."""
    a = Experiment(
        kx.TinyNet(),
        _flaky,
        "grid",
        directory=tmp_path / "a",
        executor=RayExecutor(2),
        progress="off",
        save_weights=False,
    ).run()
    b = Experiment(
        kx.TinyNet(),
        _flaky,
        "grid",
        directory=tmp_path / "b",
        executor="inprocess",
        progress="off",
        save_weights=False,
    ).run()
    key = lambda e: sorted((t.arch_id, t.status, t.metrics) for t in e.trials())  # noqa: E731
    assert key(a) == key(b)


@pytest.mark.slow
def test_cli_experiment_file_runs_on_ray(local_ray, tmp_path):
    """Classes of an experiment file imported by `nasforge run` reach Ray workers by value."""
    from nasforge.cli import main
    from nasforge.engine import Store

    f = tmp_path / "exp.py"
    f.write_text(
        "import torch.nn as nn\n"
        "import nasforge as nf\n"
        "class Net(nf.ModelSpace):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(3, nf.choice([2, 4, 8], label='w'))\n"
        "def evaluate(model, report):\n"
        "    return float(model.fc.out_features)\n"
        "space = Net()\n"
        "strategy = 'grid'\n"
        "config = {'progress': 'off'}\n"
    )
    assert main(["run", str(f), "--dir", str(tmp_path / "d"), "--executor", "ray"]) == 0
    trials = Store.open(tmp_path / "d").trials()
    assert sorted(t.metrics["default"] for t in trials) == [2.0, 4.0, 8.0]
