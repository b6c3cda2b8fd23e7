"""Devices as a resource: the GPU checks, the pure slot assignment, the trial's device, and a
one-line ConfigError before any record for every kind of run asked for a GPU it lacks."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.runtime import devices as dv


@pytest.fixture
def two_gpus(monkeypatch):
    """This CPU machine made to look like one with two GPUs (torch's count is faked)."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


# -- the pure slot assignment ----------------------------------------------------------------
AMOUNTS = st.one_of(
    st.integers(1, 8).map(lambda n: 1 / n),  # a share 1/n
    st.integers(1, 4).map(float),  # whole GPUs
)


@given(st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True), AMOUNTS)
def test_slots_never_give_a_gpu_beyond_its_share(devices, g):
    """Every slot holds ceil(g) distinct GPUs of `devices`; a GPU is in at most 1/g slots for a
    share and in one slot for whole GPUs, so concurrent trials (one per slot) never hold more
    than the whole GPU; no GPU is left idle that a slot could use."""
    slots = dv.gpu_slots(devices, g)
    need = math.ceil(g)
    assert all(len(s) == need and len(set(s)) == need and set(s) <= set(devices) for s in slots)
    uses = Counter(d for s in slots for d in s)
    cap = round(1 / g) if g < 1 else 1
    assert all(n <= cap for n in uses.values())
    assert sum(g for _ in slots) <= len(devices) + 1e-9  # never more than the GPUs there are
    expected = len(devices) * round(1 / g) if g < 1 else len(devices) // int(g)
    assert len(slots) == expected


def test_slots_spread_the_first_trials_over_the_gpus():
    """Two GPUs at 0.5 give four slots, the first two on different GPUs; 0 gives none."""
    assert dv.gpu_slots([0, 1], 0.5) == [(0,), (1,), (0,), (1,)]
    assert dv.gpu_slots([0, 1, 2], 2) == [(0, 1)]
    assert dv.gpu_slots([0, 1], 0) == []


# -- the checks --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "g, devices, match",
    [
        (0.3, None, r"1/n"),
        (1.5, None, r"whole GPUs"),
        (-1, None, r">= 0"),
        (True, None, r">= 0"),
        (0, [0], r"gpus_per_trial is 0"),
        (1, [0, 5], r"GPU ids among the 2"),
        (1, [0, 0], r"distinct"),
        (3, None, r"needs 3 GPUs per trial, but only 2"),
        (2, [1], r"needs 2 GPUs per trial, but only 1"),
    ],
)
def test_check_gpus_refuses_impossible_requests(g, devices, match):
    """Bad amounts, unknown or repeated ids, and more GPUs than exist are ConfigErrors."""
    with pytest.raises(ConfigError, match=match):
        dv.check_gpus(g, devices, visible=[0, 1])


def test_check_gpus_defaults_to_every_visible_gpu():
    """devices=None means every visible GPU; a CPU request needs none."""
    assert dv.check_gpus(0.5, None, visible=[0, 1]) == (0.5, (0, 1))
    assert dv.check_gpus(1, [1], visible=[0, 1]) == (1.0, (1,))
    assert dv.check_gpus(0, None, visible=[]) == (0.0, ())


def test_a_gpu_on_a_machine_without_one_is_one_line():
    """On this machine torch sees no GPU: any GPU request is a one-line ConfigError."""
    if torch.cuda.device_count():
        pytest.skip("this check is about a machine without a GPU")
    for call in (lambda: dv.check_gpus(1), lambda: dv.check_device("cuda")):
        with pytest.raises(ConfigError, match="this machine has none") as err:
            call()
        assert "\n" not in str(err.value)


def test_check_device_knows_which_gpus_exist(two_gpus):
    """cuda:1 exists on a two-GPU machine, cuda:3 does not; 'cpu' and None always pass."""
    assert dv.check_device("cuda:1") == "cuda:1"
    assert dv.check_device(None) is None and dv.check_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match=r"GPU 3, but this machine has 2 \(cuda:0..cuda:1\)"):
        dv.check_device("cuda:3", "device")
    with pytest.raises(ConfigError, match="is not a device"):
        dv.check_device("gpu0")


