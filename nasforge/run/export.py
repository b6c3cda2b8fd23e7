"""Export of a run's best trials, and loading an export back as a ready model in one call.

One layout for every kind of run: ``<out>/rank<r>_trial<id>/`` holds

    arch.json   format, rank, trial id, arch id, the architecture, its metrics and how they
                were measured (trained, inherited, predicted), its status and the resource it
                reached (reports; a ``pruned`` trial's metrics are those of its last report,
                so compare it only with trials of the same resource), the run's kind and objective,
                and a reference that rebuilds the model space (class and constructor
                arguments, see :mod:`nasforge.run.refs`)
    weights.pt  when the trial saved weights: a dict of tensors written by ``torch.save``,
                read back with ``weights_only=True``; a trial whose file the run deleted
                (``keep_checkpoints``) has none, and ``arch.json`` says why under
                ``weights_note``, which :func:`load_model` raises with
    <files>     the run's artifacts that a model needs beside its weights (recorded with
                ``{"export": true}`` in their metadata, e.g. a translation model's tokenizer),
                listed in ``arch.json`` under ``files``
    hf/         with ``hf=True`` (``nasforge export --hf``), for a space that builds a Hugging
                Face model: ``save_pretrained``'s folder (``config.json`` with the frozen
                sizes, see :mod:`nasforge.space.hf_config`, and the weights), which
                ``AutoModelForCausalLM.from_pretrained`` loads without nasforge; ``arch.json``
                names it under ``hf``, or says under ``hf_note`` why it is missing (the config
                cannot hold sizes that differ per layer, or the trial kept no weights)
    model.onnx, model.ts, model.pt2
                with ``formats`` (``nasforge export --format``): the model in each deployment
                format, verified when written (:mod:`nasforge.run.deploy`); ``arch.json``
                holds each one's report under ``deploy`` (file, largest absolute difference
                from the PyTorch model, tolerance, whether the batch axis stayed dynamic), and
                ``example.pt`` the input they were checked on
    model.int8.onnx
                with ``quantize="int8"`` (``nasforge export --format onnx --quantize int8``):
                the ONNX model quantized by onnxruntime (:mod:`nasforge.run.quantize`);
                ``arch.json`` holds under ``quantized`` its accuracy change on the run's
                evaluator data (where the record can rebuild it), its largest output
                difference from the fp32 model and both latencies on onnxruntime

A run that recorded a shortlist (a two-stage search: :mod:`nasforge.run.shortlist`) also
gets ``<out>/shortlist.json``: each candidate's first-stage score and sizes beside its
second-stage trial, status, reports and metric; the ``arch.json`` of a shortlisted trial
names its entry under ``shortlist``.

:func:`load_model` needs nothing but that folder.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError, StoreError
from nasforge.run.deploy import FORMATS, SUFFIXES, derive_example, export_model
from nasforge.run.preflight import check_folder, folder_entries, make_folder, remove_new
from nasforge.run.quantize import QUANTIZE, evaluation_data, quantize_onnx
from nasforge.run.refs import from_ref
from nasforge.run.results import rank_trials
from nasforge.run.shortlist import shortlist_results
from nasforge.run.store import Store, TrialRecord
from nasforge.runtime.weights import KEPT_NOTE, not_kept

if TYPE_CHECKING:  # torch and the space language load when a model is
    import torch
    from torch import nn

    from nasforge.space.model_space import BaseSpace

__all__ = ["export_top", "load_model", "save_hf", "EXPORT_FORMAT"]

EXPORT_FORMAT = "nasforge-export/2"

log = logging.getLogger("nasforge.run")


def _checkpoint(directory: Path, t: TrialRecord) -> Path | None:
    if not t.checkpoint:
        return None
    p = Path(t.checkpoint)
    p = p if p.is_absolute() else directory / p
    return p if p.exists() else None


def export_top(
    directory: str | Path,
    k: int = 1,
    out: str | Path | None = None,
    per: str | None = None,
    hf: bool = False,
    formats: Sequence[str] = (),
    example: torch.Tensor | None = None,
    quantize: str | None = None,
) -> list[Path]:
    """Returns the folders written for the ``k`` best feasible trials of the run in
    ``directory``, best first (with ``per``: the ``k`` best for each value of that metric,
    e.g. each latency target of a once-for-all search). With ``hf``, each folder also gets
    ``hf/``, the model saved for Hugging Face's ``from_pretrained`` (see the module's
    docstring). With ``formats`` (a subset of :data:`~nasforge.run.deploy.FORMATS`), each
    folder also gets the model in those formats, each verified on ``example`` (derived from
    the model when None, see :func:`~nasforge.run.deploy.derive_example`). With ``quantize``
    ``"int8"`` (``formats`` must hold ``onnx``), each ONNX model is also quantized
    (:func:`~nasforge.run.quantize.quantize_onnx`: ``model.int8.onnx``), its accuracy change
    measured on the run's evaluator data where the record rebuilds it, and its report kept in
    ``arch.json`` under ``quantized``.

    Raises:
        StoreError: the run cannot be read, or it has no ranked trial to export; with
            ``formats``: a chosen trial kept no weights.
        ExportError: a model has an operator a format cannot hold (the message names it), or
            its export differs beyond the tolerance; nothing this call wrote is kept.
        ConfigError: ``k`` < 1; an unknown format; ``quantize`` is not ``"int8"`` or comes
            without the ``onnx`` format; ``out`` is a file, lies under one, or
            cannot be made; with ``hf``: the space does not build a Hugging Face model, or a
            trial's ``hf/`` could not be written (its config cannot hold the frozen sizes: the
            message names the attributes; every other folder is written first).
    """
    if not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive int, got {k!r}")
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"export formats {unknown} are not among {FORMATS}")
    if quantize is not None and (quantize not in QUANTIZE or "onnx" not in formats):
        raise ConfigError(
            f"--quantize {quantize} with formats {list(formats)}: quantization is onnxruntime's "
            f"and takes {QUANTIZE[0]!r} on the ONNX export; add --format onnx"
        )
    directory = Path(directory)
    out = Path(out) if out is not None else directory / "export"
    check_folder(out, "export folder")  # before anything is read or written
    before = folder_entries(out)
    with Store.open(directory) as store:
        cfg, obj = store.config(), store.objective()
        trials = store.trial_metrics()  # what ranking reads; the chosen are read in full
        ranked = rank_trials(trials, obj["metric"], obj["mode"], obj["constraints"],
                             picks=store.picks())  # fmt: skip
        if per is not None:
            groups: dict[Any, list[TrialRecord]] = {}
            for t in ranked:
                groups.setdefault((t.metrics or {}).get(per), []).append(t)
            chosen = [t for g in groups.values() for t in g[:k]]
        else:
            chosen = ranked[:k]
        chosen = [store.trial(t.id) for t in chosen]
        needed = {n: a for n, a in store.artifacts().items() if a["meta"].get("export")}
        kept = store.notes(KEPT_NOTE)
        shortlist = shortlist_results(store, obj["metric"])
    if not chosen:
        raise StoreError(
            f"{directory} has no finished trial ranked by {obj['metric']!r} to export "
            f"({len(trials)} trials; `nasforge status {directory}` shows them)"
        )
    written = [
        _write_trial(out, rank, t, directory, cfg, obj, needed, kept, shortlist)
        for rank, t in enumerate(chosen, 1)
    ]
    if formats:
        try:
            data = evaluation_data(cfg) if quantize else None
            for d in written:
                _deploy(d, formats, example, quantize is not None, data)
        except Exception:  # one clear error, and no export half-written
            remove_new(out, before)
            raise
    if shortlist:
        (out / "shortlist.json").write_text(json.dumps(shortlist, indent=2, sort_keys=True))
    if hf:
        missing = [f"{d.name}: {note}" for d in written if (note := save_hf(d)) is not None]
        if missing:
            raise ConfigError(
                f"no Hugging Face folder for {len(missing)} of {len(written)} exports "
                f"({'; '.join(missing)}); their arch.json and weights are written and load "
                "with nasforge.load_model"
            )
    return written


def _write_trial(
    out: Path,
    rank: int,
    t: TrialRecord,
    directory: Path,
    cfg: dict[str, Any],
    obj: dict[str, Any],
    needed: dict[str, Any],
    kept: list[dict[str, Any]],
    shortlist: list[dict[str, Any]],
) -> Path:
    """Returns the folder written for trial ``t`` at ``rank``: its ``arch.json``, weights
    (when kept) and the run's artifacts marked for export."""
    d = make_folder(out / f"rank{rank}_trial{t.id}", "export folder")
    weights = None
    ckpt = _checkpoint(directory, t)
    if ckpt is not None:
        shutil.copyfile(ckpt, d / "weights.pt")
        weights = "weights.pt"
    note = None
    if ckpt is None and kept and not t.error and t.evaluation == "trained":
        note = not_kept(kept[-1].get("keep"))
        log.warning("%s (rank %d, trial %d): %s", d, rank, t.id, note)
    files: dict[str, str] = {}  # artifact name -> file copied beside arch.json
    meta = {
        "format": EXPORT_FORMAT,
        "rank": rank,
        "trial": t.id,
        "arch_id": t.arch_id,
        "arch": t.arch,
        "metrics": t.metrics,
        "evaluation": t.evaluation,
        "status": t.status,  # "pruned"/"early_stopped": metrics of its last report
        "resource": len(t.intermediates),  # reports (epochs) it reached
        "kind": cfg.get("kind"),
        "objective": obj,
        "space": cfg.get("space"),
        "run": str(directory.resolve()),
        "weights": weights,
        "weights_note": note,
        "files": files,
    }
    for name, a in needed.items():
        src = Path(a["path"])
        if src.exists():
            shutil.copyfile(src, d / src.name)
            files[name] = src.name
    entry = [r for r in shortlist if r.get("arch_id") == t.arch_id]
    if entry:
        meta["shortlist"] = {k: v for k, v in entry[0].items() if k != "arch"}
    (d / "arch.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return d


def _deploy(
    folder: Path,
    formats: Sequence[str],
    example: torch.Tensor | None,
    quantize: bool = False,
    data: tuple[tuple[torch.Tensor, torch.Tensor], str] | None = None,
) -> None:
    """Writes the export in ``folder`` in each of ``formats``, verified, and records the
    reports in its ``arch.json`` (see :func:`export_top`); with ``quantize``, the ONNX model
    quantized to int8 too, its accuracy measured on ``data`` (inputs and labels, and where
    they come from) when it is not None; without ``example``, two of ``data``'s inputs are
    the example, so that the exports take the input size the run trained on."""
    import torch

    meta_path, meta = _read_meta(folder)
    model, _ = _build(meta_path, meta)
    x = example
    if x is None:  # the run's own data, where it is known, has the size the model was trained at
        x = data[0][0][:2].float() if data else derive_example(model)
    reports = {}
    for fmt in formats:
        r = export_model(model, folder / f"model{SUFFIXES[fmt]}", fmt, example=x)
        reports[fmt] = {**r, "path": Path(r["path"]).name}
    if quantize:
        q = quantize_onnx(folder / "model.onnx", x, data[0] if data else None)
        meta["quantized"] = {**q, "path": Path(q["path"]).name, "data": data and data[1]}
    torch.save(x, folder / "example.pt")
    meta["deploy"], meta["example"] = reports, "example.pt"
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True))


