"""``python -m nasforge``: the command line, as ``torchrun ... -m nasforge run FILE`` starts
each rank of a data-parallel job (docs/distributed.md)."""

from __future__ import annotations

import sys

from nasforge.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
