"""Shared fixtures: every test starts from fixed seeds and one torch thread (trainings are
bitwise repeatable, and a busy 2-core machine is not oversubscribed)."""

import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeds Python, NumPy and torch and pins one torch thread before each test, also as the
    library's default (NASFORGE_THREADS), which the training paths choose themselves."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    monkeypatch.setenv("NASFORGE_THREADS", "1")
