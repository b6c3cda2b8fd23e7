"""Shared fixtures of the engine tests."""

import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Seeds every generator and pins one thread so that trainings are bitwise repeatable."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
