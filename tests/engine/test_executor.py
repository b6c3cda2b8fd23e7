"""The executors beyond their shared contract (tests/engine/test_executor_conformance.py runs
every executor through that): the pool's checks for spawn, the table of names, GPU slots and
reused workers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nasforge.engine.evaluator import FunctionEvaluator
from nasforge.engine.executor import InProcessExecutor, ProcessPoolExecutor, get_executor
from nasforge.errors import ConfigError
from nasforge.space.search_space import Decision, SearchSpace

SPACE = SearchSpace([Decision("x", "value", (1, 2, 3, 4, 5, 6))])


def _ev(arch, report):
    if arch["x"] == 3:
        raise ValueError("three is bad")
    report({"default": arch["x"] / 2})
    return float(arch["x"])


def test_spawn_refuses_unpicklable_evaluator_up_front():
    """Without fork, an evaluator that cannot be pickled is a ConfigError naming the fix."""
    ex = ProcessPoolExecutor(1, start_method="spawn")
    with pytest.raises(ConfigError, match="cannot be sent to a worker.*inprocess"):
        ex.start(SPACE, FunctionEvaluator(lambda arch, report: 1.0))


def test_spawn_refuses_objects_of_an_experiment_file(tmp_path):
    """Without fork, a space class from a file imported by `nasforge run` is refused up front."""
    from nasforge.run.refs import load_script as load_experiment_file

    f = tmp_path / "exp.py"
    f.write_text("def evaluate(arch, report):\n    return 1.0\n")
    module = load_experiment_file(f)
    ex = ProcessPoolExecutor(1, start_method="spawn")
    with pytest.raises(ConfigError, match="experiment file"):
        ex.start(SPACE, FunctionEvaluator(module.evaluate))


def test_get_executor():
    """Names build executors, instances pass through, unknown names are refused."""
    assert isinstance(get_executor("inprocess"), InProcessExecutor)
    assert get_executor("pool", 3).concurrency == 3
    ex = InProcessExecutor()
    assert get_executor(ex) is ex
    with pytest.raises(ConfigError, match="unknown executor"):
        get_executor("slurm")


def test_executors_register_in_a_table_that_get_executor_reads():
    """An executor registered under a name is built by that name (with the settings of a run
    file's mapping); a name another class holds is refused; every built-in is in the table."""
    from nasforge.engine._executor_base import _EXECUTORS
    from nasforge.engine.executor import register_executor
    from nasforge.engine.ray_executor import RayExecutor

    assert get_executor({"name": "ray", "max_retries": 1}).max_retries == 1
    assert isinstance(get_executor("ray"), RayExecutor)

    @register_executor("test-serial", takes_concurrency=False)
    class Serial(InProcessExecutor):
        def __init__(self, tag: str = "") -> None:
            super().__init__()
            self.tag = tag

    try:
        built = get_executor({"name": "test-serial", "tag": "x"})
        assert isinstance(built, Serial) and built.tag == "x"
        with pytest.raises(ConfigError, match="taken by Serial"):
            register_executor("test-serial")(InProcessExecutor)
        with pytest.raises(ConfigError, match="'test-serial'"):
            get_executor("slurm")  # the message lists the names there are
    finally:
        _EXECUTORS.pop("test-serial")


# -- GPUs: each child gets exactly its slot's GPUs (a fake list of two GPUs on this machine) ----
@pytest.fixture
def two_fake_gpus(monkeypatch):
    """The engine's process sees two GPUs (ids 0 and 1); the trials never touch CUDA. Fakes
    GPUs where there are none: on a GPU machine tests/engine/test_gpu_trials_real.py runs."""
    import torch

    from nasforge.runtime import devices

    if torch.cuda.is_available():
        pytest.skip("fakes GPUs for a machine without one; test_gpu_trials_real.py uses the GPU")

    monkeypatch.setattr(devices, "visible_gpus", lambda: [0, 1])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _gpu_run(tmp_path, gpus, concurrency=8, devices=None, executor="pool", seconds=0.4):
    """Returns the experiment and what its 8 trials saw; each takes ``seconds`` (long enough
    to overlap where a test counts the trials on a GPU at once, 0 where none runs beside it)."""
    from nasforge.engine import Experiment
    from tests.engine.gpu_trials import SPACE, WhereEvaluator, rows

    out = tmp_path / "seen"
    out.mkdir(parents=True)
    exp = Experiment(
        SPACE,
        WhereEvaluator(out, seconds),
        "grid",
        directory=tmp_path / "run",
        executor=executor,
        concurrency=concurrency,
        gpus_per_trial=gpus,
        devices=devices,
        progress="off",
        crossmodel=False,
    )
    exp.run()
    return exp, rows(out)


def test_pool_shares_each_gpu_between_two_trials_at_half(two_fake_gpus, tmp_path):
    """2 GPUs at 0.5 per trial: 4 slots; each child's CUDA_VISIBLE_DEVICES is its one GPU, at
    most two trials hold a GPU at once, and every trial records the GPU it ran on."""
    from tests.engine.gpu_trials import most_at_once

    exp, seen = _gpu_run(tmp_path, 0.5)
    assert exp.executor.concurrency == 4  # lowered from 8 to the GPUs' slots
    assert len(seen) == 8 and len({r["pid"] for r in seen}) == 8
    for r in seen:
        assert len(r["devices"]) == 1 and r["env"] == str(r["devices"][0])
        assert r["device"] == "cpu"  # the fake GPUs are not there: the trial falls back
    assert max(most_at_once(seen).values()) == 2  # shared, never by more than two
    assert all(v <= 2 for v in most_at_once(seen).values())
    recorded = {t.arch["x"]: t.placement for t in exp.trials()}
    assert all(recorded[r["x"]]["devices"] == r["devices"] for r in seen)
    assert all(p["gpus"] == 0.5 and p["node"] for p in recorded.values())


def test_pool_gives_whole_gpus_to_one_trial_each(two_fake_gpus, tmp_path):
    """1 GPU per trial: two slots, no GPU ever held by two trials at once."""
    from tests.engine.gpu_trials import most_at_once

    exp, seen = _gpu_run(tmp_path, 1)
    assert exp.executor.concurrency == 2
    assert all(r["env"] == str(r["devices"][0]) for r in seen)
    assert most_at_once(seen) == {0: 1, 1: 1}


def test_pool_multi_gpu_trials_see_both_gpus(two_fake_gpus, tmp_path):
    """2 GPUs per trial out of 2: one trial at a time, each seeing CUDA_VISIBLE_DEVICES=0,1."""
    exp, seen = _gpu_run(tmp_path, 2, seconds=0)  # one at a time: nothing to overlap
    assert exp.executor.concurrency == 1
    assert {r["env"] for r in seen} == {"0,1"} and all(r["devices"] == [0, 1] for r in seen)


def test_pool_maps_ids_through_the_engines_visible_devices(two_fake_gpus, tmp_path, monkeypatch):
    """An engine started with CUDA_VISIBLE_DEVICES=5,7 and devices=[1] gives each child the
    physical GPU 7, and records id 1 as the engine numbers it."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    exp, seen = _gpu_run(tmp_path, 1, devices=[1], seconds=0)  # one GPU: one at a time
    assert {r["env"] for r in seen} == {"7"} and all(r["devices"] == [1] for r in seen)
    assert {t.placement["devices"][0] for t in exp.trials()} == {1}


def test_in_process_trials_get_the_configured_devices(two_fake_gpus, tmp_path):
    """In-process trials get the first of `devices`; the engine's environment is untouched;
    CPU trials record the host and no GPU."""
    exp, seen = _gpu_run(tmp_path, 1, devices=[1], executor="inprocess", seconds=0)
    assert all(r["devices"] == [1] and r["env"] is None for r in seen)
    _, cpu = _gpu_run(tmp_path / "cpu", 0, executor="inprocess", seconds=0)
    assert all(r["devices"] == [] for r in cpu)


def test_pool_refuses_gpus_after_cuda_was_initialised(two_fake_gpus, monkeypatch):
    """A forked child cannot use CUDA once the engine initialised it: a ConfigError at start."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    ex = ProcessPoolExecutor(2)
    ex.use_gpus(1)
    with pytest.raises(ConfigError, match="CUDA is already initialised"):
        ex.start(SPACE, FunctionEvaluator(_ev))
    cpu = ProcessPoolExecutor(2)  # CPU trials do not care
    cpu.start(SPACE, FunctionEvaluator(_ev))
    cpu.shutdown()


@pytest.mark.slow
def test_the_gpu_example_runs_on_a_fake_gpu(two_fake_gpus, tmp_path, monkeypatch):
    """examples/gpu_trials.yaml (half a GPU per trial) on a machine made to show one GPU: the
    pool runs two trials at a time, both on GPU 0, and the record says so."""
    from pathlib import Path

    from nasforge.cli import main
    from nasforge.run.store import Store
    from nasforge.runtime import devices

    monkeypatch.setattr(devices, "visible_gpus", lambda: [0])
    example = Path(__file__).resolve().parents[2] / "examples" / "gpu_trials.yaml"
    assert main(["run", str(example), "--dir", str(tmp_path / "run")]) == 0
    with Store.open(tmp_path / "run") as store:
        trials = store.trials()
    assert len(trials) == 4 and all(t.status == "done" for t in trials)
    assert all(t.placement["devices"] == [0] and t.placement["gpus"] == 0.5 for t in trials)
    at_once = [sum(1 for u in trials if u.started <= t.started < u.finished) for t in trials]
    assert max(at_once) == 2  # 0.5 per trial: two share the one GPU, never three


class _ModelSpaceLike:
    """Warming treats anything with ``freeze`` as a space that trains models."""

    def freeze(self, arch):
        return arch


def test_a_pool_with_gpu_slots_warms_data_but_no_optimizer(two_fake_gpus, monkeypatch):
    """A first optimizer step initialises CUDA on a GPU machine, and forked GPU children then
    fail every trial ("Cannot re-initialize CUDA in forked subprocess", seen on an H100): with
    GPU slots the pool warms the evaluator's data only; without, the optimizers too."""
    from nasforge.engine import warm

    calls: list[str] = []
    monkeypatch.setattr(warm, "warm_torch", lambda: calls.append("torch") or 0.0)
    evaluator = FunctionEvaluator(lambda arch, report: 0.0)
    monkeypatch.setattr(evaluator, "prepare", lambda space: calls.append("data"), raising=False)
    for gpus, expected in ((1, ["data"]), (0, ["data", "torch"])):
        calls.clear()
        ex = ProcessPoolExecutor(2, start_method="fork")
        ex.use_gpus(gpus)
        ex.start(_ModelSpaceLike(), evaluator)
        ex.shutdown()
        assert calls == expected, (gpus, calls)


def _pid_unless_two(arch, report):
    if arch["x"] == 2:
        raise ValueError("x = 2 fails on purpose")
    return 1.0


def _worker_pids(reuse: bool, where, concurrency: int = 2) -> list[tuple[int, int, str]]:
    """Returns (trial id, worker pid, status) of 6 trials on the pool x ``concurrency``,
    trial 3 failing."""
    from nasforge.engine import Experiment
    from nasforge.run.trial_logs import trial_log

    exp = Experiment(
        SearchSpace([Decision("x", "value", tuple(range(6)))]),
        _pid_unless_two,
        "grid",
        directory=where,
        executor=ProcessPoolExecutor(concurrency, reuse_workers=reuse),
        progress="off",
        crossmodel=False,
    )
    exp.run()
    # a log's first line names its worker: "--- trial N: pid P on HOST"
    return [
        (t.id, int(trial_log(exp.directory, t.id).read_text().split()[4]), t.status)
        for t in exp.trials()
    ]


def _previous_worker_ended(arch, report) -> float:
    """Returns 1.0 when the worker of the trial before this one (pool x 1) has exited within
    3 s of this trial's start (dead or a zombie waiting to be reaped), else 0.0; writes this
    worker's pid to the file the next trial reads."""
    import os
    from pathlib import Path

    here, x = Path(os.environ["NF_TEST_PIDS"]), arch["x"]
    (here / f"{x}.pid").write_text(str(os.getpid()))
    if x == 0:
        return 1.0
    stat = Path("/proc", (here / f"{x - 1}.pid").read_text(), "stat")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return 1.0
        time.sleep(0.05)
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_that_takes_no_further_trial_exits_after_its_trial(tmp_path, monkeypatch):
    """Without reuse, each worker ends once its trial is done, though spares forked while it
    ran hold copies of its task pipe (the engine tells it to end rather than wait for EOF)."""
    from nasforge.engine import Experiment

    monkeypatch.setenv("NF_TEST_PIDS", str(tmp_path))
    exp = Experiment(
        SearchSpace([Decision("x", "value", tuple(range(4)))]),
        _previous_worker_ended,
        "grid",
        directory=tmp_path / "run",
        executor=ProcessPoolExecutor(1, reuse_workers=False),
        progress="off",
        crossmodel=False,
    )
    exp.run()
    assert [t.metrics for t in exp.trials()] == [{"default": 1.0}] * 4


def test_pool_workers_take_trial_after_trial_and_a_failed_trials_worker_is_replaced(tmp_path):
    """With reuse (the default) a worker whose trial succeeded runs later trials too, and the
    worker of the failed trial runs none after it; without it every trial has its own process."""
    rows = _worker_pids(True, tmp_path / "reuse")
    assert [s for _, _, s in rows].count("failed") == 1
    assert len({pid for _, pid, _ in rows}) < len(rows)  # workers were reused
    failed_id, failed_pid = next((tid, pid) for tid, pid, s in rows if s == "failed")
    assert failed_pid not in [pid for tid, pid, _ in rows if tid > failed_id]
    fresh = _worker_pids(False, tmp_path / "fresh")
    assert len({pid for _, pid, _ in fresh}) == len(fresh)


def test_the_worker_after_a_failed_trial_is_reused_too(tmp_path):
    """On the pool x 1, the fresh worker that replaces a failed trial's runs every later trial
    (its spare is forked as the slot frees, not left to a lone child per trial)."""
    rows = _worker_pids(True, tmp_path / "run", concurrency=1)
    assert [s for _, _, s in rows] == ["done"] * 2 + ["failed"] + ["done"] * 3
    assert len({pid for tid, pid, _ in rows if tid > 3}) == 1, rows
