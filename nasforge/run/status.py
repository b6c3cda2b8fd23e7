"""What ``nasforge status`` shows of any run, read from the record alone: the run's state and
plan, its latest progress rows and its trials, best first.

Every function here reads a record read-only; none knows which kind of run wrote it.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from nasforge.run.agreement import AGREEMENT_META, agreement_text, read_agreement
from nasforge.run.progress import fmt_number
from nasforge.run.results import rank_trials
from nasforge.run.shortlist import shortlist_rows
from nasforge.run.store import Store, TrialRecord
from nasforge.run.trial_logs import trial_log
from nasforge.runtime.devices import placement_text

__all__ = [
    "summary",
    "record_line",
    "progress_table",
    "trial_table",
    "notes_table",
    "print_status",
    "failure_summary",
    "resource_spent",
    "report_unit",
    "UNCOUNTED",
]


#: trial statuses that do not count toward a run's planned trials (``n_trials``): in flight,
#: resolved from an earlier trial of the same architecture, or cancelled before they ended
UNCOUNTED = ("running", "interrupted", "cached", "cancelled")


def _plan(store: Store) -> tuple[str, int | None, int]:
    """Returns (unit, total or None, done) of the run's plan (trials: those that count toward
    ``n_trials``)."""
    try:
        plan = json.loads(store.get_meta("plan") or "{}")
    except ValueError:
        plan = {}
    unit = plan.get("unit", "trials")
    if unit == "trials":
        counts = store.counts()
        done = sum(n for s, n in counts.items() if s not in UNCOUNTED)
    else:
        done = store.n_progress()
    return unit, plan.get("total"), done


def _breakdown(store: Store, unit: str, done: int) -> str:
    """Returns what the count of trials leaves unsaid: how many of them failed, and the
    cancelled ones, which do not count."""
    if unit != "trials":
        return ""
    counts = store.counts()
    failed, cancelled = counts.get("failed", 0), counts.get("cancelled", 0)
    text = ""
    if failed:
        text += f" (all {failed} failed)" if failed == done else f" ({failed} failed)"
    if cancelled:
        text += f"; {cancelled} cancelled (not counted)"
    return text


def summary(store: Store) -> str:
    """Returns one line: the run's kind, state, how far it got, and what to do next."""
    d = store.directory
    state = store.state()
    unit, total, done = _plan(store)
    far = f"{done} of {total} {unit} done" if total else f"{done} {unit} done"
    far += _breakdown(store, unit, done)
    line = f"{d}: {store.kind} run, {state}: {far}"
    if state in ("interrupted", "stopped"):
        line += f"; resume with: nasforge resume {d}"
    elif state == "failed":
        error = (store.get_meta("error") or "").strip().splitlines()
        line += f" ({error[0][:300]})" if error else ""
        line += f"; after fixing it, `nasforge resume {d}` continues it"
    elif state == "running":
        line += " (a writer is working on it now)"
    return line


def record_line(store: Store) -> str:
    """Returns one line naming the record's format version and the nasforge versions that
    created it and last wrote it (``created by 0.2.0, last written by 0.3.0``)."""
    created = store.get_meta("created_by")
    last = store.get_meta("nasforge_version")
    by = f"nasforge {last}" if created in (None, last) else f"nasforge {created}, last by {last}"
    return f"record format {store.get_meta('version')}, written by {by}"


def failure_summary(trials: list[TrialRecord], limit: int = 3) -> str:
    """Returns the failed trials' errors grouped: the last line of each distinct error and how
    many trials share it, most common first."""
    errors = Counter(
        (t.error or "no error text").strip().splitlines()[-1][:300]
        for t in trials
        if t.status == "failed"
    )
    return "; ".join(f"{n} x {text}" for text, n in errors.most_common(limit))


