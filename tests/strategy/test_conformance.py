"""The conformance suite every strategy passes: seeded, inside the space, replayable."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nasforge.errors import ConfigError
from nasforge.space.search_space import Decision, SearchSpace, arch_id
from nasforge.strategy import BaseStrategy, get_strategy, list_strategies


def _space() -> SearchSpace:
    return SearchSpace(
        [
            Decision("width", "value", (8, 16, 32, 64)),
            Decision("op", "layer", ("conv3", "conv5", "id")),
            Decision("skip", "input", ([0], [1], [0, 1])),
            Decision("depth", "depth", (1, 2, 3)),
        ]
    )


def _metric(arch: dict) -> float:
    """A deterministic landscape with a unique optimum (64, conv5, [0, 1], 3)."""
    return (
        arch["width"] / 64
        + {"conv3": 0.5, "conv5": 1.0, "id": 0.0}[arch["op"]]
        + len(arch["skip"]) * 0.3
        + arch["depth"] * 0.2
    )


def _drive(strategy: BaseStrategy, n: int, fail_every: int = 0) -> list[tuple[dict, float | None]]:
    history = []
    for i in range(n):
        arch = strategy.ask()
        if arch is None:
            break
        metric = None if fail_every and i % fail_every == fail_every - 1 else _metric(arch)
        strategy.tell(arch, metric)
        history.append((arch, metric))
    return history


NAMES = list_strategies()
#: a GP's ask costs about 0.1 s, so its runs of this suite are in the slow set (test_gp.py and
#: test_auto.py keep fast checks of it)
_SLOW = {"gp"}
ALL = [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in NAMES]


def test_all_five_strategies_are_registered():
    """The issue's five strategies are reachable by name."""
    assert {"random", "grid", "evolution", "tpe", "rl"} <= set(NAMES)


@pytest.mark.parametrize("name", ALL)
def test_asks_lie_inside_the_space(name):
    """Every asked architecture validates against the space."""
    space = _space()
    s = get_strategy(name, seed=3)
    s.setup(space)
    for arch, _ in _drive(s, 40, fail_every=7):
        assert space.validate(arch) == arch


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_sequence(name):
    """Two strategies with the same seed and feedback ask the same architectures."""
    a, b = get_strategy(name, seed=5), get_strategy(name, seed=5)
    a.setup(_space())
    b.setup(_space())
    assert _drive(a, 30, fail_every=5) == _drive(b, 30, fail_every=5)


@pytest.mark.parametrize("name", ALL)
def test_setup_resets_state(name):
    """Calling setup again restarts the seeded sequence from the beginning."""
    s = get_strategy(name, seed=2)
    s.setup(_space())
    first = _drive(s, 20)
    s.setup(_space())
    assert _drive(s, 20) == first


@pytest.mark.parametrize("name", ALL)
def test_replay_rebuilds_state(name):
    """Replaying a recorded history gives a strategy that asks what the original asks next."""
    original = get_strategy(name, seed=11)
    original.setup(_space())
    history = _drive(original, 25, fail_every=6)
    rebuilt = get_strategy(name, seed=11)
    rebuilt.setup(_space())
    rebuilt.replay(history)
    for _ in range(10):
        nxt = original.ask()
        assert rebuilt.ask() == nxt
        if nxt is None:
            break
        original.tell(nxt, _metric(nxt))
        rebuilt.tell(nxt, _metric(nxt))


@pytest.mark.parametrize("name", ALL)
def test_interleaved_asks_are_handled(name):
    """Several asks before their tells (concurrent trials) work and stay inside the space."""

    def interleave() -> list[dict]:
        s = get_strategy(name, seed=1)
        s.setup(_space())
        asked = []
        for _ in range(6):
            batch = [s.ask() for _ in range(4)]
            assert None not in batch  # 24 of the space's 108 architectures: none exhausted
            for arch in reversed(batch):
                s.tell(arch, _metric(arch))
            asked += batch
        return asked

    asked = interleave()
    space = _space()
    assert len(asked) == 24 and all(space.validate(a) == a for a in asked)
    assert interleave() == asked  # the same asks and tells in the same order: the same archs


@pytest.mark.parametrize("name", ALL)
def test_foreign_history_can_be_told(name):
    """Telling architectures the strategy never asked (an imported history) is accepted."""
    s = get_strategy(name, seed=0)
    s.setup(_space())
    for arch in list(_space().grid())[:5]:
        s.tell(arch, _metric(arch))
    nxt = s.ask()
    assert nxt is None or _space().validate(nxt) == nxt


@pytest.mark.parametrize("name", ALL)
def test_bad_metric_is_refused(name):
    """A NaN metric is a clear ConfigError naming the value."""
    s = get_strategy(name, seed=0)
    s.setup(_space())
    arch = s.ask()
    with pytest.raises(ConfigError, match="nan"):
        s.tell(arch, float("nan"))


