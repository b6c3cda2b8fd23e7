"""The pipeline's supernet: a chain of m choice blocks with n candidate layers each, written as
an ``nf.ModelSpace`` (one ``LayerChoice`` per block), and the views the runtime needs of it.

A subnet is one candidate index per block (NASPipe §3); the pipeline runs block b's chosen
candidate after block b-1's. Any ``ModelSpace`` whose only decisions are ``LayerChoice`` blocks
applied in declaration order and which holds no parameters outside them can be trained; a
parameter outside every block would be shared by all subnets and serialise the pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.parallel.csp import Layer, Subnet

__all__ = [
    "ChoiceSupernet",
    "choice_blocks",
    "block_label",
    "layer_table",
    "n_candidates",
    "arch_to_subnet",
]

#: Candidate kinds of the built-in supernet, by index modulo the table length.
_ACTIVATIONS: list[type[nn.Module]] = [nn.ReLU, nn.Tanh, nn.GELU, nn.Identity, nn.SiLU]


class _Residual(nn.Sequential):
    """Returns ``x + alpha * act(Linear(x))``; ``alpha`` starts at 0 (ReZero, Bachlechner et
    al. 2020), so a fresh candidate is the identity.

    Why: a chain of plain ``Linear -> activation`` layers with PyTorch's default init shrinks
    the signal per layer (weight variance 1/(3 fan_in), halved again by ReLU-like
    activations), so on a deep chain the logits do not depend on the input and the loss stays
    at ln 10 (docs/naspipe.md has the figures). With the residual path a deep chain starts as
    block 0 followed by the head, and each middle block adds to it as its ``alpha`` grows.
    """

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__(*layers)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.alpha * super().forward(x)


class _InputNormalised(nn.Sequential):
    """Returns ``act(Linear(layer_norm(x)))``: each sample's features scaled to zero mean and
    unit variance (no parameters) before the first block's layer.

    Why: raw digit pixels (``/ 16``) share a large common component, and a caller may not
    standardise them (the pipeline runner feeds ``[0, 1]`` pixels); normalised, the 8-block
    example learns faster in its first steps and ends where it did (docs/naspipe.md has the
    figures).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.layer_norm(x, x.shape[-1:]))


def _candidate(d_in: int, d_out: int, act: type[nn.Module] | None, first: bool) -> nn.Module:
    if act is None:
        return _InputNormalised(nn.Linear(d_in, d_out)) if first else nn.Linear(d_in, d_out)
    if first:
        return _InputNormalised(nn.Linear(d_in, d_out), act())
    if d_in == d_out:
        return _Residual(nn.Linear(d_in, d_out), act())
    return nn.Sequential(nn.Linear(d_in, d_out), act())


class ChoiceSupernet(nf.ModelSpace):
    """Returns a space of ``n_blocks`` choice blocks x ``n_candidates`` candidate layers.

    Block 0 maps ``d_in`` to ``hidden``, the middle blocks keep ``hidden``, the last maps to
    ``n_classes``. Candidate c of a block is a Linear followed by the activation
    ``_ACTIVATIONS[c % 5]`` (the last block's candidates have no activation and differ by
    initialisation). A middle block's candidate is residual, ``x + alpha * act(Linear(x))``
    with a learned scalar ``alpha`` that starts at 0, so a deep chain trains (a plain chain of
    8 blocks stays at chance loss). Block 0's candidates first normalise each sample's
    features (``layer_norm``, no parameters). ``candidate[0]`` is the Linear in every case.
    Labels are ``block0`` .. ``block{m-1}``. Inputs train best standardised per feature, as
    :func:`nasforge.parallel.config.digits` gives them.

    Invariants:
        * A freshly built middle candidate is the identity map (``alpha == 0``).

    Raises:
        ConfigError: fewer than 2 blocks or 1 candidate, or a non-positive width.
    """

    def __init__(
        self,
        n_blocks: int = 4,
        n_candidates: int = 3,
        d_in: int = 64,
        hidden: int = 32,
        n_classes: int = 10,
    ) -> None:
        super().__init__()
        if n_blocks < 2 or n_candidates < 1 or min(d_in, hidden, n_classes) < 1:
            raise ConfigError(
                f"ChoiceSupernet needs n_blocks >= 2, n_candidates >= 1 and positive widths, got "
                f"n_blocks={n_blocks}, n_candidates={n_candidates}, d_in={d_in}, "
                f"hidden={hidden}, n_classes={n_classes}"
            )
        blocks = []
        for b in range(n_blocks):
            i = d_in if b == 0 else hidden
            o = n_classes if b == n_blocks - 1 else hidden
            last = b == n_blocks - 1
            cands = [
                _candidate(i, o, None if last else _ACTIVATIONS[c % len(_ACTIVATIONS)], b == 0)
                for c in range(n_candidates)
            ]
            blocks.append(nf.LayerChoice(cands, label=f"block{b}"))
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen subnet (or a one-shot supernet) for ``x``, flattened
        to ``(N, d_in)`` first (8x8 digits become 64 features)."""
        x = x.flatten(1)
        for block in self.blocks:
            x = block(x)
        return x


def choice_blocks(space: nn.Module) -> list[nf.LayerChoice]:
    """Returns the space's ``LayerChoice`` blocks in declaration (= execution) order.

    Raises:
        ConfigError: the space has a decision that is not a LayerChoice, no blocks, or
            parameters outside every block.
    """
    if not isinstance(space, nf.ModelSpace):
        raise ConfigError(
            f"pipeline training needs an nf.ModelSpace of LayerChoice blocks, got "
            f"{type(space).__name__}"
        )
    ss = space.search_space()
    bad = [d.label for d in ss.decisions if d.kind != "layer"]
    if bad:
        raise ConfigError(
            f"pipeline training supports chains of LayerChoice blocks only; decisions {bad} are "
            "not LayerChoices: fix them or train the space with a one-shot strategy"
        )
    blocks = [m for m in space.modules() if isinstance(m, nf.LayerChoice)]
    if not blocks:
        raise ConfigError("the space has no LayerChoice blocks to pipeline")
    inside = {id(p) for b in blocks for p in b.parameters()}
    outside = [n for n, p in space.named_parameters() if id(p) not in inside]
    if outside:
        raise ConfigError(
            f"parameters {outside[:3]} lie outside every LayerChoice; every subnet would share "
            "them and serialise the pipeline: move them into the blocks' candidates"
        )
    return blocks


def block_label(block: nf.LayerChoice) -> str:
    """Returns the label of a block of a built space (the key of its choice in an arch dict)."""
    assert block.label is not None, "a built space has labelled every LayerChoice"
    return block.label


def n_candidates(space: nn.Module) -> list[int]:
    """Returns the number of candidates of each block."""
    return [len(b.names) for b in choice_blocks(space)]


def layer_table(space: nn.Module) -> dict[Layer, nn.Module]:
    """Returns every candidate module keyed by ``(block, candidate index)``."""
    return {
        (b, c): m
        for b, blk in enumerate(choice_blocks(space))
        for c, m in enumerate(blk.candidates())
    }


def arch_to_subnet(space: nf.ModelSpace, arch: Mapping[str, Any]) -> Subnet:
    """Returns the subnet (candidate index per block) of an architecture dict of the space."""
    blocks = choice_blocks(space)
    arch = space.search_space().validate(arch)
    return tuple(blk.names.index(arch[block_label(blk)]) for blk in blocks)


def run_layers(modules: Sequence[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """Returns ``x`` passed through ``modules`` in order."""
    for m in modules:
        x = m(x)
    return x
