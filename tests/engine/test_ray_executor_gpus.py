"""The Ray executor's GPUs, on a real local Ray with two logical GPUs: tasks ask num_gpus,
each trial sees exactly the ids Ray gave it, and asking for more is a ConfigError."""

from __future__ import annotations

import pytest

from nasforge.engine import Experiment
from nasforge.engine.ray_executor import RayExecutor
from nasforge.errors import ConfigError
from tests.engine.gpu_trials import SPACE, WhereEvaluator, most_at_once, rows
from tests.engine.local_ray import loopback_ray

ray = pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")


@pytest.fixture(scope="module")
def ray_two_gpus():
    """A local Ray instance with two CPUs and two logical GPUs on 127.0.0.1, shut down after
    the module."""
    with loopback_ray(num_cpus=2, num_gpus=2, object_store_memory=100 * 2**20):
        yield


def _run(tmp_path, gpus):
    out = tmp_path / "seen"
    out.mkdir()
    exp = Experiment(
        SPACE,
        WhereEvaluator(out),
        "grid",
        directory=tmp_path / "run",
        executor=RayExecutor(concurrency=4, cpus_per_trial=0.5),
        gpus_per_trial=gpus,
        progress="off",
        crossmodel=False,
    )
    exp.run()
    return exp, rows(out)


@pytest.mark.slow
def test_ray_half_gpus_share_each_gpu_by_two(ray_two_gpus, tmp_path):
    """At 0.5 GPUs per trial, Ray gives each trial one GPU id, sets CUDA_VISIBLE_DEVICES to it,
    and never runs more than two trials on one GPU; the record names the node and the GPU."""
    exp, seen = _run(tmp_path, 0.5)
    assert len(seen) == 8
    assert all(len(r["devices"]) == 1 and r["env"] == str(r["devices"][0]) for r in seen)
    assert set(most_at_once(seen)) <= {0, 1}
    assert all(n <= 2 for n in most_at_once(seen).values())
    recorded = {t.arch["x"]: t.placement for t in exp.trials()}
    assert all(recorded[r["x"]]["devices"] == r["devices"] for r in seen)
    assert all(p["node"] and p["gpus"] == 0.5 for p in recorded.values())


@pytest.mark.slow
def test_ray_whole_gpus_are_never_shared(ray_two_gpus, tmp_path):
    """At one GPU per trial, no two trials hold the same GPU at once."""
    _, seen = _run(tmp_path, 1)
    assert all(r["env"] == str(r["devices"][0]) for r in seen)
    assert all(n == 1 for n in most_at_once(seen).values())


@pytest.mark.slow  # starts a Ray instance to ask its nodes
def test_ray_refuses_more_gpus_than_a_node_has(ray_two_gpus, tmp_path):
    """Three GPUs per trial where the node has two is a ConfigError from the constructor: no
    record is made."""
    with pytest.raises(ConfigError, match="more GPUs than any Ray node has"):
        Experiment(SPACE, WhereEvaluator(tmp_path), "grid", directory=tmp_path / "a",
                   executor=RayExecutor(2), gpus_per_trial=3)  # fmt: skip
    assert not (tmp_path / "a").exists()


def test_ray_refuses_a_device_list(tmp_path):
    """A device list (Ray picks the GPUs) is a ConfigError from the constructor, with or
    without a running Ray: no record is made."""
    with pytest.raises(ConfigError, match="Ray picks"):
        Experiment(SPACE, WhereEvaluator(tmp_path), "grid", directory=tmp_path / "b",
                   executor=RayExecutor(2), gpus_per_trial=1, devices=[0])  # fmt: skip
    assert not (tmp_path / "b").exists()
