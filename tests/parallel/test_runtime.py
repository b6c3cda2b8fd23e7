"""Tests of the torch.distributed pipeline runtime: bitwise reproducibility and failures."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from nasforge.errors import (
    ArchitectureError,
    ConfigError,
    DivergenceError,
    ScheduleError,
    WorkerError,
)
from nasforge.parallel.config import RunConfig
from nasforge.parallel.context import TieredLayerCache
from nasforge.parallel.launcher import collect, launch
from nasforge.parallel.runtime import StageWorker, train_sequential
from nasforge.parallel.sampler import UniformSampler
from nasforge.parallel.supernet import ChoiceSupernet

STEPS = 32


def _cfg(**kw) -> RunConfig:
    base = dict(
        space_cls=ChoiceSupernet,
        space_kwargs={"n_blocks": 4, "n_candidates": 3, "hidden": 16},
        steps=STEPS,
        batch_size=8,
        n_stages=2,
        cache_subnets=1.0,  # one subnet's stage layers: forces evictions and write-backs
        timeout_s=240,
    )
    base.update(kw)
    return RunConfig(**base)


def _merged(results: list[dict]) -> tuple[dict, list[float]]:
    state: dict = {}
    for r in results:
        state.update(r["state"])
    losses = results[-1]["losses"]
    return state, [losses[i] for i in range(len(losses))]


def _children() -> list[int]:
    """Returns the pids of live spawned stage processes of this test (Linux /proc).

    multiprocessing's own resource tracker (a child for the parent's lifetime) is not a stage.
    """
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            cmd = (stat.parent / "cmdline").read_bytes()
            if b"spawn_main" in cmd:
                out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def sequential() -> dict:
    """Sequential one-process training: the reference run."""
    return train_sequential(_cfg())


def _assert_same(state: dict, losses: list[float], ref: dict) -> None:
    assert state.keys() == ref["state"].keys()
    for key, tensor in ref["state"].items():
        assert torch.equal(state[key], tensor), key
    assert losses == ref["losses"]


def test_csp_two_stages_is_bitwise_sequential(sequential: dict) -> None:
    """After 32 steps every parameter tensor and every step's loss equal sequential training."""
    results = launch(_cfg(policy="csp"))
    state, losses = _merged(results)
    _assert_same(state, losses, sequential)
    assert all(r["stats"]["evictions"] > 0 for r in results)  # the cache budget was exercised
    assert not _children()


@pytest.mark.slow
def test_bsp_and_asp_differ_from_sequential(sequential: dict) -> None:
    """BSP (bulk update) and ASP (no waits) change the result: the comparison can fail."""
    for policy in ("bsp", "asp"):
        state, losses = _merged(launch(_cfg(policy=policy)))
        differs = losses != sequential["losses"] or any(
            not torch.equal(state[k], v) for k, v in sequential["state"].items()
        )
        assert differs, policy


@pytest.mark.slow
def test_csp_four_stages_is_bitwise_sequential(sequential: dict) -> None:
    """Four stage processes give the same parameters and losses as sequential training."""
    state, losses = _merged(launch(_cfg(policy="csp", n_stages=4)))
    _assert_same(state, losses, sequential)


def test_more_stages_than_blocks_fails_before_spawning() -> None:
    """A stage count above the block count is a ScheduleError and starts no process."""
    with pytest.raises(ScheduleError, match="4 choice blocks into 5"):
        launch(_cfg(n_stages=5))
    assert not _children()


def test_subnet_with_missing_candidate_is_rejected() -> None:
    """An explicit subnet naming candidate 7 of a 3-candidate block raises ArchitectureError."""
    subnets = [[0, 1, 2, 0]] * STEPS
    subnets[3] = [0, 7, 0, 0]
    with pytest.raises(ArchitectureError, match="candidate 7 in block 1"):
        launch(_cfg(subnets=subnets))
    assert not _children()


@pytest.mark.slow
def test_dying_worker_stops_the_run_and_leaves_no_process() -> None:
    """A stage that dies mid-run gives WorkerError naming it; no stage process survives."""
    with pytest.raises(WorkerError, match="stage 1 .* exited with code 17"):
        launch(_cfg(fail_rank=1, fail_step=5, timeout_s=120))
    assert not _children()


