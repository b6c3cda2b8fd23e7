"""Data-parallel one-shot search (2 gloo ranks on loopback): every rank takes the same steps
whatever its global generators, and N ranks x batch B/N train what one process x batch B does."""

from __future__ import annotations

import pytest
import torch

from tests.oneshot._dp import OWN, on_ranks, run

#: the float tolerance of the equivalence: summing each rank's share of a batch's gradient
#: rounds differently from one process's mean over the whole batch
TOLERANCE = 1e-4


def _check(algorithm: str, tmp_path) -> None:
    ranks = on_ranks(algorithm, tmp_path)
    one = run(algorithm)
    a, b = ranks
    assert a["steps"] == b["steps"] and len(a["steps"]) > 4  # every step, bitwise equal
    assert a["archs"] == b["archs"] and a["arch"] == b["arch"]
    assert all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"])
    assert a["arch"] == one["arch"] and a["archs"] == one["archs"]
    worst = max(float((a["state"][k] - one["state"][k]).abs().max()) for k in one["state"])
    assert worst < TOLERANCE, worst


def test_two_ranks_agree_and_match_one_process_darts(tmp_path) -> None:
    """DARTS on 2 ranks (global generators set apart): both take the same steps, end with the
    same supernet and architecture, and match one process with the whole batch."""
    _check("darts", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(set(OWN) - {"darts"}))
def test_two_ranks_agree_and_match_one_process(algorithm: str, tmp_path) -> None:
    """Each algorithm on 2 ranks: the same steps on both, and the weights, architecture
    parameters and pick of one process with the whole batch."""
    _check(algorithm, tmp_path)


def _worst(a: dict, b: dict) -> float:
    return max(float((a["state"][k] - b["state"][k]).abs().max()) for k in b["state"])


@pytest.mark.slow
def test_sync_bn_makes_a_batch_norm_space_match_one_process(tmp_path) -> None:
    """With batch norm, 2 ranks normalising by their shards drift from one process; with
    ``sync_bn`` (the whole batch's statistics in the gradient steps) they match it within the
    float tolerance, running statistics included."""
    one = run("darts", bn="sync")  # one process: sync_bn changes nothing
    synced = on_ranks("darts", tmp_path / "sync", bn="sync")[0]
    sharded = on_ranks("darts", tmp_path / "shard", bn="shard")[0]
    assert _worst(synced, one) < TOLERANCE < _worst(sharded, one)


@pytest.mark.slow
def test_a_measured_latency_budget_is_rank_0_s_table_on_every_rank(tmp_path) -> None:
    """Each rank times the candidates itself (the timings differ); the search then reads rank
    0's table on every rank, so both ranks keep to the same budget and pick the same."""
    from nasforge.oneshot import proxyless
    from tests.oneshot._dp import MlpSpace, data

    times = proxyless.latency_table(MlpSpace(), data()[0][:2])
    low = sum(min(row.values()) for row in times.values())
    high = sum(max(row.values()) for row in times.values())
    extra = {"budget": {"latency": (low + high) / 2}}
    a, b = on_ranks("spos", tmp_path, extra=extra)
    tables = [k for k in a["state"] if k.startswith("latency.")]
    assert tables and all(torch.equal(a["state"][k], b["state"][k]) for k in tables)
    assert a["arch"] == b["arch"] and a["archs"] == b["archs"] and a["steps"] == b["steps"]
    assert a["metrics"]["latency"] == b["metrics"]["latency"] <= extra["budget"]["latency"]
