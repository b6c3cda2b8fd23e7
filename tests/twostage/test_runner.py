"""The two-stage kind: a run from Python and from a run file, what status shows of it, and
the settings it refuses before its record exists."""

import random
import textwrap
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.errors import ConfigError
from nasforge.run.shortlist import read_shortlist
from nasforge.run.store import Store
from nasforge.twostage import TwoStageSearch
from tests.twostage._two_stage_run import DigitsNet


def evaluate(model, report):
    """A deterministic curve from the parameter count: three reports, the last the metric."""
    n = sum(p.numel() for p in model.parameters())
    for epoch in range(1, 4):
        report(epoch * (n % 101) / 1000)
    return {"default": 3 * (n % 101) / 1000, "params": float(n)}


@pytest.mark.slow
def test_a_rule_shortlist_is_trained_and_status_shows_it_beside_the_tau(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The params rule shortlists the 3 largest within the budget; stage 2 trains exactly
    them in that order, picks the best finished one; status shows the shortlist and τ."""
    d = tmp_path / "run"
    run = TwoStageSearch(DigitsNet(), evaluate, "digits",
                         {"algorithm": "params", "k": 3, "pool": 8, "budget": {"params": 3000}},
                         stopper=None, executor="inprocess", progress="off",
                         directory=d).run()  # fmt: skip
    with Store.open(d) as store:
        shortlist = read_shortlist(store)
        assert shortlist is not None
        cands = shortlist["candidates"]
        trials = store.trials()
        picks = store.picks()
    sizes = [c["params"] for c in cands]
    assert len(cands) == 3 and sizes == sorted(sizes, reverse=True) and max(sizes) <= 3000
    assert [t.arch_id for t in trials] == [c["arch_id"] for c in cands]
    best = max(trials, key=lambda t: t.metrics["default"])
    assert picks == [best.id] and run.best(1)[0].id == best.id
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "the proxy params agrees with parameter count at τ 1.00" in out
    assert "stage 1 (params)" in out and "(the pick)" in out


def test_stage_2_trains_the_whole_shortlist_to_the_end_by_default(tmp_path: Path) -> None:
    """No stopper given: every shortlisted architecture reports all its epochs and finishes;
    the same shortlist under ASHA (trained one at a time) stops the ones the first beats at
    its first rung, which is why ASHA is not the default."""

    def by_size(model, report):  # the shortlist comes largest first: each below the one before
        n = sum(p.numel() for p in model.parameters())
        for epoch in range(1, 4):
            report(epoch * n / 1e5)
        return {"default": 3 * n / 1e5}

    shortlist = {"algorithm": "params", "k": 3, "pool": 8, "budget": {"params": 3000}}
    run = TwoStageSearch(DigitsNet(), by_size, "digits", shortlist, executor="inprocess",
                         progress="off", directory=tmp_path / "default").run()  # fmt: skip
    trials = run.trials()
    assert len(trials) == 3
    assert all(t.status == "done" and len(t.intermediates) == 3 for t in trials)
    asha = TwoStageSearch(DigitsNet(), by_size, "digits", shortlist, stopper="asha",
                          executor="inprocess", progress="off",
                          directory=tmp_path / "asha").run()  # fmt: skip
    assert [t.arch_id for t in asha.trials()] == [t.arch_id for t in trials]
    assert any(t.status == "pruned" for t in asha.trials())


class TwoSeeds(BaseEvaluator):
    """A value per architecture (from its id) for the first training, and 1 - 2 x that for a
    retraining (:meth:`reseeded`): the mean over both favours the lower first value."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def evaluate(self, space, arch, report):
        first = random.Random(space.search_space().id_of(arch)).random()
        value = first if self.seed == 0 else 1 - 2 * first
        report(value)
        return value

    def reseeded(self, repeat: int) -> "TwoSeeds":
        return TwoSeeds(repeat)


def test_stage_2_confirms_its_best_2_with_another_seed_and_picks_the_best_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the shortlist's 4 trainings, its best 2 train again (the evaluator's next seed);
    the pick is the better mean of the two, here the shortlist's second (its better
    training's trial); a run note gives each mean, and status shows both trainings. An
    evaluator that cannot reseed (a function) trains the shortlist alone (the test above);
    confirm 0 does too."""
    shortlist = {"algorithm": "params", "k": 4, "pool": 8}
    d = tmp_path / "run"
    run = TwoStageSearch(DigitsNet(), TwoSeeds(), "digits", shortlist, executor="inprocess",
                         progress="off", directory=d).run()  # fmt: skip
    trials = run.trials()
    first = sorted(trials[:4], key=lambda t: -t.metrics["default"])
    assert [t.arch_id for t in trials[4:]] == [t.arch_id for t in first[:2]]
    mean = {t.arch_id: (t.metrics["default"] + u.metrics["default"]) / 2
            for t, u in zip(first[:2], trials[4:])}  # fmt: skip
    best = max(mean, key=mean.__getitem__)
    assert best == first[1].arch_id != first[0].arch_id  # the confirmation changed the pick
    trainings = [t for t in trials if t.arch_id == best]
    better = max(trainings, key=lambda t: t.metrics["default"])  # its weights are exported
    assert [t.id for t in run.best(1)] == [better.id]
    with Store.open(d) as store:
        (note,) = store.notes("two-stage")[-1:]
        assert store.picks() == [better.id]
    assert note["event"] == "confirm" and note["means"][str(better.id)] == pytest.approx(mean[best])
    assert main(["status", str(d)]) == 0  # the shortlist shows both trainings and the mean
    out = capsys.readouterr().out
    assert out.count("trained 2 times") == 2 and "trained 2 times (the pick)" in out
    assert f"mean {mean[best]:.4g}" in out
    once = TwoStageSearch(DigitsNet(), TwoSeeds(), "digits", shortlist, executor="inprocess",
                          progress="off", confirm=0, directory=tmp_path / "once").run()  # fmt: skip
    assert len(once.trials()) == 4 and once.best(1)[0].arch_id == first[0].arch_id


def test_half_a_scored_shortlist_hedges_with_the_largest_by_default(tmp_path: Path) -> None:
    """by_size unset: half of k for a supernet or a proxy's ranking, none for random draws or
    a size rule; a given by_size is kept."""

    def hedge(shortlist: dict) -> int:
        run = TwoStageSearch(DigitsNet(), evaluate, "digits", shortlist,
                             directory=tmp_path / "unused")  # fmt: skip
        return run.proposer.by_size()

    assert hedge({"algorithm": "spos", "k": 8}) == 4
    assert hedge({"algorithm": "synflow", "k": 5}) == 2
    assert hedge({"algorithm": "random", "k": 8}) == 0
    assert hedge({"algorithm": "flops", "k": 8}) == 0
    assert hedge({"algorithm": "spos", "k": 8, "by_size": 0}) == 0


def test_bad_settings_are_refused_before_the_record(tmp_path: Path) -> None:
    """An unknown rule, an engine setting misplaced, a pool below k: one line, no record."""
    d = tmp_path / "run"
    for shortlist, extra, words in [
        ({"algorithm": "sopos"}, {}, "unknown; give a one-shot algorithm"),
        ({"algorithm": "params", "k": 4, "pool": 2}, {}, "pool >= k"),
        ({"algorithm": "params", "epochs": 3}, {}, "belong to a one-shot algorithm"),
        ({"algorithm": "spos"}, {"n_trials": 3}, "no settings of a two-stage search"),
        ({"algorithm": "params", "budget": {"latency": 2.0}}, {}, "latency budget belongs to"),
        ({"algorithm": "params", "k": 2}, {"confirm": 3}, "confirm must be an int from 0 to"),
    ]:
        with pytest.raises(ConfigError, match=words):
            TwoStageSearch(DigitsNet(), evaluate, "digits", shortlist, directory=d, **extra)
    assert not d.exists()


@pytest.mark.slow
def test_a_run_file_names_the_two_stage_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`strategy: {name: two-stage, shortlist: {algorithm: spos, k: 3}, stopper: asha}` runs
    SPOS, then the engine under ASHA; status shows the supernet's τ and the shortlist."""
    f = tmp_path / "two.yaml"
    f.write_text(textwrap.dedent("""\
        space: tests.twostage._two_stage_run:DigitsNet
        data: digits
        evaluator: {type: classification, data: digits, epochs: 3, lr: 0.01}
        strategy:
          name: two-stage
          shortlist: {algorithm: spos, k: 3, pool: 8, epochs: 2, cycles: 4, population: 2,
                      selection: loss}
          stopper: asha
        executor: inprocess
        progress: "off"
        """))  # fmt: skip
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "two-stage run, finished: 3 of 3 trials done" in out
    assert "the supernet agrees with parameter count at τ" in out
    assert "stage 1 (spos)" in out and "(the pick)" in out
    assert main(["export", str(d), "--top", "1", "--out", str(tmp_path / "out")]) == 0


