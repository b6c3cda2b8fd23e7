"""An OFA run in the run record (:mod:`nasforge.run.store`), kind ``ofa``.

    config      ``{"kind": "ofa", "ofa": {"spec", "train", "plan", "run", "search"}, "space":
                a reference to OFAMobileNetV3(spec), ...}``
    progress    one row per finished epoch (step = the epoch's number over the whole plan):
                stage, stage_index, epoch, loss, ``acc_<probe>`` accuracies, checkpoint, seconds
    artifacts   ``supernet``: the trained supernet's state dict, once training ended
    trials      one per deployment-search result: the best sub-network for a target, with
                ``accuracy``, ``cost`` (ms or MMACs) and ``target``; its weights as checkpoint
    checkpoints ``checkpoints/*.pt``: state dicts only (model, teacher, optimizer, scheduler),
                read with ``torch.load(weights_only=True)``; the latest, and the last of each
                finished stage, are kept

Invariants: a progress row naming a checkpoint is added only after its file was written
atomically, so the last row always names a complete file; the stored spec, training config and
plan never change once the run is created.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nasforge.errors import StoreError
from nasforge.ofa.spaces import OFASpec, Phase, Stage
from nasforge.run.runner import Objective
from nasforge.run.store import Store, is_run

__all__ = [
    "KIND",
    "stage_to_dict",
    "stage_from_dict",
    "section",
    "run_config",
    "spec_ref",
    "open_run",
    "open_ofa_store",
]

KIND = "ofa"


def stage_to_dict(stage: Stage) -> dict[str, Any]:
    """Returns a training stage as JSON-able plain data (its phase spelled out)."""
    phase = None if stage.phase is None else dataclasses.asdict(stage.phase)
    return {"name": stage.name, "epochs": stage.epochs, "lr": stage.lr, "phase": phase}


def stage_from_dict(data: Mapping[str, Any]) -> Stage:
    """Returns the :class:`~nasforge.ofa.spaces.Stage` that :func:`stage_to_dict` wrote."""
    p = data["phase"]
    phase = None
    if p is not None:
        phase = Phase(p["name"], tuple(p["depths"]), tuple(p["expands"]), tuple(p["kernels"]),
                      bool(p["sort_channels"]))  # fmt: skip
    return Stage(data["name"], phase, int(data["epochs"]), data["lr"])


def section(
    spec: OFASpec,
    plan: Sequence[Any],
    train_config: Any,
    run: Mapping[str, Any] | None = None,
    search: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Returns the ``ofa`` section of a run config: spec, training config, plan, free ``run``
    data (the command line keeps its data source and thread count there) and the search
    settings (or None)."""
    # a JSON round trip makes tuples lists, as they come back from the store
    return json.loads(json.dumps({
        "spec": spec.to_dict(), "train": dataclasses.asdict(train_config),
        "plan": [stage_to_dict(s) for s in plan], "run": dict(run or {}),
        "search": None if search is None else dict(search),
    }))  # fmt: skip


def run_config(
    spec: OFASpec, plan: Sequence[Any], train_config: Any, run: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Returns the whole run config of an OFA training started from Python (``train(...,
    directory=...)``)."""
    return {
        "kind": KIND,
        "objective": Objective("accuracy", "max").to_dict(),
        KIND: section(spec, plan, train_config, run),
        "space": spec_ref(spec),
        "source": None,
    }


def spec_ref(spec: OFASpec) -> dict[str, Any]:
    """Returns the record's reference to ``OFAMobileNetV3(spec)`` (see nasforge.run.refs), so
    that ``load_model`` rebuilds the space of an export without building it here."""
    return json.loads(json.dumps({
        "object": "nasforge.ofa.mobilenet:OFAMobileNetV3",
        "args": [{"__dataclass__": "nasforge.ofa.spaces:OFASpec", "fields": spec.to_dict()}],
        "kwargs": {},
    }))  # fmt: skip


def open_ofa_store(directory: str | Path, readonly: bool = True) -> Store:
    """Returns the store of an existing OFA run.

    Raises:
        StoreError: no run there, an unreadable or foreign database, or a run that is not an
            OFA run (e.g. a multi-trial search).
        LockError: ``readonly=False`` and another process writes the run.
    """
    store = Store.open(directory, readonly=readonly)
    kind = store.kind
    if kind != KIND:
        store.close()
        raise StoreError(
            f"{directory} holds a {kind or 'unknown'} run, not an OFA run; give the directory "
            "`nasforge ofa train` wrote"
        )
    return store


def open_run(directory: str | Path, config: Mapping[str, Any]) -> Store:
    """Returns the writer store of the run in ``directory``: created with ``config`` when the
    directory holds none, else opened after checking that it was started with the same spec,
    training config and plan (the ``run`` part is not compared).

    Raises:
        StoreError: the directory holds another kind of run, an unreadable database, or an OFA
            run started with different settings.
        LockError: another process writes the run.
    """
    if not is_run(directory):
        return Store.create(directory, config)
    store = open_ofa_store(directory, readonly=False)
    stored = store.config()[KIND]
    diff = [k for k in ("spec", "train", "plan") if stored.get(k) != config[KIND].get(k)]
    if diff:
        store.close()
        raise StoreError(
            f"{directory} holds an OFA run started with a different {', '.join(diff)}; resume "
            "it with the same settings (`nasforge resume DIR` reads them from the record) or "
            "choose a new directory"
        )
    return store
