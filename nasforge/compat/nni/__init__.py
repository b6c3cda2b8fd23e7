"""NNI 3.0's model-space language on nasforge: NNI spaces run unchanged (docs/from-nni.md).

Two ways in:

* **Replace the import line.** ``from nasforge.compat.nni import ModelSpace, LayerChoice,
  MutableLinear`` and ``import nasforge.compat.nni as nni`` give the names of
  ``nni.nas.nn.pytorch``, ``nni.mutable`` and ``nni`` (``nni.choice('c', [16, 32])``); a class
  written with them is a nasforge space.
* **Change nothing.** :func:`load` imports a module written against NNI as it is (NNI installed
  or not): its ``nni`` imports get these names, and its classes are nasforge spaces.
  ``load('nni.nas.hub.pytorch')`` loads NNI's own hub spaces the same way (from the installed
  NNI's files).

Every NNI choice keeps its label (NNI's automatic labels included), so an architecture dict
NNI wrote freezes to the same network here; any nasforge strategy searches the space, and
``nasforge.freeze`` gives the plain PyTorch model. A construct that has no nasforge meaning
(``nni.normal``, ``InputChoice(n_chosen=None)``, an NNI module beyond the space language while
NNI is not installed) is refused in one line that names it.

``Mutable<Name>`` (``MutableConv2d``, ``MutableBatchNorm2d``) exists for every module class
``torch.nn.<Name>``, made when first asked for; ``<Name>`` alone is the same, under torch's
name, as NNI's ``import nni.nas.nn.pytorch as nn`` gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nasforge._lazy import lazy_names

_EXPORTS = {
    # nni.mutable and the nni shortcuts
    "Mutable": "nasforge.compat.nni._mutable",
    "LabeledMutable": "nasforge.compat.nni._mutable",
    "MutableExpression": "nasforge.compat.nni._mutable",
    "MutableSymbol": "nasforge.compat.nni._mutable",
    "Categorical": "nasforge.compat.nni._mutable",
    "CategoricalMultiple": "nasforge.compat.nni._mutable",
    "Numerical": "nasforge.compat.nni._mutable",
    "Sample": "nasforge.compat.nni._mutable",
    "choice": "nasforge.compat.nni._modules",
    "uniform": "nasforge.compat.nni._mutable",
    "quniform": "nasforge.compat.nni._mutable",
    "loguniform": "nasforge.compat.nni._mutable",
    "qloguniform": "nasforge.compat.nni._mutable",
    "normal": "nasforge.compat.nni._mutable",
    "qnormal": "nasforge.compat.nni._mutable",
    "ensure_frozen": "nasforge.compat.nni._mutable",
    "label_scope": "nasforge.compat.nni._labels",
    "auto_label": "nasforge.compat.nni._labels",
    "label": "nasforge.compat.nni._labels",
    # nni.nas.nn.pytorch and nni.nas.space
    "MutableModule": "nasforge.compat.nni._modules",
    "ModelSpace": "nasforge.compat.nni._modules",
    "ParametrizedModule": "nasforge.compat.nni._modules",
    "LayerChoice": "nasforge.compat.nni._modules",
    "InputChoice": "nasforge.compat.nni._modules",
    "ChosenInputs": "nasforge.compat.nni._modules",
    "Repeat": "nasforge.compat.nni._modules",
    "Cell": "nasforge.compat.nni._modules",
    "model_context": "nasforge.compat.nni._modules",
    "current_model": "nasforge.compat.nni._modules",
    "nni_arch": "nasforge.compat.nni._modules",
    # loading NNI files unchanged
    "load": "nasforge.compat.nni._importer",
}

#: the names of _EXPORTS, spelled out so that type checkers see them exported
__all__ = [
    "Categorical",
    "CategoricalMultiple",
    "Cell",
    "ChosenInputs",
    "InputChoice",
    "LabeledMutable",
    "LayerChoice",
    "ModelSpace",
    "Mutable",
    "MutableExpression",
    "MutableModule",
    "MutableSymbol",
    "Numerical",
    "ParametrizedModule",
    "Repeat",
    "Sample",
    "auto_label",
    "choice",
    "current_model",
    "ensure_frozen",
    "label",
    "label_scope",
    "load",
    "loguniform",
    "model_context",
    "nni_arch",
    "normal",
    "qloguniform",
    "qnormal",
    "quniform",
    "uniform",
]

_lazy_getattr, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


#: NNI 3.0 names with no nasforge meaning: asking for one is one line naming it
_UNMAPPED = {
    "Constraint": "constraints between choices",
    "ExpressionConstraint": "constraints between choices",
    "MutableAnnotation": "constraints between choices",
    "MutableList": "containers of mutables",
    "MutableDict": "containers of mutables",
    "frozen_context": "NNI's dry-run context",
    "frozen_factory": "NNI's dry-run context",
    "MutationAnchor": "graph mutation anchors",
    "GraphModelSpace": "graph model spaces",
}


def __getattr__(name: str) -> Any:
    """Returns a name of the table above, or NNI's form of a ``torch.nn`` name:
    ``Mutable<Name>`` and ``<Name>`` for a module class (parametrized: it takes mutables),
    anything else of ``torch.nn`` as it is.

    Raises:
        SpaceError: an NNI name this adapter does not map (named, with why).
        AttributeError: any other unknown name.
    """
    try:
        return _lazy_getattr(name)
    except AttributeError:
        pass
    if name in _UNMAPPED:
        from nasforge.errors import SpaceError

        raise SpaceError(
            f"NNI construct not mapped: {name} ({_UNMAPPED[name]}) has no nasforge "
            "equivalent; rewrite that part of the space with LayerChoice/InputChoice/"
            "nni.choice, or keep it in NNI"
        )
    from torch import nn

    from nasforge.compat.nni._modules import parametrized

    base = name[len("Mutable") :] if name.startswith("Mutable") else name
    target = getattr(nn, base, None)
    plain = (nn.Module, nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList)
    if isinstance(target, type) and issubclass(target, nn.Module) and target not in plain:
        made = parametrized(target, name)  # type: ignore[arg-type]
        globals()[name] = made
        return made
    if target is not None and base == name:
        return target
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge.compat.nni._importer import load
    from nasforge.compat.nni._labels import auto_label, label, label_scope
    from nasforge.compat.nni._modules import (
        Cell,
        ChosenInputs,
        InputChoice,
        LayerChoice,
        ModelSpace,
        MutableModule,
        ParametrizedModule,
        Repeat,
        choice,
        current_model,
        model_context,
        nni_arch,
    )
    from nasforge.compat.nni._mutable import (
        Categorical,
        CategoricalMultiple,
        LabeledMutable,
        Mutable,
        MutableExpression,
        MutableSymbol,
        Numerical,
        Sample,
        ensure_frozen,
        loguniform,
        normal,
        qloguniform,
        qnormal,
        quniform,
        uniform,
    )
