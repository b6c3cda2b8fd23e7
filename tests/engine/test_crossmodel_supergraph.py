"""Super-graph weight sharing: the three places for shared weights compute the same search."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.engine.crossmodel.supergraph import SharedWeightsEvaluator, path_map
from nasforge.errors import ConfigError


class TinySpos(nf.ModelSpace):
    """A two-choice SPOS space on 1x12x12 images."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nf.Repeat(
            lambda i: nf.LayerChoice(
                {
                    "c3": nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)),
                    "c5": nn.Sequential(nn.Conv2d(8, 8, 5, padding=2), nn.BatchNorm2d(8)),
                }
            ),
            (1, 2),
        )
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.blocks(self.stem(x))).mean((2, 3)))


def _data() -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(200, 1, 12, 12, generator=g)
    y = torch.randint(10, (200,), generator=g)
    return (x[:150], y[:150]), (x[150:], y[150:])


def _search(space: TinySpos, ev: SharedWeightsEvaluator, n: int = 6) -> list[dict[str, float]]:
    rng = __import__("random").Random(0)
    archs = [space.search_space().sample(rng) for _ in range(n)]
    return [ev.evaluate(space, a, lambda *_: None) for a in archs]


@pytest.mark.parametrize("mode", ["dict", "file"])
def test_checkpoint_modes_equal_supergraph(tmp_path, mode: str) -> None:
    """A search with checkpointed weights gives the super-graph's metrics and final weights."""
    space = TinySpos()
    train, val = _data()
    sg = SharedWeightsEvaluator(train, val, batches_per_trial=2, sharing="supergraph")
    ck = SharedWeightsEvaluator(
        train, val, batches_per_trial=2, sharing=mode, path=tmp_path / "w.pt"
    )
    a, b = _search(space, sg), _search(space, ck)
    for x, y in zip(a, b):
        assert x["accuracy"] == y["accuracy"]
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-6, abs=1e-7)
    sa, sb = sg.state(space), ck.state(space)
    assert sa["step"] == sb["step"] == 12
    for k, v in sa["weights"].items():
        torch.testing.assert_close(v, sb["weights"][k], rtol=1e-5, atol=1e-6)
    assert sorted(sa["momentum"]) == sorted(sb["momentum"])


def test_switch_mid_search_keeps_the_search(tmp_path) -> None:
    """Moving the state file -> supergraph -> dict halfway gives the same metrics."""
    space = TinySpos()
    train, val = _data()
    ref = _search(space, SharedWeightsEvaluator(train, val, sharing="supergraph"), 6)
    ev = SharedWeightsEvaluator(train, val, sharing="file", path=tmp_path / "w.pt")
    got = _search(space, ev, 2)
    ev.switch(space, "supergraph")
    rng = __import__("random").Random(0)
    archs = [space.search_space().sample(rng) for _ in range(6)]
    got += [ev.evaluate(space, a, lambda *_: None) for a in archs[2:4]]
    ev.switch(space, "dict")
    got += [ev.evaluate(space, a, lambda *_: None) for a in archs[4:]]
    assert [m["accuracy"] for m in got] == [m["accuracy"] for m in ref]


def test_path_map_follows_the_chosen_candidates() -> None:
    """Every frozen key maps to the space key of its chosen candidate."""
    space = TinySpos()
    arch = {"blocks": 2, "blocks.0": "c5", "blocks.1": "c3"}
    keys = path_map(space, nf.freeze(space, arch), arch)
    assert keys["blocks.0.0.weight"] == "blocks.0.c5.0.weight"
    assert keys["blocks.1.1.running_mean"] == "blocks.1.c3.1.running_mean"
    assert set(keys.values()) <= set(space.state_dict())


def test_unknown_mode_is_a_config_error() -> None:
    """An unknown sharing mode names the accepted ones."""
    with pytest.raises(ConfigError, match="supergraph"):
        SharedWeightsEvaluator(_data()[0], sharing="disk")


class _Widths(nf.ModelSpace):
    """A space whose width decision changes shapes: no one super-graph holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, nf.choice((2, 3), label="w"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_a_space_with_shape_changing_value_choices_has_no_supergraph() -> None:
    """SinglePath refuses a width decision with a SpaceError naming it."""
    from nasforge.errors import SpaceError
    from nasforge.weightsharing import SinglePath

    with pytest.raises(SpaceError, match=r"\['w'\]"):
        SinglePath(_Widths())