def test_cuda_visible_devices_maps_through_the_engines_own(monkeypatch):
    """A child of an engine that sees physical GPUs 5 and 7 gets their physical ids."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert dv.cuda_visible_devices([0, 1]) == "0,1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert dv.cuda_visible_devices([1]) == "7"


# -- the trial's device ------------------------------------------------------------------------
def test_trial_device_follows_the_placement():
    """Outside a trial and for a CPU trial the device is the CPU; a trial given a GPU that
    torch cannot see here (a fake or logical one) falls back to the CPU, and its placement
    still names the GPU."""
    import nasforge as nf

    assert nf.trial_device() == torch.device("cpu")
    with dv.placed(dv.Placement("host")):
        assert nf.trial_device() == torch.device("cpu")
    with dv.placed(dv.Placement("host", (0,), 0.5, (0,))):
        expected = "cuda:0" if torch.cuda.device_count() else "cpu"
        assert str(nf.trial_device()) == expected
        assert dv.trial_placement().to_dict() == {"node": "host", "devices": [0], "gpus": 0.5}
    assert dv.trial_placement() is None


def test_trial_device_is_the_gpu_torch_numbers(two_gpus):
    """A pool child that sees its GPU as cuda:0 gets cuda:0, whatever its recorded id."""
    with dv.placed(dv.Placement("host", (1,), 1.0, (0,))):
        assert dv.trial_device() == torch.device("cuda", 0)
    with dv.placed(dv.Placement("host", (0, 1), 2.0)):
        assert dv.trial_devices() == [torch.device("cuda", 0), torch.device("cuda", 1)]


def test_placement_text():
    """The status column: host and GPUs, the share when it is one."""
    assert dv.placement_text({"node": "a", "devices": [0, 1], "gpus": 2}) == "a gpu 0,1"
    assert dv.placement_text({"node": "a", "devices": [1], "gpus": 0.5}) == "a gpu 1 (x0.5)"
    assert dv.placement_text({"node": "a", "devices": []}) == "a cpu"
    assert dv.placement_text(None) == ""


def test_a_ray_node_id_tells_apart_nodes_that_share_an_address():
    """Trials on two Ray nodes of one machine (both 127.0.0.1) show different locations: the
    record keeps the node id and the column shows its first characters."""
    a = dv.Placement("127.0.0.1", node_id="3f2a9c1b" + "0" * 48).to_dict()
    b = dv.Placement("127.0.0.1", (1,), 0.5, node_id="77aa01ee" + "0" * 48).to_dict()
    assert a == {"node": "127.0.0.1", "devices": [], "node_id": "3f2a9c1b" + "0" * 48}
    assert dv.placement_text(a) == "127.0.0.1 node 3f2a9c1b cpu"
    assert dv.placement_text(b) == "127.0.0.1 node 77aa01ee gpu 1 (x0.5)"
    assert "node_id" not in dv.Placement("host").to_dict()  # off Ray: as before


# -- every kind of run: a missing GPU is a ConfigError before the record -------------------------
SPACE = """
from torch import nn
import nasforge as nf


class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.op = nf.LayerChoice({"a": lambda: nn.Linear(64, 10), "b": lambda: nn.Linear(64, 10)},
                                 label="op")

    def forward(self, x):
        return self.op(x.flatten(1))
