"""Translation data: loading and splitting, BPE round trip, token batches, BLEU, decoding."""

from __future__ import annotations

import fnmatch
import math
import random
import sys
from pathlib import Path

import pytest
import torch

from nasforge.data.translation import (
    BOS,
    EOS,
    PAD,
    Bpe,
    Pairs,
    bleu,
    bleu_paired,
    bleu_parts,
    load_pairs,
    split_pairs,
    token_batches,
    toy_ende,
)
from nasforge.errors import ConfigError

pytest.importorskip("tokenizers", reason="the 'translation' extra (tokenizers) is not installed")
pytest.importorskip("sacrebleu", reason="the 'translation' extra (sacrebleu) is not installed")

_ROOT = Path(__file__).resolve().parents[2]
# ../shared/data from the repository root (one level further up from a git worktree in wt/)
_CANDIDATES = [_ROOT.parent / "shared/data", _ROOT.parent.parent / "shared/data"]
DATA = next((p for p in _CANDIDATES if p.is_dir()), _CANDIDATES[0]) / "opennmt_toy_ende"
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"toy en-de data not found at {DATA} (../shared/data)"
)


@pytest.fixture(autouse=True)
def _threads() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)


def test_shipped_subset_loads_with_its_licence() -> None:
    """The package ships 2,000 training and 50 validation pairs with the MIT licence and a
    source note, so the examples need no ../shared/data."""
    folder = toy_ende()
    for part, n in (("train", 2000), ("val", 50)):
        for side in ("src", "tgt"):
            assert len((folder / f"{side}-{part}.txt").read_text().splitlines()) == n
    assert len(load_pairs(folder, "train")) == 1999  # one pair has an empty side
    assert len(load_pairs(folder, "val")) == 50
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "OpenNMT-py" in (folder / "SOURCE.md").read_text()


@needs_data
def test_shipped_subset_is_the_head_of_the_full_set() -> None:
    """The shipped files are the first 2,000 training lines and all validation lines of the
    full set, byte for byte."""
    for side in ("src", "tgt"):
        full = (DATA / f"{side}-train.txt").read_text(encoding="utf-8").splitlines(True)
        assert (toy_ende() / f"{side}-train.txt").read_text(encoding="utf-8") == "".join(
            full[:2000]
        )
        assert (toy_ende() / f"{side}-val.txt").read_bytes() == (
            DATA / f"{side}-val.txt"
        ).read_bytes()


