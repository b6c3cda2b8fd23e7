"""Shared setup of the one-shot benchmarks: the cell space, one architecture, five networks."""

from __future__ import annotations

import torch

import nasforge as nf
from nasforge.oneshot import activate, supernet
from nasforge.oneshot.nasb import binarize
from nasforge.oneshot.proxyless import ProxylessLayer, follow
from nasforge.oneshot.supernet import MixedLayer
from nasforge.spaces import DartsCellSpace

__all__ = ["setup"]


def setup(image: int, batch: int, seed: int = 0) -> dict:
    """Returns the DARTS, NASB, SPOS and ProxylessNAS supernets of the 8-cell, 16-channel cell
    space, the standalone network of one architecture, and a batch; NASB's G, SPOS's path and
    ProxylessNAS's active paths are set to that same architecture (ProxylessNAS in its
    architecture step: a second sampled candidate beside each active one, recomputed in
    backward), so all five compute comparable things."""
    torch.manual_seed(seed)
    space = DartsCellSpace(n_cells=8, channels=16, in_channels=3, n_classes=10)
    arch = space.search_space().sample(seed)
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, 10, (batch,))
    names = ("darts", "nasb", "spos", "proxylessnas")
    nets = {name: supernet(space, name, example=x[:2]) for name in names}
    nasb = nets["nasb"]
    with torch.no_grad():  # A = one-hot of the architecture's (edge, op) pairs
        for p in nasb.arch_parameters():
            p.zero_()
        for m in nasb.mixed():
            if isinstance(m, MixedLayer) and m.node is not None:
                pos = m.node.edges.index(m)
                if pos in arch[m.node.label]:
                    m.arch()[m.names.index(arch[m.label])] = 1.0
    binarize(nasb)
    activate(nets["spos"], arch)
    follow(nets["proxylessnas"], arch)
    for m in nets["proxylessnas"].mixed():  # the architecture step's second sampled candidate
        if isinstance(m, ProxylessLayer):
            m.alt = [(m.active[0] + 1) % len(m.names)]
    nets["standalone"] = nf.freeze(space, arch)
    return {"space": space, "arch": arch, "x": x, "y": y, "nets": nets}
