"""Deployment search on published artifacts as a run (`nasforge ofa search --latency-table`),
on SYNTHETIC files in the published formats (tests/ofa/_synthetic.py)."""

from __future__ import annotations

import torch

from nasforge.cli import main
from nasforge.ofa.latency import LatencyTable
from nasforge.ofa.mobilenet import extract
from nasforge.ofa.predictor import AccuracyPredictor
from nasforge.ofa.pretrained import load_pretrained
from nasforge.run.export import load_model
from nasforge.run.store import Store
from tests.ofa._synthetic import ofa_layout_state, write_ofa_predictor, write_ofa_tables


def test_search_on_published_artifacts_records_a_run_and_exports_subnets(tmp_path, capsys):
    """One trial per target, within its target by the tables, scored by the predictor; each
    exported sub-network loads with load_model alone and equals the supernet's extraction."""
    write_ofa_tables(tmp_path / "note10", width=1.2)
    write_ofa_predictor(tmp_path / "acc_predictor.pth")
    supernet = tmp_path / "ofa_mbv3_d234_e346_k357_w1.2"
    torch.save({"state_dict": ofa_layout_state(1.2, n_classes=1000)}, supernet)
    out = tmp_path / "run"
    argv = ["ofa", "search", "--latency-table", str(tmp_path / "note10"),
            "--predictor", str(tmp_path / "acc_predictor.pth"), "--supernet", str(supernet),
            "--target-ms", "22,28", "--resolutions", "160,192", "--generations", "2",
            "--population", "12", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    net = load_pretrained(supernet)
    files = [tmp_path / "note10" / f"{r}_lookup_table.yaml" for r in (160, 192)]
    from dataclasses import replace

    from nasforge.ofa.spaces import OFASearchSpace

    space = OFASearchSpace(replace(net.spec, resolutions=(160, 192)))
    table = LatencyTable.from_ofa_yaml(files, space)
    pred = AccuracyPredictor.load_ofa(tmp_path / "acc_predictor.pth", table.space)
    with Store.open(out) as store:
        trials = store.trials()
        assert store.kind == "ofa-deploy" and store.state() == "finished"
    assert [t.metrics["target"] for t in trials] == [22.0, 28.0]
    for t in trials:
        assert t.evaluation == "predicted" and t.metrics["latency_ms"] <= t.metrics["target"]
        assert abs(t.metrics["latency_ms"] - table.predict(t.arch)) < 1e-6
        assert abs(t.metrics["accuracy"] - pred(t.arch)) < 1e-6
        assert table.space.resolution(t.arch) in (160, 192)
    capsys.readouterr()
    assert main(["export", str(out), "--per", "target"]) == 0
    folders = capsys.readouterr().out.split()
    assert len(folders) == 2
    model = load_model(folders[0])  # rebuilt from the record's reference to the supernet space
    best = max(trials, key=lambda t: (t.metrics["accuracy"], -t.id))
    x = torch.randn(1, 3, 160, 160)
    assert torch.equal(model(x), extract(net, best.arch).eval()(x))


def test_missing_published_file_is_a_clear_error(tmp_path):
    """A predictor path that does not exist exits with code 2 before any search."""
    write_ofa_tables(tmp_path / "note10", width=1.2)
    argv = ["ofa", "search", "--latency-table", str(tmp_path / "note10"), "--predictor",
            str(tmp_path / "nope.pth"), "--target-ms", "25",
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 2
    assert not (tmp_path / "r").exists()
