"""nasforge: neural architecture search on PyTorch.

Write a model space (a ``ModelSpace`` with choices, or a base model plus mutators), pick a
strategy, and search it multi-trial or one-shot. ``import nasforge as nf``.

Names are imported lazily, so that the pure parts (``nasforge.space.search_space``,
``nasforge.strategy``, the schedulers) can be used without importing torch. Importing
nasforge puts the finder of moved module paths on ``sys.meta_path`` (:mod:`nasforge._deprecated`:
``import nasforge.run.threads`` warns and gives ``nasforge.runtime.threads``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasforge import _deprecated
from nasforge._lazy import Target, lazy_names
from nasforge._version import __version__

_deprecated.install()

#: name -> the module that defines it (loaded on first use)
_EXPORTS: dict[str, Target] = {
    "Arch": "nasforge.space.search_space",
    "Decision": "nasforge.space.search_space",
    "SearchSpace": "nasforge.space.search_space",
    "arch_id": "nasforge.space.search_space",
    "choice": "nasforge.space.expr",
    "uniform": "nasforge.space.expr",
    "integer": "nasforge.space.expr",
    "suggest_float": "nasforge.space.suggest",
    "suggest_int": "nasforge.space.suggest",
    "suggest_categorical": "nasforge.space.suggest",
    "hparams": "nasforge.space.model_space",
    "max": ("nasforge.space.expr", "max_"),
    "min": ("nasforge.space.expr", "min_"),
    "BaseSpace": "nasforge.space.model_space",
    "ModelSpace": "nasforge.space.model_space",
    "freeze": "nasforge.space.model_space",
    "mutation_history": "nasforge.space.model_space",
    "InputChoice": "nasforge.space.modules",
    "LayerChoice": "nasforge.space.modules",
    "Repeat": "nasforge.space.modules",
    "Mutator": "nasforge.space.mutator",
    "MutatedSpace": "nasforge.space.mutator",
    "ModuleMutator": "nasforge.space.module_mutator",
    "OperatorMutator": "nasforge.space.mutator",
    "InputMutator": "nasforge.space.mutator",
    "InsertMutator": "nasforge.space.mutator",
    "load_model": "nasforge.run.export",
    "trial_device": "nasforge.runtime.devices",
    "trial_devices": "nasforge.runtime.devices",
    "errors": ("nasforge.errors", None),  # the module itself
}

__all__ = [
    "Arch",
    "BaseSpace",
    "Decision",
    "InputChoice",
    "InputMutator",
    "InsertMutator",
    "LayerChoice",
    "ModelSpace",
    "ModuleMutator",
    "MutatedSpace",
    "Mutator",
    "OperatorMutator",
    "Repeat",
    "SearchSpace",
    "__version__",
    "arch_id",
    "choice",
    "errors",
    "freeze",
    "hparams",
    "integer",
    "load_model",
    "max",
    "min",
    "mutation_history",
    "suggest_categorical",
    "suggest_float",
    "suggest_int",
    "trial_device",
    "trial_devices",
    "uniform",
]


__getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge import errors
    from nasforge.run.export import load_model
    from nasforge.runtime.devices import trial_device, trial_devices
    from nasforge.space.expr import choice, integer, uniform
    from nasforge.space.expr import max_ as max  # noqa: A004
    from nasforge.space.expr import min_ as min  # noqa: A004
    from nasforge.space.model_space import (
        BaseSpace,
        ModelSpace,
        freeze,
        hparams,
        mutation_history,
    )
    from nasforge.space.module_mutator import ModuleMutator
    from nasforge.space.modules import InputChoice, LayerChoice, Repeat
    from nasforge.space.mutator import (
        InputMutator,
        InsertMutator,
        MutatedSpace,
        Mutator,
        OperatorMutator,
    )
    from nasforge.space.search_space import Arch, Decision, SearchSpace, arch_id
    from nasforge.space.suggest import suggest_categorical, suggest_float, suggest_int
