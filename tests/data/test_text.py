"""The shipped tinyshakespeare subset is the real corpus's head, with its licence."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasforge.data import tinyshakespeare

FULL = Path(__file__).resolve().parents[3] / "shared/data/tinyshakespeare/input.txt"


def test_shipped_subset_is_the_head_of_the_real_corpus() -> None:
    """The subset is the full file's first characters, unchanged, cut at a blank line."""
    if not FULL.is_file():
        pytest.skip(f"the full corpus is not at {FULL} (../shared/data)")
    head, full = tinyshakespeare().read_text(), FULL.read_text()
    assert len(head) > 190_000 and full.startswith(head)
    assert full[len(head) - 1 : len(head) + 1] == "\n\n"  # a blank line follows the cut


def test_shipped_subset_carries_its_licence_and_source() -> None:
    """LICENSE (MIT, char-rnn) and SOURCE.md sit beside the text."""
    folder = tinyshakespeare().parent
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "char-rnn" in (folder / "SOURCE.md").read_text()
