"""``ModelSpace``: an ordinary ``nn.Module`` whose ``__init__`` contains choices, and ``freeze``.

A space is recorded once, when the user constructs it: the wrapped ``__init__`` runs under a
:class:`~nasforge.space.context.Recording`, every choice registers its decision, and afterwards
unlabelled decisions get labels from their module paths. Freezing an architecture runs the same
``__init__`` with the same arguments again under a :class:`~nasforge.space.context.Frozen`
context, where every choice returns its chosen value or module: the result is the model a person
would have written by hand, with the same parameters and state-dict keys.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import nn

from nasforge.errors import ArchitectureError, NasforgeError, SpaceError
from nasforge.space.context import Declaration, Frozen, Key, Recording, current, use
from nasforge.space.expr import ChoiceValue, Leaf
from nasforge.space.search_space import RANGE_KINDS, Decision, SearchSpace

__all__ = [
    "ModelSpace",
    "BaseSpace",
    "freeze",
    "Mutation",
    "mutation_history",
    "shared_labels",
    "hparams",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class BaseSpace(Protocol):
    """What every model space offers, whether written inline or as a base model plus mutators."""

    def search_space(self) -> SearchSpace:
        """Returns every decision of the space, in a stable order."""
        ...

    def freeze(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns the plain model of architecture ``arch``."""
        ...


@dataclass(frozen=True)
class Mutation:
    """One decision applied to make a model: the label, its kind, the value taken, and where."""

    label: str
    kind: str
    value: Any
    where: str


def _attribute_paths(root: nn.Module) -> dict[int, str]:
    """Returns the first attribute path of each value-choice leaf stored on a module."""
    found: dict[int, str] = {}
    for path, module in root.named_modules():
        for attr, value in vars(module).items():
            items = value if isinstance(value, (tuple, list)) else (value,)
            for item in items:
                if isinstance(item, ChoiceValue) and isinstance(item.expr, Leaf):
                    found.setdefault(id(item.expr), f"{path}.{attr}" if path else attr)
    return found


def _assign_labels(
    root: nn.Module, declarations: list[Declaration], module_paths: dict[int, str]
) -> None:
    """Gives each unlabelled declaration a label derived from where it sits in ``root``.

    Modules take their path (``cells.2.op``, from ``module_paths``: id -> path); value choices
    take the path of the attribute that holds them (``stem.0.out_channels``), or
    ``<Class>.value_<n>`` when no module stores them.
    """
    attr_paths = _attribute_paths(root)
    explicit = {d.label for d in declarations if d.explicit}
    taken = set(explicit)
    n_loose = 0
    for d in declarations:
        if d.explicit:
            continue
        if isinstance(d.owner, Leaf):
            label = attr_paths.get(id(d.owner))
        else:
            label = module_paths.get(id(d.owner))
        if label is None or label in taken:
            if label is not None and label in explicit:
                raise SpaceError(
                    f"the automatic label {label!r} of an unlabelled {d.kind} choice equals an "
                    "explicit label; rename the explicit label or label this choice"
                )
            while (label := f"{type(root).__name__}.value_{n_loose}") in taken:
                n_loose += 1
            n_loose += 1
        d.label = label
        taken.add(label)


def _record(self: nn.Module, rec: Recording) -> None:
    module_paths = {id(m): p for p, m in self.named_modules() if p}  # one walk serves all
    _assign_labels(self, rec.declarations, module_paths)
    decisions: dict[str, Decision] = {}
    where: dict[str, str] = {}
    auto: dict[Key, str] = {}
    for d in rec.declarations:
        assert d.label is not None
        decisions.setdefault(d.label, d.decision())
        # a tied label is described by its first place, as its decision is
        where.setdefault(d.label, module_paths.get(id(d.owner), type(self).__name__))
        if not d.explicit:
            auto[d.key] = d.label
    object.__setattr__(self, "_nf_space", SearchSpace(list(decisions.values())))
    object.__setattr__(self, "_nf_where", where)
    object.__setattr__(self, "_nf_auto_labels", auto)
    logger.debug("recorded %s: %d decisions", type(self).__name__, len(decisions))


