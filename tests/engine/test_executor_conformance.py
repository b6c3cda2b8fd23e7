"""The conformance suite of the executors: every executor (in-process, the process pool with
and without reused workers, Ray on a local cluster bound to 127.0.0.1) passes the same tests,
one per clause of :class:`nasforge.engine.executor.BaseExecutor`'s contract.

Each test drives the executor as the engine does (``submit`` while ``n_running`` is below
``concurrency``, ``poll`` until every result is back) with an evaluator whose trials do what
the clause needs: report and return, raise, die, hang until killed, or meet the others. A
trial writes its process id to a file as it starts, so a test waits for that event rather
than for a guessed time, and can then tell whether the process is gone.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.executor import (
    BaseExecutor,
    InProcessExecutor,
    ProcessPoolExecutor,
    get_executor,
)
from nasforge.engine.trial import CANCELLED, TrialResult, TrialTask
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import MedianStopper
from tests.runwait import wait_until

CASES = ("ok", "raise", "exit", "hang", "reports", "meet")
SPACE = SearchSpace([Decision("case", "value", CASES), Decision("x", "value", tuple(range(8)))])
#: how long a test waits for an event before it counts as never coming (a guard against a
#: hang, far above what any event needs; Ray starts a worker process for a first trial)
PATIENCE = 120.0


class Behave(BaseEvaluator):
    """Returns what the architecture's ``case`` asks of a trial; every trial first writes its
    process id to ``folder/<x>.pid`` and says hello on its standard output.

    ``ok`` reports x/2 then 3x/4 and returns x (and 2x as ``twice``); ``raise`` raises;
    ``exit`` ends its process with code 3; ``hang`` sleeps until something kills it;
    ``reports`` reports falling values forever (a stopper or a cancel marker ends it);
    ``meet`` waits until ``meet`` trials have started (``folder/*.pid``), returning 1.0 when
    they did (they ran at once) and 0.0 when it gave up.
    """

    needs_model = False

    def __init__(self, folder: Path, meet: int = 1) -> None:
        self.folder, self.meet = str(folder), meet

    def evaluate(self, space: Any, arch: dict[str, Any], report: Any) -> Any:
        """Returns the case's metrics (see the class docstring)."""
        case, x = arch["case"], arch["x"]
        pid_file = Path(self.folder, f"{x}.pid")
        (tmp := pid_file.with_suffix(".tmp")).write_text(str(os.getpid()))
        tmp.replace(pid_file)  # whole or absent: a test reads it as soon as it appears
        print(f"trial x={x} says hello", flush=True)
        if case == "ok":
            report({"default": x / 2})
            report({"default": 3 * x / 4})
            return {"default": float(x), "twice": 2.0 * x}
        if case == "raise":
            raise ValueError(f"x={x} is broken on purpose")
        if case == "exit":
            os._exit(3)
        if case == "hang":
            time.sleep(3600)  # only a kill (timeout, cancel, shutdown) ends it
        if case == "reports":
            for step in range(10**6):
                report({"default": -float(step)})
        started = lambda: len(list(Path(self.folder).glob("*.pid"))) >= self.meet  # noqa: E731
        return 1.0 if wait_until(started, PATIENCE) else 0.0


# -- the executors --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loopback_ray() -> Iterator[None]:
    """A local Ray of two CPUs bound to 127.0.0.1 in a private folder (the executors under
    test join it); after the module, no process of it is left."""
    from tests.engine.local_ray import loopback_ray as start

    with start(num_cpus=2):
        ray = sys.modules["ray"]
        # trials of this module reach Ray's workers by value, whatever their sys.path
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            yield
        finally:
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


EXECUTORS = [
    "inprocess",
    "pool",
    "pool-fresh",  # reuse_workers=False: one process per trial
    pytest.param("ray", marks=pytest.mark.slow),  # starts a Ray instance: seconds, not ms
]
#: executors whose trials run in processes of their own: a trial that dies or hangs is
#: theirs to kill, and a running trial can be cancelled; in-process trials run inside submit
ISOLATED = {"pool", "pool-fresh", "ray"}


def _build(name: str, request: pytest.FixtureRequest) -> BaseExecutor:
    if name == "inprocess":
        return InProcessExecutor()
    if name in ("pool", "pool-fresh"):
        return ProcessPoolExecutor(2, reuse_workers=name == "pool")
    request.getfixturevalue("loopback_ray")
    from nasforge.engine.ray_executor import RayExecutor

    return RayExecutor(2, max_retries=0)  # a dead worker fails its trial at once


@pytest.fixture(params=EXECUTORS)
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseExecutor]:
    """Each executor, started on SPACE with a :class:`Behave` evaluator writing to
    ``tmp_path/pids``; shut down after the test."""
    ex = _build(request.param, request)
    (tmp_path / "pids").mkdir()
    ex.start(SPACE, Behave(tmp_path / "pids", meet=ex.concurrency))
    ex.kind = request.param  # type: ignore[attr-defined]
    yield ex
    ex.shutdown()


def _task(x: int, case: str = "ok", **kwargs: Any) -> TrialTask:
    """Returns the task of trial ``x + 1`` running ``case``."""
    return TrialTask(trial=x + 1, arch={"case": case, "x": x}, metric="default", **kwargs)


def _run_all(ex: BaseExecutor, tasks: list[TrialTask]) -> list[TrialResult]:
    """Returns the results of ``tasks``, submitted as the engine does (while ``n_running`` is
    below ``concurrency``) and polled until every one is back; checks ``n_running`` on the
    way: one more per submit, one less per result, never above ``concurrency``."""
    pending, out = list(tasks), []
    deadline = time.monotonic() + PATIENCE
    while pending or ex.n_running:
        assert time.monotonic() < deadline, f"{len(tasks) - len(out)} results never came"
        while pending and ex.n_running < ex.concurrency:
            before = ex.n_running
            ex.submit(pending.pop(0))
            assert ex.n_running == before + 1
        before = ex.n_running
        got = ex.poll(0.2)
        assert ex.n_running == before - len(got) and ex.n_running <= ex.concurrency
        out += got
    return out


def _pid(folder: Path, x: int) -> int:
    """Returns the process id trial ``x + 1`` wrote as it started (waits for it)."""
    path = folder / f"{x}.pid"
    assert wait_until(path.exists, PATIENCE), f"trial {x + 1} never started"
    return int(path.read_text())


def _gone(pid: int) -> bool:
    """Returns whether process ``pid`` has ended (a zombie not yet reaped counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _isolated(ex: BaseExecutor) -> None:
    if ex.kind not in ISOLATED:  # type: ignore[attr-defined]
        pytest.skip("in-process trials run inside submit, in the engine's own process")


# -- the contract, clause by clause ---------------------------------------------------------


def test_each_task_yields_one_result_with_its_metrics_and_reports(executor, tmp_path):
    """Every submitted task comes back exactly once, ``done``, with the metrics it returned,
    the values it reported in order, where it ran and when the evaluator ran; then nothing
    more comes and nothing runs."""
    results = _run_all(executor, [_task(x) for x in range(5)])
    assert sorted(r.trial for r in results) == [1, 2, 3, 4, 5]
    for r in results:
        x = r.trial - 1
        assert r.status == "done" and r.error is None, r.error
        assert r.metrics == {"default": float(x), "twice": 2.0 * x}
        assert r.intermediates == [{"default": x / 2}, {"default": 3 * x / 4}]
        assert r.placement is not None and r.placement["node"]
        assert r.timing["entered"] <= r.timing["returned"]
    assert executor.poll(0.1) == [] and executor.n_running == 0


def test_a_raising_evaluator_is_a_failed_result_with_its_traceback(executor):
    """An exception in the evaluator fails that trial only, with the traceback as its error;
    the trials beside it are done."""
    results = {r.trial: r for r in _run_all(executor, [_task(0), _task(1, "raise"), _task(2)])}
    assert sorted(results) == [1, 2, 3]
    failed = results[2]
    assert failed.status == "failed" and failed.metrics is None
    assert "Traceback (most recent call last)" in failed.error
    assert "ValueError: x=1 is broken on purpose" in failed.error
    assert "in evaluate" in failed.error  # the frame that raised, not only the message
    assert results[1].status == results[3].status == "done"


def test_a_worker_that_dies_is_one_failed_result(executor):
    """A trial whose process dies (exit code 3) is one failed result saying so; the trials
    beside it are done, and none comes back twice."""
    _isolated(executor)
    results = _run_all(executor, [_task(0), _task(1, "exit"), _task(2)])
    assert sorted(r.trial for r in results) == [1, 2, 3]
    by_id = {r.trial: r for r in results}
    assert by_id[2].status == "failed" and by_id[2].metrics is None
    assert "died" in by_id[2].error or "Ray task failed" in by_id[2].error, by_id[2].error
    assert by_id[1].status == by_id[3].status == "done"


def test_concurrency_trials_run_at_once(executor):
    """``concurrency`` trials submitted together all run at the same time: each waits until
    all of them have started, and all see the others (none waits for a free place)."""
    n = executor.concurrency
    results = _run_all(executor, [_task(x, "meet") for x in range(n)])
    assert sorted(r.trial for r in results) == list(range(1, n + 1))
    assert all(r.status == "done" and r.metrics == {"default": 1.0} for r in results), results


def test_set_concurrency_takes_effect_within_what_the_executor_has(executor):
    """``set_concurrency(n)`` returns the concurrency in force, at most ``n`` and at least 1,
    says what bounds it when it is lower, and ``concurrency`` reads it back; a bad ``n`` is a
    ConfigError that changes nothing."""
    from nasforge.errors import ConfigError

    before = executor.concurrency
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError):
            executor.set_concurrency(bad)
        assert executor.concurrency == before
    now = executor.set_concurrency(1)
    assert now == executor.concurrency == 1
    now = executor.set_concurrency(64)
    assert 1 <= now <= 64 and executor.concurrency == now
    if now < 64:
        assert executor.concurrency_limit()
    results = _run_all(executor, [_task(x) for x in range(3)])
    assert all(r.status == "done" for r in results)


def test_a_trial_past_its_timeout_is_failed_and_its_process_ended(executor, tmp_path):
    """A trial that runs past ``task.timeout`` is failed as timed out, and the process that
    ran it (for isolated executors) is ended; the next trial runs normally."""
    timeout = 1.0
    for x in range(6):  # x: the attempt; the timeout counts from submit, not from the start
        (r,) = _run_all(executor, [_task(x, "hang", timeout=timeout)])
        assert r.status == "failed" and r.error == f"timed out after {timeout} s (trial_timeout)"
        started = tmp_path / "pids" / f"{x}.pid"
        if started.exists() or executor.kind not in ISOLATED:
            break
        timeout *= 2  # killed before it began (a busy machine, a cold worker): longer
    else:
        pytest.fail(f"no trial started within {timeout / 2} s of its submission")
    if executor.kind in ISOLATED:
        pid = int(started.read_text())
        assert wait_until(lambda: _gone(pid), PATIENCE), "the timed-out trial's process lives"
    (after,) = _run_all(executor, [_task(7)])
    assert after.status == "done"


def test_a_trial_with_its_cancel_marker_is_cancelled_at_its_next_report(executor, tmp_path):
    """A trial whose cancel marker exists (``nasforge stop --trial``) ends at its next report
    as ``cancelled``, keeping the metrics it reported."""
    marker = tmp_path / "cancel-1"
    marker.touch()
    (r,) = _run_all(executor, [_task(0, "reports", cancel_marker=str(marker))])
    assert (r.trial, r.status, r.error) == (1, "cancelled", CANCELLED)
    assert r.metrics == {"default": 0.0} and r.intermediates == [{"default": 0.0}]


def test_cancel_stops_a_running_trial_once_or_says_it_did_not(executor, tmp_path):
    """``cancel`` of a running trial (isolated executors) returns True, ends its process,
    and the next poll returns it once as ``cancelled``; of a trial that is not running (every
    trial of the in-process executor once submit returns) it returns False."""
    assert executor.cancel(99) is False
    if executor.kind not in ISOLATED:
        executor.submit(_task(0))
        assert executor.cancel(1) is False
        (r,) = executor.poll(0.1)
        assert r.status == "done"
        return
    executor.submit(_task(0, "hang"))
    pid = _pid(tmp_path / "pids", 0)  # running now
    assert executor.cancel(1) is True
    assert executor.cancel(1) is False  # once
    results = _run_all(executor, [])
    assert [(r.trial, r.status, r.error) for r in results] == [(1, "cancelled", CANCELLED)]
    assert wait_until(lambda: _gone(pid), PATIENCE), "the cancelled trial's process lives"
    assert executor.poll(0.1) == [] and executor.n_running == 0


def test_a_stopper_snapshot_stops_a_trial_early_with_its_last_reports(executor):
    """A trial given a stopper snapshot that rules it out stops at its first report past the
    warm-up as ``early_stopped``, its metrics the last values it reported."""
    stopper = MedianStopper(warmup_steps=2, min_trials=1)
    stopper.add_finished([1.0, 1.0, 1.0, 1.0])  # a finished trial far above this one
    task = _task(0, "reports", stopper=stopper.snapshot(1))
    (r,) = _run_all(executor, [task])
    assert r.status == "early_stopped" and r.error is None
    assert r.intermediates == [{"default": -float(s)} for s in range(3)]
    assert r.metrics == {"default": -2.0}


def test_a_trial_s_output_reaches_its_log(executor, tmp_path):
    """What a trial prints goes to its log (``task.log``), or comes back with its result for
    the engine to write (Ray, whose workers may not see the run's folder)."""
    log = tmp_path / "logs" / "trial-1.log"
    (r,) = _run_all(executor, [_task(0, log=str(log))])
    text = (log.read_text() if log.exists() else "") + (r.log_text or "")
    assert "trial x=0 says hello" in text and "--- trial 1" in text


def test_shutdown_ends_every_running_trial_and_leaves_no_process(executor, tmp_path):
    """``shutdown`` with trials running ends their processes (and the pool's waiting
    workers) and leaves no child of this process behind."""
    before = {p.pid for p in mp.active_children()}
    if executor.kind not in ISOLATED:
        executor.submit(_task(0))
        executor.shutdown()
        assert {p.pid for p in mp.active_children()} <= before
        return
    executor.submit(_task(0, "hang"))
    executor.submit(_task(1, "hang"))
    pids = [_pid(tmp_path / "pids", x) for x in (0, 1)]  # both running
    executor.shutdown()
    assert wait_until(lambda: all(_gone(p) for p in pids), PATIENCE), "a trial outlived it"
    assert mp.active_children() == []


def _settings(ex: BaseExecutor) -> dict[str, Any]:
    """Returns the executor's public settings that are plain data."""
    plain = (bool, int, float, str, tuple, list, dict, type(None))
    return {k: v for k, v in vars(ex).items() if not k.startswith("_") and isinstance(v, plain)}


def test_the_spec_rebuilds_the_same_executor(executor):
    """What ``spec`` returns (a run's config keeps it, and a resume rebuilds from it) builds
    an executor of the same class and settings with ``get_executor``."""
    again = get_executor(executor.spec(), executor.concurrency)
    assert type(again) is type(executor) and again.spec() == executor.spec()
    expected = {k: v for k, v in _settings(executor).items() if k != "kind"}
    assert _settings(again) == expected
