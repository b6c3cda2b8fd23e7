"""DARTSformer on real data: search, retrain and BLEU against a standard Transformer of equal
size and a random architecture of the space (toy OpenNMT English-German, 10k pairs).

Pipeline: split a test set off the training pairs; train a byte-level BPE on the training text;
search the seq2seq space (reversible DARTS, Algorithm 2; weights on one half of the training
pairs, architecture on the other) within a time budget; freeze the argmax architecture; retrain
it, a random architecture and a Transformer of the same parameter count the same way (same
data, optimizer, schedule and time budget); report greedy and beam BLEU (sacrebleu) on the test
split.

Settings (``--setting``):
    tiny    seconds: proves the pipeline runs (not a quality result)
    cpu     the issue's quality run: search <= 20 min and each retrain <= 20 min on 2 cores
    paper   the paper's model scale (§3.2: d=960, e=256, 2/3 splits, s=2, 5000-token batches)
            on this data, for a GPU: ``--setting paper --device cuda``; not run here

Last line: one JSON object with ``bleu`` per model, ``significance`` (each greedy BLEU's 95%
bootstrap interval and the paired bootstrap p-value against the Transformer), ``bleu_parts``
(n-gram precisions, brevity penalty, length ratio), parameter counts, the architecture found.
``--reference`` adds the space's Transformer-like genotype; ``--algorithm nasb`` searches with
binary gates instead of the DARTS softmax. ``--quick`` (the slow test set's smoke run): the tiny
setting cut to 5 search and 5 retraining steps, on the CPU unless ``--device`` says otherwise.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

import nasforge as nf
from nasforge.data.translation import (
    Bpe,
    bleu_paired,
    bleu_parts,
    load_pairs,
    split_pairs,
    token_batches,
    toy_ende,
)
from nasforge.oneshot.dartsformer import RevSearchConfig, rev_search
from nasforge.oneshot.dartsformer.space import Seq2SeqSpace, TransformerSeq2Seq, n_params
from nasforge.oneshot.dartsformer.train import TrainConfig, train_seq2seq, translate_bleu

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data from the repository root (one level further up from a git worktree in wt/)
DATA = (
    next(
        (
            p
            for p in (ROOT.parent / "shared/data", ROOT.parent.parent / "shared/data")
            if p.is_dir()
        ),
        ROOT.parent / "shared/data",
    )
    / "opennmt_toy_ende"
)

SETTINGS = {
    "tiny": dict(
        n_pairs=600,
        test=40,
        vocab=1000,
        d=48,
        e=32,
        splits=2,
        s=1,
        repeats=1,
        tokens=600,
        search_tokens=600,
        search=dict(warmup=20, w_lr=1e-3, a_lr=3e-3),
        train=dict(warmup=50, lr=1e-3),
        search_s=20,
        train_s=20,
        beam=2,
        n_test_beam=10,
    ),
    "cpu": dict(
        n_pairs=10000,
        test=500,
        vocab=4000,  # the 64-wide logits over the vocabulary dominate a CPU step
        d=144,
        e=64,
        splits=2,
        s=2,
        repeats=1,
        tokens=2500,
        search_tokens=1200,  # about 6 s per search step on one loaded core
        # about 200 steps fit: a short warm-up, and alpha's step scaled up from 3e-4
        search=dict(warmup=50, w_lr=2e-3, a_lr=3e-3),
        # a 0.4M-parameter model learns faster at 3e-3 (loss 6.34 against 6.81 at 1e-3 after 300
        # steps; 5.43 after 1,000)
        train=dict(warmup=100, lr=3e-3),
        search_s=1200,
        train_s=1200,
        beam=5,
        n_test_beam=200,
    ),
    "paper": dict(
        n_pairs=10000,
        test=500,
        vocab=32000,
        d=960,
        e=256,
        splits=2,
        s=2,
        repeats=3,
        tokens=5000,
        search_tokens=5000,
        search=dict(warmup=10000, w_lr=5e-4, a_lr=3e-4),  # §3.2
        train=dict(warmup=10000, lr=5e-4),  # §4.1: the search's schedule
        search_s=40 * 3600,
        train_s=24 * 3600,
        beam=5,
        n_test_beam=500,
    ),
}


class Batches:
    """Returns the token batches of one epoch when called with the epoch (picklable, so that a
    retrain can run in another process)."""

    def __init__(self, src: list, tgt: list, n_tokens: int, seed: int, device: str) -> None:
        self.src, self.tgt, self.n_tokens, self.seed, self.device = src, tgt, n_tokens, seed, device

    def __call__(self, epoch: int):
        for b in token_batches(self.src, self.tgt, self.n_tokens, seed=self.seed + epoch):
            yield tuple(x.to(self.device) for x in b)


def transformer_like(space: Seq2SeqSpace) -> dict[str, str]:
    """Returns the space's genotype nearest a Transformer: in every searched layer split 0 is
    self-attention and the other splits the FFN (encoder and decoder; the decoder's last split is
    the fixed cross-attention), i.e. the hand-designed answer a search would be judged against."""
    return {
        label: "self_attn" if label.endswith(".g0") else "ffn" for label in space.search_space()
    }


def retrain(
    name: str, model: torch.nn.Module, data: Batches, test, bpe: Bpe, cfg: dict, args: dict
) -> dict:
    """Returns the retrain time, logged steps, final loss and BLEU of one frozen model."""
    torch.set_num_threads(args["threads"])
    torch.manual_seed(args["seed"])
    model.to(args["device"])
    t0 = time.perf_counter()
    steps = args["train_steps"]
    rows = train_seq2seq(
        model,
        data,
        TrainConfig(
            time_budget_s=float(cfg["train_s"]) if steps is None else 1e9,
            max_steps=steps or 10**9,
            **cfg["train"],
        ),
    )
    out = {"name": name, "train_s": round(time.perf_counter() - t0, 1)}
    logging.info("retrain %s: %.1fs", name, out["train_s"])
    if args["probe"]:
        return out
    out["logged_steps"] = rows[-1]["step"] if rows else 0
    out["final_loss"] = rows[-1]["loss"] if rows else None
    greedy, out["hyps"] = translate_bleu(model, bpe, test.src, test.tgt, beam=1)
    n_beam = int(cfg["n_test_beam"])
    beam, _ = translate_bleu(
        model, bpe, test.src[:n_beam], test.tgt[:n_beam], beam=int(cfg["beam"])
    )
    out["bleu"] = {"greedy": round(greedy, 2), f"beam{cfg['beam']}_first{n_beam}": round(beam, 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", choices=sorted(SETTINGS), default="tiny")
    ap.add_argument(
        "--data",
        default=None,
        help=f"translation data folder (default: {DATA} if present, else the 2,000 pairs "
        "nasforge ships for a setting that uses no more)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="e.g. cuda for the paper setting")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1 on a shared machine; the cpu setting's budget assumes 2 cores)",
    )
    ap.add_argument(
        "--search-steps",
        type=int,
        default=None,
        help="a step budget for the search instead of the setting's time budget (the same "
        "computation on any device: measure the seconds per step on 2 cores, run it on a GPU)",
    )
    ap.add_argument("--train-steps", type=int, default=None, help="likewise for each retrain")
    ap.add_argument(
        "--algorithm",
        choices=("darts", "nasb"),
        default="darts",
        help="the mixed op of the search: DARTS softmax (the paper's) or NASB binary gates",
    )
    ap.add_argument(
        "--probe",
        action="store_true",
        help="time --search-steps and --train-steps here, skip the BLEU, and print how many "
        "steps fit the setting's budgets on this machine (fit_search_steps, fit_train_steps)",
    )
    ap.add_argument(
        "--space",
        type=json.loads,
        default={},
        help='JSON overrides of the setting\'s Seq2SeqSpace, e.g. \'{"pool": "avg", "heads": 4}\'',
    )
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also retrain the space's Transformer-like genotype (self-attention then FFN in "
        "every searched layer): is the gap the search's or the space's at this scale?",
    )
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="retrain the three models in three processes at once (same results; for a GPU)",
    )
    ap.add_argument("--quick", action="store_true", help="tiny, 5 search and 5 train steps")
    args = ap.parse_args()
    if args.quick:
        args.setting, args.search_steps, args.train_steps = "tiny", 5, 5
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = SETTINGS[args.setting]
    known = set(inspect.signature(Seq2SeqSpace).parameters) - {"vocab_size"}
    if not isinstance(args.space, dict) or set(args.space) - known:
        ap.error(f"--space takes a JSON object with keys among {sorted(known)}; got {args.space}")
    if args.data is None:  # a clone without ../shared/data still runs the small settings
        small = int(cfg["n_pairs"]) <= 2000
        args.data = str(DATA if DATA.is_dir() or not small else toy_ende())
    if not Path(args.data).is_dir():
        print(
            json.dumps(
                {
                    "skipped": f"translation data not found at {args.data}; give "
                    "--data FOLDER with OpenNMT-py's data/ files (all 10,000 pairs)"
                }
            )
        )
        return
    torch.set_num_threads(args.threads)
    pairs = load_pairs(args.data, "train", limit=int(cfg["n_pairs"]))
    parts = split_pairs(pairs, {"test": int(cfg["test"]), "train": -1}, seed=args.seed)
    train, test = parts["train"], parts["test"]
    bpe = Bpe(train.src + train.tgt, vocab_size=int(cfg["vocab"]))
    src, tgt = bpe.encode(train.src), bpe.encode(train.tgt)
    half = len(src) // 2
    tok = int(cfg["tokens"])

    def batches(s: list, t: list, n_tokens: int = tok) -> Batches:
        return Batches(s, t, n_tokens, args.seed, args.device)

    space = Seq2SeqSpace(
        bpe.vocab_size,
        **{
            "d": int(cfg["d"]),
            "e": int(cfg["e"]),
            "n_splits": int(cfg["splits"]),
            "s": int(cfg["s"]),
            "repeats": int(cfg["repeats"]),
            **args.space,
        },
    )
    t0 = time.perf_counter()
    found = rev_search(
        space,
        batches(src[:half], tgt[:half], int(cfg["search_tokens"])),
        batches(src[half:], tgt[half:], int(cfg["search_tokens"])),
        RevSearchConfig(
            time_budget_s=float(cfg["search_s"]) if args.search_steps is None else 1e9,
            max_steps=args.search_steps or 10**9,
            seed=args.seed,
            device=args.device,
            algorithm=args.algorithm,
            **cfg["search"],  # type: ignore[arg-type]
        ),
    )
    search_s = time.perf_counter() - t0
    logging.info("search: %d steps in %.1fs", found.steps, search_s)
    rand_arch = space.search_space().sample(args.seed)
    models = {
        "searched": nf.freeze(space, found.arch),
        "random": nf.freeze(space, rand_arch),
    }
    reference = transformer_like(space) if args.reference else None
    if reference is not None:
        models["space_transformer_like"] = nf.freeze(space, reference)
    target = n_params(models["searched"])
    models["transformer"] = TransformerSeq2Seq.matching(
        target, bpe.vocab_size, e=int(cfg["e"]), layers=int(cfg["s"]) * int(cfg["repeats"])
    )
    out: dict = {
        "setting": args.setting,
        "algorithm": args.algorithm,
        "space": args.space,
        "search_s": round(search_s, 1),
        "bleu": {},
    }
    out["params"] = {k: n_params(m) for k, m in models.items()}
    jobs = [(n, m, batches(src, tgt), test, bpe, cfg, vars(args)) for n, m in models.items()]
    if args.parallel:  # independent: one process each (a GPU is underused by one small model)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(len(jobs), mp_context=ctx) as pool:
            results = list(pool.map(retrain, *zip(*jobs)))
    else:
        results = [retrain(*job) for job in jobs]
    hyps = {r["name"]: r.pop("hyps") for r in results if "hyps" in r}
    for r in results:
        out.setdefault("train_s", {})[r["name"]] = r["train_s"]
        if not args.probe:
            out["bleu"][r["name"]] = r["bleu"]
            out.setdefault("final_train_loss", {})[r["name"]] = r["final_loss"]
            out.setdefault("train_logged_steps", {})[r["name"]] = r["logged_steps"]
    if args.probe:
        per_search = search_s / found.steps
        per_train = max(out["train_s"].values()) / max(1, args.train_steps or 1)
        probe = {
            "threads": args.threads,
            "search_s_per_step": round(per_search, 3),
            "train_s_per_step_slowest": round(per_train, 4),
            "fit_search_steps": int(float(cfg["search_s"]) / per_search),
            "fit_train_steps": int(float(cfg["train_s"]) / per_train),
            "params": out["params"],
        }
        print(json.dumps(probe))
        return
    # how much of each difference the 500 test sentences can tell from chance: the 95% bootstrap
    # interval of each greedy BLEU and the paired bootstrap p-value against the Transformer
    others = {k: v for k, v in hyps.items() if k != "transformer"}
    out["significance"] = bleu_paired(("transformer", hyps["transformer"]), others, test.tgt)
    # what each greedy BLEU is made of: n-gram precisions, brevity penalty, length ratio
    out["bleu_parts"] = {k: bleu_parts(v, test.tgt) for k, v in hyps.items()}
    # searched >= Transformer of equal size; not judged at the tiny setting (BLEU ~0 there)
    met = out["bleu"]["searched"]["greedy"] >= out["bleu"]["transformer"]["greedy"]
    out["target_met"] = None if args.setting == "tiny" else met
    out["search_steps"] = found.steps
    out["arch"] = found.arch
    out["random_arch"] = rand_arch
    if reference is not None:
        out["space_transformer_like_arch"] = reference
    out["search_space_size"] = space.search_space().size
    print(json.dumps(out), file=sys.stdout)


if __name__ == "__main__":
    main()
