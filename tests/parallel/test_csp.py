"""Tests of the pure CSP scheduler, partitions, finished list and predictor."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nasforge
from nasforge.errors import ArchitectureError, ScheduleError
from nasforge.parallel.csp import (
    FinishedList,
    Task,
    admissions,
    balanced_partition,
    check_subnet,
    pending_backwards,
    predict,
    schedule,
    stage_layers,
    static_partition,
)


def test_pure_modules_do_not_import_torch() -> None:
    """csp, cache, simulator, memory, costs and fair_sampler import with torch unimportable."""
    root = Path(nasforge.__file__).parent
    code = (
        "import sys, types; sys.modules['torch'] = None\n"
        f"pkg = types.ModuleType('nasforge'); pkg.__path__ = [{str(root)!r}]\n"
        "sys.modules['nasforge'] = pkg\n"
        "import nasforge.parallel.csp, nasforge.parallel.cache, nasforge.parallel.simulator\n"
        "import nasforge.parallel.memory, nasforge.parallel.costs, nasforge.parallel.fair_sampler\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_static_partition_sizes() -> None:
    """Static partition covers every block, contiguous, sizes differ by at most one."""
    p = static_partition(10, 4)
    assert [list(r) for r in p] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_more_stages_than_blocks_is_an_error() -> None:
    """A stage count above the block count raises ScheduleError naming both numbers."""
    with pytest.raises(ScheduleError, match="3 choice blocks into 4"):
        static_partition(3, 4)
    with pytest.raises(ScheduleError):
        balanced_partition([1.0, 2.0], 3)


@given(
    costs=st.lists(st.integers(0, 9), min_size=1, max_size=7),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_balanced_partition_is_optimal(costs: list[int], data: st.DataObject) -> None:
    """The DP split's largest stage cost equals the brute-force optimum."""
    d = data.draw(st.integers(1, len(costs)))
    p = balanced_partition(costs, d)
    assert [b for r in p for b in r] == list(range(len(costs)))
    assert all(len(r) > 0 for r in p)
    got = max(sum(costs[b] for b in r) for r in p)
    best = min(
        max(sum(costs[i:j]) for i, j in zip((0, *cuts), (*cuts, len(costs))))
        for cuts in itertools.combinations(range(1, len(costs)), d - 1)
    )
    assert got == best


def test_check_subnet_rejects_missing_candidate() -> None:
    """A subnet naming a candidate a block lacks raises ArchitectureError with the index."""
    assert check_subnet([0, 2], [3, 3]) == (0, 2)
    with pytest.raises(ArchitectureError, match="candidate 3 in block 1"):
        check_subnet([0, 3], [3, 3], seq=5)
    with pytest.raises(ArchitectureError, match="one per block"):
        check_subnet([0], [3, 3])


@given(st.lists(st.integers(0, 30), unique=True, max_size=30))
def test_finished_list_elimination_keeps_membership(ids: list[int]) -> None:
    """Eliminating below the low-water mark never changes membership answers."""
    f = FinishedList()
    for i in ids:
        f.add(i)
    for x in range(-1, 35):
        assert (x in f) == (0 <= x and x in set(ids))
    assert f.low == next(x for x in itertools.count() if x not in set(ids))
    assert all(a > f.low for a in f.above)


def test_schedule_blocks_shared_layer_and_lets_later_overtake() -> None:
    """Algorithm 2: F2 waits for unfinished subnet 0 on a shared layer; F3 may run first."""
    subnets = [(0, 0), (1, 1), (0, 2), (2, 2)]
    part = static_partition(2, 2)
    fin = FinishedList()
    fin.add(1)
    assert schedule([2, 3], fin, subnets, 0, part) == (1, 3)  # 2 shares (0, 0) with 0
    assert schedule([2, 3], fin, subnets, 1, part) == (0, 2)  # stage 1: (1, 2) is free of 0
    fin.add(0)
    assert schedule([2, 3], fin, subnets, 0, part) == (0, 2)
    assert schedule([3], fin, subnets, 1, part) == (-1, -1)  # 3 shares (1, 2) with 2


@given(
    subnets=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=8),
    finished=st.sets(st.integers(0, 7)),
)
def test_lowest_unfinished_is_never_blocked(subnets: list, finished: set[int]) -> None:
    """The lowest unfinished subnet in the queue is always schedulable (no deadlock)."""
    fin = FinishedList()
    for i in sorted(finished):
        if i < len(subnets):
            fin.add(i)
    queue = [i for i in range(len(subnets)) if i not in fin]
    if queue:
        part = static_partition(2, 2)
        for k in range(2):
            _, seq = schedule(list(reversed(queue)), fin, subnets, k, part)
            assert seq >= 0
            for x in range(fin.low, seq):
                if x not in fin:
                    assert not (stage_layers(subnets[seq], part, k) & set(enumerate(subnets[x])))


