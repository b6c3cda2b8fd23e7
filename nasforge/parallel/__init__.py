"""Pipeline-parallel, reproducible supernet training (NASPipe): CSP scheduling, simulation,
context management and the torch.distributed runtime.

The pure parts (:mod:`.csp`, :mod:`.cache`, :mod:`.simulator`) import without torch; the torch
parts are imported lazily by name so that importing this package stays torch-free.
"""

from __future__ import annotations

from nasforge._lazy import lazy_names

__all__ = ["train_supernet", "ChoiceSupernet", "TrainResult"]

_LAZY = {
    "train_supernet": "nasforge.parallel.train",
    "TrainResult": "nasforge.parallel.train",
    "ChoiceSupernet": "nasforge.parallel.supernet",
}

# only __getattr__: dir() keeps listing the submodules (csp, runtime, ...) as before
__getattr__ = lazy_names(globals(), _LAZY, __all__)[0]
