"""Tests of training in resumable segments: the training state, its checks, and the invariant
that any segments train bitwise what one uninterrupted call trains."""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig, check_checkpoint_every
from nasforge.parallel.csp import FinishedList
from nasforge.parallel.sampler import SubnetFeed, UniformSampler
from nasforge.parallel.segments import merge_parts, next_boundary
from nasforge.parallel.supernet import ChoiceSupernet
from nasforge.parallel.train import TrainResult, train_supernet

SPACE = {"n_blocks": 4, "n_candidates": 2, "hidden": 8}
KW: dict[str, Any] = {"batch_size": 4, "cache_subnets": 1.0}  # a small cache: evictions too


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _assert_one_run(whole: TrainResult, parts: list[TrainResult]) -> None:
    """The last of ``parts`` (trained in segments) ends as ``whole`` (one call), bitwise."""
    end = parts[-1].training_state
    assert _same(whole.training_state["weights"], end["weights"])
    assert _same(whole.training_state["momentum"], end["momentum"])
    assert whole.losses == [x for p in parts for x in p.losses] == end["losses"]


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """Returns ``state`` after torch.save and a weights_only load (as a checkpoint file)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("sampler", ["uniform", "evolution", "fair"])
def test_sequential_segments_are_bitwise_one_call(sampler: str) -> None:
    """3 + 5 steps from a saved state, and one call checkpointing every 3 steps, train bitwise
    the weights, momentum and losses of 8 steps in one call (a learning sampler too)."""
    kw = {**KW, "sampler": sampler, "pipeline": 1}
    whole = train_supernet(SPACE, steps=8, **kw)
    first = train_supernet(SPACE, steps=3, **kw)
    rest = train_supernet(SPACE, steps=8, from_state=_roundtrip(first.training_state), **kw)
    assert rest.start == 3 and len(rest.losses) == 5
    _assert_one_run(whole, [first, rest])
    seen: list[dict[str, Any]] = []
    every = train_supernet(SPACE, steps=8, checkpoint_every=3, checkpoint=seen.append, **kw)
    assert [s["step"] for s in seen] == [3, 6, 8]
    assert _same(seen[0]["weights"], first.training_state["weights"])
    assert _same(seen[-1]["momentum"], whole.training_state["momentum"])
    _assert_one_run(whole, [every])
    assert seen[-1]["stats"]["samples"] == 8 * 4 and rest.training_state["stats"]["launches"] == 2


def test_a_state_that_does_not_fit_the_run_is_refused() -> None:
    """Another seed, batch size or space, a step past the run, another format, or a bsp state
    inside a bulk are ConfigErrors naming the setting; nothing trains."""
    state = train_supernet(SPACE, steps=3, **KW).training_state
    with pytest.raises(ConfigError, match="seed=0"):
        train_supernet(SPACE, steps=8, seed=1, from_state=state, **KW)
    with pytest.raises(ConfigError, match="batch_size=4"):
        train_supernet(SPACE, steps=8, from_state=state, batch_size=8)
    with pytest.raises(ConfigError, match="do not fit the space"):
        train_supernet({**SPACE, "hidden": 6}, steps=8, from_state=state, **KW)
    with pytest.raises(ConfigError, match="expected a step in 0..2"):
        train_supernet(SPACE, steps=2, from_state=state, **KW)
    with pytest.raises(ConfigError, match="format 1"):
        train_supernet(SPACE, steps=8, from_state={"format": 0}, **KW)
    with pytest.raises(ConfigError, match="inside a bulk"):
        train_supernet(SPACE, steps=8, pipeline=2, policy="bsp", from_state=state, **KW)


def test_checkpoint_every_is_checked() -> None:
    """checkpoint_every must be an int >= 0, and under bsp on several stages a multiple of
    the bulk (a segment ends where bsp updates)."""
    check_checkpoint_every(0, "bsp", 4)
    check_checkpoint_every(8, "bsp", 4)
    check_checkpoint_every(3, "csp", 4)
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="int >= 0"):
            check_checkpoint_every(bad, "csp", 2)
    with pytest.raises(ConfigError, match="multiple of 4"):
        check_checkpoint_every(6, "bsp", 4)
    with pytest.raises(ConfigError, match="multiple of 3"):
        check_checkpoint_every(4, "bsp", 2, bulk=3)


def test_boundaries_feed_and_finished_list_start_at_a_step() -> None:
    """Boundaries fall on multiples and the end; a feed started at step 3 yields what a feed
    from 0 yields there; a finished list started at 3 holds 0..2 finished."""
    assert [next_boundary(s, 10, 4) for s in (0, 3, 4, 8, 9)] == [4, 4, 8, 10, 10]
    assert next_boundary(5, 10, 0) == 10
    full = SubnetFeed(UniformSampler([3, 3, 3], 7), [3, 3, 3], 6)
    late = SubnetFeed(UniformSampler([3, 3, 3], 7), [3, 3, 3], 6, start=3)
    assert [late.get(s) for s in range(3, 6)] == [full.get(s) for s in range(3, 6)]
    full.close(), late.close()
    with pytest.raises(ConfigError, match="start <= total"):
        SubnetFeed(UniformSampler([3], 0), [3], 2, start=3)
    done = FinishedList(3)
    assert 2 in done and 3 not in done and len(done) == 3
    done.add(3)
    assert done.low == 4


def test_merge_takes_each_mirrored_layer_from_its_latest_write() -> None:
    """Stages mirroring a layer may hold an older copy at a boundary; the merged state takes
    the copy of the stage that holds the layer's latest WRITE, and sums the statistics."""
    cfg = RunConfig(ChoiceSupernet, dict(SPACE), steps=4, n_stages=2, batch_size=4)
    old, new = torch.zeros(2), torch.ones(2)
    counts = {"hits": 3, "misses": 1}

    def part(t: torch.Tensor, version: int, losses: dict[int, float]) -> dict[str, Any]:
        return {"step": 2, "state": {"1.0.w": t}, "momentum": {"1.0.w": t + 1},
                "versions": {"1.0": version}, "losses": losses, "stats": counts,
                "busy": 1.0, "wall": 2.0, "layer_costs": None}  # fmt: skip

    got = merge_parts([part(new, 1, {}), part(old, -1, {0: 0.5, 1: 0.25})], None, cfg)
    assert torch.equal(got["weights"]["1.0.w"], new) and torch.equal(
        got["momentum"]["1.0.w"], new + 1
    )
    assert got["losses"] == [0.5, 0.25] and got["step"] == 2
    assert got["stats"]["busy_s"] == 2.0 and got["stats"]["stage_s"] == 4.0
    assert got["stats"]["cache"][0]["hits"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("mirror", [False, True])
def test_two_stage_csp_segments_are_bitwise_one_call(mirror: bool, live_stages) -> None:
    """On 2 stages under csp (with and without layer mirroring), 3 + 5 steps from a saved
    state and one launch checkpointing every 3 steps train bitwise what one sequential call
    does; no stage process is left."""
    kw = {**KW, "mirror": mirror}
    whole = train_supernet(SPACE, steps=8, pipeline=1, **KW)
    first = train_supernet(SPACE, steps=3, pipeline=2, **kw)
    rest = train_supernet(SPACE, steps=8, pipeline=2, from_state=first.training_state, **kw)
    _assert_one_run(whole, [first, rest])
    if mirror:  # the cost table measured by the first launch splits the second's subnets
        assert rest.training_state["layer_costs"] == first.training_state["layer_costs"]
    seen: list[dict[str, Any]] = []
    every = train_supernet(SPACE, steps=8, pipeline=2, checkpoint_every=3,
                           checkpoint=seen.append, **kw)  # fmt: skip
    assert [s["step"] for s in seen] == [3, 6, 8]
    assert _same(seen[0]["weights"], first.training_state["weights"])
    assert _same(seen[0]["momentum"], first.training_state["momentum"])
    _assert_one_run(whole, [every])
    assert live_stages() == []


@pytest.mark.slow
def test_bsp_segments_on_its_bulks_are_bitwise_one_call_and_asp_resumes() -> None:
    """bsp on 2 stages: 4 + 4 steps, and one launch checkpointing every 2, equal one 8-step
    launch bitwise (segments end on bulks). asp is not reproducible even in one launch; a
    resumed asp run trains the remaining steps from the saved state."""
    kw = {**KW, "pipeline": 2, "policy": "bsp"}
    whole = train_supernet(SPACE, steps=8, **kw)
    first = train_supernet(SPACE, steps=4, **kw)
    rest = train_supernet(SPACE, steps=8, from_state=first.training_state, **kw)
    _assert_one_run(whole, [first, rest])
    every = train_supernet(SPACE, steps=8, checkpoint_every=2, checkpoint=lambda s: None, **kw)
    _assert_one_run(whole, [every])
    asp = {**kw, "policy": "asp"}
    start = train_supernet(SPACE, steps=3, **asp)
    end = train_supernet(SPACE, steps=8, from_state=start.training_state, **asp)
    assert end.training_state["losses"][:3] == start.losses and len(end.losses) == 5
    assert not _same(end.state, start.state)  # it trained on
