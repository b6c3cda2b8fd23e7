"""Deterministic train/validation/test splits and their ``DataLoader``s.

``load_digits`` gives scikit-learn's bundled handwritten digits (1,797 real 8×8 images, 10
classes; no download). ``split_dataset`` splits any tensors or ``Dataset`` the same way, so a
user's own data behaves exactly like the built-in sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from nasforge.errors import ConfigError

__all__ = ["Splits", "load_digits", "split_dataset", "to_tensors"]


def to_tensors(dataset: Dataset | Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns a dataset of (x, y) examples as two stacked tensors (a pair passes through)."""
    if isinstance(dataset, (tuple, list)) and len(dataset) == 2:
        return dataset[0], dataset[1]
    x, y = next(iter(DataLoader(dataset, batch_size=len(dataset))))  # type: ignore[arg-type]
    return x, y


@dataclass(frozen=True)
class Splits:
    """Three disjoint parts of one dataset.

    Invariants: the parts are disjoint and cover the dataset; the same seed gives the same parts.
    """

    train: Dataset
    val: Dataset
    test: Dataset
    n_classes: int | None = None

    def loaders(
        self, batch_size: int = 64, seed: int = 0, num_workers: int = 0
    ) -> tuple[DataLoader, DataLoader, DataLoader]:
        """Returns (train, val, test) loaders; train is shuffled by a generator seeded ``seed``."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        gen = torch.Generator().manual_seed(seed)
        return (
            DataLoader(
                self.train, batch_size, shuffle=True, generator=gen, num_workers=num_workers
            ),
            DataLoader(self.val, batch_size, shuffle=False, num_workers=num_workers),
            DataLoader(self.test, batch_size, shuffle=False, num_workers=num_workers),
        )


def split_dataset(
    data: Dataset | tuple[torch.Tensor, ...] | list[torch.Tensor],
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    seed: int = 0,
    n_classes: int | None = None,
) -> Splits:
    """Returns a seeded random split of ``data`` (a ``Dataset`` or a tuple of tensors).

    Raises:
        ConfigError: fractions outside [0, 1) or summing to 1 or more, or too little data for
            every part to be non-empty.
    """
    if isinstance(data, (tuple, list)):
        if not data or not all(isinstance(t, torch.Tensor) for t in data):
            raise ConfigError("pass the data as a Dataset or a tuple of tensors (inputs, labels)")
        lengths = {len(t) for t in data}
        if len(lengths) != 1:
            raise ConfigError(f"the tensors have different lengths {sorted(lengths)}")
        data = TensorDataset(*data)
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ConfigError(
            f"val_fraction={val_fraction} and test_fraction={test_fraction} must each lie in "
            "[0, 1) and sum to less than 1"
        )
    n = len(data)  # type: ignore[arg-type]
    n_val, n_test = round(n * val_fraction), round(n * test_fraction)
    n_train = n - n_val - n_test
    if n_train < 1 or (val_fraction > 0 and n_val < 1) or (test_fraction > 0 and n_test < 1):
        raise ConfigError(f"{n} examples are too few for fractions {val_fraction}/{test_fraction}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    return Splits(
        Subset(data, perm[:n_train]),
        Subset(data, perm[n_train : n_train + n_val]),
        Subset(data, perm[n_train + n_val :]),
        n_classes,
    )


def load_digits(seed: int = 0, val_fraction: float = 0.15, test_fraction: float = 0.15) -> Splits:
    """Returns scikit-learn's handwritten digits split three ways: images ``N×1×8×8`` float32
    scaled to [0, 1], labels int64 in 0..9."""
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.int64)
    return split_dataset((x, y), val_fraction, test_fraction, seed, n_classes=10)