def test_predictor_names_forward_unblocked_by_backward() -> None:
    """Algorithm 3: before B0, the forward that B0 unblocks is predicted."""
    subnets = [(0, 0), (0, 1)]
    part = static_partition(2, 2)
    fin = FinishedList()
    assert predict([1], fin, subnets, 0, part) == []  # blocked by 0 now
    assert predict([1], fin, subnets, 0, part, backward_of=0) == [Task(1, 0)]
    got = predict([], fin, subnets, 0, part, current=1, pending_backward=[(0, 1), (5, 9)])
    assert got == [Task(0, 0, backward=True)]


def test_pending_backwards_passes_relevant_pairs_upstream() -> None:
    """Algorithm 3's next_bwd: this stage's blocked forwards and carried pairs, minus those whose
    backward ran here or whose precedence's forward already ran here, lowest first, capped."""
    fin = FinishedList()
    fin.add(0)
    ran = {0, 2}.__contains__  # forwards that ran here
    here = {5: 3, 6: 4}  # forwards 5 and 6 wait in this stage's queue behind 3 and 4
    carried = {0: 9, 4: 2, 5: 1, 7: 1}  # from downstream; 5's own queue entry is newer
    assert pending_backwards(here, carried, fin, ran, 8) == [(5, 3), (6, 4), (7, 1)]
    assert pending_backwards(here, carried, fin, ran, 2) == [(5, 3), (6, 4)]
    assert pending_backwards({}, {}, fin, ran, 4) == []


def test_predictor_prefetches_pending_backward_released_by_current() -> None:
    """Before F3, the backward of 5 (pending downstream behind 3) is prefetched; a custom
    blocking rule replaces Algorithm 2's in the forward prediction."""
    subnets = [(0, 0), (1, 1), (2, 2), (0, 1), (1, 0), (2, 1)]
    part = static_partition(2, 2)
    fin = FinishedList()
    pending = pending_backwards({5: 3}, {}, fin, lambda p: False, 4)
    got = predict([4], fin, subnets, 0, part, current=3, pending_backward=pending)
    assert got == [Task(5, 0, backward=True)]  # F4 waits for 1 on layer (0, 1): not predicted
    never = predict([4], fin, subnets, 0, part, current=3, rule=lambda seq, f: 0)
    assert never == []
    always = predict([4], fin, subnets, 0, part, current=2, pending_backward=pending,
                     rule=lambda seq, f: -1)  # fmt: skip
    assert always == [Task(4, 0)]


def test_predictor_looks_ahead_at_inflight_and_upcoming_subnets() -> None:
    """After Algorithm 3's tasks come the in-flight backwards then the subnets not yet here,
    each once, none of `current` or of a finished subnet; with nothing queued (one stage) the
    look-ahead is the whole prediction."""
    subnets = [(0, 0), (1, 1), (2, 2), (0, 1), (1, 0), (2, 1)]
    part = static_partition(2, 1)
    fin = FinishedList()
    fin.add(0)
    got = predict([2], fin, subnets, 0, part, current=1, inflight=[0, 1], upcoming=[2, 3])
    assert got == [Task(2, 0), Task(3, 0)]  # 0 finished, 1 is current, F2 named once
    one = predict([], fin, subnets, 0, part, current=1, upcoming=admissions(2, 6, 2))
    assert one == [Task(2, 0), Task(3, 0)]
    bwd = predict([], fin, subnets, 0, part, backward_of=3, inflight=[3, 4], upcoming=[5])
    assert bwd == [Task(4, 0, backward=True), Task(5, 0)]


def test_admissions_stop_at_the_run_end_and_at_unknown_losses() -> None:
    """The look-ahead names `depth` subnets, none past the run, and with a feedback lag none
    drawn after a loss the stage has not seen (subnet q waits for the loss of q - lag)."""
    assert admissions(3, 10, 4) == range(3, 7)
    assert admissions(8, 10, 4) == range(8, 10)
    assert admissions(3, 10, 4, lag=2, low=3) == range(3, 5)  # losses < 3 known: q <= 4
    assert admissions(5, 10, 4, lag=2, low=3) == range(5, 5)
    assert admissions(3, 10, 0) == range(3, 3)
