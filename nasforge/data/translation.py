"""Parallel text for translation search: loading, splitting, a BPE tokenizer, batches, BLEU.

The loader takes a directory with OpenNMT-style files (``src-train.txt``/``tgt-train.txt``, one
sentence per line); the library never assumes where data lives, except for one small real set
it ships: :func:`toy_ende` (the name :data:`TOY_ENDE` in a run file), the first 2,000 training
and the 50 validation pairs of OpenNMT-py's toy English-German data (MIT; ``LICENSE`` and
``SOURCE.md`` beside the files), so that the examples run from a fresh install. The tokenizer
is a byte-level BPE of the maintained ``tokenizers`` library, trained at run time on the
training text of both languages (one shared vocabulary, as the paper's shared embeddings need);
BLEU is sacrebleu's corpus BLEU on detokenised text. Both packages are the ``translation``
extra.

Token ids: 0 pad, 1 BOS, 2 EOS, 3 unknown (:data:`PAD`, :data:`BOS`, :data:`EOS`).

Invariants: the same seed gives the same split; a batch's source and target rows are aligned;
``decode(encode(text))`` returns the text up to whitespace normalisation.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "TOY_ENDE",
    "Bpe",
    "Pairs",
    "bleu",
    "bleu_paired",
    "bleu_parts",
    "load_pairs",
    "split_pairs",
    "token_batches",
    "toy_ende",
]

PAD, BOS, EOS, UNK = 0, 1, 2, 3
_SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]

#: The name that stands for the shipped subset wherever a data folder is asked for.
TOY_ENDE = "toy-ende"


def toy_ende() -> Path:
    """Returns the folder of the shipped subset of OpenNMT-py's toy English-German data: the
    first 2,000 pairs of ``src-train.txt``/``tgt-train.txt`` and the 50 pairs of
    ``src-val.txt``/``tgt-val.txt`` (package data; MIT, see ``LICENSE`` there)."""
    return Path(__file__).resolve().parent / "opennmt_toy_ende"


@dataclass
class Pairs:
    """Returns nothing; aligned source and target sentences."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)

    def subset(self, idx: Sequence[int]) -> Pairs:
        """Returns the pairs at positions ``idx``."""
        return Pairs([self.src[i] for i in idx], [self.tgt[i] for i in idx])


def _detok(line: str) -> str:
    return line.replace("&apos;", "'").replace("&quot;", '"').replace("&amp;", "&").strip()


def load_pairs(directory: str | Path, part: str = "train", limit: int | None = None) -> Pairs:
    """Returns the sentence pairs of ``src-{part}.txt`` and ``tgt-{part}.txt`` in ``directory``
    (HTML entities of the OpenNMT files unescaped), the first ``limit`` if given.

    Raises:
        ConfigError: a file is missing, or the two files have different line counts.
    """
    base = Path(directory)
    files = [base / f"src-{part}.txt", base / f"tgt-{part}.txt"]
    for f in files:
        if not f.is_file():
            raise ConfigError(
                f"translation data file {str(f)!r} not found; expected OpenNMT-style "
                f"src-{part}.txt and tgt-{part}.txt in {str(base)!r}"
            )
    src, tgt = (f.read_text(encoding="utf-8").splitlines() for f in files)
    if len(src) != len(tgt):
        raise ConfigError(
            f"{files[0]} has {len(src)} lines but {files[1]} has {len(tgt)}; they must align"
        )
    pairs = [(_detok(a), _detok(b)) for a, b in zip(src, tgt) if a.strip() and b.strip()]
    pairs = pairs[:limit] if limit is not None else pairs
    return Pairs([a for a, _ in pairs], [b for _, b in pairs])


def split_pairs(pairs: Pairs, sizes: dict[str, int], seed: int = 0) -> dict[str, Pairs]:
    """Returns disjoint random parts of ``pairs`` with the given sizes; ``-1`` (at most one)
    takes the rest.

    Raises:
        ConfigError: the sizes add up to more than there are pairs, or two are ``-1``.
    """
    fixed = sum(v for v in sizes.values() if v >= 0)
    if fixed > len(pairs) or sum(v < 0 for v in sizes.values()) > 1:
        raise ConfigError(
            f"split sizes {sizes} do not fit {len(pairs)} pairs (at most one -1 for the rest)"
        )
    idx = list(range(len(pairs)))
    random.Random(seed).shuffle(idx)
    out, start = {}, 0
    for name, n in sizes.items():
        n = len(pairs) - fixed if n < 0 else n
        out[name] = pairs.subset(idx[start : start + n])
        start += n
    return out


def _tokenizers() -> Any:
    """Returns the ``tokenizers`` package.

    Raises:
        ConfigError: it is not installed.
    """
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the BPE tokenizer needs the 'tokenizers' package: pip install nasforge[translation]"
        ) from exc
    return tokenizers


