"""MNIST-1D (Greydanus, 2020): 10 classes of 1-D signals generated offline from the package's
own templates, a small data set on which architectures differ clearly. No download.

Needs the optional extra ``pip install nasforge[mnist1d]`` (the ``mnist1d`` package).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from nasforge.errors import ConfigError

__all__ = ["MNIST1D_DEFAULTS", "mnist1d_tensors"]

#: The generation arguments of ``mnist1d.data.get_dataset_args`` that this module passes on
#: (the package's defaults; ``num_samples`` and ``seed`` are the ones a table changes).
MNIST1D_DEFAULTS: dict[str, Any] = {
    "num_samples": 5000,
    "template_len": 12,
    "padding": [36, 60],
    "scale_coeff": 0.4,
    "max_translation": 48,
    "corr_noise_scale": 0.25,
    "iid_noise_scale": 2e-2,
    "shear_scale": 0.75,
    "shuffle_seq": False,
    "final_seq_length": 40,
    "seed": 42,
}


def mnist1d_tensors(args: Mapping[str, Any] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (x, y): x ``N×1×L`` float32 (the generator's standardised signals), y int64 in
    0..9, generated from ``args`` (over :data:`MNIST1D_DEFAULTS`) in the generator's order.

    The generator seeds Python's and NumPy's global random state; both are restored after.

    Raises:
        ConfigError: mnist1d is not installed, or ``args`` names an unknown argument.
    """
    try:
        import mnist1d.data  # noqa: F401 - the generator, used by _generate
    except ImportError as exc:
        raise ConfigError(
            "MNIST-1D comes with the mnist1d package; install it with "
            "'pip install nasforge[mnist1d]'"
        ) from exc
    unknown = sorted(set(args or {}) - set(MNIST1D_DEFAULTS))
    if unknown:
        raise ConfigError(
            f"unknown MNIST-1D arguments {unknown}; known: {sorted(MNIST1D_DEFAULTS)}"
        )
    full = {**MNIST1D_DEFAULTS, **(args or {}), "train_split": 1.0, "url": ""}
    xs, ys = _generate(json.dumps(full, sort_keys=True))
    return torch.tensor(xs, dtype=torch.float32).unsqueeze(1), torch.tensor(ys, dtype=torch.long)


@functools.lru_cache(maxsize=4)
def _generate(key: str) -> tuple[np.ndarray, np.ndarray]:
    """Returns the generator's (x, y) arrays for the JSON arguments ``key``, generated once per
    process (5 to 7 seconds for the default 5,000 signals; every caller gets its own tensors)."""
    from mnist1d.data import make_dataset
    from mnist1d.utils import ObjectView

    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        data = make_dataset(ObjectView(json.loads(key)))
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    return np.asarray(data["x"]), np.asarray(data["y"])