def test_pyproject_puts_the_subset_in_the_wheel() -> None:
    """pyproject's setuptools package-data globs cover every shipped file, so a wheel (not
    only a source checkout) carries them."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    config = tomllib.loads((_ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"].get("package-data", {}).get("nasforge.data", [])
    package = _ROOT / "nasforge" / "data"
    for f in toy_ende().iterdir():
        rel = f.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not package data"


@needs_data
def test_load_and_split_real_pairs() -> None:
    """10k aligned pairs load; splits are disjoint, sized, and seeded."""
    pairs = load_pairs(DATA, "train")
    assert len(pairs) > 9900 and len(pairs.src) == len(pairs.tgt)
    assert "&apos;" not in " ".join(pairs.src[:200])
    parts = split_pairs(pairs, {"test": 100, "val": 50, "train": -1}, seed=3)
    assert [len(parts[k]) for k in ("test", "val")] == [100, 50]
    assert len(parts["train"]) == len(pairs) - 150
    assert not set(parts["test"].src) & set(parts["val"].src) - {""}
    again = split_pairs(pairs, {"test": 100, "val": 50, "train": -1}, seed=3)
    assert again["test"].src == parts["test"].src


@needs_data
def test_bpe_round_trip_and_batches() -> None:
    """BPE trained on real text decodes what it encodes; batches are aligned and padded."""
    pairs = load_pairs(DATA, "train", limit=500)
    bpe = Bpe(pairs.src + pairs.tgt, vocab_size=600)
    assert bpe.vocab_size <= 600
    ids = bpe.encode(pairs.src[:20])
    assert bpe.decode(ids) == [" ".join(s.split()) for s in pairs.src[:20]]
    tgt = bpe.encode(pairs.tgt[:20])
    seen = 0
    for src, tgt_in, tgt_out in token_batches(ids, tgt, max_tokens=200):
        assert src.shape[0] == tgt_in.shape[0] == tgt_out.shape[0]
        assert (tgt_in[:, 0] == BOS).all()
        assert ((tgt_out == EOS).sum(1) == 1).all()
        assert tgt_in.numel() <= max(200, tgt_in.shape[1])
        seen += src.shape[0]
    assert seen == 20


def test_bleu_and_errors(tmp_path: Path) -> None:
    """BLEU is 100 for identical text, lower otherwise; bad input raises ConfigError."""
    refs = ["the cat sat on the mat .", "a dog barks loudly today ."]
    assert bleu(refs, refs) == pytest.approx(100.0)
    assert bleu(["the cat sat on a hat .", "dog barks ."], refs) < 60
    with pytest.raises(ConfigError, match="2 hypotheses but 1 references"):
        bleu(refs, refs[:1])
    with pytest.raises(ConfigError, match="src-train.txt"):
        load_pairs(tmp_path)
    with pytest.raises(ConfigError, match="do not fit"):
        split_pairs(Pairs(["a"], ["b"]), {"x": 2})


def test_bleu_parts_separate_short_output_from_wrong_words() -> None:
    """A hypothesis that is a correct prefix of half the reference keeps every precision at
    100 and loses its BLEU to the brevity penalty alone; wrong words lower the precisions."""
    refs = ["the cat sat on the big red mat today .", "a dog barks loudly in the green park now ."]
    short = [" ".join(r.split()[:5]) for r in refs]
    parts = bleu_parts(short, refs)
    assert parts["precisions"] == [100.0] * 4
    assert parts["length_ratio"] == pytest.approx(0.5)
    assert parts["bp"] == pytest.approx(math.exp(1 - 2), abs=1e-3)
    assert parts["bleu"] == pytest.approx(bleu(short, refs), abs=0.01)
    wrong = [r.replace("the", "xx").replace("a ", "xx ") for r in refs]
    assert bleu_parts(wrong, refs)["bp"] == 1.0
    assert bleu_parts(wrong, refs)["precisions"][0] < 100
    with pytest.raises(ConfigError, match="2 hypotheses but 1 references"):
        bleu_parts(refs, refs[:1])


@pytest.mark.slow
def test_greedy_and_beam_decode_learned_copy_task() -> None:
    """A tiny Transformer trained to copy decodes exactly by greedy and beam search."""
    from nasforge.oneshot.dartsformer.space import TransformerSeq2Seq
    from nasforge.oneshot.dartsformer.train import (
        TrainConfig,
        beam_search,
        greedy_decode,
        train_seq2seq,
    )

    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(4, 12, (int(n),), generator=g).tolist() for n in range(3, 7)] * 8
    torch.manual_seed(0)
    model = TransformerSeq2Seq(12, d=32, e=16, layers=1, dropout=0.0)

    def batches(epoch: int):
        return token_batches(rows, rows, max_tokens=64, seed=epoch)

    train_seq2seq(model, batches, TrainConfig(lr=5e-3, warmup=20, max_steps=250, log_every=50))
    src = torch.full((4, 6), PAD, dtype=torch.long)
    for i, r in enumerate(rows[:4]):
        src[i, : len(r)] = torch.tensor(r)
    assert greedy_decode(model, src) == rows[:4]
    assert beam_search(model, src, beam=3) == rows[:4]


def test_bleu_paired_tells_a_real_difference_from_noise() -> None:
    """Paired bootstrap: a system as good as the baseline (its own random errors at the same
    rate) has a large p-value, a clearly better one a small p-value; scores are corpus BLEU."""
    rng = random.Random(0)
    words = "the a cat dog sat ran on in mat park house tree big small red".split()
    refs = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(120)]
    weak = [" ".join(w if rng.random() < 0.4 else "xx" for w in r.split()) for r in refs]
    peer = [" ".join(w if rng.random() < 0.4 else "xx" for w in r.split()) for r in refs]
    strong = [" ".join(w if rng.random() < 0.8 else "xx" for w in r.split()) for r in refs]
    out = bleu_paired(("weak", weak), {"peer": peer, "strong": strong}, refs, 200)
    assert out["weak"]["bleu"] == pytest.approx(bleu(weak, refs), abs=0.01)
    assert out["weak"]["p_value"] is None and out["weak"]["ci95"] > 0
    assert out["peer"]["p_value"] > 0.05
    assert out["strong"]["p_value"] < 0.01 and out["strong"]["bleu"] > out["weak"]["bleu"]
    with pytest.raises(ConfigError, match="hypotheses"):
        bleu_paired(("weak", weak), {"short": weak[:3]}, refs)
