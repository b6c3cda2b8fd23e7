"""A small MLP that predicts a sub-network's accuracy from its configuration (OFA's accuracy
predictor), trained on sampled (configuration, accuracy) pairs, or loaded from once-for-all's
published file.

Encodings (what the MLP reads)
    flat        per block and layer slot a one-hot of the ratio and of the kernel (zeros beyond
                the depth), then the resolution one-hot (:func:`nasforge.ofa.spaces.encode`)
    ofa         once-for-all's published layout: kernel one-hots of every slot, ratio one-hots
                of every slot, resolution slots ``(side - 112) // 16``
                (:func:`nasforge.ofa.published.ofa_features`; 128 inputs for MobileNetV3)
    structured  ``flat`` plus what the space's structure says: per block a one-hot of its depth,
                its mean ratio and kernel over active layers, the share of its layers active;
                per block and overall the multiply-adds relative to the largest network
                (:func:`nasforge.ofa.latency.count_macs`)

A predictor is ``n_hidden`` layers of ``hidden`` units (ReLU) and a linear output, or the mean of
``n_models`` such MLPs trained from different seeds. The published one is ``ofa`` with 3 x 400
and a single model; its ``.pth`` is the state dict of ``nn.Sequential`` (``0.weight`` ...
``6.bias``) in torch's legacy serialisation, read with ``weights_only=True``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError, StoreError
from nasforge.ofa.latency import layer_shapes
from nasforge.ofa.published import n_ofa_features, ofa_features
from nasforge.ofa.spaces import OFASearchSpace, depth_label, encode

__all__ = ["AccuracyPredictor", "ENCODINGS", "structured_features"]

logger = logging.getLogger(__name__)

ENCODINGS = ("flat", "ofa", "structured")


def structured_features(space: OFASearchSpace, arch: Mapping[str, Any]) -> list[float]:
    """Returns the ``structured`` encoding of ``arch`` (see the module docstring).

    Invariants: the length depends on the spec only; equal networks have equal features.
    """
    spec = space.spec
    arch = space.validate(arch)
    out = encode(space, arch)
    layers = space.layers(arch)
    shapes = layer_shapes(space, arch)
    largest = layer_shapes(space, space.largest())
    # shapes: stem, first layer, the active layers in order, head; block b's layers follow
    per_block = [0.0] * spec.n_blocks
    per_block_max = [0.0] * spec.n_blocks
    for (b, *_), shape in zip(layers, shapes[2:-1]):
        per_block[b] += shape.macs()
    for (b, *_), shape in zip(space.layers(space.largest()), largest[2:-1]):
        per_block_max[b] += shape.macs()
    e_span = max(spec.expands) - min(spec.expands) or 1
    k_span = max(spec.kernels) - min(spec.kernels) or 1
    for b in range(spec.n_blocks):
        d = arch[depth_label(b)]
        mine = [(e, k) for bb, _, e, k in layers if bb == b]
        out += [float(d == v) for v in spec.depths]
        out.append(d / spec.max_depth)
        out.append((sum(e for e, _ in mine) / len(mine) - min(spec.expands)) / e_span)
        out.append((sum(k for _, k in mine) / len(mine) - min(spec.kernels)) / k_span)
        out.append(per_block[b] / per_block_max[b])
    total = sum(s.macs() for s in shapes) / sum(s.macs() for s in largest)
    return out + [total]


def _features(space: OFASearchSpace, encoding: str, arch: Mapping[str, Any]) -> list[float]:
    if encoding == "flat":
        return encode(space, arch)
    if encoding == "ofa":
        return ofa_features(space, arch)
    return structured_features(space, arch)


def _mlp(n_in: int, hidden: int, n_hidden: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(n_hidden):
        layers += [nn.Linear(n_in if i == 0 else hidden, hidden), nn.ReLU()]
    layers.append(nn.Linear(hidden if n_hidden else n_in, 1))
    return nn.Sequential(*layers)


class AccuracyPredictor:
    """Returns predicted accuracies of architectures of one space (call it on an arch).

    Invariants: targets are standardised for training and predictions mapped back (a loaded
    published predictor has mean 0 and scale 1: its raw output); with ``n_models > 1`` the
    prediction is the mean of the models; the same data and seed give the same predictor (at a
    fixed thread count).

    Raises:
        ConfigError: an unknown encoding, ``hidden`` or ``n_models`` below 1, or ``ofa``
            features for a space that is not OFA-coupled.
    """

    def __init__(
        self,
        space: OFASearchSpace,
        hidden: int = 64,
        seed: int = 0,
        *,
        n_hidden: int = 2,
        encoding: str = "flat",
        n_models: int = 1,
        weight_decay: float = 1e-4,
    ) -> None:
        if encoding not in ENCODINGS:
            raise ConfigError(f"predictor encoding {encoding!r} is not one of {ENCODINGS}")
        if hidden < 1 or n_models < 1 or n_hidden < 0:
            raise ConfigError(
                f"need hidden >= 1, n_hidden >= 0 and n_models >= 1; got {hidden}, {n_hidden}, "
                f"{n_models}"
            )
        self.space, self.encoding = space, encoding
        self.hidden, self.n_hidden = hidden, n_hidden
        self.weight_decay = weight_decay  # fit's default
        n = len(_features(space, encoding, space.largest()))
        self.nets = []
        for m in range(n_models):
            gen = torch.Generator().manual_seed(seed + 7919 * m)  # model 0: the seed itself
            net = _mlp(n, hidden, n_hidden)
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(torch.randn(p.shape, generator=gen) * (1 / max(1, p.shape[-1])) ** 0.5)
            self.nets.append(net)
        self.mean, self.std = 0.0, 1.0

    @property
    def net(self) -> nn.Sequential:
        """Returns the first (or only) MLP."""
        return self.nets[0]

    @classmethod
    def structured(
        cls, space: OFASearchSpace, seed: int = 0, n_models: int = 10
    ) -> AccuracyPredictor:
        """Returns the predictor nasforge fits on its own supernets: the ``structured``
        encoding, 2 x 128 units, a mean of ``n_models`` MLPs (10), weight decay 1e-2 (chosen
        with ``benchmarks/ofa_predictor.py``; docs/ofa.md has the figures)."""
        return cls(
            space,
            128,
            seed,
            n_hidden=2,
            encoding="structured",
            n_models=n_models,
            weight_decay=1e-2,
        )

    def _x(self, archs: Sequence[Mapping[str, Any]]) -> torch.Tensor:
        rows = [_features(self.space, self.encoding, a) for a in archs]
        return torch.tensor(rows, dtype=torch.float32)

    def fit(
        self,
        archs: Sequence[Mapping[str, Any]],
        accuracies: Sequence[float],
        epochs: int = 300,
        lr: float = 3e-3,
        weight_decay: float | None = None,
    ) -> float:
        """Trains each model on the pairs (full batch, Adam, MSE; ``weight_decay`` defaults to
        the predictor's); returns the mean final training loss.

        Raises:
            ConfigError: fewer than 2 pairs, or lengths differ.
        """
        if len(archs) != len(accuracies) or len(archs) < 2:
            raise ConfigError(
                f"need >= 2 (arch, accuracy) pairs of equal count, got {len(archs)} archs and "
                f"{len(accuracies)} accuracies"
            )
        x = self._x(archs)
        y = torch.tensor(list(accuracies), dtype=torch.float32)
        self.mean, self.std = float(y.mean()), float(y.std().clamp_min(1e-6))
        y = (y - self.mean) / self.std
        losses = []
        weight_decay = self.weight_decay if weight_decay is None else weight_decay
        for net in self.nets:
            opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
            loss = torch.tensor(0.0)
            for _ in range(epochs):
                opt.zero_grad()
                loss = ((net(x).squeeze(1) - y) ** 2).mean()
                loss.backward()
                opt.step()
            losses.append(float(loss.detach()))
        logger.debug("predictor trained on %d pairs, losses %s", len(archs), losses)
        return sum(losses) / len(losses)

    @torch.no_grad()
    def predict(self, archs: Sequence[Mapping[str, Any]]) -> list[float]:
        """Returns the predicted accuracy of each architecture."""
        x = self._x(archs)
        out = torch.stack([net(x).squeeze(1) for net in self.nets]).mean(0)
        return [float(v) for v in out * self.std + self.mean]

    def __call__(self, arch: Mapping[str, Any]) -> float:
        return self.predict([arch])[0]

    def state_dict(self) -> dict[str, Any]:
        """Returns the predictor's tensors, normalisation and layout, for torch.save."""
        return {
            "net": self.nets[0].state_dict(),
            "nets": [net.state_dict() for net in self.nets],
            "mean": self.mean,
            "std": self.std,
            "layout": {"encoding": self.encoding, "hidden": self.hidden,
                       "n_hidden": self.n_hidden, "n_models": len(self.nets)},
        }  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Loads what :meth:`state_dict` returned (one written before ensembles: ``net`` only).

        Raises:
            ConfigError: the state has another number of models than this predictor.
        """
        nets = state.get("nets", [state["net"]])
        if len(nets) != len(self.nets):
            raise ConfigError(
                f"the state holds {len(nets)} models, this predictor {len(self.nets)}; build it "
                "with the same n_models"
            )
        for net, sd in zip(self.nets, nets):
            net.load_state_dict(sd)
        self.mean, self.std = float(state["mean"]), float(state["std"])

    @classmethod
    def load_ofa(cls, path: str | Path, space: OFASearchSpace) -> AccuracyPredictor:
        """Returns once-for-all's published accuracy predictor (``acc_predictor.pth``: the state
        dict of ``nn.Sequential(Linear(128, 400), ReLU, Linear(400, 400), ReLU, Linear(400,
        400), ReLU, Linear(400, 1))``) over ``space``, with the ``ofa`` encoding; its output is
        the file's MLP's raw output, as once-for-all's tutorial computes it.

        Raises:
            StoreError: the file is missing, unreadable with ``weights_only=True``, or not that
                layout: the first tensor whose name or shape differs is named.
            ConfigError: ``space`` is not OFA-coupled.
        """
        p = Path(path)
        if not p.is_file():
            raise StoreError(f"no accuracy predictor at {p}; pass the path of acc_predictor.pth")
        try:
            state = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as exc:  # corrupt or foreign
            raise StoreError(f"cannot read {p} with weights_only=True: {exc}") from exc
        if isinstance(state, Mapping) and "state_dict" in state:
            state = state["state_dict"]
        if not isinstance(state, Mapping):
            raise StoreError(f"{p} holds {type(state).__name__}, expected a state dict")
        if any(str(k).startswith("layers.") for k in state):
            raise StoreError(
                f"{p} is the layout of once-for-all's newer NAS code (layers.*, base_acc), "
                "whose encoder is not supported; use the tutorial's acc_predictor.pth"
            )
        n_hidden = sum(1 for k in state if str(k).endswith(".weight")) - 1
        first = state.get("0.weight")
        hidden = int(first.shape[0]) if isinstance(first, torch.Tensor) else 400
        pred = cls(space, hidden, n_hidden=max(n_hidden, 0), encoding="ofa")
        want = pred.net.state_dict()
        n_in = n_ofa_features(space.spec)
        for name, tensor in want.items():
            got = state.get(name)
            if not isinstance(got, torch.Tensor):
                raise StoreError(
                    f"{p}: no tensor {name!r}; expected the tutorial predictor's keys "
                    f"{list(want)} ({n_in} inputs for this space)"
                )
            if tuple(got.shape) != tuple(tensor.shape):
                raise StoreError(
                    f"{p}: tensor {name!r} has shape {tuple(got.shape)}, expected "
                    f"{tuple(tensor.shape)} ({n_in} inputs: kernel and ratio one-hots of "
                    f"{space.spec.n_blocks * space.spec.max_depth} slots and 8 resolution slots)"
                )
        extra = [k for k in state if k not in want]
        if extra:
            raise StoreError(f"{p}: unexpected tensor {extra[0]!r} in the predictor file")
        pred.net.load_state_dict({k: state[k] for k in want})
        return pred
