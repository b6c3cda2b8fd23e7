"""Character-level text: the one small real corpus nasforge ships, for examples that must run
from a fresh install.

:func:`tinyshakespeare` returns the path of the first 199,994 characters (cut at a blank line)
of Karpathy's tinyshakespeare (char-rnn, MIT; the text is in the public domain; ``LICENSE`` and
``SOURCE.md`` beside the file). The full 1,115,394 characters are one public file; give its path
wherever a path is taken.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["tinyshakespeare"]


def tinyshakespeare() -> Path:
    """Returns the path of the shipped tinyshakespeare subset (a UTF-8 text file)."""
    return Path(__file__).resolve().parent / "tinyshakespeare" / "input.txt"
