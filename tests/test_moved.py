"""Modules that moved keep working for 0.1 code, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = {
    "nasforge.engine.store": ("nasforge.run.store", "Store"),
    "nasforge.engine.results": ("nasforge.run.results", "rank_trials"),
    "nasforge.engine.export": ("nasforge.run.export", "load_model"),
    "nasforge.engine.progress": ("nasforge.run.progress", "Progress"),
    "nasforge.oneshot.experiment": ("nasforge.oneshot.runner", "OneShotExperiment"),
}
#: moved after 0.2 (issue 34): the DARTSformer kind left the example spaces for its family ...
MOVED_AFTER_0_2 = {
    "nasforge.spaces.seq2seq": ("nasforge.oneshot.dartsformer.space", "Seq2SeqSpace"),
    "nasforge.spaces.seq2seq_ops": ("nasforge.oneshot.dartsformer.ops", "make_ops"),
    "nasforge.spaces.seq2seq_train": ("nasforge.oneshot.dartsformer.train", "TrainConfig"),
    "nasforge.spaces.seq2seq_runner": ("nasforge.oneshot.dartsformer.runner", "Seq2SeqSearch"),
    # ... and the process a trial runs in got its own floor below the record
    "nasforge.run.devices": ("nasforge.runtime.devices", "trial_device"),
    "nasforge.run.threads": ("nasforge.runtime.threads", "set_threads"),
    "nasforge.run.weights": ("nasforge.runtime.weights", "save_weights"),
    "nasforge.run.loopback": ("nasforge.runtime.loopback", "pin_to_loopback"),
}
MOVED.update(MOVED_AFTER_0_2)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_module_warns_and_reexports(old: str) -> None:
    """Importing the old path warns with the new path and gives the same objects."""
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


@pytest.mark.parametrize("old", sorted(MOVED_AFTER_0_2))
def test_moved_module_keeps_every_public_name(old: str) -> None:
    """Every name the new module exports is there under the old path, the same object."""
    new, _ = MOVED_AFTER_0_2[old]
    with pytest.warns(DeprecationWarning):
        sys.modules.pop(old, None)
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    assert set(module.__all__) == set(target.__all__)
    for name in target.__all__:
        assert getattr(module, name) is getattr(target, name), name


@pytest.mark.parametrize("name", ["Seq2SeqSpace", "TransformerSeq2Seq", "space_size"])
def test_seq2seq_names_of_the_example_spaces_warn(name: str) -> None:
    """``nasforge.spaces.Seq2SeqSpace`` (and its two siblings) still resolve, with a warning
    naming the new module."""
    import nasforge.spaces
    from nasforge.oneshot.dartsformer import space

    sys.modules.pop("nasforge.spaces.seq2seq", None)
    vars(nasforge.spaces).pop("seq2seq", None)
    with pytest.warns(DeprecationWarning, match="nasforge.oneshot.dartsformer.space"):
        value = getattr(nasforge.spaces, name)
    assert value is getattr(space, name)
