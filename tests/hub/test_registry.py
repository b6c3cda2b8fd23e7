"""The hub's registry and public lookups: names, did-you-mean errors, entries that resolve."""

from __future__ import annotations

import pytest

from nasforge import hub
from nasforge.errors import ConfigError, SpaceError
from nasforge.hub._registry import register_space


def test_unknown_names_suggest_the_closest() -> None:
    """A misspelt space or architecture name is a ConfigError naming the closest names."""
    with pytest.raises(ConfigError, match="did you mean 'nasbench201'"):
        hub.space("nasbench-201")
    with pytest.raises(ConfigError, match="no published architecture is called 'nope'"):
        hub.arch("nope")


def test_a_name_registers_once() -> None:
    """Registering a space name twice is refused."""
    with pytest.raises(SpaceError, match="registered twice"):
        register_space("nasbench201", dict, paper="x", size_paper=None, family="x")


def test_every_published_architecture_names_a_registered_space() -> None:
    """Every registered architecture names a registered space and states its source."""
    for name in hub.archs():
        entry = hub.arch_info(name)
        assert entry.space in hub.spaces() and entry.source
        assert name in hub.archs(entry.space)
