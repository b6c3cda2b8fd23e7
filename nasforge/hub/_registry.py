"""The hub's registry: which published model spaces and architectures exist, and their sources.

How a family module registers (one module per family of spaces, e.g. ``nasforge/hub/nasnet.py``):

1. At import, call :func:`register_space` once per space it defines and :func:`register_arch`
   once per published architecture. Nothing else runs at import (no model is built)::

       from nasforge.hub._registry import register_arch, register_space

       register_space(
           "nasbench201",          # the name users pass to hub.space(); lower case, dashes
           NasBench201Space,       # builder: **kwargs -> ModelSpace; defaults = paper's setting
           paper="Dong & Yang 2020, NAS-Bench-201 (ICLR)",
           size_paper=15_625,      # the number of architectures the paper states, or None
           family="nasbench201",   # the module's family name (groups spaces in docs/benchmark)
           note="",                # optional: how size_paper is counted, if not obvious
           exception="",           # optional: docs/hub.md's key explaining a size not met
           size_distinct=None,     # optional: the distinct networks the paper counts when
                                   # several encodings build one network (NAS-Bench-101)
       )
       register_arch(
           "nasnet-a",                       # the name users pass to hub.arch()
           space="nasnet",                   # a registered space name
           arch={"normal.n2.op0": ...},      # a plain arch dict of that space (a Mapping)
           space_kwargs={"dataset": "imagenet", "n_cells": 4, "channels": 44},  # paper setting
           resolution=224, num_classes=1000, # the paper's input side and class count
           params_paper=5.3e6,               # parameters in the paper's table (None: not given)
           madds_paper=564e6,                # multiply-adds in the paper's table (None: not given)
           source="Zoph et al. 2018, Table 2: NASNet-A (4 @ 1056)",  # paper and table
           note="",                          # optional: why a number may not be met
           exception="",                     # optional: the key of the paragraph of
                                             # docs/hub.md that explains a number not met
           aliases=("nasnet-a-mobile",),     # optional: other names of the same entry
       )

   ``space_kwargs`` is passed to the space's builder together with ``num_classes`` (as
   ``n_classes=``) to freeze the architecture at the paper's setting: ``hub.model(name)``. An
   architecture whose input is not an image sets ``input_shape`` (without the batch dimension)
   and ``input_dtype`` (``"float"`` or ``"long"``, token ids).

2. Add ``from nasforge.hub import <module>`` to ``nasforge/hub/__init__.py`` (cell families) or
   ``nasforge/hub/_mobile_families.py`` (mobile and transformer families): modules are imported
   by fixed names, never by a string built at run time.

   A space whose benchmark names every architecture by a string of its own (NAS-Bench-201's
   ``|nor_conv_3x3~0|+|...|``) also calls :func:`register_arch_form` once: ``hub.arch`` and
   ``hub.model`` then take such a string as a name, at the benchmark's setting::

       register_arch_form(
           "nasbench201",                    # the space the strings name architectures of
           matches=lambda name: "~" in name, # is ``name`` meant as one of these strings?
           parse=from_arch_string,           # str -> arch dict; ArchitectureError if malformed
           resolution=32, num_classes=10,    # the setting ``hub.model(string)`` builds
           source="the benchmark's architecture string",
       )

3. Add ``tests/hub/test_<module>.py``: the registered architectures freeze, a short search
   runs. ``benchmarks/hub.py`` and ``docs/hub.md`` pick the entries up from this registry.

An ``exception`` key marks a paper's number the entry does not meet (a size not equal, a
parameter count off by more than 2%, multiply-adds by more than 5%): docs/hub.md has a
paragraph that starts with the key in bold and says why, and ``benchmarks/hub.py`` reports
the figures outside the targets with their keys (a miss without a key is "unexplained").

Invariants: names are unique among spaces and among architectures; an architecture names a
registered space (checked when it is looked up, so families may register in any order).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nasforge.errors import ConfigError, SpaceError

__all__ = [
    "SpaceEntry",
    "ArchEntry",
    "register_space",
    "register_arch",
    "register_arch_form",
    "get_space_entry",
    "get_arch_entry",
    "space_names",
    "arch_names",
]


@dataclass(frozen=True)
class SpaceEntry:
    """Returns nothing; one registered space: its builder and what its paper says of it.

    ``size_paper`` is what the paper counts as the space's size, comparable with
    ``search_space().size`` (the combinations of the space's decisions); ``size_distinct`` is
    the number of distinct networks the paper states when several of those combinations build
    the same network (NAS-Bench-101: 2^21 x 3^5 encodings, 423,624 distinct cells), else None.
    """

    name: str
    builder: Callable[..., Any]
    paper: str
    size_paper: int | None
    family: str
    note: str = ""
    exception: str = ""
    size_distinct: int | None = None


@dataclass(frozen=True)
class ArchEntry:
    """Returns nothing; one published architecture, the setting it was published at, and the
    paper's numbers for it."""

    name: str
    space: str
    arch: Mapping[str, Any]
    resolution: int
    num_classes: int
    params_paper: float | None
    madds_paper: float | None
    source: str
    space_kwargs: Mapping[str, Any] = field(default_factory=dict)
    input_shape: tuple[int, ...] | None = None
    input_dtype: str = "float"
    note: str = ""
    exception: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """Returns the shape of one input without the batch dimension (``3×R×R`` for images)."""
        return self.input_shape or (3, self.resolution, self.resolution)


_SPACES: dict[str, SpaceEntry] = {}
_ARCHS: dict[str, ArchEntry] = {}
#: (matches, build) per registered form: build(name) -> the ArchEntry of a string name
_FORMS: list[tuple[Callable[[str], bool], Callable[[str], ArchEntry]]] = []
#: alias -> the registered name it stands for (``hub.archs()`` lists registered names only)
_ALIASES: dict[str, str] = {}


def _suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.5)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def register_space(
    name: str,
    builder: Callable[..., Any],
    *,
    paper: str,
    size_paper: int | None,
    family: str,
    note: str = "",
    exception: str = "",
    size_distinct: int | None = None,
) -> SpaceEntry:
    """Returns the entry of a new space, registered under ``name``.

    Raises:
        SpaceError: ``name`` is already registered.
    """
    if name in _SPACES:
        raise SpaceError(f"hub space {name!r} is registered twice; give each space one name")
    entry = SpaceEntry(name, builder, paper, size_paper, family, note, exception, size_distinct)
    _SPACES[name] = entry
    return entry


