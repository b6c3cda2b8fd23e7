"""MNIST-1D generated offline: shapes, the seed decides the draw, global random state kept."""

import random

import numpy as np
import pytest
import torch

pytest.importorskip("mnist1d")

from nasforge.data.mnist1d import _generate, mnist1d_tensors  # noqa: E402
from nasforge.errors import ConfigError  # noqa: E402


def test_generation_is_offline_seeded_and_leaves_global_state_alone() -> None:
    """200 signals of length 40, 20 per class; same seed same data, another seed other data."""
    _generate.cache_clear()  # the generator itself runs below, not a cached copy
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


def test_a_draw_is_generated_once_per_process_and_each_caller_owns_its_tensors() -> None:
    """The second call with the same arguments reuses the generated arrays (a cache hit), and
    changing one caller's tensor in place leaves the next caller's data as generated."""
    _generate.cache_clear()
    x, y = mnist1d_tensors({"num_samples": 100, "seed": 7})
    first = x.clone()
    x.zero_()
    y.zero_()
    x2, y2 = mnist1d_tensors({"num_samples": 100, "seed": 7})
    assert _generate.cache_info().hits == 1
    assert torch.equal(x2, first) and y2.bincount().tolist() == [10] * 10
