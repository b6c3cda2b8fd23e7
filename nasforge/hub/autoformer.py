"""AutoFormer's vision-transformer spaces (Chen et al., ICCV 2021, Table 1) and its searched
AutoFormer-T, -S and -B.

A ViT on 16×16 patches (a class token, absolute position embeddings and, as AutoFormer
trains its networks, 2-D relative position embeddings for keys and values in every layer;
the class is read from the mean of the patch tokens). Decisions:

    embed_dim               the width of every layer (one choice for the network)
    depth                   the number of layers
    layers.{j}.mlp_ratio    the hidden width of layer j's MLP, as a multiple of embed_dim
    layers.{j}.heads        layer j's attention heads; each head has 64 dimensions, so the
                            query/key/value width is 64 × heads (AutoFormer's "Q-K-V dim")

The three supernets of Table 1 (and their published networks):

    ===========  ===============  ==========  =======  ========
    space        embed_dim        mlp_ratio   heads    depth
    ===========  ===============  ==========  =======  ========
    tiny         192, 216, 240    3, 3.5, 4   3, 4     12-14
    small        320, 384, 448    3, 3.5, 4   5, 6, 7  12-14
    base         528, 576, 624    3, 3.5, 4   8, 9, 10 14-16
    ===========  ===============  ==========  =======  ========

Every decision changes a shape, so the spaces search multi-trial (one-shot weight sharing for
them is AutoFormer's own weight entanglement, not a path sampler's mixed op).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.hub._registry import register_arch, register_space

__all__ = ["AutoFormerSpace", "AUTOFORMER_SPACES", "AUTOFORMER_ARCHS"]

_HEAD_DIM = 64
_MAX_REL = 14  # relative distances are clipped to ±14 patches


class RelativePosition2D(nn.Module):
    """Returns the ``N×N×d`` relative position embeddings of ``N = 1 + side²`` tokens: the sum of
    a learnt row-distance and a column-distance vector (distances clipped to ±``_MAX_REL``);
    index 0 of each table is reserved for pairs with the class token."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.rows = nn.Parameter(torch.randn(2 * _MAX_REL + 2, dim) * 0.02)
        self.cols = nn.Parameter(torch.randn(2 * _MAX_REL + 2, dim) * 0.02)

    def forward(self, n_tokens: int) -> torch.Tensor:
        side = math.isqrt(int(n_tokens) - 1)  # int(): a traced shape is a tensor
        pos = torch.arange(side * side, device=self.rows.device)
        r, c = pos // side, pos % side
        dr = (r[None, :] - r[:, None]).clamp(-_MAX_REL, _MAX_REL) + _MAX_REL + 1
        dc = (c[None, :] - c[:, None]).clamp(-_MAX_REL, _MAX_REL) + _MAX_REL + 1
        index_r = torch.nn.functional.pad(dr, (1, 0, 1, 0))  # class-token pairs -> index 0
        index_c = torch.nn.functional.pad(dc, (1, 0, 1, 0))
        return self.rows[index_r] + self.cols[index_c]


