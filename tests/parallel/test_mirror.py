"""Tests of layer mirroring in the real pipeline runtime (RunConfig.mirror, NASPipe §4.2)."""

from __future__ import annotations

import random

import pytest
import torch

from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig
from nasforge.parallel.csp import stage_of_blocks, subnet_partition
from nasforge.parallel.launcher import launch
from nasforge.parallel.mirror import check_layer_costs, mirror_blocks
from nasforge.parallel.runtime import train_sequential
from nasforge.parallel.supernet import ChoiceSupernet

BLOCKS, CANDS, STEPS = 6, 3, 24
#: Candidate 0 of every block costs 4x the others, so subnets' balanced partitions differ.
COSTS = [[4.0 if c == 0 else 1.0 for c in range(CANDS)] for _ in range(BLOCKS)]


def _subnets(n: int, seed: int = 3) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(CANDS) for _ in range(BLOCKS)] for _ in range(n)]


def _cfg(**kw) -> RunConfig:
    base = dict(
        space_cls=ChoiceSupernet,
        space_kwargs={"n_blocks": BLOCKS, "n_candidates": CANDS, "hidden": 16},
        steps=STEPS,
        batch_size=8,
        n_stages=2,
        cache_subnets=1.0,  # a small cache: evictions write mirrors back to the host tier
        timeout_s=240,
        mirror=True,
        layer_costs=COSTS,
        subnets=_subnets(STEPS),
    )
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def sequential() -> dict:
    """Sequential one-process training of the explicit subnet sequence: the reference."""
    torch.set_num_threads(1)
    return train_sequential(_cfg())


def _assert_every_mirror_is_sequential(results: list[dict], ref: dict) -> None:
    """Every stage's copy of every layer it holds, and every loss, equal the reference."""
    losses = results[-1]["losses"]
    assert [losses[i] for i in range(len(losses))] == ref["losses"]
    covered: set[str] = set()
    for rank, r in enumerate(results):
        for key, tensor in r["state"].items():
            assert torch.equal(tensor, ref["state"][key]), (rank, key)
        covered |= r["state"].keys()
    assert covered == ref["state"].keys()


def _placements(n_stages: int) -> dict[int, set[int]]:
    """Returns, per block, the stages the run's subnets place it on (with COSTS)."""
    out: dict[int, set[int]] = {}
    for sn in _subnets(STEPS):
        part = subnet_partition(tuple(sn), lambda layer: COSTS[layer[0]][layer[1]], n_stages)
        for b, k in enumerate(stage_of_blocks(part)):
            out.setdefault(b, set()).add(k)
    return out


def test_mirror_blocks_leave_no_stage_empty() -> None:
    """A stage may run the blocks that leave every stage before and after it one block."""
    assert [list(mirror_blocks(k, 6, 2)) for k in range(2)] == [[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]
    assert [list(mirror_blocks(k, 4, 4)) for k in range(4)] == [[0], [1], [2], [3]]


def test_bad_mirror_configs_are_config_errors() -> None:
    """mirror with bsp, and a cost table of the wrong shape, fail before any process starts."""
    with pytest.raises(ConfigError, match="needs policy 'csp', got 'bsp'"):
        launch(_cfg(policy="bsp"))
    with pytest.raises(ConfigError, match=r"shape \[3, 3, 3, 3, 3, 3\], got shape \[3\]"):
        launch(_cfg(layer_costs=[[1.0, 1.0, 1.0]]))
    with pytest.raises(ConfigError, match="finite and >= 0"):
        check_layer_costs([[-1.0]], [1])


def test_csp_mirror_two_stages_is_bitwise_sequential(sequential: dict, live_stages) -> None:
    """With per-subnet partitions (layers run on both stages), every mirror and loss equal
    sequential training, and layer state was really pushed between the stages."""
    assert any(len(ks) > 1 for ks in _placements(2).values())  # mirroring really happens
    results = launch(_cfg())
    _assert_every_mirror_is_sequential(results, sequential)
    assert all(r["pushed_bytes"] > 0 for r in results)
    assert not live_stages()


@pytest.mark.slow  # a launch; the two-stage mirror test stays fast
def test_csp_mirror_with_measured_costs_is_bitwise_sequential(live_stages) -> None:
    """Costs measured on rank 0 and broadcast give every process the same partitions; with the
    learning evolution sampler (losses fed back with the gradients) too."""
    cfg = _cfg(layer_costs=None, steps=12, subnets=None, sampler="evolution", feedback_lag=4)
    results = launch(cfg)
    _assert_every_mirror_is_sequential(results, train_sequential(cfg))
    assert not live_stages()


@pytest.mark.slow  # a launch; the two-stage mirror test stays fast
def test_csp_mirror_one_stage_is_bitwise_sequential(sequential: dict) -> None:
    """One stage holds every layer and pushes nothing; training equals sequential."""
    results = launch(_cfg(n_stages=1))
    _assert_every_mirror_is_sequential(results, sequential)
    assert results[0]["pushed_bytes"] == 0


@pytest.mark.slow
def test_csp_mirror_four_stages_is_bitwise_sequential(sequential: dict, live_stages) -> None:
    """Four stages (a layer on up to three of them, bundles between non-neighbours) equal
    sequential training in every mirror and loss."""
    assert max(len(ks) for ks in _placements(4).values()) >= 3
    results = launch(_cfg(n_stages=4))
    _assert_every_mirror_is_sequential(results, sequential)
    assert not live_stages()
