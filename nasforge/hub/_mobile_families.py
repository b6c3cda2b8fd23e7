"""Imports the hub's mobile and transformer families so that they register (fixed names).

Each family module registers its spaces and published architectures when imported (see
:mod:`nasforge.hub._registry`); add one ``from nasforge.hub import <module>`` line per family.
"""

from __future__ import annotations

from nasforge.hub import (  # noqa: F401  (they register)
    autoformer,
    fbnet,
    mnasnet,
    mobilenetv3,
    proxylessnas,
    spos,
    textnas,
)

__all__: list[str] = []
