"""Algorithms own their settings and register by name (nasforge/oneshot/algorithms.py): an
algorithm defined here alone, with its own settings, runs through search() and a run file."""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from nasforge.cli import main
from nasforge.engine import Store
from nasforge.errors import ConfigError
from nasforge.oneshot import (
    Algorithm,
    OneShot,
    OneShotSearch,
    SearchConfig,
    common,
    register_algorithm,
    search,
)
from nasforge.oneshot.algorithms import (
    ALGORITHMS,
    LOOP_SETTINGS,
    config_for,
    flat_settings,
    setting_names,
)
from nasforge.oneshot.common import activate
from nasforge.oneshot.spos import SposInput, SposLayer, SposRepeat

from ._spaces import ToySpace
from .test_runner import _write


@dataclass
class PathsSettings:
    """The settings of the test's algorithm: uniform paths trained per step."""

    paths: int = 1

    def check(self) -> None:
        if isinstance(self.paths, bool) or not isinstance(self.paths, int) or self.paths < 1:
            raise ConfigError(f"paths must be an int >= 1, got {self.paths!r}")


@register_algorithm
class ManyPaths(Algorithm):
    """Single-path ops; a step sums the gradients of ``paths`` uniform paths."""

    name = "manypaths"
    settings_class = PathsSettings
    uses_val = False
    learns_arch = False
    layer = SposLayer
    input = SposInput
    repeat = SposRepeat

    @classmethod
    def step(cls, net: Any, state: Any, train: Any, val: Any, cfg: Any) -> tuple[float, None]:
        x, y = train
        total = 0.0
        for _ in range(cfg.algo.paths):
            activate(net, net.space.search_space().sample(state.rng))
            loss = torch.nn.functional.cross_entropy(net(x), y) / cfg.algo.paths
            loss.backward()
            total += float(loss.detach())
        common.apply_weights(net, state.opt_w, cfg)
        return total, None

    @classmethod
    def after_epoch(cls, net: Any, state: Any, split: Any, cfg: Any) -> dict[str, Any]:
        return {"paths": cfg.algo.paths}  # the setting as the hooks saw it

    @classmethod
    def current_arch(cls, net: Any) -> Any:
        arch = net.space.search_space().default()
        activate(net, arch)
        return arch


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(48, 1, 6, 6, generator=g), torch.randint(0, 3, (48,), generator=g)


def test_an_algorithm_of_this_module_alone_runs_with_its_own_setting() -> None:
    """The algorithm above (this module is all it touches: no shared settings class has its
    setting) is found by name, its setting reaches its hooks, and its own check refuses a
    bad value."""
    assert inspect.getsourcefile(ManyPaths) == __file__ and ALGORITHMS["manypaths"] is ManyPaths
    assert "paths" not in {f.name for f in dataclasses.fields(SearchConfig)}
    assert "manypaths" in OneShotSearch.names()
    assert setting_names("manypaths") == [*LOOP_SETTINGS, "paths"]
    res = search(ToySpace(), "manypaths", _data(), epochs=1, batch_size=16, paths=3,
                 progress="off")  # fmt: skip
    assert res.history[0]["paths"] == 3
    with pytest.raises(ConfigError, match="paths must be an int >= 1, got 0"):
        search(ToySpace(), "manypaths", _data(), epochs=1, paths=0, progress="off")
    with pytest.raises(ConfigError, match="paths must be an int >= 1"):
        OneShot("manypaths", paths=0)


def test_a_run_file_names_the_algorithm_and_records_its_setting(tmp_path: Path) -> None:
    """`nasforge run` of a file with `strategy: {name: manypaths, paths: 2}` runs it through the
    one-shot runner; the record keeps the flat section, and a resume reads it back."""
    f = _write(tmp_path, {"name": "manypaths", "paths": 2})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    with Store.open(d) as store:
        section, rows = store.config()["oneshot"]["strategy"], store.progress()
        trials = store.trials()
    assert section["name"] == "manypaths" and section["config"]["paths"] == 2
    assert set(section["config"]) == {*LOOP_SETTINGS, "paths"}
    assert [r["paths"] for r in rows] == [2, 2] and trials[-1].status == "done"
    assert main(["resume", str(d)]) == 0  # finished: the same settings, nothing to do