"""


def _run_files(tmp_path: Path) -> dict[str, Path]:
    """Returns a run file per kind, each asking for a GPU (``cuda:3``, or a trial GPU)."""
    (tmp_path / "dev_space.py").write_text(SPACE)
    py = {
        "multitrial-gpus": "config = {'n_trials': 2, 'gpus_per_trial': 3}\n",
        "multitrial-evaluator": "evaluator = {'type': 'classification', 'device': 'cuda:3'}\n"
        "config = {'n_trials': 2}\n",
        "oneshot": "data = 'digits'\nstrategy = {'name': 'darts', 'epochs': 1}\n"
        "config = {'device': 'cuda:3'}\n",
    }
    files = {}
    for name, body in py.items():
        f = tmp_path / f"{name}.py"
        strategy = "" if name == "oneshot" else "strategy = 'random'\n"
        evaluator = "" if "evaluator" in body or name == "oneshot" else (
            "evaluator = {'type': 'classification'}\n"
        )  # fmt: skip
        f.write_text(f"from dev_space import Net\nspace = Net()\n{strategy}{evaluator}{body}")
        files[name] = f
    files["ofa"] = tmp_path / "ofa.yaml"
    files["ofa"].write_text("kind: ofa\nspace: compofa\ndevice: cuda:3\n")
    files["pipeline"] = tmp_path / "pipe.toml"
    files["pipeline"].write_text('kind = "pipeline"\nsteps = 2\ndevice = "cuda:3"\n')
    from nasforge.oneshot.dartsformer.runner import find_data

    try:
        data = find_data("shared/data/opennmt_toy_ende", Path(__file__).resolve().parents[2])
    except ConfigError:
        return files
    files["dartsformer"] = tmp_path / "dartsformer.yaml"
    files["dartsformer"].write_text(
        f"kind: dartsformer\ndata: {data}\npairs: 60\ntest: 6\nvocab: 300\nmax_steps: 2\n"
        "device: cuda:3\n"
    )
    return files


def test_every_kind_of_run_refuses_a_missing_gpu_before_its_record(tmp_path, caplog, two_gpus):
    """`nasforge run` of a file asking for GPU 3 on a machine with two (or 3 GPUs per trial)
    fails with one error line naming the device, and no record is created; the kinds that
    take no device (one-shot, once-for-all, pipeline) refuse the setting just as early."""
    files = _run_files(tmp_path)
    for name, f in files.items():
        d = tmp_path / "runs" / name
        caplog.clear()
        assert main(["run", str(f), "--dir", str(d)]) == 2, name
        (err,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert "\n" not in err, (name, err)
        assert "cuda:3" in err or "3 GPUs" in err, (name, err)
        assert not (d / "run.db").exists(), name
    assert {"multitrial-gpus", "multitrial-evaluator", "oneshot", "ofa", "pipeline"} <= set(files)


def test_multitrial_gpus_need_a_gpu(tmp_path):
    """gpus_per_trial on a machine without GPUs, or devices beyond those there are: a
    ConfigError from the constructor, before any directory is made."""
    from nasforge.engine import Experiment
    from nasforge.space.search_space import Decision, SearchSpace

    space = SearchSpace([Decision("x", "value", (1, 2))])
    if not torch.cuda.device_count():
        with pytest.raises(ConfigError, match="this machine has none"):
            Experiment(space, lambda a, r: 1.0, n_trials=1, gpus_per_trial=1, directory=tmp_path)
    with pytest.raises(ConfigError, match="devices"):
        Experiment(space, lambda a, r: 1.0, n_trials=1, devices=[9], gpus_per_trial=1,
                   directory=tmp_path / "x")  # fmt: skip
    assert not (tmp_path / "x").exists()


def test_python_apis_with_a_device_check_it(two_gpus):
    """The one-shot CMP search, the pipeline's run config and the shared-weights evaluator
    refuse GPU 3 of two with the same check."""
    from nasforge.engine.crossmodel.supergraph import SharedWeightsEvaluator
    from nasforge.oneshot.cmp import _check_device
    from nasforge.parallel.config import RunConfig, check_config
    from nasforge.parallel.supernet import ChoiceSupernet

    x = (torch.zeros(4, 64), torch.zeros(4, dtype=torch.long))
    for call in (
        lambda: _check_device("cuda:3"),
        lambda: check_config(RunConfig(ChoiceSupernet, device="cuda:3")),
        lambda: SharedWeightsEvaluator(x, device="cuda:3"),
    ):
        with pytest.raises(ConfigError, match="cuda:3"):
            call()


@pytest.mark.parametrize(
    "given, n", [(0.333333, 3), ("1/3", 3), (" 1 / 4 ", 4), (1 / 3, 3), (0.1666667, 6), ("0.5", 2)]
)
def test_a_share_near_1_over_n_or_written_1_over_n_is_accepted_as_1_over_n(given, n):
    """A share within rounding of 1/n (0.333333) or the text 1/n (YAML reads `1/3` as a
    string) is taken as exactly 1/n."""
    assert dv.check_gpu_amount(given) == 1 / n


@pytest.mark.parametrize("given", [0.3, 0.45, 0.7, "1/3.5", "a/b", "1/0"])
def test_every_suggested_share_is_accepted(given):
    """A refused share suggests values, and each value it suggests is accepted."""
    with pytest.raises(ConfigError) as info:
        dv.check_gpu_amount(given)
    tail = str(info.value).partition("e.g.")[2]
    suggested = [float(x) for x in re.findall(r"\b0\.\d+\b", tail)]
    assert suggested or not isinstance(given, float)
    for s in suggested:
        assert 0 < dv.check_gpu_amount(s) < 1
