"""The Python examples of docs/reversible.md run as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

DOC = Path(__file__).resolve().parents[2] / "docs" / "reversible.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_example_runs(index: int) -> None:
    """Each python block of docs/reversible.md executes without error."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    exec(compile(BLOCKS[index], f"docs/reversible.md block {index}", "exec"), {})


def test_doc_has_examples() -> None:
    """The doc keeps its two examples (custom reversible space, seq2seq space)."""
    assert len(BLOCKS) == 2
