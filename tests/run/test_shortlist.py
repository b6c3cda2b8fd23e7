"""A recorded shortlist and size baseline, as status and the dashboard show them, whatever
kind wrote them."""

import json
from pathlib import Path

import pytest

from nasforge.dashboard.data import run_facts
from nasforge.errors import StoreError
from nasforge.run.agreement import AGREEMENT_META, size_agreement
from nasforge.run.export import export_top
from nasforge.run.shortlist import SHORTLIST_META, shortlist_rows, write_shortlist
from nasforge.run.status import print_status
from nasforge.run.store import Store, TrialOutcome

OBJECTIVE = {"metric": "acc", "mode": "max", "constraints": {}, "second": None}


def _record(d: Path) -> None:
    with Store.create(d, {"kind": "x", "objective": OBJECTIVE}) as s:
        cands = [{"arch": {"w": w}, "arch_id": f"{w}" * 16, "score": 1 - w / 10,
                  "params": 100.0 * w, "flops": 300.0 * w} for w in (1, 2, 3)]  # fmt: skip
        write_shortlist(s, {"rule": "spos", "k": 3, "pool": 9, "budget": None,
                            "candidates": cands})  # fmt: skip
        s.set_meta(AGREEMENT_META, json.dumps(size_agreement([3, 2, 1], {"params": [1, 2, 3]})))
        a = s.add_trial("1" * 16, {"w": 1})
        s.finish_trial(a, TrialOutcome("done", {"acc": 0.9}, [{"acc": 0.5}] * 3))
        b = s.add_trial("2" * 16, {"w": 2})
        s.finish_trial(b, TrialOutcome("pruned", {"acc": 0.4}, [{"acc": 0.4}]))
        s.set_picks([a])
        s.finish()


def test_status_shows_the_shortlist_beside_stage_two_and_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each candidate's stage-1 score and sizes beside its trial's status, reports and
    metric (one not trained yet says so); the τ sentence above."""
    _record(tmp_path)
    with Store.open(tmp_path) as store:
        header, rows = shortlist_rows(store, "acc")
        facts = run_facts(store)
    assert header[2] == "stage 1 (spos)"
    assert rows[0][2:] == ["0.9", "100", "300", "1", "done @3 (the pick)", "0.9"]
    assert rows[1][6:] == ["pruned @1", "0.4"] and rows[2][6] == "not trained yet"
    print_status(tmp_path)
    out = capsys.readouterr().out
    assert "baseline: the supernet agrees with parameter count at τ -1.00" in out
    assert "shortlist (stage 1's scores beside stage 2's training)" in out
    assert (
        facts["baseline"].startswith("the supernet agrees")
        and "#1 0.9 → done @3" in (facts["shortlist"])
    )


def test_a_damaged_shortlist_is_one_store_error(tmp_path: Path) -> None:
    """A shortlist that does not decode names the run; none recorded gives no rows."""
    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        assert shortlist_rows(s, "acc") == ([], [])
        s.set_meta(SHORTLIST_META, "{not json")
        with pytest.raises(StoreError, match="does not decode"):
            shortlist_rows(s, "acc")


def test_export_writes_the_shortlist_beside_the_picks(tmp_path: Path) -> None:
    """shortlist.json holds every candidate with its stage-2 result; the pick's arch.json
    names its entry."""
    _record(tmp_path / "run")
    (folder,) = export_top(tmp_path / "run", 1, tmp_path / "out")
    table = json.loads((tmp_path / "out" / "shortlist.json").read_text())
    assert [(r["position"], r["status"], r["pick"]) for r in table] == [
        (1, "done", True), (2, "pruned", False), (3, None, False)
    ]  # fmt: skip
    entry = json.loads((folder / "arch.json").read_text())["shortlist"]
    assert entry["score"] == 0.9 and entry["rule"] == "spos" and entry["resource"] == 3
