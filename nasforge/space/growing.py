"""``GrowingSpace``: a model space whose architectures are edit histories, frozen by replaying
them, and whose function-preserving edits let a child inherit its parent's weights.

A growing space pairs a pure :class:`~nasforge.space.edits.EditSpace` (what the networks are
and how edits change them) with the torch side a subclass writes: :meth:`GrowingSpace.build`
makes the module of a state, and :meth:`GrowingSpace.inherit` moves a parent's weights into
the child of a preserving edit (net2net: the child computes what the parent did).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from torch import nn

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.edits import EDITS, BaseEdits, Edit, EditSpace, State
from nasforge.space.model_space import Mutation

__all__ = ["GrowingSpace"]


class GrowingSpace(abc.ABC):
    """Returns the models of edit histories: ``nf.freeze(space, {"edits": [...]})`` replays the
    history on the base network and builds it. Subclasses implement :meth:`build`, and
    :meth:`inherit` for the edits their language declares preserving.

    Invariants: a frozen model's ``mutation_history`` lists its edits in order; ``grow`` of a
    parent by preserving edits computes what the parent computed (up to float rounding).

    Raises:
        SpaceError: ``language`` is not a BaseEdits.
    """

    def __init__(self, language: BaseEdits, max_edits: int = 64, sample_length: int = 4) -> None:
        self.language = language
        self._space = EditSpace(language, max_edits, sample_length)

    def search_space(self) -> EditSpace:
        """Returns the edit space: the histories and the edits that grow them."""
        return self._space

    @abc.abstractmethod
    def build(self, state: State) -> nn.Module:
        """Returns a freshly initialised module that computes the network ``state``."""

    def inherit(self, parent: nn.Module, state: State, edit: Edit, child: nn.Module) -> None:
        """Copies ``parent``'s weights (the network ``state``) into ``child`` (the network
        after ``edit``) so that the child computes what the parent did.

        Raises:
            SpaceError: the space declares no preserving edit (this default).
        """
        raise SpaceError(f"{type(self).__name__} declares no function-preserving edit")

    def freeze(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns the freshly initialised model of the history ``arch``.

        Raises:
            ArchitectureError: a malformed history or an edit that does not apply.
        """
        arch = self._space.validate(arch)
        model = self.build(self._space.replay(arch))
        history = [Mutation(EDITS, "edit", e, str(e["op"])) for e in arch[EDITS]]
        object.__setattr__(model, "_nf_history", history)
        return model

    def grow(self, parent: nn.Module, parent_arch: Mapping[str, object], arch: Any) -> nn.Module:
        """Returns the model of ``arch`` with ``parent``'s weights carried through the edits
        that ``arch`` adds to ``parent_arch``, each function-preserving.

        Raises:
            ArchitectureError: ``arch`` does not extend ``parent_arch``, or adds an edit that
                its language does not declare preserving (the message names it).
        """
        before = self._space.history(parent_arch)
        after = self._space.history(arch)
        if after[: len(before)] != before:
            raise ArchitectureError(
                f"{len(after)} edits do not extend the parent's {len(before)}; grow needs the "
                "parent's history as a prefix"
            )
        model, done = parent, list(before)
        for edit in after[len(before) :]:
            if not self.language.preserves(edit):
                raise ArchitectureError(
                    f"edit {edit} is not function-preserving, so the child cannot inherit; "
                    "freeze it and train it from scratch"
                )
            state = self._space.replay({EDITS: done})
            done.append(edit)
            child = self.build(self._space.replay({EDITS: done}))
            self.inherit(model, state, edit, child)
            model = child
        history = [Mutation(EDITS, "edit", e, str(e["op"])) for e in after]
        object.__setattr__(model, "_nf_history", history)
        return model
