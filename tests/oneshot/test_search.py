"""The one-line search API: every algorithm returns a freezable arch and per-epoch history."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.oneshot import search

from ._spaces import tiny_cell_space


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(48, 1, 8, 8, generator=g), torch.randint(0, 3, (48,), generator=g)


@pytest.mark.parametrize(
    "algo, settings",
    [
        ("darts", {}),
        ("nasb", {}),
        ("nasb", {"order": "alternate"}),
        ("spos", {"cycles": 4, "population": 2}),
    ],
)
def test_search_returns_freezable_arch(data: tuple, algo: str, settings: dict) -> None:
    """search() gives a valid arch, one history row per epoch with losses and the argmax arch."""
    space = tiny_cell_space()
    rows: list[dict] = []
    result = search(space, algo, data, epochs=2, batch_size=16, on_epoch=rows.append, **settings)
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all({"train_loss", "val_loss", "val_acc", "arch", "arch_id"} <= r.keys() for r in rows)
    if algo != "spos":
        assert rows[-1]["val_loss"] is not None
        # the architecture weights: a strength per candidate of each decision, argmax = arch
        weights = rows[-1]["arch_weights"]
        layer_labels = [k for k, v in result.arch.items() if isinstance(v, str)]
        assert layer_labels and set(layer_labels) <= weights.keys()
        if algo == "darts":
            assert all(abs(sum(w) - 1.0) < 1e-4 for w in weights.values())
    else:
        assert "arch_weights" not in rows[-1]  # SPOS learns no architecture parameters


def test_search_is_deterministic(data: tuple) -> None:
    """The same seed (and the same space weights) gives the same architecture and losses."""
    torch.manual_seed(1)
    a = search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, seed=3)
    torch.manual_seed(1)
    b = search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, seed=3)
    assert a.arch == b.arch and a.history[0]["train_loss"] == b.history[0]["train_loss"]


def test_search_rejects_bad_settings(data: tuple) -> None:
    """Unknown settings, bad orders and malformed data are ConfigErrors."""
    with pytest.raises(ConfigError, match="setting"):
        search(tiny_cell_space(), "darts", data, epochs=1, bogus=1)
    with pytest.raises(ConfigError, match="alternate"):
        search(tiny_cell_space(), "nasb", data, epochs=1, order="sideways")
    with pytest.raises(ConfigError, match="pair"):
        search(tiny_cell_space(), "darts", [1, 2, 3], epochs=1)


@pytest.mark.parametrize("algo", ["darts", "nasb", "spos"])
def test_search_with_repeat_depth_and_explicit_split(data: tuple, algo: str) -> None:
    """A space with a Repeat depth choice searches one-shot; a train/val dict is accepted."""
    from ._spaces import ToySpace

    space = ToySpace()
    split = {"train": (data[0][:32], data[1][:32]), "val": (data[0][32:], data[1][32:])}
    result = search(space, algo, split, epochs=1, batch_size=16, cycles=3, population=2)
    assert result.arch["depth"] in (1, 2, 3)
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)
