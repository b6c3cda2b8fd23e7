"""Path-level edits keep the function: the child computes what its parent did (1e-5)."""

from __future__ import annotations

import pytest
import torch

from nasforge.errors import ArchitectureError
from nasforge.spaces.pathlevel import PathLevelSpace


@pytest.mark.parametrize("op", ["replicate", "split", "deepen"])
def test_each_edit_preserves_the_function_of_a_trained_like_parent(op):
    """Outputs before and after each declared preserving edit agree within 1e-5, also when
    the edit lands inside branches made by earlier edits."""
    space = PathLevelSpace(n_inputs=8, n_outputs=3, units=6)
    ss = space.search_space()
    x = torch.randn(32, 8)
    arch: dict = {"edits": []}
    model = space.freeze(arch)
    for p in model.parameters():  # away from init: biases too, so relu cuts some units
        p.data.normal_(0, 0.7)
    for step in range(4):
        options = [e for e in ss.edits(arch) if e["op"] == op]
        assert options
        edit = options[step % len(options)]
        assert space.language.preserves(edit)
        child_arch = ss.extend(arch, edit)
        child = space.grow(model, arch, child_arch)
        torch.testing.assert_close(child(x), model(x), atol=1e-5, rtol=0)
        arch, model = child_arch, child


def test_grow_refuses_a_child_that_does_not_extend_its_parent():
    """grow needs the parent's history as a prefix."""
    space = PathLevelSpace(n_inputs=4, n_outputs=2, units=4)
    parent = {"edits": [{"op": "deepen", "node": "d"}]}
    with pytest.raises(ArchitectureError, match="prefix"):
        space.grow(space.freeze(parent), parent, {"edits": [{"op": "split", "node": "d"}]})
