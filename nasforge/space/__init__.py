"""The model-space language: inline choices, mutators, search spaces, freezing.

Pure modules (no torch): ``search_space``, ``ranges``, ``expr``, ``context``. Torch
modules: ``modules``, ``model_space``, ``mutator``, ``module_mutator``. Names load lazily so the
pure ones import without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Arch": "search_space",
    "Decision": "search_space",
    "SearchSpace": "search_space",
    "arch_id": "search_space",
    "canonical_json": "search_space",
    "choice": "expr",
    "uniform": "expr",
    "integer": "expr",
    "hparams": "model_space",
    "Range": "ranges",
    "is_choice": "expr",
    "max_": "expr",
    "min_": "expr",
    "BaseSpace": "model_space",
    "ModelSpace": "model_space",
    "Mutation": "model_space",
    "freeze": "model_space",
    "mutation_history": "model_space",
    "shared_labels": "model_space",
    "InputChoice": "modules",
    "LayerChoice": "modules",
    "Repeat": "modules",
    "ModuleChoice": "module_mutator",
    "ModuleMutator": "module_mutator",
    "MutableModel": "module_mutator",
    "InputMutator": "mutator",
    "InsertMutator": "mutator",
    "MutableGraph": "mutator",
    "MutatedSpace": "mutator",
    "Mutator": "mutator",
    "OperatorMutator": "mutator",
}

#: the names of _EXPORTS, spelled out so that type checkers see them exported
__all__ = [
    "Arch",
    "BaseSpace",
    "Decision",
    "InputChoice",
    "InputMutator",
    "InsertMutator",
    "LayerChoice",
    "ModelSpace",
    "ModuleChoice",
    "ModuleMutator",
    "MutableGraph",
    "MutableModel",
    "MutatedSpace",
    "Mutation",
    "Mutator",
    "OperatorMutator",
    "Range",
    "Repeat",
    "SearchSpace",
    "arch_id",
    "canonical_json",
    "choice",
    "freeze",
    "hparams",
    "integer",
    "is_choice",
    "max_",
    "min_",
    "mutation_history",
    "shared_labels",
    "uniform",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nasforge.space' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"nasforge.space.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge.space.expr import choice, integer, is_choice, max_, min_, uniform
    from nasforge.space.model_space import (
        BaseSpace,
        ModelSpace,
        Mutation,
        freeze,
        hparams,
        mutation_history,
        shared_labels,
    )
    from nasforge.space.module_mutator import ModuleChoice, ModuleMutator, MutableModel
    from nasforge.space.modules import InputChoice, LayerChoice, Repeat
    from nasforge.space.mutator import (
        InputMutator,
        InsertMutator,
        MutableGraph,
        MutatedSpace,
        Mutator,
        OperatorMutator,
    )
    from nasforge.space.ranges import Range
    from nasforge.space.search_space import Arch, Decision, SearchSpace, arch_id, canonical_json