def test_unknown_keys_and_other_algorithms_settings_say_whose_they_are() -> None:
    """A misspelt setting lists the algorithm's settings and suggests the closest; a setting of
    another algorithm names its owners."""
    with pytest.raises(ConfigError, match="did you mean 'paths'") as err:
        config_for("manypaths", path=2)
    assert "'epochs'" in str(err.value)  # the accepted keys are listed
    owners = "'cycles' is a setting of fairnas, fewshot, spos, not darts"
    with pytest.raises(ConfigError, match=owners):
        search(ToySpace(), "darts", _data(), epochs=1, cycles=30, progress="off")
    with pytest.raises(ConfigError, match="'paths' is a setting of manypaths, not nasb"):
        OneShot("nasb", paths=2)
    with pytest.raises(ConfigError, match="did you mean 'spos'"):
        search(ToySpace(), "spoos", _data(), epochs=1, progress="off")


def test_a_flat_mapping_splits_one_way_and_back() -> None:
    """config_for puts the loop's keys on the config and the algorithm's in ``algo``;
    flat_settings is its inverse; a config of another algorithm's settings is refused."""
    cfg = config_for("spos", {"epochs": 3, "cycles": 7}, selection="loss")
    assert (cfg.epochs, cfg.algo.cycles, cfg.algo.selection) == (3, 7, "loss")
    assert config_for("spos", flat_settings(cfg)) == cfg
    with pytest.raises(ConfigError, match="nasb takes its settings as NasbSettings"):
        search(ToySpace(), "nasb", _data(), config=cfg, progress="off")


def test_registration_refuses_a_taken_built_in_name_and_a_loop_setting() -> None:
    """A built-in's name and a setting named like the loop's are refused at registration."""

    @dataclass
    class Clash:
        epochs: int = 1

        def check(self) -> None:
            pass

    with pytest.raises(ConfigError, match="nasforge's"):
        register_algorithm(type("Mine", (Algorithm,), {"name": "darts"}))
    with pytest.raises(ConfigError, match=r"\['epochs'\] like settings of the search loop"):
        register_algorithm(type("Mine", (Algorithm,), {"name": "mine", "settings_class": Clash}))
    assert "mine" not in ALGORITHMS


def test_a_run_recorded_when_one_config_held_every_setting_resumes(tmp_path: Path) -> None:
    """A record whose strategy section holds every algorithm's settings (as nasforge wrote
    before each algorithm owned its settings) resumes and keeps its section as written; built
    from such a section, the search drops the other algorithms' settings."""
    f = _write(tmp_path, {"name": "nasb", "order": "alternate"})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    with Store.open(d, readonly=False) as store:
        config = store.config()
        ours = config["oneshot"]["strategy"]["config"]
        legacy: dict[str, Any] = {}
        for name in ("darts", "nasb", "spos", "enas", "proxylessnas"):
            legacy.update(json.loads(json.dumps(flat_settings(config_for(name)))))
        legacy.update(ours)
        for added in (
            "checkpoint_every",
            "sync_bn",
            "budget",
            "budget_weight",
            "budget_latency_table",
            "pick",
        ):
            legacy.pop(added)  # added since: a record of then lacks these (DARTS's pick too)
        assert len(legacy) == 31  # the one config's fields
        config["oneshot"]["strategy"]["config"] = legacy
        store.set_config(config)
    assert main(["resume", str(d)]) == 0
    with Store.open(d) as store:
        assert store.config()["oneshot"]["strategy"]["config"] == legacy
    stored = {"space": ToySpace(), "data": _data(), "strategy": {"name": "nasb", "config": legacy}}
    rebuilt = OneShotSearch.from_section(stored)  # the others' settings dropped, as resume does
    assert flat_settings(rebuilt.strategy.config) == flat_settings(config_for("nasb", ours))