def resource_spent(trials: list[TrialRecord]) -> dict[str, int]:
    """Returns the resource a run spent: ``total`` reports (epochs) summed over its trained
    trials (pruned and failed ones included; a cached repeat trains nothing) and the part of
    it per status."""
    out: dict[str, int] = {"total": 0}
    for t in trials:
        if t.status in ("cached", "running"):
            continue
        out["total"] += len(t.intermediates)
        out[t.status] = out.get(t.status, 0) + len(t.intermediates)
    return out


def report_unit(trials: list[TrialRecord]) -> str:
    """Returns `` (epochs)`` or `` (steps)`` when the trials' reports name what they count
    (an ``epoch`` or a ``step`` in each), else ``""``: a report is whatever the evaluator
    reports at."""
    reports = [r for t in trials for r in t.intermediates]
    for key in ("epoch", "step"):
        if reports and all(key in r for r in reports):
            return f" ({key}s)"
    return ""


def _stopped_at(t: TrialRecord) -> str:
    """Returns `` @r`` for a stopped trial (the resource it reached), else ``""``."""
    return f" @{len(t.intermediates)}" if t.status in ("pruned", "early_stopped") else ""


def progress_table(store: Store, limit: int = 10) -> tuple[list[str], list[list[str]]]:
    """Returns (header, rows) of the last ``limit`` progress rows: every number they hold,
    and the architecture when rows carry one."""
    rows = store.progress(last=limit)
    keys: list[str] = []
    for r in rows:
        for k, v in r.items():
            if (
                k not in keys
                and k != "step"
                and isinstance(v, (int, float))
                and not isinstance(v, bool)
            ):
                keys.append(k)
    has_arch = any("arch_id" in r for r in rows)
    header = ["step", *keys] + (["arch"] if has_arch else [])
    out = []
    for r in rows:
        cells = [str(r["step"])]
        for k in keys:
            v = r.get(k)
            cells.append(fmt_number(v) if isinstance(v, (int, float)) else str(v or ""))
        if has_arch:
            cells.append(str(r.get("arch_id", "")))
        out.append(cells)
    return header, out


def trial_table(store: Store, limit: int | None = 20) -> tuple[list[str], list[list[str]], int]:
    """Returns (header, rows, n_more): the trials best feasible first, one row per distinct
    architecture (a cached repeat is counted in its original's row), then the unranked ones by
    id; ``n_more`` counts the rows left out by ``limit``. A ``where`` column (host and GPUs,
    :func:`~nasforge.runtime.devices.placement_text`) appears when any shown trial recorded it."""
    obj, trials, picks = store.objective(), store.trials(light=True), store.picks()
    metric = obj["metric"]
    ranked = rank_trials(trials, metric, obj["mode"], obj["constraints"], picks=picks)
    repeats = Counter(t.cached_from for t in trials if t.status == "cached" and t.cached_from)
    ranked_ids = {t.id for t in ranked}
    ranked_archs = {t.arch_id for t in ranked}
    rest = [
        t
        for t in trials
        if t.id not in ranked_ids and t.status != "cached" and t.arch_id not in ranked_archs
    ]
    ordered = ranked + rest
    others = sorted({k for t in trials if t.metrics for k in t.metrics} - {metric})
    shown = [store.trial(t.id) for t in (ordered[:limit] if limit else ordered)]
    where = any(t.placement for t in shown)
    header = ["rank", "trial", "status", "how", metric, *others, "seconds"]
    header += ["where"] * where + ["arch / error"]
    rows = []
    for i, t in enumerate(shown):
        m = t.metrics or {}
        info = json.dumps(t.arch, separators=(",", ":"))
        if t.error:
            info += "  " + t.error.strip().splitlines()[-1][:80]
        seen = f" (+{repeats[t.id]} repeats)" if repeats.get(t.id) else ""
        rows.append(
            [
                str(i + 1) if t.id in ranked_ids else "-",
                str(t.id),
                t.status + _stopped_at(t) + seen + (" (the pick)" if t.id in picks else ""),
                t.evaluation,
                *(fmt_number(m.get(k)) for k in [metric, *others]),
                "" if t.duration is None else f"{t.duration:.2f}",
                *([placement_text(t.placement)] if where else []),
                info,
            ]
        )
    return header, rows, len(ordered) - len(shown)