class _Attention(nn.Module):
    """Returns multi-head self-attention of ``x`` (B×N×embed) with ``heads`` heads of 64
    dimensions and relative position embeddings on keys and values."""

    def __init__(self, embed: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(embed, 3 * heads * _HEAD_DIM)
        self.proj = nn.Linear(heads * _HEAD_DIM, embed)
        self.rel_k = RelativePosition2D(_HEAD_DIM)
        self.rel_v = RelativePosition2D(_HEAD_DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, _HEAD_DIM).permute(2, 0, 3, 1, 4)
        q = q * _HEAD_DIM**-0.5  # q, k, v: B×h×N×64
        attn = q @ k.transpose(-2, -1) + torch.einsum("bhnd,nmd->bhnm", q, self.rel_k(n))
        attn = attn.softmax(-1)
        out = attn @ v + torch.einsum("bhnm,nmd->bhnd", attn, self.rel_v(n))
        return self.proj(out.transpose(1, 2).reshape(b, n, self.heads * _HEAD_DIM))


class _Layer(nn.Module):
    """Returns one pre-norm transformer layer: attention and MLP, each with its residual."""

    def __init__(self, j: int, embed: Any, mlp_ratios: Sequence[float], heads: Sequence[int]):
        super().__init__()
        ratio = nf.choice(list(mlp_ratios), label=f"layers.{j}.mlp_ratio")
        n_heads = nf.choice(list(heads), label=f"layers.{j}.heads")
        hidden = int(float(ratio) * int(embed))
        self.norm1 = nn.LayerNorm(int(embed))
        self.attn = _Attention(int(embed), int(n_heads))
        self.norm2 = nn.LayerNorm(int(embed))
        self.mlp = nn.Sequential(
            nn.Linear(int(embed), hidden), nn.GELU(), nn.Linear(hidden, int(embed))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


#: Table 1's supernets: embed dims, MLP ratios, heads, depths
AUTOFORMER_SPACES: dict[str, dict[str, tuple[Any, ...]]] = {
    "tiny": {"embed_dims": (192, 216, 240), "heads": (3, 4), "depths": (12, 13, 14)},
    "small": {"embed_dims": (320, 384, 448), "heads": (5, 6, 7), "depths": (12, 13, 14)},
    "base": {"embed_dims": (528, 576, 624), "heads": (8, 9, 10), "depths": (14, 15, 16)},
}


class AutoFormerSpace(nf.ModelSpace):
    """Returns an AutoFormer space: ``size`` names one of Table 1's supernets, or give the
    candidate lists yourself (tests use tiny ones: ``image_size=32, patch=8``).

    Invariants: decisions ``embed_dim``, ``depth``, then per layer (up to the largest depth)
    ``layers.{j}.mlp_ratio`` and ``layers.{j}.heads``.

    Raises:
        SpaceError: an unknown ``size``, or an image side not divisible by the patch side.
    """

    def __init__(
        self,
        size: str = "tiny",
        n_classes: int = 1000,
        image_size: int = 224,
        patch: int = 16,
        embed_dims: Sequence[int] | None = None,
        mlp_ratios: Sequence[float] = (3.0, 3.5, 4.0),
        heads: Sequence[int] | None = None,
        depths: Sequence[int] | None = None,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        if size not in AUTOFORMER_SPACES:
            raise SpaceError(
                f"AutoFormer size {size!r} is not one of {sorted(AUTOFORMER_SPACES)} (Table 1)"
            )
        if image_size % patch:
            raise SpaceError(
                f"image_size {image_size} is not a multiple of the patch side {patch}; "
                "pick sides whose ratio is an integer (224 and 16 in the paper)"
            )
        preset = AUTOFORMER_SPACES[size]
        embed = nf.choice(list(embed_dims or preset["embed_dims"]), label="embed_dim")
        depth = nf.choice(list(depths or preset["depths"]), label="depth")
        ratios, n_heads = tuple(mlp_ratios), tuple(heads or preset["heads"])
        n_patches = (image_size // patch) ** 2
        e = int(embed)
        self.patch_embed = nn.Conv2d(in_channels, e, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, e))
        self.pos_embed = nn.Parameter(torch.randn(1, n_patches + 1, e) * 0.02)
        self.layers = nf.Repeat(lambda j: _Layer(j, embed, ratios, n_heads), depth, "depth")
        self.norm = nn.LayerNorm(e)
        self.head = nn.Linear(e, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen network (a recorded space refuses forward)."""
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # B×N×embed
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), 1) + self.pos_embed
        x = self.norm(self.layers(x))
        return self.head(x[:, 1:].mean(1))


def _arch(embed: int, ratios: Sequence[float], heads: Sequence[int], n_layers: int) -> dict:
    """Returns a published network: the layers beyond its depth take the smallest values."""
    arch: dict[str, Any] = {"embed_dim": embed, "depth": len(ratios)}
    for j in range(n_layers):
        arch[f"layers.{j}.mlp_ratio"] = ratios[j] if j < len(ratios) else 3.0
        arch[f"layers.{j}.heads"] = heads[j] if j < len(heads) else min(heads)
    return arch


#: the searched networks (the reference implementation's retrain configurations)
AUTOFORMER_ARCHS: dict[str, dict[str, Any]] = {
    "tiny": _arch(
        192,
        (3.5, 3.5, 3.0, 3.5, 3.0, 3.0, 4.0, 4.0, 3.5, 4.0, 3.5, 4.0, 3.5),
        (3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 3, 3),
        14,
    ),
    "small": _arch(
        384,
        (3.0, 3.5, 3.0, 3.5, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.5, 4.0),
        (6, 6, 5, 7, 5, 5, 5, 6, 6, 7, 7, 6, 7),
        14,
    ),
    "base": _arch(
        576,
        (3.5, 3.5, 4.0, 3.5, 4.0, 3.5, 3.5, 3.0, 4.0, 4.0, 3.0, 4.0, 3.0, 3.5),
        (9, 9, 9, 9, 9, 10, 9, 9, 10, 9, 10, 9, 9, 10),
        16,
    ),
}

_PAPER = "Chen et al. 2021, AutoFormer (ICCV)"
_NUMBERS = {"tiny": (5.7e6, 1.3e9), "small": (22.9e6, 5.1e9), "base": (54e6, 11e9)}


def _builder(size: str) -> Any:
    def build(**kwargs: Any) -> AutoFormerSpace:
        return AutoFormerSpace(size, **kwargs)

    build.__doc__ = f"Returns AutoFormer's {size} space (Table 1)."
    return build


for _size in ("tiny", "small", "base"):
    register_space(
        f"autoformer-{_size}",
        _builder(_size),
        paper=_PAPER,
        size_paper=None,
        family="autoformer",
        note="Table 1 lists each supernet's candidates, not a count",
    )
    register_arch(
        f"autoformer-{_size}",
        space=f"autoformer-{_size}",
        arch=AUTOFORMER_ARCHS[_size],
        resolution=224,
        num_classes=1000,
        params_paper=_NUMBERS[_size][0],
        madds_paper=_NUMBERS[_size][1],
        source=f"{_PAPER}, Table 3: AutoFormer-{_size[0].upper()}",
        note="counts include the relative position embeddings and their products, which the "
        "paper's figures seem to leave out (see docs/hub.md)",
        exception="" if _size == "small" else "autoformer-relative-position",
    )