class Bpe:
    """Returns token ids of text and text of token ids: a byte-level BPE trained on ``texts``.

    Raises:
        ConfigError: the ``tokenizers`` package is not installed.
    """

    def __init__(self, texts: Sequence[str], vocab_size: int = 8000, min_frequency: int = 2):
        tokenizers = _tokenizers()
        Tokenizer, decoders, models = tokenizers.Tokenizer, tokenizers.decoders, tokenizers.models
        pre_tokenizers, trainers = tokenizers.pre_tokenizers, tokenizers.trainers
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=_SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(list(texts), trainer)
        self.tok = tok

    @classmethod
    def from_str(cls, text: str) -> Bpe:
        """Returns the tokenizer saved by :meth:`to_str` (``tokenizers`` JSON), untrained anew.

        Raises:
            ConfigError: the ``tokenizers`` package is not installed.
        """
        bpe = cls.__new__(cls)  # the constructor trains; this one is trained already
        bpe.tok = _tokenizers().Tokenizer.from_str(text)
        return bpe

    def to_str(self) -> str:
        """Returns the trained tokenizer as ``tokenizers`` JSON (:meth:`from_str` reads it)."""
        return self.tok.to_str()

    @property
    def vocab_size(self) -> int:
        """Returns the vocabulary size, special tokens included."""
        return int(self.tok.get_vocab_size())

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Returns the token ids of each text (no BOS/EOS)."""
        return [e.ids for e in self.tok.encode_batch(list(texts))]

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Returns the text of each id sequence, stopping at EOS and skipping specials."""
        out = []
        for seq in ids:
            seq = list(seq)
            if EOS in seq:
                seq = seq[: seq.index(EOS)]
            out.append(self.tok.decode([i for i in seq if i > UNK]).strip())
        return out


def _pad(rows: list[list[int]]) -> torch.Tensor:
    t = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        t[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return t


def token_batches(
    src: list[list[int]],
    tgt: list[list[int]],
    max_tokens: int,
    max_len: int = 100,
    shuffle: bool = True,
    seed: int = 0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Yields ``(src, tgt_in, tgt_out)`` padded batches of about ``max_tokens`` target tokens,
    grouping similar lengths; ``tgt_in`` starts with BOS, ``tgt_out`` ends with EOS; pairs
    longer than ``max_len`` tokens are truncated."""
    order = sorted(range(len(src)), key=lambda i: (len(tgt[i]), len(src[i])))
    groups: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        longest = max(longest, min(len(tgt[i]), max_len) + 1)
        if cur and longest * (len(cur) + 1) > max_tokens:
            groups.append(cur)
            cur, longest = [], min(len(tgt[i]), max_len) + 1
        cur.append(i)
    if cur:
        groups.append(cur)
    if shuffle:
        random.Random(seed).shuffle(groups)
    for g in groups:
        s = [src[i][:max_len] for i in g]
        t = [tgt[i][:max_len] for i in g]
        yield _pad(s), _pad([[BOS, *r] for r in t]), _pad([[*r, EOS] for r in t])


def _sacrebleu() -> Any:
    """Returns the ``sacrebleu`` module with its significance tests loaded.

    Raises:
        ConfigError: ``sacrebleu`` is not installed.
    """
    try:
        import sacrebleu
        import sacrebleu.significance
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("BLEU needs 'sacrebleu': pip install nasforge[translation]") from exc
    return sacrebleu


def _one_reference_each(hypotheses: Sequence[str], references: Sequence[str], who: str) -> None:
    """Raises ConfigError unless there is one reference per hypothesis (``who`` names the
    system in the message, if any)."""
    if len(hypotheses) != len(references):
        raise ConfigError(
            f"{who}{len(hypotheses)} hypotheses but {len(references)} references; need one each"
        )


def _corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> Any:
    """Returns sacrebleu's corpus BLEU result (score, precisions, brevity penalty, lengths).

    Raises:
        ConfigError: ``sacrebleu`` is not installed, or the lists differ in length.
    """
    sacrebleu = _sacrebleu()
    _one_reference_each(hypotheses, references, "")
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)])


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Returns sacrebleu's corpus BLEU (0-100) of ``hypotheses`` against one reference each.

    Raises:
        ConfigError: ``sacrebleu`` is not installed, or the lists differ in length.
    """
    return float(_corpus_bleu(hypotheses, references).score)


def bleu_parts(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Returns what a corpus BLEU is made of: ``bleu``, the 1- to 4-gram ``precisions`` (%),
    the brevity penalty ``bp`` and ``length_ratio`` (hypothesis ÷ reference tokens), so that a
    low score can be told apart as wrong words or as too-short output.

    Raises:
        ConfigError: ``sacrebleu`` is not installed, or the lists differ in length.
    """
    r = _corpus_bleu(hypotheses, references)
    return {
        "bleu": round(float(r.score), 2),
        "precisions": [round(float(p), 1) for p in r.precisions],
        "bp": round(float(r.bp), 3),
        "length_ratio": round(r.sys_len / max(1, r.ref_len), 3),
    }


def bleu_paired(
    baseline: tuple[str, Sequence[str]],
    systems: dict[str, Sequence[str]],
    references: Sequence[str],
    n_samples: int = 1000,
) -> dict[str, dict[str, float | None]]:
    """Returns, for the baseline and each system, its corpus BLEU, the half-width of its 95%
    bootstrap interval and (systems only) the p-value of paired bootstrap resampling against
    the baseline (Koehn 2004; sacrebleu's ``PairedTest``, seeded, so repeatable): two-sided,
    the chance of a difference this large either way if the two were equally good.

    Raises:
        ConfigError: ``sacrebleu`` is not installed, or a system's hypotheses and the
            references differ in length.
    """
    sacrebleu = _sacrebleu()
    named = [(baseline[0], list(baseline[1]))] + [(k, list(v)) for k, v in systems.items()]
    for name, hyps in named:
        _one_reference_each(hyps, references, f"system {name!r}: ")
    test = sacrebleu.significance.PairedTest(
        named, {"BLEU": sacrebleu.metrics.BLEU()}, references=[list(references)],
        test_type="bs", n_samples=n_samples,
    )  # fmt: skip
    _, scores = test()
    return {
        name: {
            "bleu": round(float(r.score), 2),
            "ci95": round(float(r.ci), 2),
            "p_value": None if r.p_value is None else round(float(r.p_value), 4),
        }
        for (name, _), r in zip(named, scores["BLEU"])
    }
