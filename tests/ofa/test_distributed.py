"""Data-parallel once-for-all training (2 gloo ranks on loopback): every rank trains the same
sub-networks whatever its global generators, N ranks x batch B/N with ``sync_bn`` train what
one process x batch B does, and the predictor's accuracy set split across ranks is the one
process's."""

from __future__ import annotations

import pytest
import torch

from nasforge.ofa.deploy import measure_pairs
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group
from tests.ofa._dp import data, on_ranks, run
from tests.ofa.conftest import tiny_spec

pytestmark = pytest.mark.slow  # two processes that import torch: several seconds each test

#: the float tolerance of the equivalence: summing each rank's share of a batch's gradient (and
#: batch norm's moments) rounds differently from one process's mean over the whole batch
TOLERANCE = 1e-4


def _worst(a: dict, b: dict) -> float:
    return max(float((a["state"][k] - b["state"][k]).abs().max()) for k in b["state"])


def _same_on_both(a: dict, b: dict) -> None:
    assert a["steps"] == b["steps"] and len(a["steps"]) >= 4  # after every step, bitwise
    assert all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"])
    assert [r["loss"] for r in a["rows"]] == [r["loss"] for r in b["rows"]]


def test_two_ranks_with_sync_bn_agree_and_match_one_process(tmp_path) -> None:
    """CompOFA on 2 ranks with ``sync_bn`` (global generators set apart): both hold the same
    weights after every step, and end with one process's weights (batch-norm statistics
    included) and losses within the float tolerance."""
    a, b = on_ranks(tmp_path, sync_bn=True)
    one = run()
    _same_on_both(a, b)
    assert _worst(a, one) < TOLERANCE
    for r2, r1 in zip(a["rows"], one["rows"], strict=True):
        assert r2["stage"] == r1["stage"] and abs(r2["loss"] - r1["loss"]) < TOLERANCE


def test_progressive_shrinking_on_two_ranks_agrees_per_shard_bn(tmp_path) -> None:
    """OFA's progressive shrinking (kernel, depth, width phases) on 2 ranks normalising by
    their own shards: the same sub-networks and weights on both after every step; their
    averaged batch-norm statistics set them apart from one process (what ``sync_bn`` fixes)."""
    a, b = on_ranks(tmp_path, coupling="ofa")
    _same_on_both(a, b)
    assert [r["stage"] for r in a["rows"]][:3] == ["full", "kernel", "depth-1"]
    assert _worst(a, run(coupling="ofa")) > TOLERANCE


def _net() -> OFAMobileNetV3:
    """Returns the tiny network with weights drawn wide enough that its sub-networks score
    differently (an initialised one predicts one class whatever the sub-network)."""
    torch.manual_seed(0)
    net = OFAMobileNetV3(tiny_spec("compofa"))
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() > 1:  # filters and the classifier's matrix; biases stay 0
                p.normal_(0.0, 1.0)
    return net


def _measure(rank: int, folder: str, world: int) -> tuple[list, list]:
    """Returns :func:`measure_pairs` of :func:`_net` on rank ``rank`` of ``world``."""
    ranks = join_group(rank, world, file_rendezvous(folder), timeout_s=120)
    torch.set_num_threads(1)
    x, y = data()
    return measure_pairs(_net(), (x, y), x[:16], n_pairs=6, seed=2, ranks=ranks)


def test_the_predictor_accuracy_set_split_across_ranks_is_one_process(tmp_path) -> None:
    """The predictor's sub-networks measured split across 2 ranks: every rank gets all of
    them, in order, with the accuracies one process measures."""
    tmp_path.mkdir(exist_ok=True)
    with LocalGroup(2, _measure, (str(tmp_path), 2), folder=tmp_path, what="rank",
                    timeout_s=300) as group:  # fmt: skip
        (archs0, accs0), (archs1, accs1) = group.results(weights_only=False)
    x, y = data()
    archs, accs = measure_pairs(_net(), (x, y), x[:16], n_pairs=6, seed=2)
    assert archs0 == archs1 == archs and accs0 == accs1 == accs
    assert len(set(map(str, archs))) == 6 and len(set(accs)) > 2  # the order is tested
