"""MNIST-1D generated offline: shapes, the seed decides the draw, global random state kept."""

import random

import numpy as np
import pytest

pytest.importorskip("mnist1d")

from nasforge.data.mnist1d import mnist1d_tensors  # noqa: E402
from nasforge.errors import ConfigError  # noqa: E402


def test_generation_is_offline_seeded_and_leaves_global_state_alone() -> None:
    """200 signals of length 40, 20 per class; same seed same data, another seed other data."""
    random.seed(5)
    np.random.seed(5)
    before = (random.random(), np.random.rand())
    random.seed(5)
    np.random.seed(5)
    x, y = mnist1d_tensors({"num_samples": 200, "seed": 3})
    assert (random.random(), np.random.rand()) == before
    assert x.shape == (200, 1, 40) and y.bincount().tolist() == [20] * 10
    x2, _ = mnist1d_tensors({"num_samples": 200, "seed": 3})
    x3, _ = mnist1d_tensors({"num_samples": 200, "seed": 4})
    assert (x == x2).all() and not (x == x3).all()
    with pytest.raises(ConfigError, match="unknown MNIST-1D arguments"):
        mnist1d_tensors({"samples": 10})