def test_the_proposer_says_how_many_supernet_epochs_stage_1_trains(tmp_path: Path) -> None:
    """A one-shot stage 1 trains its ``epochs``; when not given, the one-shot default (10) or
    enough epochs for FEW_SUPERNET_STEPS weight steps, whichever is more (on digits' 1,257
    training images, 20 steps an epoch: 128 epochs; on 20,000 examples, 313 steps an epoch:
    the 10); a size rule trains nothing. The run's section records the epochs trained."""
    import torch

    from nasforge.twostage.propose import FEW_SUPERNET_STEPS

    g = torch.Generator().manual_seed(0)
    big = (torch.randn(20000, 1, 8, 8, generator=g), torch.randint(0, 10, (20000,), generator=g))
    runs = {
        name: TwoStageSearch(DigitsNet(), evaluate, data, {"algorithm": algo, "k": 2, **extra},
                             executor="inprocess", progress="off", directory=tmp_path / name)
        for name, algo, data, extra in [("given", "spos", "digits", {"epochs": 2}),
                                        ("default", "fairnas", "digits", {}),
                                        ("big", "fairnas", {"train": big, "val": big}, {}),
                                        ("flops", "flops", "digits", {})]
    }  # fmt: skip
    epochs = {n: r.proposer.epochs for n, r in runs.items()}
    per_epoch = runs["given"].proposer.steps // 2
    assert epochs == {"given": 2, "default": -(-FEW_SUPERNET_STEPS // per_epoch), "big": 10,
                      "flops": 0}  # fmt: skip
    assert runs["default"].proposer.steps >= FEW_SUPERNET_STEPS > runs["given"].proposer.steps
    # in epochs of one network: a FairNAS step trains 2 paths here (2 candidates a decision)
    network = {n: r.proposer.network_epochs for n, r in runs.items()}
    assert network == {"given": 2, "default": 2 * epochs["default"], "big": 20, "flops": 0}
    for name in ("given", "default"):
        assert runs[name].section()["oneshot"]["strategy"]["config"]["epochs"] == epochs[name]


def test_a_short_supernet_is_warned_of(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Stage 1 warns when its supernet trains fewer than FEW_SUPERNET_STEPS weight steps (it
    may rank at chance), and not when it trains that many."""
    import math

    from nasforge.twostage.propose import FEW_SUPERNET_STEPS

    def build(name: str, epochs: int) -> TwoStageSearch:
        shortlist = {"algorithm": "spos", "k": 2, "epochs": epochs}
        return TwoStageSearch(DigitsNet(), evaluate, "digits", shortlist, executor="inprocess",
                              progress="off", directory=tmp_path / name)  # fmt: skip

    with caplog.at_level("WARNING", logger="nasforge.twostage"):
        short = build("short", 2)
    assert f"for {short.proposer.steps} weight steps (2 epochs)" in caplog.text
    per_epoch = short.proposer.steps // 2
    caplog.clear()
    with caplog.at_level("WARNING", logger="nasforge.twostage"):
        long = build("long", math.ceil(FEW_SUPERNET_STEPS / per_epoch))
    assert long.proposer.steps >= FEW_SUPERNET_STEPS and "weight steps" not in caplog.text
