"""The pure MP/CMP schedules and their discrete-event simulation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.errors import ScheduleError
from nasforge.oneshot.cmp_schedule import (
    PHASES,
    check_schedule,
    clock_cycles,
    partition_order,
    simulate,
    theory_ratio,
)


def _orders(m: int, schedule: str) -> list[list[str]]:
    return [partition_order(m, schedule, k) for k in range(m)]


@pytest.mark.parametrize("m", [1, 2, 3, 4, 8])
def test_unit_costs_give_eq4(m: int) -> None:
    """With unit costs MP takes 4M ticks, CMP 2M+2, and their ratio is Eq. 4."""
    unit = {(k, p): 1.0 for k in range(m) for p in PHASES}
    mp = simulate(unit, _orders(m, "mp")).time
    cmp = simulate(unit, _orders(m, "cmp")).time
    assert mp == 4 * m == len(clock_cycles(m, "mp"))
    if m > 1:
        assert cmp == 2 * m + 2 == len(clock_cycles(m, "cmp"))
    assert cmp / mp == pytest.approx(theory_ratio(m)) or m == 1


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), schedule=st.sampled_from(["mp", "cmp"]), data=st.data())
def test_each_subtask_once_in_dependency_order(m: int, schedule: str, data) -> None:  # noqa: ANN001
    """Every (partition, phase) runs once, after its dependency, under any costs."""
    ticks = clock_cycles(m, schedule)
    cells = [c for t in ticks for c in t]
    assert sorted(cells) == sorted((k, p) for k in range(m) for p in PHASES)
    check_schedule(m, _orders(m, schedule))
    costs = {(k, p): data.draw(st.floats(0.0, 5.0)) for k in range(m) for p in PHASES}
    sim = simulate(costs, _orders(m, schedule), comm=0.1)
    for (k, p), (s, _) in sim.spans.items():
        if p.startswith("F") and k > 0:
            assert s >= sim.spans[(k - 1, p)][1]
        if p.startswith("B"):
            dep = (k, "F" + p[1:]) if k == m - 1 else (k + 1, p)
            assert s >= sim.spans[dep][1]
    assert all(0.0 <= f <= 1.0 for f in sim.idle_fraction)


def test_deadlock_and_bad_input_are_refused() -> None:
    """An order that waits on itself, an unknown schedule and m < 1 raise ScheduleError."""
    with pytest.raises(ScheduleError, match="deadlock"):
        check_schedule(2, [["B_A", "F_A", "F_w", "B_w"], ["F_A", "B_A", "F_w", "B_w"]])
    with pytest.raises(ScheduleError, match="unknown schedule"):
        clock_cycles(2, "gpipe")
    with pytest.raises(ScheduleError, match=">= 1"):
        clock_cycles(0, "cmp")


def test_imports_without_torch() -> None:
    """The schedule module is pure: loaded alone, it runs with torch unavailable."""
    code = (
        "import sys, importlib.util; sys.modules['torch'] = None; "
        "spec = importlib.util.spec_from_file_location('s', 'nasforge/oneshot/cmp_schedule.py'); "
        "s = importlib.util.module_from_spec(spec); sys.modules['s'] = s; "
        "spec.loader.exec_module(s); "
        "print(s.theory_ratio(4))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "0.625"


def test_deferred_recomputation_runs_after_its_own_pass() -> None:
    """R_A follows B_A on the same partition and waits for nothing else; it helps CMP when
    B_A's recomputation dominates (NASB)."""
    m = 2
    orders = [partition_order(m, "cmp", k, deferred=True) for k in range(m)]
    assert orders[0] == ["F_A", "F_w", "B_w", "B_A", "R_A"]
    check_schedule(m, orders)
    costs = {(k, p): 1.0 for k in range(m) for p in ("F_A", "F_w", "B_w", "B_A")}
    heavy = {**costs, **{(k, "R_A"): 4.0 for k in range(m)}}
    plain = {**costs, **{(k, "B_A"): 5.0 for k in range(m)}}
    deferred = simulate(heavy, orders).time
    undeferred = simulate(plain, [partition_order(m, "cmp", k) for k in range(m)]).time
    assert deferred < undeferred
