"""Canonical functions of the benchmark cell: dead ends dropped, identical functions collapsed."""

import random

import torch

from nasforge.oneshot import activate, supernet
from nasforge.spaces.bench_cell import BENCH_OPS, NB201_OPS, BenchCellSpace
from nasforge.spaces.cell_canon import (
    canonical_arch,
    competent,
    distinct_functions,
    function_key,
    live_param_ops,
)

LABELS = ["e1_0", "e2_0", "e2_1", "e3_0", "e3_1", "e3_2"]


def _arch(*ops: str) -> dict[str, str]:
    return dict(zip(LABELS, ops))


def test_dead_ends_are_dropped_and_counted_out() -> None:
    """A conv into a node that never reaches node 3, or out of a zero node, is not live."""
    # node 1 (conv) feeds nothing live: e2_1 and e3_1 are none, so e1_0 is a dead end
    a = _arch("conv", "skip_connect", "none", "none", "none", "conv1x1")
    assert canonical_arch(a) == _arch("none", "skip_connect", "none", "none", "none", "conv1x1")
    assert live_param_ops(a) == 1 and competent(a)
    # node 1 is zero (e1_0 none), so the conv out of it (e3_1) is dead: nothing parametric live
    b = _arch("none", "pool", "none", "skip_connect", "conv", "none")
    assert live_param_ops(b) == 0 and not competent(b)
    assert function_key(_arch(*["none"] * 6)) == "0"


def test_identical_functions_share_one_key() -> None:
    """Swapped intermediate nodes, skip-then-conv versus conv-then-skip, and a pool
    distributed over a sum give one key; a different op gives another."""
    swap1 = _arch("conv", "pool", "none", "none", "skip_connect", "skip_connect")
    swap2 = _arch("pool", "conv", "none", "none", "skip_connect", "skip_connect")
    assert function_key(swap1) == function_key(swap2)
    via_skip = _arch("skip_connect", "none", "conv", "none", "none", "skip_connect")
    direct = _arch("none", "conv", "none", "none", "none", "skip_connect")
    assert function_key(via_skip) == function_key(direct) == "conv(x)"
    pooled_sum = _arch("conv", "skip_connect", "skip_connect", "none", "none", "pool")
    sum_pooled = _arch("conv", "none", "none", "pool", "pool", "none")
    assert function_key(pooled_sum) == function_key(sum_pooled)
    assert function_key(direct) != function_key(_arch(*["none"] * 5, "conv1x1"))


def test_the_canonical_architecture_computes_the_same_output() -> None:
    """In one supernet (shared weights) every architecture and its canonical form give the
    same output, for 15 random architectures."""
    torch.manual_seed(0)
    x = torch.randn(4, 1, 16)
    net = supernet(BenchCellSpace(channels=4, dims=1, ops=NB201_OPS), "spos", example=x[:2])
    net.eval()
    rng = random.Random(0)
    for _ in range(15):
        arch = {label: rng.choice(NB201_OPS) for label in LABELS}
        activate(net, arch)
        full = net(x)
        activate(net, canonical_arch(arch))
        assert torch.allclose(full, net(x), atol=1e-6), arch


def test_distinct_functions_of_both_spaces() -> None:
    """Every architecture is counted once; each function's representative is canonical and
    unique; the degenerate functions are exactly those without a live parametric op."""
    funcs, counts = distinct_functions(BENCH_OPS)
    assert counts["architectures"] == 4**6
    assert counts["functions"] == len(funcs) == len({function_key(a) for a in funcs})
    assert all(canonical_arch(a) == a for a in funcs)
    assert counts["degenerate"] == sum(not competent(a) for a in funcs) > 0
    assert counts["competent"] + counts["degenerate"] == counts["functions"] < 4**6
    _, five = distinct_functions(NB201_OPS)
    assert five["architectures"] == 5**6 and five["functions"] > counts["functions"]
