"""The model-space language: inline choices, mutators, search spaces, freezing.

Pure modules (no torch): ``search_space``, ``ranges``, ``expr``, ``suggest``, ``context``. Torch
modules: ``modules``, ``model_space``, ``mutator``, ``module_mutator``. Names load lazily so the
pure ones import without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasforge._lazy import lazy_names

#: name -> the module that defines it (loaded on first use)
_EXPORTS = {
    "Arch": "nasforge.space.search_space",
    "Decision": "nasforge.space.search_space",
    "SearchSpace": "nasforge.space.search_space",
    "arch_id": "nasforge.space.search_space",
    "canonical_json": "nasforge.space.search_space",
    "choice": "nasforge.space.expr",
    "uniform": "nasforge.space.expr",
    "integer": "nasforge.space.expr",
    "suggest_float": "nasforge.space.suggest",
    "suggest_int": "nasforge.space.suggest",
    "suggest_categorical": "nasforge.space.suggest",
    "hparams": "nasforge.space.model_space",
    "Range": "nasforge.space.ranges",
    "is_choice": "nasforge.space.expr",
    "max_": "nasforge.space.expr",
    "min_": "nasforge.space.expr",
    "BaseSpace": "nasforge.space.model_space",
    "ModelSpace": "nasforge.space.model_space",
    "Mutation": "nasforge.space.model_space",
    "freeze": "nasforge.space.model_space",
    "mutation_history": "nasforge.space.model_space",
    "shared_labels": "nasforge.space.model_space",
    "InputChoice": "nasforge.space.modules",
    "LayerChoice": "nasforge.space.modules",
    "Repeat": "nasforge.space.modules",
    "ModuleChoice": "nasforge.space.module_mutator",
    "ModuleMutator": "nasforge.space.module_mutator",
    "MutableModel": "nasforge.space.module_mutator",
    "InputMutator": "nasforge.space.mutator",
    "InsertMutator": "nasforge.space.mutator",
    "MutableGraph": "nasforge.space.mutator",
    "MutatedSpace": "nasforge.space.mutator",
    "Mutator": "nasforge.space.mutator",
    "OperatorMutator": "nasforge.space.mutator",
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
    "suggest_categorical",
    "suggest_float",
    "suggest_int",
    "uniform",
]


__getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


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
    from nasforge.space.suggest import suggest_categorical, suggest_float, suggest_int