def register_arch(
    name: str,
    *,
    space: str,
    arch: Mapping[str, Any],
    resolution: int,
    num_classes: int,
    params_paper: float | None,
    madds_paper: float | None,
    source: str,
    space_kwargs: Mapping[str, Any] | None = None,
    input_shape: tuple[int, ...] | None = None,
    input_dtype: str = "float",
    note: str = "",
    exception: str = "",
    aliases: tuple[str, ...] = (),
) -> ArchEntry:
    """Returns the entry of a new published architecture, registered under ``name`` and
    looked up by ``aliases`` too (the paper's own name of a setting, e.g. "nasnet-a-mobile").

    Raises:
        SpaceError: ``name`` or an alias is already registered, or ``input_dtype`` is not
            float or long.
    """
    for taken in (name, *aliases):
        if taken in _ARCHS or taken in _ALIASES:
            raise SpaceError(f"hub architecture {taken!r} is registered twice; give each one name")
    if input_dtype not in ("float", "long"):
        raise SpaceError(f"hub architecture {name!r}: input_dtype must be 'float' or 'long'")
    entry = ArchEntry(
        name,
        space,
        dict(arch),
        resolution,
        num_classes,
        params_paper,
        madds_paper,
        source,
        dict(space_kwargs or {}),
        input_shape,
        input_dtype,
        note,
        exception,
        tuple(aliases),
    )
    _ARCHS[name] = entry
    _ALIASES.update(dict.fromkeys(aliases, name))
    return entry


def register_arch_form(
    space: str,
    *,
    matches: Callable[[str], bool],
    parse: Callable[[str], Mapping[str, Any]],
    resolution: int,
    num_classes: int,
    source: str,
    space_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Returns nothing; makes every string that ``matches`` a name of an architecture of
    ``space``: ``parse(name)`` is its arch dict, built at ``space_kwargs``, ``resolution`` and
    ``num_classes`` (a benchmark's own names, such as NAS-Bench-201's architecture strings).
    A registered name wins over a form; ``parse`` raises for a string that matches but is
    malformed, so a bad string is that one error, not "no architecture is called"."""

    def build(name: str) -> ArchEntry:
        return ArchEntry(
            name,
            space,
            dict(parse(name)),
            resolution,
            num_classes,
            None,
            None,
            source,
            dict(space_kwargs or {}),
        )

    _FORMS.append((matches, build))


def get_space_entry(name: str) -> SpaceEntry:
    """Returns the registered space called ``name``.

    Raises:
        ConfigError: no space has that name (the message suggests the closest names).
    """
    try:
        return _SPACES[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"no hub space is called {name!r}{_suggest(name, space_names())}; "
            f"the hub has: {', '.join(space_names())}"
        ) from None


def get_arch_entry(name: str) -> ArchEntry:
    """Returns the registered published architecture called ``name`` (or by an alias of it),
    or the entry of a string of a registered form (:func:`register_arch_form`).

    Raises:
        ConfigError: no architecture has that name, or it names an unregistered space.
        ArchitectureError: ``name`` is meant as a string of a registered form (e.g. a
            NAS-Bench-201 architecture string) but is malformed (the form's own message).
    """
    entry = _ARCHS.get(_ALIASES.get(name, name)) if isinstance(name, str) else None
    if entry is None and isinstance(name, str):
        entry = next((build(name) for matches, build in _FORMS if matches(name)), None)
    if entry is None:
        raise ConfigError(
            f"no published architecture is called "
            f"{name!r}{_suggest(name, [*arch_names(), *_ALIASES])}; "
            f"the hub has: {', '.join(arch_names())}"
        )
    get_space_entry(entry.space)
    return entry


def space_names(family: str | None = None) -> list[str]:
    """Returns the registered space names (of one ``family`` if given), sorted."""
    return sorted(n for n, e in _SPACES.items() if family is None or e.family == family)


def arch_names(space: str | None = None) -> list[str]:
    """Returns the registered architecture names (of one ``space`` if given), sorted."""
    return sorted(n for n, e in _ARCHS.items() if space is None or e.space == space)
