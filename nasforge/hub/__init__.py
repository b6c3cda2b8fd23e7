"""The model space hub: the published search spaces and their searched architectures by name.

``hub.space(name, **kwargs)`` builds a space (its defaults are the paper's search setting);
``hub.arch(name)`` gives a published architecture as a plain arch dict of its space, frozen
like any other with ``nf.freeze``; ``hub.model(name)`` freezes it at the paper's setting
(width, depth, resolution, class count). ``hub.spaces()`` and ``hub.archs()`` list the names;
``hub.space_info`` / ``hub.arch_info`` give the paper, its stated size and its table's numbers;
``hub.profile`` counts parameters and multiply-adds as the papers do.

    import nasforge as nf
    from nasforge import hub

    space = hub.space("darts", n_classes=10)
    model = nf.freeze(space, hub.arch("darts-v2"))

One module per family (:mod:`nasforge.hub.nasnet`, :mod:`nasforge.hub.nasbench101`,
:mod:`nasforge.hub.nasbench201`, and the mobile families imported by
:mod:`nasforge.hub._mobile_families`); each registers its entries in
:mod:`nasforge.hub._registry` when imported. The hub is a set of spaces: it imports the space
language, the shared cell operations of :mod:`nasforge.spaces`, torch, and the once-for-all
family's MobileNetV3 space (served as is); nothing in nasforge below it imports the hub.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nasforge.errors import SpaceError
from nasforge.hub import (  # noqa: F401  (they register)
    _mobile_families,
    nasbench101,
    nasbench201,
    nasnet,
)
from nasforge.hub._count import Profile, profile
from nasforge.hub._registry import (
    ArchEntry,
    SpaceEntry,
    arch_names,
    get_arch_entry,
    get_space_entry,
    space_names,
)
from nasforge.space.context import Frozen, use

__all__ = [
    "space",
    "arch",
    "model",
    "spaces",
    "archs",
    "space_info",
    "arch_info",
    "example_input",
    "freeze_direct",
    "profile",
    "Profile",
    "SpaceEntry",
    "ArchEntry",
]


def spaces(family: str | None = None) -> list[str]:
    """Returns the names of the hub's spaces (of one ``family`` if given), sorted."""
    return space_names(family)


def archs(space: str | None = None) -> list[str]:
    """Returns the names of the published architectures (of one ``space`` if given), sorted."""
    return arch_names(space)


def space_info(name: str) -> SpaceEntry:
    """Returns the registry entry of space ``name``: builder, paper, the paper's stated size.

    Raises:
        ConfigError: no space has that name (the message suggests the closest).
    """
    return get_space_entry(name)


def arch_info(name: str) -> ArchEntry:
    """Returns the registry entry of published architecture ``name``: its space, the setting it
    was published at, the paper's parameters and multiply-adds, and the table they come from.

    Raises:
        ConfigError: no architecture has that name (the message suggests the closest).
    """
    return get_arch_entry(name)


def space(name: str, **kwargs: Any) -> Any:
    """Returns a new model space ``name``, built with ``kwargs`` (defaults: the paper's search
    setting; see each family module for the arguments).

    Raises:
        ConfigError: no space has that name.
    """
    return get_space_entry(name).builder(**kwargs)


def arch(name: str) -> dict[str, Any]:
    """Returns published architecture ``name`` as a plain arch dict of its space (a copy);
    ``name`` may be a benchmark's own string (NAS-Bench-201's ``|nor_conv_3x3~0|+|...|``).

    Raises:
        ConfigError: no architecture has that name.
        ArchitectureError: a malformed benchmark string (the message gives the form).
    """
    return copy.deepcopy(dict(get_arch_entry(name).arch))


def model(name: str, **overrides: Any) -> nn.Module:
    """Returns published architecture ``name`` frozen at its paper's setting (``overrides``
    change the space's arguments, e.g. ``n_classes=10``); ``name`` may be a NAS-Bench-201
    string, built at the benchmark's CIFAR-10 setting.

    Raises:
        ConfigError: no architecture has that name.
        ArchitectureError: the architecture does not fit its space as built, or a malformed
            benchmark string.
    """
    entry = get_arch_entry(name)
    kwargs = {"n_classes": entry.num_classes, **entry.space_kwargs, **overrides}
    return freeze_direct(get_space_entry(entry.space).builder, kwargs, entry.arch)


def freeze_direct(builder: Any, kwargs: Mapping[str, Any], arch: Mapping[str, Any]) -> nn.Module:
    """Returns the model of ``arch`` built by ``builder(**kwargs)`` with only the chosen
    candidates, without recording the whole space first (a paper-sized cell space holds every
    operation of every edge: minutes to build). The hub's spaces label every choice, which
    this needs; a space with an unlabelled choice is recorded and frozen the usual way. A
    model built directly carries no mutation history (``nf.freeze`` of the space gives one).

    Raises:
        ArchitectureError: a label of the space is missing from ``arch``, or a value is not
            among its candidates.
    """
    try:
        with use(Frozen(dict(arch))):
            return builder(**kwargs)  # type: ignore[no-any-return]
    except SpaceError:  # an unlabelled choice: it needs the recorded space's labels
        return builder(**kwargs).freeze(arch)  # type: ignore[no-any-return]


def example_input(name: str, batch: int = 1) -> torch.Tensor:
    """Returns a random input of published architecture ``name`` at its paper's resolution.

    Raises:
        ConfigError: no architecture has that name.
    """
    entry = get_arch_entry(name)
    if entry.input_dtype == "long":
        return torch.randint(0, 100, (batch, *entry.shape))
    return torch.randn(batch, *entry.shape)
