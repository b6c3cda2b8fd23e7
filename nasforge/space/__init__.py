"""The model-space language: inline choices, mutators, search spaces, freezing.

Pure modules (no torch): ``search_space``, ``expr``, ``context``. Torch modules: ``modules``,
``model_space``, ``mutator``,
``module_mutator``. Names load lazily so the pure ones import without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Arch": "search_space",
    "Decision": "search_space",
    "SearchSpace": "search_space",
    "arch_id": "search_space",
    "canonical_json": "search_space",
    "choice": "expr",
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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nasforge.space' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"nasforge.space.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
