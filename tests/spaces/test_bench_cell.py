"""The benchmark cell space: its decisions, and that its architectures really differ."""

import torch

import nasforge as nf
from nasforge.spaces.bench_cell import BENCH_OPS, BenchCellSpace


def test_six_edges_of_four_ops_and_the_all_none_cell_ignores_its_input() -> None:
    """4^6 architectures; all-none gives one output for every input, all-conv does not."""
    space = BenchCellSpace(channels=4, n_cells=2)
    search = space.search_space()
    assert search.size == 4**6
    assert [d.values for d in search.decisions] == [BENCH_OPS] * 6
    x = torch.randn(3, 1, 12, 12)
    none = nf.freeze(space, dict.fromkeys([d.label for d in search.decisions], "none")).eval()
    conv = nf.freeze(space, dict.fromkeys([d.label for d in search.decisions], "conv")).eval()
    assert torch.allclose(none(x)[0], none(x)[1])
    assert not torch.allclose(conv(x)[0], conv(x)[1])
    assert conv(x).shape == (3, 10)


def test_the_1d_twin_has_nas_bench_201s_five_ops_and_takes_sequences() -> None:
    """dims=1 with NB201_OPS: 5^6 architectures over 1-D convolutions; a bad dims is refused."""
    import pytest

    from nasforge.errors import ConfigError
    from nasforge.spaces.bench_cell import NB201_OPS

    space = BenchCellSpace(channels=4, dims=1, ops=NB201_OPS)
    search = space.search_space()
    assert search.size == 5**6
    assert [d.values for d in search.decisions] == [NB201_OPS] * 6
    labels = [d.label for d in search.decisions]
    net = nf.freeze(space, dict.fromkeys(labels, "conv1x1")).eval()
    assert net(torch.randn(3, 1, 40)).shape == (3, 10)
    assert not any(isinstance(m, torch.nn.Conv2d) for m in net.modules())
    with pytest.raises(ConfigError, match="dims"):
        BenchCellSpace(dims=3)
    with pytest.raises(ConfigError, match="ops"):
        BenchCellSpace(ops=("none", "conv5x5"))
