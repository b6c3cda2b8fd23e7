"""Reversible seq2seq search (DARTSformer) as a run: the ``dartsformer`` kind of
``nasforge run``, recorded in the run record like every other kind, beside its
search (:mod:`~nasforge.oneshot.dartsformer.search`) and space
(:mod:`~nasforge.oneshot.dartsformer.space`).

    data        an OpenNMT-style folder (``src-train.txt``/``tgt-train.txt``), by default
                ``toy-ende``, the subset the package ships (:func:`~nasforge.data.translation.
                toy_ende`; a path gives the full set or your own): the first
                ``pairs`` training pairs, ``test`` of them split off for BLEU, the rest for
                training (the search trains weights on one half and the architecture on the
                other; a retrain uses all of it)
    tokenizer   a byte-level BPE of ``vocab`` tokens trained on the training text, kept as the
                artifact ``tokenizer`` (the ``tokenizers`` JSON): :func:`load_tokenizer`
                reads it back so an exported model can translate
    progress    one row per ``log_every`` search steps: ``train_loss``, ``val_loss``, the
                argmax ``arch`` and ``arch_id``, ``arch_weights`` (label -> each candidate's
                strength), ``elapsed_s``
    checkpoints ``checkpoints/search_step<N>.pt`` every ``checkpoint_every`` steps and at the
                end (supernet, both optimizers, schedule, step, RNG, loss sums, seconds),
                recorded as the artifact ``search_state``; older files are removed. A resume
                goes on from it and ends bitwise equal to an uninterrupted run (same thread
                count, a step budget)
    trials      the found architecture: with ``retrain`` its test BLEU after ordinary training
                (``evaluation: trained``, the retrain's loss rows as intermediates), else the
                validation loss of the supernet's weights in the frozen model
                (``inherited``); its weights are its checkpoint, so ``nasforge export`` and
                :func:`nasforge.run.load_model` rebuild it
    artifacts   ``tokenizer``, ``search_state``, ``supernet`` (the trained supernet's weights)

The objective is ``bleu`` (max) with a retrain and ``val_loss`` (min) without.

Data parallel: ``nasforge run FILE --nproc N`` (or torchrun) runs the search on N ranks, each
on its shard of every batch (:mod:`~nasforge.oneshot.dartsformer.search`); rank 0 trains the
tokenizer, writes the record and checkpoints and hands the others the tokenizer and its resume
point; the retrain and the scoring run on rank 0 after the search.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import nasforge as nf
from nasforge.data.translation import (
    TOY_ENDE,
    Bpe,
    Pairs,
    load_pairs,
    split_pairs,
    token_batches,
    toy_ende,
)
from nasforge.errors import ConfigError, DivergenceError, StoreError
from nasforge.oneshot.dartsformer.search import RevSearchConfig, rev_search
from nasforge.oneshot.dartsformer.space import Seq2SeqSpace, n_params
from nasforge.oneshot.dartsformer.train import (
    TrainConfig,
    seq2seq_loss,
    train_seq2seq,
    translate_bleu,
)
from nasforge.oneshot.supernet import Supernet, inherit_weights
from nasforge.run.preflight import require
from nasforge.run.progress import fmt_time
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.settings import kind_settings
from nasforge.run.store import Store, TrialOutcome
from nasforge.runtime.threads import set_threads
from nasforge.runtime.weights import save_state, save_weights
from nasforge.space import arch_id

__all__ = ["Seq2SeqSearch", "Seq2SeqSettings", "find_data", "load_tokenizer"]

log = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]

#: Settings of the space a run file may give (the vocabulary size comes from the tokenizer).
SPACE_KEYS = ("d", "e", "n_splits", "s", "repeats", "pool", "heads", "dropout", "enc_ops",
              "dec_ops")  # fmt: skip
#: RevSearchConfig fields a run file may set under ``search`` (the rest have their own keys).
SEARCH_KEYS = ("reconstruct", "w_lr", "warmup", "a_lr", "a_weight_decay", "label_smoothing",
               "grad_clip")  # fmt: skip
#: Retrain settings under ``retrain``: TrainConfig fields, plus beam search on the test split.
RETRAIN_KEYS = ("steps", "time_budget_s", "lr", "warmup", "label_smoothing", "grad_clip",
                "log_every", "batch_tokens", "beam", "n_beam")  # fmt: skip


def find_data(path: str | Path, base: Path | None = None) -> Path:
    """Returns the absolute data folder ``path`` names: the shipped subset for ``"toy-ende"``
    (:data:`~nasforge.data.translation.TOY_ENDE`); a path as given when absolute, else from
    ``base`` (the run file's folder) or any folder above it, e.g. ``shared/data/x`` found
    from ``/work/wt/me/examples`` as ``/work/shared/data/x``.

    Raises:
        ConfigError: no such folder (the message lists where it looked).
    """
    if str(path) == TOY_ENDE:
        return toy_ende()
    p = Path(path).expanduser()
    if p.is_absolute():
        tried = [p]
    else:
        start = (base or Path.cwd()).resolve()
        tried = [d / p for d in (start, *start.parents)]
    for cand in tried:
        if cand.is_dir():
            return cand.resolve()
    raise ConfigError(
        f"translation data folder {str(path)!r} not found (looked in {[str(t) for t in tried[:4]]}"
        f"{' ...' if len(tried) > 4 else ''}); give the folder holding src-train.txt and "
        f"tgt-train.txt, absolute or relative to the run file, or {TOY_ENDE!r} for the small "
        "subset nasforge ships"
    )


def load_tokenizer(path: str | Path) -> Bpe:
    """Returns the tokenizer a ``dartsformer`` run trained, to encode sources and decode
    translations: from the run directory (its ``tokenizer`` artifact) or from an exported
    model's folder (which holds a copy, ``tokenizer.json``).

    Raises:
        StoreError: neither a run with a tokenizer artifact nor an export holding one.
    """
    path = Path(path)
    exported = path / "tokenizer.json"
    if (path / "arch.json").exists() and exported.exists():
        return Bpe.from_str(exported.read_text())
    with Store.open(path) as store:
        file = store.artifact("tokenizer")
    if file is None or not file.exists():
        raise StoreError(f"{path} records no tokenizer (artifact 'tokenizer'); is it a "
                         "dartsformer run, or an export of one?")  # fmt: skip
    return Bpe.from_str(file.read_text())


class _Batches:
    """Returns the token batches of one epoch when called with the epoch (one seed per epoch)."""

    def __init__(self, src: list, tgt: list, n_tokens: int, seed: int, device: str) -> None:
        self.src, self.tgt, self.n_tokens, self.seed, self.device = src, tgt, n_tokens, seed, device

    def __call__(self, epoch: int) -> Iterator[Batch]:
        for b in token_batches(self.src, self.tgt, self.n_tokens, seed=self.seed + epoch):
            src, tgt_in, tgt_out = b
            yield src.to(self.device), tgt_in.to(self.device), tgt_out.to(self.device)


def _pick(what: str, given: Mapping[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    given = dict(given or {})
    bad = sorted(set(given) - set(keys))
    if bad:
        raise ConfigError(f"{what}: unknown settings {bad}; the settings are {list(keys)}")
    return given


@dataclass
class Seq2SeqSettings:
    """Returns nothing; the settings of a ``dartsformer`` run beside its data folder, each with
    its default, written once (a run file's keys; the record's section holds them, ``space``
    as ``space_args`` and ``data`` resolved).

    Raises:
        ConfigError: (:meth:`check`) a size or budget that is not positive, or no budget.
    """

    pairs: int | None = None  # training pairs read (None: all)
    test: int = 500  # of them held out for BLEU
    vocab: int = 4000  # BPE tokens
    space: Mapping[str, Any] | None = None  # Seq2SeqSpace settings (SPACE_KEYS)
    algorithm: str = "darts"  # darts or nasb (reversible)
    max_steps: int | None = None  # search budget in steps ...
    time_budget_s: float | None = None  # ... and/or in seconds
    batch_tokens: int = 1200
    search: Mapping[str, Any] | None = None  # RevSearchConfig fields (SEARCH_KEYS)
    log_every: int = 20
    checkpoint_every: int = 100
    seed: int = 0
    retrain: Mapping[str, Any] | None = None  # RETRAIN_KEYS; None: no retrain
    device: str = "cpu"
    threads: int | None = None
    progress: str = "auto"

    def check(self) -> None:
        """Returns None when the settings that need no data are valid.

        Raises:
            ConfigError: see the class.
        """
        for name in ("test", "vocab", "batch_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        if self.pairs is not None and not isinstance(self.pairs, int):
            raise ConfigError(f"pairs must be an int (or left out: all), got {self.pairs!r}")
        if self.max_steps is None and self.time_budget_s is None:
            raise ConfigError("give a search budget: max_steps, time_budget_s, or both")


@register_runner
class Seq2SeqSearch(BaseRunner):
    """Returns, after :meth:`run`, a DARTSformer search of the seq2seq space on translation
    data recorded in ``directory`` (the ``dartsformer`` kind; see the module docstring).

    ``data`` is the translation folder (relative paths start at ``base``); ``settings`` a
    :class:`Seq2SeqSettings` (or a mapping of its fields). Its fields given as keywords still
    work until nasforge 0.4.0 and warn (DeprecationWarning).

    Invariants: configuration errors (missing data, a bad setting, a space whose hidden size
    does not split) are raised before the record is created; a search resumed from a
    checkpoint ends with the same supernet, architecture weights and architecture as an
    uninterrupted one (same thread count, a step budget).

    Raises:
        ConfigError: the data folder is missing; an unknown algorithm or setting; sizes or
            budgets that are not positive; no budget at all.
        SpaceError: ``space`` settings the seq2seq space refuses (the message says which).
        DivergenceError: (``run``) a search or retrain loss became NaN or infinite; the run
            is recorded failed.
    """

    kind = "dartsformer"
    controls = frozenset({"stop"})
    boundary = "step"
    data_parallel = True

    def __init__(
        self,
        data: str | Path = TOY_ENDE,
        settings: Seq2SeqSettings | Mapping[str, Any] | None = None,
        *,
        directory: str | Path | None = None,
        source: Mapping[str, Any] | None = None,
        base: Path | None = None,
        callbacks: Sequence[Any] | None = None,
        **deprecated: Any,
    ) -> None:
        self.settings = s = kind_settings(Seq2SeqSettings, settings, deprecated, "Seq2SeqSearch")
        s.check()
        self.data = find_data(data, base)
        # the shipped subset is recorded by name: the package's folder moves with its install
        self.data_ref = TOY_ENDE if str(data) == TOY_ENDE else str(self.data)
        for f in ("src-train.txt", "tgt-train.txt"):
            if not (self.data / f).is_file():
                raise ConfigError(f"{self.data} has no {f}; a translation data folder holds "
                                  "OpenNMT-style src-train.txt and tgt-train.txt")  # fmt: skip
        n = len(load_pairs(self.data, "train", limit=s.pairs))  # ConfigError on unaligned files
        if n < s.test + 2:
            raise ConfigError(
                f"{n} training pairs (pairs={s.pairs}) leave fewer than 2 to train on after the "
                f"{s.test} test pairs; raise pairs or lower test"
            )
        self.pairs, self.test, self.vocab, self.batch_tokens = (
            s.pairs,
            s.test,
            s.vocab,
            s.batch_tokens,
        )
        self.space_args = _pick("space", s.space, SPACE_KEYS)
        with torch.random.fork_rng(devices=[]):  # the caller's generator stays untouched
            Seq2SeqSpace(16, **self.space_args)  # SpaceError now, before any record or training
        self.search = _pick("search", s.search, SEARCH_KEYS)
        self.cfg = RevSearchConfig(
            algorithm=s.algorithm,
            max_steps=10**9 if s.max_steps is None else s.max_steps,
            time_budget_s=float("inf") if s.time_budget_s is None else float(s.time_budget_s),
            log_every=s.log_every,
            checkpoint_every=s.checkpoint_every,
            seed=s.seed,
            device=s.device,
            **self.search,
        )
        self.cfg.check()
        self.max_steps, self.time_budget_s = s.max_steps, s.time_budget_s
        self.retrain = None if s.retrain is None else _pick("retrain", s.retrain, RETRAIN_KEYS)
        if self.retrain is not None and not ({"steps", "time_budget_s"} & self.retrain.keys()):
            raise ConfigError("retrain needs a budget: retrain: {steps: N} or {time_budget_s: S}")
        self.threads, self.progress_mode = s.threads, s.progress
        metric = ("bleu", "max") if self.retrain is not None else ("val_loss", "min")
        super().__init__(Objective(*metric), directory, source, callbacks=callbacks)

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the dartsformer kind's flags: the search budget."""
        parser.add_argument("--max-steps", type=int, help="search steps (dartsformer; overrides)")
        parser.add_argument(
            "--time-budget-s", type=float, help="search seconds (dartsformer; overrides)"
        )

    @classmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> Seq2SeqSearch:
        """Returns the run from a run file's settings or a stored section (whose ``space``
        reference is dropped: the space is rebuilt from ``space_args`` and the tokenizer).

        Raises:
            ConfigError: a data folder that is not there, or a bad setting.
        """
        s = {**dict(settings), **{k: v for k, v in overrides.items() if v is not None}}
        s.pop("objective", None)
        space = s.pop("space", None)
        if "space_args" in s:  # a stored section; "space" is then the record's reference
            space = s.pop("space_args")
        elif isinstance(space, Mapping) and "object" in space:
            raise ConfigError("a dartsformer run builds its own Seq2SeqSpace: give `space` as "
                              f"its settings {list(SPACE_KEYS)}, not a reference")  # fmt: skip
        where = {k: s.pop(k) for k in ("data", "directory", "source", "callbacks") if k in s}
        fields = kind_settings(Seq2SeqSettings, {**s, "space": space}, {}, "a dartsformer run")
        return cls(settings=fields, base=base, **where)

    def section(self) -> dict[str, Any]:
        """Returns the run's settings as JSON-able data."""
        return {
            "data": self.data_ref,
            "pairs": self.pairs,
            "test": self.test,
            "vocab": self.vocab,
            "space_args": self.space_args,
            "algorithm": self.cfg.algorithm,
            "max_steps": self.max_steps,
            "time_budget_s": self.time_budget_s,
            "batch_tokens": self.batch_tokens,
            "search": self.search,
            "log_every": self.cfg.log_every,
            "checkpoint_every": self.cfg.checkpoint_every,
            "seed": self.cfg.seed,
            "retrain": self.retrain,
            "device": self.cfg.device,
            "threads": self.threads,
            "progress": self.progress_mode,
        }

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns what a resume must keep: data, tokenizer, space and search settings."""
        return ("data", "pairs", "test", "vocab", "space_args", "algorithm", "batch_tokens",
                "search", "log_every", "seed")  # fmt: skip

    def check(self) -> None:
        """Returns None when the packages the run needs are installed: ``tokenizers`` for
        the BPE, and ``sacrebleu`` when a retrain is scored by BLEU.

        Raises:
            ConfigError: one is missing (``pip install 'nasforge[translation]'``).
        """
        require("tokenizers", "translation", "a dartsformer run's BPE tokenizer")
        if self.retrain is not None:
            require("sacrebleu", "translation", "a dartsformer run's retrain (scored by BLEU)")

    # -- the run ---------------------------------------------------------------------------------
    def _tokenizer(self, store: Store, train: Pairs) -> Bpe:
        path = store.artifact("tokenizer")
        if path is not None and path.exists():  # a resume: the very tokenizer of the start
            return Bpe.from_str(path.read_text())
        bpe = Bpe(train.src + train.tgt, vocab_size=self.vocab)
        path = self.directory / "artifacts" / "tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(bpe.to_str())
        meta = {"vocab_size": bpe.vocab_size, "export": True}  # an export translates alone
        store.add_artifact("tokenizer", "artifacts/tokenizer.json", "tokenizer", meta)
        return bpe

    def _execute(self, store: Store, resume: bool) -> None:
        set_threads(self.threads)
        cfg = self._ranked_config()
        try:  # the other ranks wait for what rank 0 finds here: they hear of a failure too
            train, test = self._pairs()
            bpe = self._tokenizer(store, train)
            self._build_space(bpe)
            # the record's config now names the space (a resume's config did not), for export
            store.set_config(self.config())
            done = resume and any(t.status == "done" for t in store.trials())
            state = None if done else self._resume_point(store, resume)
        except BaseException as exc:
            self.ranks.broadcast(("failed", f"{type(exc).__name__}: {exc}"))
            raise
        self.ranks.broadcast(("done",) if done else ("start", bpe.to_str(), state))
        if done:
            log.info("%s: the dartsformer run already finished; nothing to do", self.directory)
            return
        progress = self.progress(self.max_steps, self.time_budget_s, self.progress_mode)
        total = f"/{self.max_steps}" if self.max_steps else ""

        def on_step(row: dict[str, Any]) -> None:
            row = {**row, "arch_id": arch_id(row["arch"])}
            store.add_progress(row["step"], row)
            progress.show(
                f"dartsformer {cfg.algorithm} step {row['step']}{total} | train loss "
                f"{row['train_loss']:.4f} | val loss {row['val_loss']:.4f} | elapsed "
                f"{fmt_time(row['elapsed_s'])} | arch {row['arch_id']}",
                force=True,
            )

        try:
            found, src, tgt, batches = self._search(
                cfg, bpe, train, state, on_step, lambda st: self._checkpoint(store, st)
            )
        finally:
            progress.close()
        net = found.supernet
        save_weights(net, self.directory / "artifacts" / "supernet.pt")
        store.add_artifact("supernet", "artifacts/supernet.pt", "supernet")
        self._evaluate(store, net, found.arch, found.steps, src, tgt, batches[1], test, bpe)

    def _follow(self, resume: bool) -> None:
        """Trains this rank's shards of the search beside rank 0 (see
        :meth:`BaseRunner._follow`): rank 0's tokenizer and resume point, the same search,
        no record or checkpoint; rank 0 alone then scores (or retrains) the architecture.

        Raises:
            ConfigError: rank 0 could not prepare the search (its error, named).
        """
        set_threads(self.threads)
        what = self.ranks.broadcast(None)
        if what[0] == "failed":
            raise ConfigError(f"rank 0 could not start the dartsformer search: {what[1]}")
        if what[0] == "done":
            return
        bpe = Bpe.from_str(what[1])
        train, _ = self._pairs()
        self._build_space(bpe)
        self._search(self._ranked_config(), bpe, train, what[2], None, None)

    def device(self) -> str:
        """Returns the device the search trains on (its ``device`` setting)."""
        return self.cfg.device

    def _ranked_config(self) -> RevSearchConfig:
        """Returns the search's settings on this rank: its own GPU on a CUDA job."""
        return dataclasses.replace(self.cfg, device=self.ranks.device(self.cfg.device))

    def _pairs(self) -> tuple[Pairs, Pairs]:
        """Returns (training pairs, the test pairs held out for BLEU)."""
        parts = split_pairs(load_pairs(self.data, "train", limit=self.pairs),
                            {"test": self.test, "train": -1}, seed=self.cfg.seed)  # fmt: skip
        return parts["train"], parts["test"]

    def _build_space(self, bpe: Bpe) -> None:
        """Builds the run's space for ``bpe``'s vocabulary, from the seed (every rank alike)."""
        torch.manual_seed(self.cfg.seed)  # the supernet's initial weights are the space's
        self.space = Seq2SeqSpace(bpe.vocab_size, **self.space_args)

    def _resume_point(self, store: Store, resume: bool) -> dict[str, Any] | None:
        """Returns the search state to go on from (None: from the start), after setting the
        plan and cutting the progress rows back to it.

        Raises:
            StoreError: the checkpoint the record names is missing.
        """
        cfg = self.cfg
        logs = None if self.max_steps is None else self.max_steps // cfg.log_every
        store.set_plan(f"logs of {cfg.log_every} steps", logs)
        ckpt = store.artifact("search_state") if resume else None
        if ckpt is not None and not ckpt.exists():
            raise StoreError(
                f"{self.directory}: the search's checkpoint {ckpt} is recorded but missing; "
                "restore it, or run the search again in a new directory"
            )
        if ckpt is None:
            if resume:  # stopped before the first checkpoint: start over
                store.truncate_progress(0)
            return None
        # on the CPU: RNG states must be CPU tensors; load_state_dict moves the rest
        state = torch.load(ckpt, weights_only=True, map_location="cpu")
        store.truncate_progress(int(state["step"]))
        log.info("%s: resuming the search after step %d", self.directory, state["step"])
        return state

    def _search(self, cfg: RevSearchConfig, bpe: Bpe, train: Pairs, state: Any,
                on_step: Any, checkpoint: Any) -> tuple[Any, list, list, tuple]:  # fmt: skip
        """Returns (the search's result, the encoded sources and targets, the weights' and
        the architecture's batch streams): the search on this rank, from ``state``."""
        src, tgt = bpe.encode(train.src), bpe.encode(train.tgt)
        half, n, seed, dev = len(src) // 2, self.batch_tokens, cfg.seed, cfg.device
        batches = (_Batches(src[:half], tgt[:half], n, seed, dev),
                   _Batches(src[half:], tgt[half:], n, seed, dev))  # fmt: skip
        found = rev_search(self.space, *batches, cfg, on_step, checkpoint, state,
                           should_stop=self.stop_asked, ranks=self.ranks)  # fmt: skip
        return found, src, tgt, batches

    def _checkpoint(self, store: Store, state: dict[str, Any]) -> None:
        """Saves the search's ``state`` and records it as the resume point (the artifact
        ``search_state``); then removes the older state files."""
        name = f"checkpoints/search_step{state['step']}.pt"  # relative to the run directory
        path = self.directory / name
        save_state(state, path)
        store.add_artifact("search_state", name, "checkpoint", {"step": state["step"]})
        for old in path.parent.glob("search_step*.pt"):  # the record names the new one
            if old != path:
                old.unlink()

    def _evaluate(
        self,
        store: Store,
        net: Supernet,
        arch: dict[str, Any],
        steps: int,
        src: list,
        tgt: list,
        val: _Batches,
        test: Pairs,
        bpe: Bpe,
    ) -> None:
        """Records the found architecture as a trial: retrained and scored by test BLEU, or
        with the supernet's weights and scored by validation loss."""
        cfg = self.cfg
        running = [t for t in store.trials() if t.status == "running"]
        if running:  # killed during the retrain: it starts again (it is seeded)
            tid = running[0].id
            store.restart_trial(tid)
        else:
            tid = store.add_trial(arch_id(arch), arch)
        rows = store.progress(last=1)
        metrics: dict[str, float] = {"search_steps": float(steps)}
        if rows:
            metrics["supernet_val_loss"] = rows[-1]["val_loss"]
        t0 = time.monotonic()
        intermediates: list[dict[str, float]] = []
        if self.retrain is None:
            model = inherit_weights(net, arch).eval()
            with torch.no_grad():
                losses = [float(seq2seq_loss(model, b, cfg.label_smoothing)) for b in val(0)]
            metrics["val_loss"] = sum(losses) / len(losses)
            evaluation = "inherited"
        else:
            model, intermediates = self._retrain(arch, src, tgt)
            evaluation = "trained"
        metrics["bleu"], _ = translate_bleu(model, bpe, test.src, test.tgt, beam=1)
        retrain = self.retrain or {}
        beam = int(retrain.get("beam", 1))
        if beam > 1:
            n = int(retrain.get("n_beam", len(test)))
            metrics[f"bleu_beam{beam}"], _ = translate_bleu(
                model, bpe, test.src[:n], test.tgt[:n], beam=beam
            )
        metrics["params"] = float(n_params(model))
        weights = save_weights(model, self.directory / "checkpoints" / f"trial_{tid}.pt")
        outcome = TrialOutcome("done", metrics, intermediates, duration=time.monotonic() - t0,
                               checkpoint=str(Path(weights).relative_to(self.directory)),
                               evaluation=evaluation)  # fmt: skip
        store.finish_trial(tid, outcome)
        store.set_picks([tid])  # the search's architecture is what it exports
        log.info("dartsformer found arch %s: %s (%s)", arch_id(arch), metrics, evaluation)

    def _retrain(
        self, arch: dict[str, Any], src: list, tgt: list
    ) -> tuple[torch.nn.Module, list[dict[str, float]]]:
        """Returns the frozen architecture trained from scratch on all training pairs, and its
        logged loss rows.

        Raises:
            DivergenceError: a logged loss is NaN or infinite.
        """
        r = {"log_every": self.cfg.log_every, **(self.retrain or {})}
        not_train = ("beam", "n_beam", "batch_tokens", "steps", "time_budget_s")
        tc = TrainConfig(
            max_steps=int(r.get("steps", 10**9)),
            time_budget_s=float(r.get("time_budget_s", float("inf"))),
            seed=self.cfg.seed,
            **{k: v for k, v in r.items() if k not in not_train},
        )
        torch.manual_seed(self.cfg.seed)  # the frozen model's initial weights
        model = nf.freeze(self.space, arch).to(self.cfg.device)
        data = _Batches(src, tgt, int(r.get("batch_tokens", self.batch_tokens)), self.cfg.seed,
                        self.cfg.device)  # fmt: skip

        def check(row: dict[str, Any]) -> None:
            if not math.isfinite(row["loss"]):
                raise DivergenceError(
                    f"retrain step {row['step']}: loss {row['loss']} is not finite; lower "
                    f"retrain.lr ({tc.lr}) or lengthen retrain.warmup ({tc.warmup})"
                )

        rows = train_seq2seq(model, data, tc, on_step=check)
        model.eval()
        return model, [{k: float(v) for k, v in row.items()} for row in rows]