def save_hf(folder: str | Path) -> str | None:
    """Returns None once the export in ``folder`` is saved for Hugging Face in
    ``folder/hf`` (``save_pretrained``: a ``config.json`` of the frozen sizes and the
    weights), or the reason it is not (the model's config cannot hold its sizes: the
    attributes are named; the trial kept no weights), which is logged as a warning and
    recorded in ``arch.json`` under ``hf_note``.

    Raises:
        StoreError: ``folder`` is not an export.
        ConfigError: its space does not build a ``transformers`` model, or cannot be rebuilt.
    """
    from nasforge.space.hf_config import is_hf_model, sync_config, unmapped_message

    meta_path, meta = _read_meta(Path(folder))
    note = None
    if not meta.get("weights"):
        note = meta.get("weights_note") or "the trial saved no weights"
        model, space = None, None
    else:
        model, space = _build(meta_path, meta)
        if not is_hf_model(model):
            raise ConfigError(
                f"{meta_path.parent}: --hf saves a Hugging Face model, and this space builds a "
                f"{type(model).__name__}; export it without --hf and load it with "
                "nasforge.load_model"
            )
        unmapped = sync_config(model, getattr(space, "base_model", None))
        if unmapped:
            note = unmapped_message(model, unmapped)
    if note is None:
        assert model is not None
        hf_model: Any = model  # a transformers.PreTrainedModel
        hf_model.save_pretrained(meta_path.parent / "hf")
        meta["hf"], meta["hf_note"] = "hf", None
    else:
        log.warning("%s: no Hugging Face folder: %s", meta_path.parent, note)
        meta["hf"], meta["hf_note"] = None, note
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True))
    return note


