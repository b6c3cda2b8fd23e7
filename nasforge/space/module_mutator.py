"""Module-level mutators: decisions that swap submodules of an unmodified model, with no graph.

A :class:`ModuleMutator` picks submodules of the base model by type, by a glob over qualified
names (``"transformer.h.*.mlp"``) or by a predicate ``(name, module) -> bool``, and replaces
each by one of its candidates: a module, a factory ``(old_module) -> module`` (which may wrap
the old module), ``None`` (keep the old module), or, with ``factory=``, one of plain
``candidates`` values turned into a module by ``factory(old_module, value)``.

Nothing is traced: a space built only from module-level mutators freezes an architecture by
deep-copying the base model and setting the chosen modules at their qualified names, so the
frozen model is the base model's own class (a Hugging Face model keeps its ``forward``
signature, output type, ``generate`` and ``save_pretrained``). Every site is a labelled
``layer`` decision like any other, so strategies and one-shot supernets see it.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from torch import nn

from nasforge.errors import SpaceError
from nasforge.space._mutator_base import MutableGraph, Mutator, _is_plain, _set_submodule
from nasforge.space.modules import LayerChoice

__all__ = ["ModuleMutator", "MutableModel", "ModuleMatch", "ModuleChoice"]

#: a module type, a glob over qualified names, or a predicate ``(name, module) -> bool``
ModuleMatch = type | str | Callable[[str, nn.Module], bool]


def matches(match: ModuleMatch, name: str, module: nn.Module) -> bool:
    """Returns whether submodule ``name`` of a model is selected by ``match``."""
    if isinstance(match, type):
        return isinstance(module, match)
    if isinstance(match, str):
        return fnmatch.fnmatchcase(name, match)
    return bool(match(name, module))


class MutableModel:
    """Returns the submodules of a (copied) model and swaps them by qualified name; what a
    module-level mutator edits.

    Invariants: only modules are swapped (``setattr`` on the parent); the root keeps its class.
    """

    def __init__(self, root: nn.Module) -> None:
        self.root = root

    def modules(self, match: ModuleMatch) -> list[tuple[str, nn.Module]]:
        """Returns ``(qualified name, module)`` of every submodule ``match`` selects, in module
        order, leaving out those nested inside an earlier selected one."""
        out: list[tuple[str, nn.Module]] = []
        for name, module in self.root.named_modules():
            if not name or any(name.startswith(p + ".") for p, _ in out):
                continue
            if matches(match, name, module):
                out.append((name, module))
        return out

    def get(self, name: str) -> nn.Module:
        """Returns the submodule at ``name``."""
        return self.root.get_submodule(name)

    def replace(self, name: str, module: nn.Module) -> None:
        """Sets ``module`` at qualified name ``name`` (``ModuleList`` items included).

        Raises:
            SpaceError: ``module`` is not an ``nn.Module``.
        """
        if not isinstance(module, nn.Module):
            raise SpaceError(
                f"a module-level candidate for {name!r} returned {type(module).__name__}, "
                "expected an nn.Module"
            )
        _set_submodule(self.root, name, module)  # also right for ModuleList/Sequential items


class ModuleMutator(Mutator):
    """Replaces each submodule that ``match`` selects by one of ``candidates`` (see the module
    docstring). One ``layer`` decision per site, labelled ``"{label}/{qualified name}"``; with
    ``tie=True`` one decision ``label`` for every site.

    Subclass it and override :meth:`mutate_modules` for other module-level edits; call
    ``self.choose`` for every decision, as a graph mutator does.

    Raises:
        SpaceError: no candidates; ``factory`` given with candidates that are not plain values.
    """

    def __init__(
        self,
        match: ModuleMatch,
        candidates: Mapping[str, Any] | Sequence[Any],
        factory: Callable[[nn.Module, Any], nn.Module] | None = None,
        label: str = "module",
        tie: bool = False,
    ) -> None:
        if not candidates:
            raise SpaceError(f"ModuleMutator {label!r} needs at least one candidate")
        if factory is not None:
            values = list(candidates)
            if isinstance(candidates, Mapping) or not all(_is_plain(v) for v in values):
                raise SpaceError(
                    f"ModuleMutator {label!r}: with factory=, candidates are plain values "
                    f"(int, float, str, bool), got {values!r:.80}; pass a mapping of modules "
                    "or factories without factory= instead"
                )
            self.candidates: dict[Any, Any] = {v: v for v in values}
        elif isinstance(candidates, Mapping):
            self.candidates = dict(candidates)
        else:
            raise SpaceError(
                f"ModuleMutator {label!r}: candidates must map names to modules or factories "
                "(or be plain values with factory=)"
            )
        self.match, self.factory, self.label, self.tie = match, factory, label, tie

    # -- the edit -----------------------------------------------------------------------------
    def sites(self, model: MutableModel) -> list[tuple[str, nn.Module]]:
        """Returns the submodules this mutator edits.

        Raises:
            SpaceError: ``match`` selects nothing; the message lists some module names.
        """
        found = model.modules(self.match)
        if not found:
            names = [n for n, _ in model.root.named_modules() if n][:12]
            raise SpaceError(
                f"ModuleMutator {self.label!r}: {self.match!r} selects no submodule of "
                f"{type(model.root).__name__}; its modules include {names}"
            )
        return found

    def site_label(self, name: str) -> str:
        """Returns the decision label of the site at qualified name ``name``."""
        return self.label if self.tie else f"{self.label}/{name}"

    def build(self, value: Any, old: nn.Module) -> nn.Module:
        """Returns the module candidate ``value`` puts where ``old`` was (``old`` itself for a
        ``None`` candidate)."""
        cand = self.candidates[value]
        if self.factory is not None:
            module = self.factory(old, value)
        elif cand is None:
            module = old
        elif isinstance(cand, nn.Module):
            module = copy.deepcopy(cand)
        else:
            module = cand(old)
        if not isinstance(module, nn.Module):
            raise SpaceError(
                f"ModuleMutator {self.label!r}: candidate {value!r} gave "
                f"{type(module).__name__}, expected an nn.Module"
            )
        return module

    def mutate_modules(self, model: MutableModel) -> None:
        """Swaps every site for its chosen candidate."""
        for name, old in self.sites(model):
            value = self.choose(list(self.candidates), self.site_label(name), kind="layer")
            new = self.build(value, old)
            if new is not old:
                model.replace(name, new)

    def expand(self, root: nn.Module) -> None:
        """Puts at every site of ``root`` a :class:`ModuleChoice` of all candidates (each
        built from its own copy of the old module), for a supernet. Inside a choice that an
        earlier mutator put, sites are named as in the frozen model (without the candidate's
        name), so each keeps the label the space gave it.

        Raises:
            SpaceError: ``match`` selects nothing.
        """
        sites = list(_logical_sites(root, self.match, ""))
        if not sites:
            self.sites(MutableModel(root))  # raises the no-match error
        for path, owner, attr, old in sites:
            built = {v: self.build(v, copy.deepcopy(old)) for v in self.candidates}
            owner._modules[attr] = ModuleChoice(self.site_label(path), built)

    def mutate(self, graph: MutableGraph) -> None:
        raise SpaceError(
            f"{type(self).__name__} is a module-level mutator; MutatedSpace applies it with "
            "mutate_modules, not on a graph"
        )


def _logical_sites(
    module: nn.Module, match: ModuleMatch, path: str
) -> Iterator[tuple[str, nn.Module, str, nn.Module]]:
    """Yields ``(path, parent, attribute, module)`` of the submodules ``match`` selects, with
    the candidates of a :class:`ModuleChoice` seen at the choice's own path."""
    for attr, child in list(module._modules.items()):
        if child is None:
            continue
        here = path if isinstance(module, ModuleChoice) else (f"{path}.{attr}" if path else attr)
        if not isinstance(child, ModuleChoice) and matches(match, here, child):
            yield here, module, attr, child
        else:
            yield from _logical_sites(child, match, here)


class ModuleChoice(LayerChoice):
    """Returns nothing when called (a space part); holds every candidate module of one
    module-level site, as a ``LayerChoice`` whose names are the decision's values, so one-shot
    supernets convert it like any LayerChoice.

    Raises:
        SpaceError: a value whose text is not a valid module name (contains ``.``).
    """

    def __init__(self, label: str, built: Mapping[Any, nn.Module]) -> None:
        nn.Module.__init__(self)
        self._label = label
        self.names = list(built)
        for value, module in built.items():
            if "." in str(value) or not str(value):
                raise SpaceError(
                    f"{label!r}: candidate {value!r} cannot name a supernet branch (it contains "
                    "'.'); use int or str candidate values for one-shot search"
                )
            self.add_module(str(value), module)

    @property
    def label(self) -> str:
        """Returns the decision's label."""
        return self._label
