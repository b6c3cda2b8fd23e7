"""How single-path searches choose (nasforge/oneshot/selection.py): accuracy, loss and the
hybrid of supernet loss and a zero-cost proxy, in SPOS's and few-shot's evolution and ENAS's
pick."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.oneshot import config_for, search, supernet
from nasforge.oneshot.fewshot import evolve_fewshot, split_supernet
from nasforge.oneshot.selection import Selection, evolve, pick, share_below
from nasforge.proxies import score_arch

from ._spaces import ToySpace


def _data(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _net() -> tuple[ToySpace, nf.oneshot.Supernet]:
    torch.manual_seed(0)
    space = ToySpace()
    return space, supernet(space, "spos", example=_data()[0][:2])


def test_share_below_counts_strictly_smaller_values() -> None:
    assert share_below(2.0, [1.0, 2.0, 3.0, 0.5]) == 0.5
    assert share_below(0.0, []) == 0.0


@pytest.mark.parametrize("how", ["accuracy", "loss", "hybrid"])
def test_each_selection_compares_what_it_names(how: str) -> None:
    """accuracy and loss are the inherited figures; the hybrid is the mean of the shares of the
    seeded reference that the candidate beats by supernet loss and by the proxy, recomputed here
    from those figures."""
    space, net = _net()
    data = _data()
    cfg = config_for("spos", batch_size=16, bn_batches=2, selection=how, selection_reference=6)
    sel = Selection(space, lambda a: net, data, data, cfg)
    for seed in range(3):
        arch = space.search_space().sample(seed)
        acc, loss = sel.inherited(arch)
        if how == "accuracy":
            assert sel.value(arch) == acc
        elif how == "loss":
            assert sel.value(arch) == -loss
        else:
            ref_loss, ref_proxy = sel.reference()
            assert len(ref_loss) == len(ref_proxy) == 6
            syn = score_arch(space, arch, "synflow", data[0][:16], data[1][:16], cfg.seed)
            expected = (share_below(-loss, ref_loss) + share_below(syn, ref_proxy)) / 2
            assert sel.value(arch) == expected and 0.0 <= expected <= 1.0


def test_evolution_picks_the_best_value_and_records_accuracies() -> None:
    """The pick is the scored architecture of the highest value; the history holds each scored
    architecture once with its inherited validation accuracy; rejected ones are not scored."""
    space, net = _net()
    data = _data()
    cfg = config_for("spos", population=4, cycles=12, sample_size=2, batch_size=16,
                     bn_batches=1, selection="loss")  # fmt: skip
    sel = Selection(space, lambda a: net, data, data, cfg)
    best, history = evolve(sel, cfg, allowed=lambda a: a["e1"] == "conv1")
    assert history and all(a["e1"] == "conv1" for a, _ in history)
    assert len({nf.arch_id(a) for a, _ in history}) == len(history)
    assert all(acc == sel.inherited(a)[0] for a, acc in history)
    assert nf.arch_id(best) == nf.arch_id(max((a for a, _ in history), key=sel.value))


def test_few_shot_evolution_scores_each_architecture_in_its_own_sub_supernet() -> None:
    """A sub-supernet's weights change only its own architectures' scores."""
    space, net = _net()
    data = _data()
    few = split_supernet(net, ["e1"])
    cfg = config_for("spos", population=3, cycles=6, sample_size=2, batch_size=16,
                     bn_batches=1, selection="accuracy")  # fmt: skip
    before = dict((nf.arch_id(a), acc) for a, acc in evolve_fewshot(few, data, data, cfg)[1])
    with torch.no_grad():
        for p in few.subnets[("conv3",)].parameters():
            p.zero_()
    after = evolve_fewshot(few, data, data, cfg)[1]
    kept = [(a, acc) for a, acc in after if a["e1"] == "conv1" and nf.arch_id(a) in before]
    assert kept and all(before[nf.arch_id(a)] == acc for a, acc in kept)


def test_pick_takes_distinct_candidates_and_the_first_of_equals() -> None:
    space, net = _net()
    data = _data()
    cfg = config_for("enas", batch_size=16, bn_batches=1, selection="accuracy")
    sel = Selection(space, lambda a: net, data, data, cfg)
    archs = [space.search_space().sample(s) for s in (0, 1, 0, 2)]
    best, history = pick(sel, archs)
    assert len(history) == len({nf.arch_id(a) for a in archs})
    top = max(sel.value(a) for a, _ in history)
    assert best == next(a for a, _ in history if sel.value(a) == top)


class Tokens(nf.ModelSpace):
    """Takes token ids: SynFlow's all-ones float input cannot run it."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.op = nf.LayerChoice({"a": lambda: nn.Linear(8, 8), "b": nn.Identity}, label="op")
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.op(self.emb(x)).mean(1))


@pytest.mark.parametrize("algorithm", ["spos", "enas"])
def test_a_hybrid_selection_that_cannot_score_the_space_fails_before_training(
    algorithm: str,
) -> None:
    """The proxy is tried on the default architecture when the search starts, and the error
    names the setting that avoids it; selection: loss runs the same space."""
    x = torch.randint(0, 10, (32, 5))
    data = (x, (x[:, 0] > 4).long())
    with pytest.raises(ConfigError, match="selection: loss"):
        search(Tokens(), algorithm, data, epochs=1, batch_size=8, progress="off")
    small = {"spos": {"cycles": 2, "population": 2}, "enas": {"final_samples": 2}}[algorithm]
    res = search(Tokens(), algorithm, data, epochs=1, batch_size=8, progress="off",
                 selection="loss", **small)  # fmt: skip
    assert res.arch["op"] in ("a", "b")


def test_bad_selection_settings_are_refused() -> None:
    for bad, match in (({"selection": "best"}, "selection must be one of"),
                       ({"selection_proxy": "nope"}, "unknown proxy"),
                       ({"selection_reference": 0}, "selection_reference")):  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            config_for("spos", **bad).check()


def test_a_constrained_evolution_spends_every_cycle_within_the_constraint() -> None:
    """Rejected asks are not cycles: all ``cycles`` asks that count are allowed ones; a
    constraint nothing meets is an error, not a default architecture."""
    space, net = _net()
    data = _data()
    cfg = config_for("spos", population=3, cycles=5, sample_size=2, batch_size=16,
                     bn_batches=1, selection="accuracy")  # fmt: skip
    sel = Selection(space, lambda a: net, data, data, cfg)
    asked: list[dict] = []

    def allowed(arch: dict) -> bool:
        asked.append(arch)
        return arch["e0"] == "pool" and arch["e1"] == "conv1"

    best, history = evolve(sel, cfg, allowed)
    assert best["e0"] == "pool" and best["e1"] == "conv1"
    assert history and all(a["e0"] == "pool" and a["e1"] == "conv1" for a, _ in history)
    assert len(asked) > cfg.algo.cycles  # rejected asks did not use up the cycles
    with pytest.raises(ConfigError, match="rejected all"):
        evolve(sel, cfg, lambda a: False)