@pytest.mark.parametrize("name", ALL)
def test_empty_space_is_refused(name):
    """A space with no decisions is refused at setup, with the fix in the message."""
    with pytest.raises(ConfigError, match="no decisions"):
        get_strategy(name).setup(SearchSpace([]))


@pytest.mark.parametrize("name", ["evolution", "tpe", "rl"])
def test_learning_strategies_beat_random(name):
    """Over a budget of 60 on a smooth landscape, learners find better archs than random."""

    def best(n, seed):
        s = get_strategy(n, seed=seed)
        s.setup(_space())
        return [max(m for _, m in _drive(s, 60) if m is not None)]

    seeds = range(4)
    ours = sum(best(name, k)[0] for k in seeds)
    rand = sum(best("random", k)[0] for k in seeds)
    assert ours >= rand


def test_unknown_strategy_lists_the_known_ones():
    """An unknown name is a ConfigError listing the registered names."""
    with pytest.raises(ConfigError, match="evolution"):
        get_strategy("simulated_annealing")


def test_instances_pass_through():
    """get_strategy returns an instance unchanged."""
    s = get_strategy("random")
    assert get_strategy(s) is s


def test_grid_visits_every_arch_once():
    """Grid search asks each architecture exactly once, then None."""
    s = get_strategy("grid")
    s.setup(_space())
    ids = [arch_id(a) for a, _ in _drive(s, 1000)]
    assert len(ids) == len(set(ids)) == _space().size


def test_evolution_population_ages():
    """Regularized evolution keeps the most recent members, dropping the oldest first."""
    s = get_strategy("evolution", population_size=4, sample_size=2, seed=0)
    s.setup(_space())
    history = _drive(s, 12)
    assert [a for a, _ in s.population] == [a for a, _ in history[-4:]]


def test_evolution_children_differ_in_one_decision():
    """After the population fills, each child differs from some member in exactly one label."""
    s = get_strategy("evolution", population_size=5, sample_size=2, seed=4)
    s.setup(_space())
    _drive(s, 5)
    members = [a for a, _ in s.population]
    child = s.ask()
    diffs = [sum(child[k] != m[k] for k in child) for m in members]
    assert 1 in diffs


