"""Operator batching: a frozen prefix found from the freeze record, run once, and each merged
model trained exactly as alone."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.engine.crossmodel.opbatch import MergedModels, MergeError, describe, find_prefix
from nasforge.engine.crossmodel.policy import ChildRecord, shared_prefix


class Adapters(nf.ModelSpace):
    """A frozen conv backbone, a searched adapter (width, activation), a linear head."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(7)  # "pre-trained": the same weights in every model
        self.backbone = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            for p in self.backbone.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
        self.backbone.requires_grad_(False)
        w = nf.choice((8, 16), label="width")
        self.adapter = nn.Sequential(
            nn.Linear(4 * 6 * 6, w),
            nf.LayerChoice({"relu": nn.ReLU(), "tanh": nn.Tanh()}, label="act"),
        )
        self.head = nn.Linear(w, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.adapter(self.backbone(x)))


def _models(n: int) -> list[nn.Module]:
    space = Adapters()
    archs = [{"width": (8, 16)[i % 2], "act": ("relu", "tanh")[i // 2 % 2]} for i in range(n)]
    out = []
    for i, a in enumerate(archs):
        torch.manual_seed(i)
        out.append(nf.freeze(space, a))
    return out


@pytest.mark.parametrize("mode", ["vmap", "loop"])
def test_merged_training_equals_training_alone(mode: str) -> None:
    """After 5 Adam steps every model's weights, losses and accuracy equal training it alone."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 1, 8, 8, generator=g), torch.randint(3, (40,), generator=g)
    models = _models(6)
    alone = [copy.deepcopy(m) for m in models]
    merged = MergedModels(
        models, lambda ps: torch.optim.Adam(ps, lr=0.01), example=x[:4], mode=mode
    )
    assert merged.k == 1 and len(merged.groups) == 4
    merged_losses = [merged.step(x[i : i + 8], y[i : i + 8]) for i in range(0, 40, 8)]
    for j, m in enumerate(alone):
        opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=0.01)
        for step, i in enumerate(range(0, 40, 8)):
            loss = nn.functional.cross_entropy(m(x[i : i + 8]), y[i : i + 8])
            opt.zero_grad()
            loss.backward()
            opt.step()
            assert merged_losses[step][j] == pytest.approx(loss.item(), rel=1e-5, abs=1e-6)
    accs = merged.accuracy(x, y)
    for j, (a, b) in enumerate(zip(merged.unstack(), alone)):
        for (n, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=f"model {j} {n}")
        with torch.no_grad():
            assert accs[j] == int((b(x).argmax(1) == y).sum()) / len(y)


def test_gradients_equal_training_alone() -> None:
    """The stacked gradient of each model equals its own gradient on the batch."""
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 1, 8, 8, generator=g), torch.randint(3, (16,), generator=g)
    models = _models(8)  # 4 structures, 2 models each
    grads = []
    for m in models:
        loss = nn.functional.cross_entropy(m(x), y)
        grads.append(torch.autograd.grad(loss, [p for p in m.parameters() if p.requires_grad]))
    merged = MergedModels(models, lambda ps: torch.optim.SGD(ps, lr=0.0), example=x)
    merged.step(x, y)
    assert all(grp.stacked for grp in merged.groups)
    for grp in merged.groups:
        stacked = [p.grad for p in grp.parameters()]
        for j, i in enumerate(grp.index):
            for gs, ga in zip(stacked, grads[i]):
                torch.testing.assert_close(gs[j], ga, rtol=1e-5, atol=1e-7)


def test_prefix_comes_from_the_freeze_record() -> None:
    """The frozen backbone is the prefix; unfreezing it, or changing its weights, removes it."""
    models = _models(2)
    assert find_prefix(models) == 1
    assert [r.frozen for r in describe(models[0])] == [True, False, False]
    models[1].backbone.requires_grad_(True)
    assert find_prefix(models) == 0
    models = _models(2)
    with torch.no_grad():
        models[1].backbone[0].bias.add_(1.0)
    assert find_prefix(models) == 0


def test_a_forward_that_is_not_sequential_is_refused() -> None:
    """A model whose forward reorders its modules cannot be split: MergeError."""
    models = _models(2)
    for m in models:
        m.forward = lambda x, m=m: m.head(torch.relu(m.adapter(m.backbone(x))) * 2)
    with pytest.raises(MergeError, match="top-level modules in order"):
        MergedModels(
            models, lambda ps: torch.optim.SGD(ps, lr=0.1), example=torch.randn(2, 1, 8, 8)
        )


def test_shared_prefix_rules() -> None:
    """Pure rule: a stateful, trainable or differing module ends the prefix."""
    a = ChildRecord("b", True, False, "x")
    assert shared_prefix([[a, a], [a, a]]) == 2
    assert shared_prefix([[a]]) == 0
    assert shared_prefix([[a, a], [a, ChildRecord("b", True, True, "x")]]) == 1
    assert shared_prefix([[ChildRecord("b", False, False, "x")], [a]]) == 0
    assert shared_prefix([[a], [ChildRecord("b", True, False, "x", (("w", "1"),))]]) == 0
