"""Imports the hub's mobile and transformer families so that they register (fixed names).

Each family module registers its spaces and published architectures when imported (see
:mod:`nasforge.hub._registry`); add one ``from nasforge.hub import <module>`` line per family.
"""

from __future__ import annotations

__all__: list[str] = []
