"""Tests of benchmarks/ofa_published.py on SYNTHETIC files in the published formats (see
tests/ofa/_synthetic.py): the skip line without files, and a short search whose reported
accuracy and latency are the predictor's and the tables' for the reported architectures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from nasforge.ofa.latency import LatencyTable
from nasforge.ofa.predictor import AccuracyPredictor
from nasforge.ofa.published import from_ofa_arch
from tests.ofa._synthetic import ofa_layout_state, write_ofa_predictor, write_ofa_tables

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "ofa_published.py"


def _bench():
    """Returns the benchmark script as a module."""
    spec = importlib.util.spec_from_file_location("ofa_published_bench", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_files_prints_a_skip_line(capsys):
    """No --latency-table / --predictor: one JSON skip line, normal exit."""
    _bench().main([])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["skipped"] is True and "--latency-table" in last["reason"]


def test_short_search_reports_table_latency_and_predicted_accuracy(tmp_path, capsys):
    """Each seed's best meets 25 ms; its numbers are the tables' and predictor's for its arch."""
    write_ofa_tables(tmp_path / "note10", width=1.2)
    write_ofa_predictor(tmp_path / "acc_predictor.pth")
    supernet = tmp_path / "ofa_mbv3_d234_e346_k357_w1.2"
    torch.save({"state_dict": ofa_layout_state(1.2, n_classes=1000)}, supernet)
    _bench().main([
        "--latency-table", str(tmp_path / "note10"), "--predictor",
        str(tmp_path / "acc_predictor.pth"), "--supernet", str(supernet),
        "--seeds", "2", "--generations", "2", "--population", "12",
    ])  # fmt: skip
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [row["seed"] for row in out["best"]] == [0, 1] and out["search_s"] > 0
    table = LatencyTable.from_ofa_yaml(tmp_path / "note10")
    pred = AccuracyPredictor.load_ofa(tmp_path / "acc_predictor.pth", table.space)
    for row in out["best"]:
        arch = from_ofa_arch(table.space, row["arch"])
        assert row["latency_ms"] <= 25.0
        assert abs(row["latency_ms"] - table.predict(arch)) < 1e-5
        assert abs(row["accuracy"] - pred(arch)) < 1e-5
        assert row["logits_finite"] and row["params"] > 0
