"""NAS-Bench-101's space: the benchmark's encoding, its validity rules, its cell arithmetic."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.errors import ArchitectureError
from nasforge.hub.nasbench101 import N_CELLS, N_ENCODINGS, NB101_OPS, is_valid, to_spec

from ._engine import multi_trial


@pytest.fixture(scope="module")
def space() -> nf.ModelSpace:
    return hub.space("nasbench101", channels=4, n_stacks=2, n_cells=1)


def _cell(edges: list[tuple[int, int]], ops: tuple[str, ...] = NB101_OPS[:1] * 5) -> dict:
    arch: dict = {f"e{i}_{j}": 0 for i in range(7) for j in range(i + 1, 7)}
    arch.update({f"e{i}_{j}": 1 for i, j in edges})
    arch.update({f"op{v}": op for v, op in enumerate(ops, 1)})
    return arch


def test_the_encoding_is_the_benchmarks(space: nf.ModelSpace) -> None:
    """21 edge bits and 5 three-way vertex labels: 2^21 * 3^5 encodings, the paper's count."""
    ss = space.search_space()
    assert ss.size == 2**21 * 3**5 == hub.space_info("nasbench101").size_paper
    assert [d.values for d in ss.decisions if d.label.startswith("op")] == [NB101_OPS] * 5


def test_both_sizes_are_exposed_the_encodings_and_the_distinct_cells(space: nf.ModelSpace):
    """The space's size is the 510M encodings; the 423,624 distinct cells are a named constant
    and the registry entry's ``size_distinct``, not only prose."""
    info = hub.space_info("nasbench101")
    assert space.search_space().size == N_ENCODINGS == info.size_paper == 509_607_936
    assert info.size_distinct == N_CELLS == 423_624
    assert all(hub.space_info(n).size_distinct is None for n in hub.spaces() if n != info.name)


def test_validity_and_pruning_follow_the_benchmark() -> None:
    """More than 9 edges or no input-output path is invalid; dangling vertices are pruned."""
    chain = [(0, 1), (1, 2), (2, 6)]
    matrix, ops = to_spec(_cell([*chain, (3, 4)]))  # 3 and 4 lie on no input-output path
    assert ops == ["input", NB101_OPS[0], NB101_OPS[0], "output"]
    assert matrix == [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]
    dense = [(i, j) for i in range(7) for j in range(i + 1, 7)][:10]
    assert not is_valid(_cell(dense)) and not is_valid(_cell([(0, 1), (2, 6)]))
    with pytest.raises(ArchitectureError, match="at most 9"):
        to_spec(_cell(dense))


def test_vertices_split_the_output_channels(space: nf.ModelSpace) -> None:
    """Two vertices feeding the output split its channels (concat), and the input's projection
    is added: the frozen cell runs and keeps the stack's width."""
    arch = _cell(
        [(0, 1), (0, 2), (1, 6), (2, 6), (0, 6)],
        ("conv3x3-bn-relu", "maxpool3x3") * 2 + ("conv1x1-bn-relu",),
    )
    model = nf.freeze(space, arch)
    cell = model.cells[0]
    assert cell.ch == [4, 2, 2, 4]
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 10)
    with pytest.raises(ArchitectureError, match="no path"):
        nf.freeze(space, _cell([(0, 1), (2, 6)]))


@pytest.mark.parametrize("strategy", ["random", "evolution"])
def test_a_multi_trial_search_runs(space: nf.ModelSpace, strategy: str, tmp_path) -> None:
    """A search trains the valid cells it samples and records the invalid ones as failed."""
    trials = multi_trial(space, strategy, tmp_path / strategy, n_trials=4)
    assert len(trials := list(trials.trials())) == 4
    assert all((t.status == "done") == is_valid(t.arch) for t in trials)
    assert any(t.status == "done" for t in trials)
