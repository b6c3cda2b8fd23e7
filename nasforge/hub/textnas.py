"""TextNAS's space for text classification (Wang et al., AAAI 2020, §3), with a BERT embedding
built from a ``transformers.BertConfig`` (no pretrained weights).

Token ids pass through ``BertEmbeddings`` (word, position and segment embeddings, layer norm),
a linear map to the network's width, then ``n_layers`` searched layers (24 in the paper) and a
max-pool-over-time classifier. Layer ``l`` (labels ``l{l}.…``) makes three kinds of decision:

    l{l}.op        one of the paper's 8 operations, on a ``B×T×C`` sequence: convolutions of
                   width 1, 3, 5, 7 (ReLU, batch norm); max and average pooling of width 3; a
                   bidirectional GRU; 8-head self-attention
    l{l}.input     which earlier output feeds it (the embedding is output 0, layer k is k + 1)
    l{l}.skip{k}   for each earlier layer k: ``none`` or ``add`` its output to this layer's
                   (the paper's skip connections), before the layer norm

The paper states no count: with 24 layers the space has ∏_l 8 · (l + 1) · 2^l architectures.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

import nasforge as nf
from nasforge.hub._blocks import Zero
from nasforge.hub._registry import register_space

__all__ = ["TextNASSpace", "TEXTNAS_OPS", "bert_embedding"]

#: the operations of a layer, in the space's order
TEXTNAS_OPS: tuple[str, ...] = (
    "conv1", "conv3", "conv5", "conv7", "max_pool", "avg_pool", "gru", "attention",
)  # fmt: skip


def bert_embedding(vocab_size: int, hidden: int, max_length: int) -> nn.Module:
    """Returns BERT's embedding layer built from a ``BertConfig`` with fresh weights."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    config = BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, max_position_embeddings=max_length
    )
    return BertEmbeddings(config)


class _Conv(nn.Module):
    """Returns a same-length 1-D convolution of a ``B×T×C`` sequence, ReLU, batch norm."""

    def __init__(self, c: int, k: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c, c, k, padding=k // 2)
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.conv(x.transpose(1, 2)))).transpose(1, 2)


class _Pool(nn.Module):
    """Returns a same-length max or average pooling of width 3 over time."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.pool: nn.Module = (
            nn.MaxPool1d(3, 1, 1)
            if kind == "max"
            else nn.AvgPool1d(3, 1, 1, count_include_pad=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x.transpose(1, 2)).transpose(1, 2)


class _GRU(nn.Module):
    """Returns a bidirectional GRU's outputs (each direction ``C/2`` wide)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.rnn = nn.GRU(c, c // 2, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class _Attention(nn.Module):
    """Returns 8-head self-attention of the sequence (``C`` must be a multiple of 8)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(c, 8, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


def _conv(c: int, k: int) -> Callable[[], nn.Module]:
    return lambda: _Conv(c, k)


def _ops(c: int) -> dict[str, Callable[[], nn.Module]]:
    return {
        **{f"conv{k}": _conv(c, k) for k in (1, 3, 5, 7)},
        "max_pool": lambda: _Pool("max"),
        "avg_pool": lambda: _Pool("avg"),
        "gru": lambda: _GRU(c),
        "attention": lambda: _Attention(c),
    }


class _Layer(nn.Module):
    """Returns layer ``l``'s output from the list of earlier outputs."""

    def __init__(self, l: int, c: int) -> None:  # noqa: E741 - the paper's layer index
        super().__init__()
        self.input = nf.InputChoice(l + 1, 1, label=f"l{l}.input")
        self.op = nf.LayerChoice(_ops(c), label=f"l{l}.op")
        self.skips = nn.ModuleList(
            nf.LayerChoice({"none": Zero, "add": nn.Identity}, label=f"l{l}.skip{k}")
            for k in range(l)
        )
        self.norm = nn.LayerNorm(c)

    def forward(self, outputs: list[torch.Tensor]) -> torch.Tensor:
        out = self.op(self.input(outputs))
        for k, skip in enumerate(self.skips):
            out = out + skip(outputs[k + 1])
        return self.norm(out)


class TextNASSpace(nf.ModelSpace):
    """Returns TextNAS's space (see the module's docstring) over token ids ``B×T``.

    ``channels`` must be even (the GRU) and a multiple of 8 (attention); the BERT embedding is
    ``bert_hidden`` wide (768 is BERT-base's), ``max_length`` its position table.

    Invariants: per layer ``l``: ``l{l}.input``, ``l{l}.op``, then ``l{l}.skip0`` …
    """

    def __init__(
        self,
        n_classes: int = 5,
        n_layers: int = 24,
        channels: int = 256,
        vocab_size: int = 30522,
        bert_hidden: int = 768,
        max_length: int = 64,
    ) -> None:
        super().__init__()
        self.embedding = bert_embedding(vocab_size, bert_hidden, max_length)
        self.project = nn.Linear(bert_hidden, channels)
        self.layers = nn.ModuleList(_Layer(l, channels) for l in range(n_layers))  # noqa: E741
        self.classifier = nn.Linear(channels, n_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen network (a recorded space refuses forward)."""
        outputs = [self.project(self.embedding(input_ids=ids))]
        for layer in self.layers:
            outputs.append(layer(outputs))
        return self.classifier(outputs[-1].max(1).values)


register_space(
    "textnas",
    TextNASSpace,
    paper="Wang et al. 2020, TextNAS (AAAI)",
    size_paper=None,
    family="textnas",
    note="∏_l 8 · (l + 1) · 2^l over the 24 layers: 8 operations, one input among the earlier "
    "outputs, and a skip from each earlier layer; the paper states no count",
)