def test_strategies_do_not_import_torch():
    """The strategy package is pure: it imports with torch made unimportable."""
    code = textwrap.dedent(
        """
        import sys, types, pathlib
        class NoTorch:  # any 'import torch' now raises ImportError, as without torch
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ImportError(f"no module named {name!r} (blocked)")

        # a finder, not sys.modules["torch"] = None: scipy (under CMA-ES) reads that entry
        sys.meta_path.insert(0, NoTorch())
        root = pathlib.Path("nasforge")
        for name in ("nasforge", "nasforge.space"):  # skip package __init__s that build models
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root if name == "nasforge" else root / "space")]
            sys.modules[name] = pkg
        import nasforge.strategy as s
        from nasforge.space.search_space import Decision, SearchSpace
        space = SearchSpace([Decision("a", "value", (1, 2, 3))])
        from nasforge.errors import ConfigError
        refused = []
        for n in s.list_strategies():
            st = s.get_strategy(n)
            try:
                st.setup(space)
            except ConfigError as exc:  # a sampler that runs on torch says so in one line
                assert "'torch'" in str(exc) and "\\n" not in str(exc), exc
                refused.append(n)
                continue
            st.tell(st.ask(), 1.0)
        print("ok", refused)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    # only the GP runs on torch (inside Optuna's GPSampler); its module imports none
    assert out.stdout.strip() == "ok ['gp']", out.stderr


# -- range decisions (nf.uniform / nf.integer): every strategy handles them ---------------------
from nasforge.space.ranges import Range  # noqa: E402

#: what grid and rl need to search ranges: the user's own discretisation
_RANGE_ARGS = {"grid": {"points_per_range": 3}, "rl": {"points_per_range": 4}}


def _mixed_space() -> SearchSpace:
    return SearchSpace(
        [
            Decision("op", "layer", ("conv3", "conv5", "id")),
            Decision("lr", "float", (), Range(1e-4, 1e-1, log=True)),
            Decision("dropout", "float", (), Range(0.0, 0.5)),
            Decision("warmup", "int", (), Range(0, 100, integer=True, step=10)),
        ]
    )


def _mixed_metric(arch: dict) -> float:
    """A smooth landscape: best at op=conv5, lr=1e-2.5, dropout=0.1, warmup=30."""
    import math

    return (
        {"conv3": 0.5, "conv5": 1.0, "id": 0.0}[arch["op"]]
        - (math.log10(arch["lr"]) + 2.5) ** 2
        - 4 * (arch["dropout"] - 0.1) ** 2
        - abs(arch["warmup"] - 30) / 100
    )


def _drive_mixed(s: BaseStrategy, n: int, fail_every: int = 0) -> list:
    history = []
    for i in range(n):
        arch = s.ask()
        if arch is None:
            break
        metric = None if fail_every and i % fail_every == fail_every - 1 else _mixed_metric(arch)
        s.tell(arch, metric)
        history.append((arch, metric))
    return history


@pytest.mark.parametrize("name", ALL)
def test_ranges_asks_lie_inside_the_space_and_replay(name):
    """On a space with float and integer ranges every strategy asks canonical architectures
    inside the space, repeats itself under the same seed, and replays its history."""
    space = _mixed_space()
    a = get_strategy(name, seed=7, **_RANGE_ARGS.get(name, {}))
    a.setup(space)
    history = _drive_mixed(a, 30, fail_every=6)
    assert history
    for arch, _ in history:
        assert space.validate(arch) == arch
        assert arch_id(arch) == space.arch_id(dict(arch))
    b = get_strategy(name, seed=7, **_RANGE_ARGS.get(name, {}))
    b.setup(_mixed_space())
    assert _drive_mixed(b, 30, fail_every=6) == history
    rebuilt = get_strategy(name, seed=7, **_RANGE_ARGS.get(name, {}))
    rebuilt.setup(_mixed_space())
    rebuilt.replay(history)
    for _ in range(5):
        nxt = a.ask()
        assert rebuilt.ask() == nxt
        if nxt is None:
            break
        a.tell(nxt, _mixed_metric(nxt))
        rebuilt.tell(nxt, _mixed_metric(nxt))


@pytest.mark.parametrize("name", ALL)
def test_ranges_foreign_history_is_told(name):
    """Values the strategy never proposed (an imported history, off any grid) are accepted."""
    s = get_strategy(name, seed=0, **_RANGE_ARGS.get(name, {}))
    s.setup(_mixed_space())
    for k in range(3):
        arch = _mixed_space().sample(100 + k)
        arch["lr"] = 0.0012345  # a value no grid holds
        s.tell(arch, _mixed_metric(arch))
    nxt = s.ask()
    assert nxt is None or _mixed_space().validate(nxt) == nxt


@pytest.mark.parametrize("name", ["grid", "rl"])
def test_listing_strategies_refuse_ranges_in_one_line(name):
    """Grid and RL need listed candidates: a range without points_per_range is a one-line
    ConfigError naming the decision and the fix."""
    with pytest.raises(ConfigError, match=r"'lr'.*points_per_range") as info:
        get_strategy(name).setup(_mixed_space())
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["evolution", "tpe"])
def test_ranges_learners_beat_random(name):
    """On the smooth mixed landscape, evolution and TPE find better values than random."""

    def best(n: str, seed: int) -> float:
        s = get_strategy(n, seed=seed)
        s.setup(_mixed_space())
        return max(m for _, m in _drive_mixed(s, 60) if m is not None)

    seeds = range(4)
    assert sum(best(name, k) for k in seeds) > sum(best("random", k) for k in seeds)


def test_random_draws_log_ranges_log_uniformly():
    """Random search's lr (log) lands in each decade about equally often."""
    s = get_strategy("random", seed=0)
    s.setup(_mixed_space())
    import math

    decades = [0, 0, 0]
    for _ in range(600):
        decades[min(2, int(-math.log10(s.ask()["lr"]) - 1))] += 1
    assert all(150 < n < 250 for n in decades), decades


def test_evolution_steps_a_range_by_a_small_gaussian():
    """A mutated range moves by a step of about mutation_scale of its (log) range, not a
    fresh draw: children stay near their parents."""
    space = SearchSpace([Decision("lr", "float", (), Range(1e-6, 1.0, log=True))])
    s = get_strategy("evolution", population_size=2, sample_size=1, seed=0, mutation_scale=0.05)
    s.setup(space)
    import math

    jumps = []
    for _ in range(40):
        arch = s.ask()
        if len(s.population) == 2:
            parents = [a["lr"] for a, _ in s.population]
            jumps.append(min(abs(math.log10(arch["lr"]) - math.log10(p)) for p in parents))
        s.tell(arch, -abs(math.log10(arch["lr"]) + 3))
    # 0.05 of 6 decades: a step of about 0.3 decade; a fresh draw would average 2 decades
    assert jumps and sum(jumps) / len(jumps) < 0.6, jumps


def test_tpe_gives_ranges_numeric_distributions():
    """TPE hands ranges to Optuna as Float/Int distributions (log kept), not categories."""
    s = get_strategy("tpe", seed=0)
    s.setup(_mixed_space())
    dists = s._dists
    assert type(dists["lr"]).__name__ == "FloatDistribution" and dists["lr"].log
    assert type(dists["warmup"]).__name__ == "IntDistribution" and dists["warmup"].step == 10
    assert type(dists["op"]).__name__ == "CategoricalDistribution"


def test_grid_points_per_range_is_the_product():
    """Grid search with points_per_range visits ops x points x points x points once each."""
    s = get_strategy("grid", points_per_range=3)
    s.setup(_mixed_space())
    ids = [arch_id(a) for a, _ in _drive_mixed(s, 1000)]
    assert len(ids) == len(set(ids)) == 3 * 3 * 3 * 3
