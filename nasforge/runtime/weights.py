"""Weights in a run directory: state dicts saved as plain tensors, written atomically.

Files are ``torch.save`` of a dict of CPU tensors, read back with ``weights_only=True``, so a
record never holds pickled Python objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported when weights are saved or read
    import torch
    from torch import nn

__all__ = ["save_state", "save_weights", "load_weights", "KEPT_NOTE", "not_kept"]

#: the ``source`` of the run note by which a run that deletes weights outside its best trials
#: records how many it keeps (``keep``); export reads it to explain a trial without weights
KEPT_NOTE = "checkpoints"


def not_kept(keep: object) -> str:
    """Returns the message for a trial whose weights the run deleted (kept the ``keep`` best)."""
    return f"weights not kept: keep_checkpoints={keep}"


def save_state(state: object, path: str | Path) -> str:
    """Returns ``path`` after ``torch.save`` of ``state`` (tensors and plain data only, so it
    loads with ``weights_only=True``) there; written beside and renamed, so a crash never
    leaves a half-written file."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return str(path)


def save_weights(model: nn.Module | Mapping[str, torch.Tensor], path: str | Path) -> str:
    """Returns ``path`` after writing the state dict of ``model`` (a module or a dict of
    tensors) there as CPU tensors; a crash never leaves a half-written file."""
    state = model.state_dict() if hasattr(model, "state_dict") else model
    return save_state({k: v.detach().cpu().contiguous().clone() for k, v in state.items()}, path)


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Returns the state dict saved at ``path`` (``.pt`` or ``.safetensors``).

    Raises:
        StoreError: the file is missing or unreadable.
    """
    import torch

    from nasforge.errors import StoreError

    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state: dict[str, torch.Tensor] = torch.load(path, weights_only=True)
        return state
    except Exception as exc:  # missing, corrupt or foreign file
        raise StoreError(f"cannot read weights {path}: {type(exc).__name__}: {exc}") from exc