def notes_table(store: Store, limit: int = 20) -> tuple[list[str], list[list[str]]]:
    """Returns (header, rows) of the run's latest notes (what it did beyond its trials, e.g.
    which cross-model optimization the engine kept), whatever part of the run wrote them;
    a note's extra numbers follow its detail."""
    rows = []
    for n in store.notes()[-limit:]:
        extra = {k: v for k, v in n.items() if k not in ("source", "event", "detail", "time")}
        more = ", ".join(f"{k}={v}" for k, v in extra.items())
        rows.append([n["source"], n["event"], n["detail"] + (f" ({more})" if more else "")])
    return ["source", "event", "detail"], rows


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    sys.stdout.write(title + "\n")  # above the table: a narrow table would wrap it
    table = Table()
    for h in header:
        # fold, not cut: an architecture is one long JSON word that would end in "…"
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*r)
    # a pipe gets a wide table rather than an 80-column one with every cell cut short; a
    # COLUMNS the user set is the width either way
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else None if sys.stdout.isatty() else 240
    Console(width=width).print(table)


def print_status(directory: str | Path, limit: int | None = 20) -> None:
    """Prints the run's summary line, its latest progress rows, the size baseline of a
    one-shot score (:mod:`nasforge.run.agreement`), its shortlist (a two-stage search's:
    :mod:`nasforge.run.shortlist`), its best trials and its notes to standard output (the
    command line's output).

    Raises:
        StoreError: the run cannot be read.
    """
    with Store.open(directory) as store:
        sys.stdout.write(summary(store) + "\n" + record_line(store) + "\n")
        if store.n_progress():
            header, rows = progress_table(store, limit or 10)
            _print_table(f"progress (last {len(rows)} of {store.n_progress()})", header, rows)
        header, rows, more = trial_table(store, limit)
        counts = store.counts()
        spent = resource_spent(store.trials())
        section = store.config().get(store.kind) or {}
        evaluator = section.get("evaluator") if isinstance(section, dict) else None
        if isinstance(evaluator, dict) and evaluator.get("type") == "classification":
            unit = " (epochs)"  # the built-in evaluator reports once per epoch
        else:
            unit = report_unit(store.trials("done")[:50])
        notes = notes_table(store)
        failed = [t.id for t in store.trials("failed", light=True)]
        short = shortlist_rows(store, store.objective()["metric"])
        agreement = read_agreement(store.get_meta(AGREEMENT_META))
    if agreement is not None:
        sys.stdout.write(f"baseline: {agreement_text(agreement)}\n")
    if short[1]:
        _print_table("shortlist (stage 1's scores beside stage 2's training)", *short)
    if spent.get("total"):
        parts = ", ".join(f"{k} {v}" for k, v in spent.items() if k != "total")
        sys.stdout.write(f"resource spent: {spent['total']} reports{unit}, by status: ")
        sys.stdout.write(f"{parts} (a stopped trial shows @ the reports it reached)\n")
    if rows:
        dups = counts.get("cached", 0)
        note = f", {dups} repeats of evaluated architectures folded in" if dups else ""
        _print_table(f"trials, best first{note}", header, rows)
        if more:
            sys.stdout.write(f"... and {more} more (--limit N shows more)\n")
    if notes[1]:
        _print_table("notes (what the run did beyond its trials)", *notes)
    _print_failed_logs(Path(directory), failed)


def _print_failed_logs(directory: Path, failed: list[int]) -> None:
    """Prints, for each failed trial with a log (the last 5), the command that shows it."""
    shown = [t for t in failed if trial_log(directory, t).exists()][-5:]
    for t in shown:
        sys.stdout.write(
            f"trial {t} failed; its output and traceback: nasforge logs {directory} {t}\n"
        )
