"""The deprecation table (nasforge/_deprecated.py): every moved path warns with its new path
and the release that removes it, and gives the same objects, through the import hook, a
package's or module's ``__getattr__`` and the record's reference resolver; removed paths
fail in one line naming the new one; and no entry outlives its removal version."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import nasforge
from nasforge._deprecated import (
    KEYWORDS_REMOVED_IN,
    MOVED,
    REMOVED,
    DeprecatedPaths,
    find,
    install,
)
from nasforge.errors import ConfigError
from nasforge.run.refs import from_ref

PKG = Path(nasforge.__file__).parent
MODULES = sorted(old for old in MOVED if ":" not in old)
NAMES = sorted(old for old in MOVED if ":" in old)


def _version(text: str) -> tuple[int, ...]:
    """Returns ``"0.4.0"`` as ``(0, 4, 0)``."""
    return tuple(int(part) for part in text.split("."))


def _load(path: str) -> object:
    """Returns the object at ``"module:Name"`` (the module for ``"module"``), no table."""
    module, _, name = path.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, name) if name else obj


def _warns(old: str, new: str, removed_in: str) -> pytest.WarningsChecker:
    """Returns a check for the DeprecationWarning that names ``old``, ``new`` and the release."""
    text = f"{old} moved to {new} and the old path will be removed in nasforge {removed_in}"
    return pytest.warns(DeprecationWarning, match=re.escape(text))


def test_every_entry_goes_in_a_later_release() -> None:
    """Each moved path, and the deprecated keywords, name a removal version later than this
    one: the release that reaches it fails here until the entry and its code are deleted."""
    now = _version(nasforge.__version__)
    due = [old for old, e in MOVED.items() if _version(e.removed_in) <= now]
    assert not due, f"remove {due} (and their code): their removal version has come"
    assert _version(KEYWORDS_REMOVED_IN) > now, "remove the deprecated settings keywords"


def test_no_module_of_the_package_stands_at_an_old_path() -> None:
    """No old path of the table is a file of the package (the hook serves them, no shim), and
    each new path exists."""
    for old in [*MOVED, *REMOVED]:
        module = old.partition(":")[0]
        if ":" not in old:
            rel = Path(*module.split(".")[1:])
            assert not rel.with_suffix(".py").exists() and not (PKG / rel).is_dir(), old
    for entry in [*MOVED.values(), *REMOVED.values()]:
        assert _load(entry.new) is not None


@pytest.mark.parametrize("old", MODULES)
def test_a_moved_module_warns_and_is_its_new_home(
    old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the old path warns with the new path and the removal version, and gives the
    new module itself: every public name is the same object."""
    entry = MOVED[old]
    new = importlib.import_module(entry.new)
    monkeypatch.delitem(sys.modules, old, raising=False)
    with _warns(old, entry.new, entry.removed_in):
        module = importlib.import_module(old)
    assert module is new and module.__name__ == entry.new and module.__spec__.name == entry.new
    name = new.__all__[0]
    with _warns(f"{old}:{name}", f"{entry.new}:{name}", entry.removed_in):
        assert from_ref({"object": f"{old}:{name}"}) is getattr(new, name)


@pytest.mark.parametrize("old", NAMES)
def test_a_moved_name_warns_and_is_the_same_object(old: str) -> None:
    """A moved name of a module or package (``nasforge.spaces.Seq2SeqSpace``) warns with its
    new path and the removal version and is the object at the new path; a stored reference to
    it resolves the same."""
    entry = MOVED[old]
    module, _, name = old.partition(":")
    target = _load(entry.new)
    dotted = (old.replace(":", "."), entry.new.replace(":", "."))
    with _warns(*dotted, entry.removed_in):
        assert getattr(importlib.import_module(module), name) is target
    with _warns(old, entry.new, entry.removed_in):
        assert from_ref({"object": old}) is target


@pytest.mark.parametrize("module", sorted({old.partition(":")[0] for old in NAMES}))
def test_a_name_that_never_was_is_an_attribute_error(module: str) -> None:
    """A module or package serving moved names still raises AttributeError for any other
    missing name (so ``hasattr`` works), without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=f"module {module!r} has no attribute 'nope'"):
            _ = importlib.import_module(module).nope


def test_a_reference_into_a_moved_module_keeps_its_attribute_path() -> None:
    """``nasforge.spaces.seq2seq:Seq2SeqSpace.build`` (a record's nested path) resolves at
    the new home's same nested path."""
    from nasforge.oneshot.dartsformer.space import Seq2SeqSpace

    assert find("nasforge.spaces.seq2seq:Seq2SeqSpace.forward", MOVED) == (
        "nasforge.oneshot.dartsformer.space:Seq2SeqSpace.forward",
        MOVED["nasforge.spaces.seq2seq"],
    )
    with pytest.warns(DeprecationWarning):
        got = from_ref({"object": "nasforge.spaces.seq2seq:Seq2SeqSpace.forward"})
    assert got is Seq2SeqSpace.forward


@pytest.mark.parametrize("old", sorted(REMOVED))
def test_a_removed_path_fails_in_one_line_naming_the_new_one(old: str) -> None:
    """Importing a removed module, reading a removed name or resolving a stored reference to
    either fails with one line that names the new path and the release that removed it."""
    entry = REMOVED[old]
    module, _, name = old.partition(":")
    if name:
        owner = importlib.import_module(module)
        text = f"{module}.{name} was removed in nasforge {entry.removed_in}; use "
        with pytest.raises(AttributeError, match=re.escape(text + entry.new.replace(":", "."))):
            getattr(owner, name)
        ref = old
    else:
        text = f"{old} was removed in nasforge {entry.removed_in}; use {entry.new}"
        with pytest.raises(ModuleNotFoundError, match=re.escape(text)) as err:
            importlib.import_module(old)
        assert "\n" not in str(err.value)
        ref = f"{old}:anything"
    with pytest.raises(ConfigError, match=re.escape(f"was removed in nasforge {entry.removed_in}")):
        from_ref({"object": ref})


def test_the_hook_is_installed_once_by_importing_nasforge() -> None:
    """``import nasforge`` puts one finder of old paths on ``sys.meta_path``, and installing
    it again adds none; in a fresh process an old path works right after ``import nasforge``."""
    install()
    assert sum(type(f).__name__ == DeprecatedPaths.__name__ for f in sys.meta_path) == 1
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "try:\n    import nasforge.run.threads\nexcept DeprecationWarning as w:\n    print(w)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "nasforge.run.threads moved to nasforge.runtime.threads" in out.stdout, out


def test_the_deprecated_keywords_name_their_removal_version() -> None:
    """A settings keyword passed to a kind's constructor warns with the release that removes
    it (the table's ``KEYWORDS_REMOVED_IN``)."""
    from dataclasses import dataclass

    from nasforge.run.settings import kind_settings

    @dataclass
    class S:
        steps: int = 1

    text = f"Run(steps=...) is deprecated and will be removed in nasforge {KEYWORDS_REMOVED_IN}"
    with pytest.warns(DeprecationWarning, match=re.escape(text)):
        assert kind_settings(S, None, {"steps": 3}, "Run").steps == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kind_settings(S, None, {"steps": 3}, "a run", deprecated=False)
