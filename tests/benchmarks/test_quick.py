"""Every benchmark's ``--quick`` smoke run: it exits 0 and its last line is one JSON object with
the fields the script documents, so that no benchmark rots unseen between the runs that
measure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
#: Seconds one smoke run may take before it counts as hung (each takes about 20 s on 2 quiet
#: cores; this guards against a hang, it is not a speed target).
TIMEOUT = 300

#: Each benchmark script -> the fields of its last line that its docstring documents. A script
#: that cannot run here (no GPU, no browser, no published files) prints ``{"skipped": ...}``
#: (or ``{"skipped": true, "reason": ...}``) and the test skips with that reason.
FIELDS: dict[str, tuple[str, ...]] = {
    "budget": ("best", "resource", "resource_to_match", "asha_fraction_of_full"),
    "budgeted_search": (
        "two_stage_percentile",
        "p_vs_random",
        "cost_over_train_all",
        "shortlist_rule",
        "single_stage_percentile",
        "n_seeds",
        "tables",
    ),
    "confirm_replay": ("replay_percentile", "gain_of_default", "min_gain", "draws", "tables"),
    "cluster": (
        "speedup_3_nodes_vs_1",
        "ray_overhead_ms_per_trial",
        "pool_overhead_ms_per_trial",
        "node_kill",
    ),
    "cmp": ("cmp_over_mp", "seconds", "device"),
    "crossmodel": (
        "shared_data_speedup",
        "op_batching_speedup",
        "supergraph_speedup_vs_file",
        "supergraph_speedup_vs_dict",
        "mixed_parallel",
        "e2e_weight_sharing_search",
        "e2e_frozen_backbone_search",
    ),
    "dashboard": ("overview_s", "trial_table_s", "overview_again_s", "trial_table_again_s"),
    "deploy": (
        "export_ok",
        "max_abs_diff",
        "table_vs_measured",
        "onnxruntime_over_torch",
        "nni_equal",
    ),
    "engine_overhead": (
        "inprocess_ms_per_trial",
        "optuna_inmemory_ms_per_trial",
        "optuna_sqlite_ms_per_trial",
        "inprocess_vs_optuna_inmemory",
        "tpe_ratio",
        "auto_ratio",
        "cpu_ratios",
        "targets_met",
        "pool_ms_per_trial",
    ),
    "freeze": ("frozen_vs_handwritten_time_ratio", "freeze_ms"),
    "ground_truth": ("n_rows", "seed_ceiling_tau", "spread_10_90"),
    "hparams": ("regret", "ask_ms", "joint_vs_arch_only", "joint_vs_hp_only"),
    "hub": (
        "spaces",
        "archs",
        "max_params_rel_error",
        "max_madds_rel_error",
        "exceptions",
        "space_exceptions",
        "unexplained",
        "stale_exceptions",
    ),
    "mutate_zoo": ("models",),
    "naspipe_costs": ("out", "device", "seconds", "families"),
    "naspipe_cuda": (
        "samples_per_s",
        "hit_rate",
        "prefetched_fraction",
        "peak_device_bytes",
        "equals_resident",
        "csp_cache_over_resident",
        "memory_ratio",
    ),
    "naspipe_run": ("samples_per_s", "equals_sequential"),
    "nni_equal": ("nni_equal", "nni_equal_freeze", "max_abs_diff", "unmapped", "mismatch"),
    "naspipe_sim": ("configs", "summary"),
    "ofa_extract": ("extract_ms", "max_abs_diff"),
    "ofa_predictor": ("spearman", "top10_overlap", "n_train", "baseline_spearman"),
    "ofa_published": ("best", "search_s"),
    "ofa_search": ("compofa_search_s", "ofa_search_s", "compofa_latency_measurements"),
    "ofa_train_compare": ("ofa_mean_acc", "compofa_mean_acc", "ofa_largest_acc", "n_common"),
    "oneshot_cli": ("seconds_per_epoch", "first_epoch_s", "total_s", "threads", "cores"),
    "oneshot_distributed": (
        "speedup",
        "max_abs_diff_vs_single",
        "same_arch_as_single",
        "scoring_speedup",
        "restart_same_arch",
        "trivial",
    ),
    "oneshot_memory": ("saved_bytes", "ratios", "max_batch_in_budget", "targets_met"),
    "oneshot_quality": ("random_median", "beats_random_median"),
    "oneshot_speed": ("step_seconds", "step_time_ratio_to_standalone", "targets_met"),
    "quickstart": ("quickstart_s", "command_s", "cores", "load_average_before_after"),
    "ranking": (
        "tau",
        "ceiling",
        "baseline_tau",
        "proxy_tau",
        "search_percentile",
        "constrained_percentile",
        "p_vs_random",
        "n_search_seeds",
    ),
    "reversible_bleu": ("bleu", "significance", "bleu_parts", "params", "arch"),
    "reversible_memory": ("saved_bytes", "max_hidden"),
    "reversible_speed": ("step_time_ratio", "step_s_by_d"),
    "scale": ("tpe_ask_ms_vs_optuna", "tpe_repeat_ask_fraction", "status_s_10k", "resume_s_10k"),
    "search_vs_random": (
        "seeds",
        "trials",
        "evolution_best_test_mean",
        "random_best_test_mean",
        "evolution_best_val_mean",
        "random_best_val_mean",
        "evolution_vs_random_test",
        "evolution_vs_random_val",
        "evolution_best_is_a_random_draw",
        "evolution_median_test_mean",
        "random_median_test_mean",
        "evolution_at_best_val_mean",
        "random_at_best_val_mean",
        "per_seed",
        "table_networks",
        "networks_trained",
        "seconds",
        "cores",
        "load_average",
    ),
    "solutions": ("wann", "pathlevel", "proxylessnas", "enas"),
    "strategies": ("best_mean", "repeat_ask_fraction"),
    "supernet_steps": ("tau_vs_truth", "tau_per_seed", "tau_flops", "steps_per_epoch", "n_seeds"),
    "trial_cost": (
        "startup_ms_per_trial",
        "training_share",
        "asha_wall_over_full",
        "asha_epochs_over_full",
        "ray_tune_wall_s",
        "optuna_wall_s",
        "optuna_over_nasforge",
        "ray_tune_over_nasforge",
    ),
}


def _scripts() -> list[str]:
    return sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_every_benchmark_has_a_smoke_run() -> None:
    """Each benchmarks/*.py script (not the _private helpers) is listed here and has --quick."""
    assert _scripts() == sorted(FIELDS)
    lacking = [s for s in FIELDS if "--quick" not in (BENCH / f"{s}.py").read_text()]
    assert not lacking, f"no --quick in {lacking}"


#: Scripts whose ``--quick`` still takes minutes on 2 cores (measured 2026-11-28, load 2-20:
#: 4-7 min each, several past this file's hang guard): together they would take CI's slow set
#: past its time limit, so they carry the ``bench`` mark (``pytest -m bench`` runs them) until
#: their smoke runs are cut down; the rest run in the slow set on every CI run.
HEAVY = {
    "budgeted_search", "cmp", "crossmodel", "deploy", "ground_truth", "hparams", "naspipe_cuda",
    "naspipe_run", "ofa_predictor", "ofa_search", "ofa_train_compare", "oneshot_cli",
    "oneshot_distributed", "oneshot_quality", "oneshot_speed", "ranking", "solutions",
}  # fmt: skip


def _mark(script: str) -> Any:
    """Returns ``script``'s parameter: in the slow set, or (too long for CI) under ``bench``."""
    return pytest.param(script, marks=pytest.mark.bench if script in HEAVY else pytest.mark.slow)


@pytest.mark.parametrize("script", [_mark(s) for s in sorted(FIELDS)])
def test_quick_run_prints_its_fields(script: str, tmp_path: Path) -> None:
    """``python benchmarks/SCRIPT.py --quick`` exits 0 and its last line is a JSON object
    with the script's documented fields (or a skip line that says why it cannot run here).
    It runs in an empty folder, so that caches a script keeps under ``runs/`` start empty."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    tail = proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"{script} --quick exited {proc.returncode}:\n{tail}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{script} --quick printed nothing:\n{tail}"
    last = json.loads(lines[-1])
    assert isinstance(last, dict), f"{script}: the last line is not a JSON object: {lines[-1]}"
    if last.get("skipped"):
        reason = last.get("reason") or last["skipped"]
        pytest.skip(f"{script}: {reason}")
    missing = [k for k in FIELDS[script] if k not in last]
    assert not missing, f"{script}: the last line lacks {missing}: {sorted(last)}"
