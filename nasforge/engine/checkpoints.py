"""Which trial weights a multi-trial run keeps: the files of its ``keep`` best trials, plus those
of trials still running; every other weight file is deleted as soon as a finished trial pushes
it out of the best ``keep`` (like Ray Tune's ``CheckpointConfig(num_to_keep=...)``).

    rank     the run's objective: :func:`nasforge.run.results.score` (metric, mode and
             constraints; failed and infeasible trials never rank), ties to the earlier trial,
             one trial per architecture, as ``nasforge export`` ranks them
    drop     the record's checkpoint field is cleared first (the trial's and those of the
             ``cached`` trials that share its file), in one transaction; then the file is
             deleted. A kill in between leaves a file that no record names, never a record
             that names a missing file; :meth:`CheckpointKeeper.sweep` deletes such files when
             the run resumes
    resume   trials still running at a kill are run again and write their file again, so
             only finished trials' files are ever dropped; the kept set is rebuilt by feeding
             the replayed trials in their tell order
    skip     once ``keep`` trials are kept, a trial is dispatched with the lowest kept score
             (:meth:`CheckpointKeeper.threshold`); one that ends below it writes no weights,
             since the keeper would drop them at once (the kept scores only rise). The record
             is the same as with the file written and dropped: no checkpoint

The run's notes say what was kept (``source="checkpoints"``, ``keep``): export and
``load_model`` use it to explain a trial without weights.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from nasforge.run.store import Store, TrialRecord
from nasforge.runtime.weights import KEPT_NOTE

__all__ = ["CheckpointKeeper"]

log = logging.getLogger("nasforge.engine")

_TRIAL_FILE = re.compile(r"trial_(\d+)\.pt")


class CheckpointKeeper:
    """Returns nothing; deletes the weight files of finished trials outside the ``keep`` best
    (``keep=None`` keeps every file).

    Invariants: after :meth:`add` returns, at most ``keep`` distinct files are named by
    finished trials, and they are those of the best ``keep`` ranked trials that still have one;
    every file a record names exists (unless removed by hand); a running trial's file is never
    touched.
    """

    def __init__(
        self, keep: int | None, store: Store, score: Callable[[TrialRecord], float | None]
    ) -> None:
        self.keep, self.store, self.score = keep, store, score
        # arch id -> ((-score, trial id), trial id, checkpoint): the kept trials
        self._kept: dict[str, tuple[tuple[float, int], int, str]] = {}
        self._sharing: dict[int, list[int]] = {}  # trial -> cached trials that name its file
        self._noted = False

    def add(self, rec: TrialRecord) -> None:
        """Takes a finished trial into account (in tell order), dropping what falls out."""
        if rec.status == "cached":
            if rec.cached_from is not None and rec.checkpoint:
                self._sharing.setdefault(rec.cached_from, []).append(rec.id)
            return
        if self.keep is None or not rec.checkpoint:
            return
        sc = self.score(rec)
        if sc is None:  # failed or infeasible: never ranks, so its weights are never exported
            self._drop(rec.id, rec.checkpoint)
            return
        entry = ((-sc, rec.id), rec.id, rec.checkpoint)
        same = self._kept.get(rec.arch_id)
        if same is not None:  # a retrained duplicate: one trial per architecture ranks
            self._kept[rec.arch_id] = min(same, entry)
            worse = max(same, entry)
            self._drop(worse[1], worse[2])
            return
        self._kept[rec.arch_id] = entry
        if len(self._kept) > self.keep:
            last = max(self._kept, key=lambda a: self._kept[a][0])
            _, tid, path = self._kept.pop(last)
            self._drop(tid, path)

    def threshold(self) -> float | None:
        """Returns the lowest score among the kept trials once ``keep`` of them are kept, else
        None (every trial may still rank). The kept set only improves as trials finish, so a
        trial that ends below this score is dropped as soon as it is added: a worker need not
        write its weights at all (the engine passes it as ``TrialTask.save_above``)."""
        if self.keep is None or len(self._kept) < self.keep:
            return None
        return -max(entry[0] for entry in self._kept.values())[0]

    def unsaved(self) -> None:
        """Returns None after noting, once, that weights are kept for the best trials only: a
        trial that scored below :meth:`threshold` has no weight file, and ``export`` says
        why from that note."""
        if self.keep is not None and not self._noted:
            self._note()

    def sweep(self, records: list[TrialRecord]) -> None:
        """Deletes ``checkpoints/trial_<id>.pt`` files of finished trials whose record names
        no file (left by a kill between clearing a record and deleting its file)."""
        folder = self.store.directory / "checkpoints"
        if not folder.is_dir():
            return
        finished = {r.id for r in records if r.status != "running" and not r.checkpoint}
        named = {r.checkpoint for r in records if r.checkpoint}
        for path in folder.iterdir():
            m = _TRIAL_FILE.fullmatch(path.name)
            rel = str(path.relative_to(self.store.directory))
            if m and int(m.group(1)) in finished and rel not in named:
                log.info("deleting %s: no trial names it (an interrupted drop)", path)
                path.unlink(missing_ok=True)

    def _drop(self, trial: int, checkpoint: str) -> None:
        """Clears the records naming ``checkpoint`` (``trial`` and its cached copies), then
        deletes the file when it lies in the run directory."""
        self.store.clear_checkpoints([trial, *self._sharing.pop(trial, [])])
        if not self._noted:
            self._note()
        root = self.store.directory.resolve()
        path = (root / checkpoint).resolve()  # an absolute checkpoint stays absolute
        if path.is_relative_to(root):
            path.unlink(missing_ok=True)

    def _note(self) -> None:
        self._noted = True
        last = self.store.notes(KEPT_NOTE)
        if last and last[-1].get("keep") == self.keep:
            return
        self.store.add_note(
            KEPT_NOTE,
            "kept",
            f"weights are kept for the {self.keep} best trials only (keep_checkpoints="
            f"{self.keep}); the other trials' files are deleted",
            keep=self.keep,
        )
