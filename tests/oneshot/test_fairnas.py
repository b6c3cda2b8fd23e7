"""FairNAS: one step trains every candidate of every decision once (strict fairness), where
SPOS's step trains one path; the search runs, resumes and scores as SPOS's does."""

from __future__ import annotations

import random
from types import SimpleNamespace

import torch
from torch import nn

import nasforge as nf
from nasforge.oneshot import search, supernet
from nasforge.oneshot.algorithms import config_for, get_algorithm


class ChainSpace(nf.ModelSpace):
    """Returns a chain of two layer choices of 3 and 2 linear candidates (every candidate has
    weights of its own, so a trained one is seen in its weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.a = nf.LayerChoice({f"a{i}": lambda: nn.Linear(8, 8) for i in range(3)}, label="a")
        self.b = nf.LayerChoice({f"b{i}": lambda: nn.Linear(8, 8) for i in range(2)}, label="b")
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.b(torch.relu(self.a(torch.relu(self.stem(x)))))))


def _trained_candidates(algorithm: str) -> set[str]:
    """Returns the candidates whose weights one step of ``algorithm`` changed."""
    torch.manual_seed(0)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    net = supernet(ChainSpace(), algorithm, x[:2])
    before = {k: v.clone() for k, v in net.state_dict().items()}
    state = SimpleNamespace(rng=random.Random(0), opt_w=torch.optim.SGD(net.weights(), lr=0.1))
    get_algorithm(algorithm).step(net, state, (x, y), None, config_for(algorithm))
    after = net.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    return {k.split(".")[-2] for k in changed if k.split(".")[-2][:1] in "ab"}


def test_one_step_trains_every_candidate_once_where_spos_trains_one_path() -> None:
    """After one FairNAS step every candidate of both choices has moved; after one SPOS step
    only one of each has."""
    assert _trained_candidates("fairnas") == {"a0", "a1", "a2", "b0", "b1"}
    assert len(_trained_candidates("spos")) == 2


def test_the_search_picks_a_valid_architecture_and_is_seeded() -> None:
    """A FairNAS search on a small problem returns an architecture of the space, scored by
    SPOS's evolution, and the same seed gives the same pick and scores."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(96, 6, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    runs = [
        search(
            ChainSpace(),
            "fairnas",
            (x, y),
            epochs=2,
            batch_size=32,
            seed=4,
            threads=1,
            progress="off",
            population=4,
            cycles=6,
            selection="accuracy",
        )  # fmt: skip
        for _ in range(2)
    ]
    arch = runs[0].arch
    assert set(arch) == {"a", "b"} and arch == runs[1].arch
    assert runs[0].evaluated == runs[1].evaluated
    assert nf.freeze(ChainSpace(), arch)(x[:2]).shape == (2, 3)