#: lr=5 makes _cfg()'s run diverge; sequential and pipeline runs agree on where (bitwise).
_DIVERGED = r"step 12 \(subnet \[1, 2, 2, 2\]\) is nan; expected a finite loss with lr=5.0"


def test_nan_loss_stops_sequential_training() -> None:
    """A NaN loss raises DivergenceError naming the step and subnet; nothing is returned."""
    with pytest.raises(DivergenceError, match=_DIVERGED) as info:
        train_sequential(_cfg(lr=5.0))
    assert (info.value.step, info.value.subnet) == (12, [1, 2, 2, 2])


@pytest.mark.slow
def test_nan_loss_stops_every_pipeline_stage() -> None:
    """The last stage's NaN loss ends both stages and the parent raises DivergenceError."""
    with pytest.raises(
        DivergenceError, match="pipeline stage 1: training diverged: the loss of " + _DIVERGED
    ) as info:
        launch(_cfg(lr=5.0, timeout_s=120))
    err = info.value
    assert (err.stage, err.step, err.subnet, math.isnan(err.loss)) == (1, 12, [1, 2, 2, 2], True)
    assert not _children()


@pytest.mark.slow
def test_torchrun_launch_is_bitwise_sequential(sequential: dict, tmp_path: Path) -> None:
    """Stages started by torchrun (env:// rendezvous) reproduce sequential training bitwise."""
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    cmd = [
        torchrun, "--standalone", "--nproc-per-node", "2", "-m", "nasforge.parallel.launcher",
        "--space-kwargs", '{"n_blocks": 4, "n_candidates": 3, "hidden": 16}',
        "--steps", str(STEPS), "--batch-size", "8", "--out", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    subprocess.run(cmd, check=True, timeout=240, env=env, capture_output=True)
    state, losses = _merged(collect(tmp_path, 2))
    _assert_same(state, losses, sequential)


@pytest.mark.slow
def test_two_node_torchrun_launch_is_bitwise_sequential(sequential: dict, tmp_path: Path) -> None:
    """Two torchrun agents as two "nodes" (--nnodes 2, one stage each, a c10d rendezvous on
    loopback) reproduce sequential training bitwise, as a multi-node run would."""
    import shutil
    import socket
    import subprocess
    import sys

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    nodes = [
        subprocess.Popen(
            [
                torchrun, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(rank),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                "--rdzv-id", "two-nodes", "--local-addr", "127.0.0.1",
                "-m", "nasforge.parallel.launcher",
                "--space-kwargs", '{"n_blocks": 4, "n_candidates": 3, "hidden": 16}',
                "--steps", str(STEPS), "--batch-size", "8", "--out", str(tmp_path),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank in (0, 1)
    ]  # fmt: skip
    try:
        outs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in nodes]
    finally:
        for p in nodes:
            p.kill()
            p.wait()
    assert all(p.returncode == 0 for p in nodes), outs
    state, losses = _merged(collect(tmp_path, 2))
    _assert_same(state, losses, sequential)


@pytest.mark.slow
def test_csp_with_the_learning_evolution_sampler_is_bitwise_sequential(sequential: dict) -> None:
    """With the evolution sampler (losses fed back with the gradients, `feedback_lag` subnets
    late), 2-stage CSP draws the same subnets and ends with the same weights as sequential."""
    ref = train_sequential(_cfg(sampler="evolution", feedback_lag=4))
    state, losses = _merged(launch(_cfg(policy="csp", sampler="evolution", feedback_lag=4)))
    _assert_same(state, losses, ref)
    assert ref["losses"] != sequential["losses"]  # not the uniform sampler's sequence
    with pytest.raises(ConfigError, match="feedback_lag"):
        launch(_cfg(sampler="evolution", feedback_lag=1))


# -- the one-stage look-ahead (predicted prefetch) -----------------------------------------------

#: 4 blocks x 8 candidates, a cache of 3 subnets (12 of 32 layers): the look-ahead must prefetch.
_WIDE = {"n_blocks": 4, "n_candidates": 8, "hidden": 16}


def _prefetch_cfg(**kw) -> RunConfig:
    return _cfg(**{"space_kwargs": _WIDE, "cache_subnets": 3.0, "n_stages": 1, **kw})


def test_one_stage_prefetch_plan_is_the_predictors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step prefetches exactly the layers of the next subnets the sampler draws (as many
    subnets as fill the cache, nearest first), minus the running subnet's, cut at capacity."""
    calls: list[list] = []
    original = TieredLayerCache.prefetch

    def spy(self: TieredLayerCache, keys: list) -> list:
        calls.append(list(keys))
        return original(self, keys)

    monkeypatch.setattr(TieredLayerCache, "prefetch", spy)
    cfg = _prefetch_cfg()
    train_sequential(cfg)
    sampler = iter(UniformSampler([8] * 4, cfg.seed))
    subnets = [next(sampler) for _ in range(cfg.steps)]
    capacity, depth = 12, 3  # 3 subnets x 4 blocks; 3 subnets fill it
    assert len(calls) == cfg.steps
    for seq, got in enumerate(calls):
        running = set(enumerate(subnets[seq]))
        ahead = [layer for sn in subnets[seq + 1 : seq + 1 + depth] for layer in enumerate(sn)]
        want = [layer for layer in dict.fromkeys(ahead) if layer not in running]
        assert got == want[: capacity - len(running)], seq
    assert any(calls) and not calls[-1]  # nothing lies beyond the last step


@pytest.fixture(scope="module")
def prefetched() -> tuple[dict, dict]:
    """Returns the all-resident run and the prefetching one of one process (sequential)."""
    return train_sequential(_prefetch_cfg(cache_subnets=None)), train_sequential(_prefetch_cfg())


def test_one_stage_prefetched_layers_are_used_and_bitwise_resident(
    prefetched: tuple[dict, dict],
) -> None:
    """Every prefetched layer is used before it is evicted, only the first subnet misses, and
    the weights and losses equal the all-resident run's bitwise."""
    resident, cached = prefetched
    s = cached["stats"]
    assert s["prefetches"] > 0 and s["prefetch_used"] == s["prefetches"]
    assert s["prefetch_wasted"] == 0 and s["misses"] == 4  # the first subnet's 4 layers
    assert s["hits"] == 2 * 4 * STEPS - 4  # forward acquires and update acquires
    assert s["prefetched_fraction"] > 0.9 and s["evictions"] > 0
    _assert_same(cached["state"], cached["losses"], resident)


@pytest.mark.slow  # a launch; the stage loop's plan is the predictor's (a unit test above)
def test_a_prefetching_stage_is_the_sequential_prefetching_run(
    prefetched: tuple[dict, dict],
) -> None:
    """As a stage process, the runtime's stage loop prefetches as the sequential run does:
    the same weights, losses and cache statistics."""
    resident, cached = prefetched
    (stage,) = launch(_prefetch_cfg())
    _assert_same(*_merged([stage]), resident)
    assert stage["stats"] == cached["stats"]


def test_look_ahead_waits_for_no_loss_of_a_learning_sampler() -> None:
    """With the evolution sampler (subnet q drawn after the loss of q - 2) the look-ahead names
    only subnets drawable now: the run ends, prefetches, and equals the resident run."""
    kw = {"sampler": "evolution", "feedback_lag": 2, "steps": 12}
    resident = train_sequential(_prefetch_cfg(cache_subnets=None, **kw))
    cached = train_sequential(_prefetch_cfg(**kw))
    assert cached["stats"]["prefetches"] > 0
    _assert_same(cached["state"], cached["losses"], resident)


def test_a_backwards_prediction_never_evicts_the_layers_its_update_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stage 0 of 2, a cache of 2 subnets: before B0 the look-ahead (F1's backward, F2, ...)
    keeps subnet 0's layers, released since F0, resident for B0's update: no miss there."""
    subnets = [[c] * 4 for c in range(8)]  # no two subnets share a layer
    cfg = _cfg(space_kwargs=_WIDE, cache_subnets=2.0, subnets=subnets, steps=8)
    worker = StageWorker(0, cfg)
    monkeypatch.setattr(worker, "_send", lambda *args, **kwargs: None)  # no neighbour here
    try:
        worker._admit()
        for _ in range(2):
            worker._forward(worker._pick_forward())
        worker.grads_in[0] = torch.ones(worker.out_numel)
        misses = worker.ctx.stats["misses"]
        worker._backward(0)
        assert worker.ctx.stats["misses"] == misses
        assert 0 in worker.finished and worker.ctx.stats["prefetches"] > 0
    finally:
        worker.feed.close()