def _read_meta(path: Path) -> tuple[Path, dict[str, Any]]:
    meta_path = path / "arch.json" if path.is_dir() else path
    if not meta_path.exists():
        raise StoreError(f"{meta_path} not found; pass a folder written by `nasforge export`")
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError as exc:
        raise StoreError(f"{meta_path} is not an export's arch.json: {exc}") from exc
    if not isinstance(meta, Mapping) or "arch" not in meta:
        raise StoreError(f"{meta_path} is not an export's arch.json (no architecture)")
    return meta_path, dict(meta)


def load_model(path: str | Path, space: BaseSpace | None = None) -> nn.Module:
    """Returns the exported architecture as a frozen ``nn.Module`` with its weights, in eval
    mode. ``path`` is an export folder (or its ``arch.json``); the space is rebuilt from the
    reference the export carries unless ``space`` is given.

    Raises:
        StoreError: ``path`` is not an export, or its trial's weights were not kept
            (``keep_checkpoints``: the message says so; the architecture is in ``arch.json``).
        ConfigError: the space cannot be rebuilt (its module is gone: pass ``space=``).
    """
    meta_path, meta = _read_meta(Path(path))
    return _build(meta_path, meta, space)[0]


def _build(
    meta_path: Path, meta: dict[str, Any], space: BaseSpace | None = None
) -> tuple[nn.Module, BaseSpace]:
    """Returns (the exported model with its weights, in eval mode; its space) of the export
    whose ``arch.json`` is ``meta_path`` holding ``meta`` (see :func:`load_model`).

    Raises:
        StoreError: its trial's weights were not kept.
        ConfigError: the space cannot be rebuilt.
    """
    import torch

    from nasforge.space.model_space import freeze

    if not meta.get("weights") and meta.get("weights_note"):
        raise StoreError(
            f"{meta_path}: trial {meta.get('trial')}'s {meta['weights_note']} (the run deleted "
            "them); load an export of a better-ranked trial, or train this architecture again "
            "(nasforge.space.freeze(space, arch) builds it untrained)"
        )
    if not meta.get("weights"):
        raise StoreError(
            f"{meta_path}: trial {meta.get('trial')} has no weights in this export (it was "
            "scored, not kept: e.g. a candidate a one-shot search measured with its supernet's "
            "weights); load the run's pick (`nasforge export DIR` exports it first), or build "
            "this architecture untrained with nasforge.space.freeze(space, arch)"
        )
    if space is None:
        ref = meta.get("space")
        if not ref:
            raise ConfigError(
                f"{meta_path} carries no reference to its model space; pass space=YourSpace()"
            )
        space = from_ref(ref)
    model = freeze(space, meta["arch"])
    if meta.get("weights"):
        state = torch.load(meta_path.parent / meta["weights"], weights_only=True)
        model.load_state_dict(state)
    model.eval()
    return model, space
