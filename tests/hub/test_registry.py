"""The hub's registry and public lookups: names, did-you-mean errors, entries that resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasforge import hub
from nasforge.errors import ConfigError, SpaceError
from nasforge.hub._registry import register_arch, register_space


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


def test_an_alias_names_its_entry_and_is_taken_once() -> None:
    """An alias gives the registered entry itself (hub.archs lists the name only); a name or
    alias registered again is refused, and a misspelt alias is suggested."""
    assert hub.arch_info("nasnet-a-mobile") is hub.arch_info("nasnet-a")
    assert "nasnet-a-mobile" not in hub.archs() and "nasnet-a" in hub.archs()
    for taken in ("nasnet-a-mobile", "nasnet-a"):
        with pytest.raises(SpaceError, match="registered twice"):
            register_arch(
                "x-new", space="nasnet", arch={}, resolution=1, num_classes=1,
                params_paper=None, madds_paper=None, source="x", aliases=(taken,),
            )  # fmt: skip
    with pytest.raises(ConfigError, match="did you mean 'darts-v2-mobile'"):
        hub.arch("darts-v2-mobil")


def test_every_published_architecture_names_a_registered_space() -> None:
    """Every registered architecture names a registered space and states its source."""
    for name in hub.archs():
        entry = hub.arch_info(name)
        assert entry.space in hub.spaces() and entry.source
        assert name in hub.archs(entry.space)


def test_every_exception_key_is_explained_in_the_docs() -> None:
    """Each registered exception key starts a bullet of docs/hub.md, in bold, and the keys
    that benchmarks/hub.py reports include the known misses (FBNet-B, the ENAS size)."""
    docs = (Path(__file__).parents[2] / "docs" / "hub.md").read_text()
    keys = {hub.arch_info(n).exception for n in hub.archs()}
    keys |= {hub.space_info(n).exception for n in hub.spaces()}
    keys.discard("")
    assert {"fbnet-b-params", "enas-size", "enas-network"} <= keys
    for key in keys:
        assert f"\n- **{key}** (" in docs, f"docs/hub.md does not explain {key!r}"
