"""The trivial baseline beside a one-shot result: Kendall's tau of its scores against
parameter count and FLOPs, in the record and in status."""

import json
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.oneshot import OneShotSearch
from nasforge.proxies import arch_size
from nasforge.run.agreement import AGREEMENT_META, kendall_tau
from nasforge.run.store import Store
from tests.twostage._two_stage_run import DigitsNet


@pytest.mark.slow
def test_a_one_shot_run_records_and_shows_its_agreement_with_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SPOS records tau over the candidates its evolution scored (their trials), equal to
    tau recomputed from those trials and their sizes; status words it."""
    d = tmp_path / "run"
    search = OneShotSearch(DigitsNet(), "spos", "digits", directory=d, progress="off", epochs=3,
                           cycles=6, population=3, sample_size=2, selection="loss")  # fmt: skip
    search.run()
    with Store.open(d) as store:
        recorded = json.loads(store.get_meta(AGREEMENT_META) or "{}")
        scored = [t for t in store.trials() if t.id not in store.picks()]
    assert recorded["scorer"] == "supernet" and recorded["candidates"] == len(scored) >= 2
    example = search.example()
    params = [arch_size(search.space, t.arch, example)["params"] for t in scored]
    want = kendall_tau([t.metrics["accuracy"] for t in scored], params)
    assert want is not None and recorded["tau"]["params"] == pytest.approx(want)
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert f"baseline: the supernet agrees with parameter count at τ {want:.2f}" in out
