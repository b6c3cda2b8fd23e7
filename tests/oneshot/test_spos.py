"""SPOS: single-path activation, batch-norm recalibration, the evolution loop."""

from __future__ import annotations

import torch

import nasforge as nf
from nasforge.oneshot import activate, config_for, recalibrate_bn, supernet
from nasforge.oneshot.spos import SposLayer, evolve
from nasforge.strategy import RegularizedEvolution

from ._spaces import ToySpace, tiny_cell_space


def test_single_path_runs_only_sampled_ops() -> None:
    """Only the sampled candidate of each chosen edge runs; unchosen edges run nothing."""
    space = tiny_cell_space()
    x = torch.randn(4, 1, 8, 8)
    net = supernet(space, "spos", example=x[:2])
    arch = space.search_space().sample(3)
    activate(net, arch)
    ran: list[int] = []
    for m in net.mixed():
        if isinstance(m, SposLayer):
            for c in m.candidates():
                c.register_forward_hook(lambda mod, i, o: ran.append(id(mod)))
    net(x)
    expected = {
        id(m.candidates()[m.chosen])
        for m in net.mixed()
        if isinstance(m, SposLayer) and not m._nf_skip
    }
    assert set(ran) == expected and len(ran) == len(expected)
    assert len(expected) == 3 * 2 * 2  # 3 cells x 2 nodes x 2 chosen inputs


def test_recalibrate_bn_resets_statistics() -> None:
    """Recalibration replaces running statistics by estimates from the given batches."""
    space = ToySpace()
    x = torch.randn(16, 1, 8, 8) * 3 + 1
    net = supernet(space, "spos", example=x[:2])
    activate(net, space.search_space().sample(0))
    bn = net.model.blocks._modules["0"].bn
    recalibrate_bn(net, (x, torch.zeros(16, dtype=torch.long)), 8, 2, seed=0)
    first = bn.running_mean.clone()
    assert not torch.equal(first, torch.zeros_like(first))
    recalibrate_bn(net, (x, torch.zeros(16, dtype=torch.long)), 8, 2, seed=0)
    torch.testing.assert_close(bn.running_mean, first)  # reset, not accumulated


def test_evolve_uses_the_engines_evolution_and_is_seeded() -> None:
    """SPOS's evolution asks the engine's RegularizedEvolution: seeded, valid, scored once."""
    space = ToySpace()
    ss = space.search_space()
    x = torch.randn(16, 1, 8, 8)
    data = (x, torch.randint(0, 3, (16,)))
    net = supernet(space, "spos", example=x[:2])
    runs = []
    for _ in range(2):
        cfg = config_for("spos", population=3, cycles=8, sample_size=5, batch_size=8,
                         bn_batches=1, seed=7, selection="accuracy")  # fmt: skip
        best, score, history = evolve(net, data, data, cfg)
        assert ss.validate(best) == best and 0.0 <= score <= 1.0
        assert len({nf.arch_id(a) for a, _ in history}) == len(history) <= 8
        runs.append((best, score, history))
    assert runs[0] == runs[1]
    strategy = RegularizedEvolution(3, 3, seed=7)
    strategy.setup(ss)
    first = strategy.ask()
    assert history[0][0] == first  # the same ask sequence as the engine's strategy


def test_spos_supernet_and_the_engines_single_path_are_one_supernet() -> None:
    """SPOS's supernet and ``weightsharing.SinglePath`` hold the same weights under the same
    keys and, given them, compute the same output for every sampled architecture (also a
    node's skipped edges change nothing); ``spos.activate`` and ``SinglePath.activate`` are
    one walk."""
    from nasforge.weightsharing import SinglePath, follow_path

    torch.manual_seed(0)
    space = tiny_cell_space()
    x = torch.randn(3, 1, 8, 8)
    net = supernet(space, "spos", example=x[:2]).eval()
    single = SinglePath(space).eval()
    assert set(single.model.state_dict()) == set(net.model.state_dict())
    single.model.load_state_dict(net.model.state_dict())
    for seed in range(4):
        arch = space.search_space().sample(seed)
        activate(net, arch)
        single.activate(arch)
        torch.testing.assert_close(single(x), net(x), rtol=0, atol=0)
    default = space.search_space().default()
    follow_path(net.model, default)  # the walk spos.activate takes, skipped edges included
    single.activate(default)
    torch.testing.assert_close(single(x), net(x), rtol=0, atol=0)