def _wrap_init(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        if current() is not None:  # nested in a space, or being frozen: plain construction
            init(self, *args, **kwargs)
            return
        rec = Recording()
        with use(rec):
            init(self, *args, **kwargs)
        object.__setattr__(self, "_nf_init_args", (args, kwargs))
        _record(self, rec)

    __init__._nf_wrapped = True  # type: ignore[attr-defined]
    return __init__


class ModelSpace(nn.Module):
    """Returns a model space when constructed: subclass it and put choices in ``__init__``.

    Choices (``LayerChoice``, ``InputChoice``, ``choice``, ``Repeat``) may also sit in any module
    built inside that ``__init__``. The constructor arguments are kept, so that an architecture
    can be frozen by running the same ``__init__`` again.

    Invariants: labels are unique (a repeated label is one tied decision); the decisions and their
    order are the same every time the space is constructed with the same arguments; the
    ``__init__`` must declare the same choices whatever the values of earlier choices.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_nf_wrapped", False):
            cls.__init__ = _wrap_init(init)  # type: ignore[method-assign]

    def search_space(self) -> SearchSpace:
        """Returns every decision of this space (label, kind, candidates) in a stable order.

        Raises:
            SpaceError: the object is a frozen model, not a space.
        """
        space: SearchSpace | None = self.__dict__.get("_nf_space")
        if space is None:
            raise SpaceError(
                f"{type(self).__name__} is a frozen model (or its __init__ did not finish), not a "
                "model space; search spaces come from a constructed ModelSpace"
            )
        return space

    def freeze(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns the plain model of ``arch``: only chosen candidates built, no search machinery.

        Invariants: the model's parameters and state-dict keys are those of the same architecture
        written by hand; ``mutation_history(model)`` gives the decisions taken.

        Raises:
            ArchitectureError: ``arch`` has an unknown or missing label or a value that is not a
                candidate, or building the model with its values fails (an invalid shape).
        """
        space = self.search_space()
        arch = space.validate(arch)
        args, kwargs = self.__dict__["_nf_init_args"]
        ctx = Frozen(arch, self.__dict__["_nf_auto_labels"])
        try:
            with use(ctx):
                model = type(self)(*args, **kwargs)
        except NasforgeError:
            raise
        except Exception as exc:  # a value choice produced an impossible module
            values = {d.label: arch[d.label] for d in space.decisions if d.kind == "value"}
            raise ArchitectureError(
                f"architecture {arch_repr(arch)} cannot be built: {type(exc).__name__}: {exc}. "
                f"The value choices {values} are the likely cause: check the arithmetic that "
                "derives shapes from them (each derived size must be a positive int that the "
                "layers accept)"
            ) from exc
        where = self.__dict__["_nf_where"]
        history = [
            Mutation(d.label, d.kind, arch[d.label], where.get(d.label, ""))
            for d in space.decisions
        ]
        object.__setattr__(model, "_nf_history", history)
        return model


def arch_repr(arch: Mapping[str, object], limit: int = 200) -> str:
    """Returns a short printable form of an architecture for messages."""
    text = repr(dict(arch))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def freeze(space: BaseSpace, arch: Mapping[str, object]) -> nn.Module:
    """Returns the plain PyTorch model of architecture ``arch`` of ``space``.

    Raises:
        ArchitectureError: see :meth:`ModelSpace.freeze`.
        SpaceError: ``space`` is not a model space.
    """
    if not isinstance(space, BaseSpace):
        raise SpaceError(
            f"freeze() takes a model space (a nasforge.ModelSpace or MutatedSpace), got "
            f"{type(space).__name__}"
        )
    return space.freeze(arch)


def mutation_history(model: nn.Module) -> list[Mutation]:
    """Returns the decisions that made a frozen model, in the order of its space.

    Raises:
        SpaceError: ``model`` was not made by ``freeze``.
    """
    history = model.__dict__.get("_nf_history")
    if history is None:
        raise SpaceError(
            f"{type(model).__name__} was not made by nasforge.freeze; it has no mutation history"
        )
    return list(history)


def hparams(model: nn.Module) -> dict[str, Any]:
    """Returns the values a frozen model took for its range decisions (``nf.uniform``,
    ``nf.integer``: a learning rate, a weight decay), label -> value, in space order; empty for
    a space without ranges.

    Raises:
        SpaceError: ``model`` was not made by ``freeze``.
    """
    return {m.label: m.value for m in mutation_history(model) if m.kind in RANGE_KINDS}


def shared_labels(a: nn.Module, b: nn.Module) -> list[str]:
    """Returns the labels on which two models of one space took the same value: the parts of the
    two models that are built the same way."""
    hb = {m.label: m.value for m in mutation_history(b)}
    return [m.label for m in mutation_history(a) if m.label in hb and hb[m.label] == m.value]
