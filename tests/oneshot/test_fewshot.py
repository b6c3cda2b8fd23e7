"""Few-shot as a search (nasforge/oneshot/fewshot.py's FewShotSpos): the loop's record,
checkpoints, resume and export, its own settings, and SPOS where it does not split."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

import nasforge as nf
from nasforge.cli import main
from nasforge.engine import Store
from nasforge.errors import ConfigError
from nasforge.oneshot import OneShot, OneShotSearch, search
from nasforge.oneshot.supernet import inherit_weights
from nasforge.run.export import load_model

from ._spaces import ToySpace
from .test_runner import _write

EVOLUTION = {"cycles": 4, "population": 2, "sample_size": 2, "selection": "loss"}


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(48, 1, 6, 6, generator=g), torch.randint(0, 3, (48,), generator=g)


def _run(algorithm: str, epochs: int, **settings: Any) -> Any:
    torch.manual_seed(0)
    return search(ToySpace(), algorithm, _data(), epochs=epochs, batch_size=16, threads=1,
                  progress="off", **EVOLUTION, **settings)  # fmt: skip


def _model(net: Any) -> dict[str, torch.Tensor]:
    return net.model.state_dict()


def _weights(net: Any) -> dict[str, torch.Tensor]:
    return dict(net.model.named_parameters())


def test_fewshot_that_splits_after_its_last_epoch_is_spos() -> None:
    """Until the split few-shot trains as SPOS, bitwise: split after the last epoch, its
    supernet's weights and its pick are SPOS's, and each sub-supernet's weights are a copy
    (batch-norm statistics differ: each candidate is recalibrated where it is held)."""
    spos = _run("spos", 2)
    few = _run("fewshot", 2, split_epoch=2)
    assert few.arch == spos.arch and few.evaluated == spos.evaluated
    a, b = _weights(spos.supernet), _weights(few.supernet)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert len(few.supernet.held) == 2  # e0 (3 candidates, the first with the most) split in 3
    assert all(torch.equal(_weights(sub)[k], b[k]) for sub in few.supernet.held for k in b)


def test_after_the_split_each_sub_supernet_trains_only_its_own_architectures() -> None:
    """Split on e1 after epoch 1 of 2: the supernet (e1=conv3's) leaves e1's conv1 weights as
    they were at the split, the held one (e1=conv1's) leaves conv3's; an architecture's
    weights are inherited from the sub-supernet that holds it."""
    seen: dict[int, dict[str, torch.Tensor]] = {}

    def keep(row: dict, state: Any) -> None:
        seen[row["epoch"]] = copy.deepcopy(_model(state.net))

    res = _run("fewshot", 2, split_on=["e1"], split_epoch=1, checkpoint=keep)
    at_split, net = seen[1], res.supernet
    (sub,) = net.held
    kept = {"e1.conv1": _model(net), "e1.conv3": _model(sub)}
    for prefix, state in kept.items():
        keys = [k for k in state if k.startswith(prefix)]
        assert keys and all(torch.equal(state[k], at_split[k]) for k in keys), prefix
    moved = [k for k in at_split if k.startswith("e1.conv3")]
    assert not all(torch.equal(_model(net)[k], at_split[k]) for k in moved)
    arch = {**ToySpace().search_space().default(), "e1": "conv1"}
    assert net.holder(arch) is sub and net.holder({**arch, "e1": "conv3"}) is net
    mine, theirs = net.extract(arch).state_dict(), inherit_weights(sub, arch).state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in mine.items())


def test_a_resumed_fewshot_search_ends_bitwise_as_an_uninterrupted_one() -> None:
    """A search resumed after the split from its checkpoint (sub-supernets and their momentum
    included) ends with the same weights and pick as one that ran through."""
    saved: dict[int, dict] = {}

    def keep(row: dict, state: Any) -> None:
        saved[row["epoch"]] = copy.deepcopy(state.state_dict())

    whole = _run("fewshot", 3, split_on=["e1"], split_epoch=1)
    torch.manual_seed(0)
    search(ToySpace(), "fewshot", _data(), epochs=3, batch_size=16, threads=1, progress="off",
           checkpoint=keep, split_on=["e1"], split_epoch=1, **EVOLUTION)  # fmt: skip
    resumed = _run("fewshot", 3, split_on=["e1"], split_epoch=1, resume_from=saved[2])
    a, b = whole.supernet.state_dict(), resumed.supernet.state_dict()
    assert any(k.startswith("held.0.") for k in a)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.arch == whole.arch


def test_fewshot_settings_are_its_own_and_checked(tmp_path: Path) -> None:
    """Bad split settings are refused by few-shot's own check, or (what needs the space)
    before training and before a run's record is made; the split settings are few-shot's."""
    with pytest.raises(ConfigError, match="split_on must be a list of one or two"):
        OneShot("fewshot", split_on="e1")
    with pytest.raises(ConfigError, match="split_epoch must be an int >= 0"):
        OneShot("fewshot", split_epoch=-1)
    with pytest.raises(ConfigError, match="population >= 2"):
        OneShot("fewshot", population=1)
    with pytest.raises(ConfigError, match="'split_on' is a setting of fewshot, not spos"):
        OneShot("spos", split_on=["e1"])
    with pytest.raises(ConfigError, match="must name distinct decisions"):
        _run("fewshot", 1, split_on=["nope"])
    with pytest.raises(ConfigError, match="beyond the search's 1 epochs"):
        _run("fewshot", 1, split_epoch=2)
    with pytest.raises(ConfigError, match="must name distinct decisions"):
        OneShotSearch(ToySpace(), {"name": "fewshot", "split_on": ["e1", "e1"]}, _data(),
                      directory=tmp_path / "run")  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_fewshot_run_file_records_exports_and_loads(tmp_path: Path, capsys) -> None:
    """`nasforge run` of `strategy: {name: fewshot, ...}` records every scored architecture and
    the pick, whose checkpoint holds the weights of its own sub-supernet; it exports and
    loads."""
    f = _write(tmp_path, {"name": "fewshot", "split_on": ["op"], **EVOLUTION})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    with Store.open(d) as store:
        trials, section = store.trials(), store.config()["oneshot"]["strategy"]
        supernet = torch.load(store.artifact("supernet"), weights_only=True)
    assert section["name"] == "fewshot" and section["config"]["split_on"] == ["op"]
    assert {t.status for t in trials} == {"done"} and len(trials) > 1
    assert any(k.startswith("held.0.model.") for k in supernet)  # op: 2 candidates, one held
    found = trials[-1]
    saved = torch.load(d / found.checkpoint, weights_only=True)
    prefix = "held.0.model." if found.arch["op"] == "pool" else "model."
    assert torch.equal(saved["stem.weight"], supernet[prefix + "stem.weight"])
    capsys.readouterr()
    assert main(["export", str(d), "--top", "1"]) == 0
    model = load_model(capsys.readouterr().out.split()[0])
    assert isinstance(model, torch.nn.Module) and nf.arch_id(found.arch)
