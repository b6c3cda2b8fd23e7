"""Conformance suite of the executors, plus the pool's pickling check for spawn."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from nasforge.engine.evaluator import FunctionEvaluator
from nasforge.engine.executor import InProcessExecutor, ProcessPoolExecutor, get_executor
from nasforge.engine.trial import TrialTask
from nasforge.errors import ConfigError
from nasforge.space.search_space import Decision, SearchSpace

SPACE = SearchSpace([Decision("x", "value", (1, 2, 3, 4, 5, 6))])


def _ev(arch, report):
    if arch["x"] == 3:
        raise ValueError("three is bad")
    report({"default": arch["x"] / 2})
    return float(arch["x"])


def _task(i: int, x: int) -> TrialTask:
    return TrialTask(trial=i, arch={"x": x}, metric="default")


def _drain(ex, n, timeout=60.0):
    out = []
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        out += ex.poll(0.2)
    return out


@pytest.fixture(params=["inprocess", "pool"])
def executor(request):
    """Each executor implementation, started on the test space."""
    ex = InProcessExecutor() if request.param == "inprocess" else ProcessPoolExecutor(2)
    ex.start(SPACE, FunctionEvaluator(_ev))
    yield ex
    ex.shutdown()


def test_one_result_per_task(executor):
    """Every submitted task yields exactly one result with the right status and metrics."""
    results = []
    pending = [(i, x) for i, x in enumerate([1, 2, 3, 4, 5, 6], 1)]
    while pending or executor.n_running:
        while pending and executor.n_running < executor.concurrency:
            executor.submit(_task(*pending.pop(0)))
        results += executor.poll(0.2)
    by_id = {r.trial: r for r in results}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 6] and len(results) == 6
    assert by_id[3].status == "failed" and "three is bad" in by_id[3].error
    assert by_id[6].metrics == {"default": 6.0}
    assert by_id[6].intermediates == [{"default": 3.0}]


def test_shutdown_leaves_no_process():
    """Shutting the pool down kills running children."""
    ex = ProcessPoolExecutor(2)
    ex.start(SPACE, FunctionEvaluator(lambda arch, report: time.sleep(30) or 1.0))
    ex.submit(_task(1, 1))
    ex.submit(_task(2, 2))
    ex.shutdown()
    assert not mp.active_children()


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
