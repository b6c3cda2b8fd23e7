"""The DARTSformer seq2seq space: size, labels, freezing, multi-trial use, causality, errors."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.oneshot import Supernet, inherit_weights, set_reconstruct
from nasforge.oneshot.darts import Darts
from nasforge.oneshot.dartsformer.ops import op_names
from nasforge.oneshot.dartsformer.space import (
    Seq2SeqSpace,
    TransformerSeq2Seq,
    n_params,
    space_size,
)
from nasforge.oneshot.nasb import Nasb, binarize
from nasforge.oneshot.reversible import ReversibleStack
from nasforge.oneshot.spos import Spos, activate


@pytest.fixture(autouse=True)
def _threads() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)


def _space(**kw) -> Seq2SeqSpace:
    return Seq2SeqSpace(40, **{"d": 48, "e": 16, "s": 1, "dropout": 0.1, **kw})


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, 40, (3, 9))
    src[0, 6:] = 0
    tgt = torch.randint(4, 40, (3, 7))
    tgt[2, 5:] = 0
    return src, tgt


def test_size_and_labels() -> None:
    """|O| is 13/14, labels per searched split, size exactly 13^(sm)·14^(sm)."""
    assert len(op_names(False)) == 13 and len(op_names(True)) == 14
    space = _space(s=2, repeats=2)
    ss = space.search_space()
    assert sorted(ss) == sorted(
        [f"enc{i}.g{k}" for i in range(2) for k in range(2)]
        + [f"dec{i}.g{k}" for i in range(2) for k in range(2)]
    )
    assert ss.size == space_size(13, 14, 2, 2) == 13**4 * 14**4
    assert "cross_attn" not in ss["enc0.g0"].values and "cross_attn" in ss["dec0.g0"].values
    assert len(space.encoder.layers) == 4  # s layers repeated


def test_frozen_is_plain_and_trains_by_ordinary_backprop() -> None:
    """A frozen architecture runs, has no reconstruction, and inherits supernet weights."""
    space = _space()
    arch = space.search_space().sample(1)
    model = nf.freeze(space, arch)
    assert all(not m.reconstruct for m in model.modules() if isinstance(m, ReversibleStack))
    src, tgt = _batch()
    assert model(src, tgt).shape == (3, 7, 40)
    net = Supernet(space, Spos)
    activate(net, arch)
    inherited = inherit_weights(net, arch)
    net.eval()
    inherited.eval()
    torch.testing.assert_close(inherited(src, tgt), net(src, tgt))


def test_decoder_is_causal() -> None:
    """Changing a later target token never changes earlier logits (conv, dynconv, attention)."""
    space = _space()
    for seed in range(3):
        model = nf.freeze(space, space.search_space().sample(seed)).eval()
        src, tgt = _batch()
        other = tgt.clone()
        other[:, 4:] = torch.randint(4, 40, other[:, 4:].shape)
        a, b = model(src, tgt), model(src, other)
        torch.testing.assert_close(a[:, :4], b[:, :4])


def test_search_step_runs_for_darts_and_nasb_with_reconstruction() -> None:
    """Both algorithms backpropagate through the reversible seq2seq supernet."""
    src, tgt = _batch()
    for algo in (Darts, Nasb):
        net = Supernet(_space(), algo)
        if algo is Nasb:
            binarize(net)
        assert set_reconstruct(net, True) == 2
        net(src, tgt).logsumexp(-1).mean().backward()
        assert all(a.grad is not None for a in net.arch_parameters())
        arch = net.export()
        assert nf.freeze(net.space, arch)(src, tgt).shape == (3, 7, 40)


def test_baseline_matches_parameter_count() -> None:
    """The standard Transformer baseline lands near the searched model's parameter count."""
    model = nf.freeze(_space(d=96, e=32), _space(d=96, e=32).search_space().sample(0))
    base = TransformerSeq2Seq.matching(n_params(model), 40, e=32, layers=1)
    assert abs(n_params(base) - n_params(model)) / n_params(model) < 0.25


def test_bad_configurations_raise_before_training() -> None:
    """Indivisible hidden size and cross-attention in the encoder are SpaceErrors naming where."""
    with pytest.raises(SpaceError, match="decoder: hidden size d=50 is not divisible by its 3"):
        _space(d=50, n_splits=2)
    with pytest.raises(SpaceError, match="encoder: candidate 'cross_attn'"):
        _space(enc_ops=["ffn", "cross_attn"])
    with pytest.raises(SpaceError, match="not divisible by 8"):
        _space(d=24)


def test_multi_trial_strategy_asks_and_freezes() -> None:
    """Regularized evolution and TPE ask architectures that freeze into runnable models."""
    from nasforge.strategy import get_strategy

    space = _space()
    src, tgt = _batch()
    for name in ("evolution", "tpe"):
        strategy = get_strategy(name, seed=0)
        strategy.setup(space.search_space())
        for _ in range(3):
            arch = strategy.ask()
            assert arch is not None
            model = nf.freeze(space, arch).eval()
            with torch.no_grad():
                loss = model(src, tgt).logsumexp(-1).mean()
            strategy.tell(arch, -float(loss))


def _seq_grads(net: Supernet, rec: bool, src: torch.Tensor, tgt: torch.Tensor) -> list:
    set_reconstruct(net, rec)
    net.zero_grad(set_to_none=True)
    torch.manual_seed(5)  # the same dropout masks in both runs
    if net.algorithm is Nasb:
        binarize(net)
    out = net(src, tgt)
    torch.nn.functional.cross_entropy(
        out.flatten(0, 1), src[:, :7].flatten(), ignore_index=0
    ).backward()
    return [p.grad for p in [*net.weights(), *net.arch_parameters()]]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_seq2seq_darts_reconstruction_equals_autograd(dtype: torch.dtype, tol: float) -> None:
    """On the paper's space (dropout 0.1, a searched block repeated twice so that decisions are
    tied across layers), reversible DARTS gradients equal ordinary DARTS's."""
    net = Supernet(_space(repeats=2), Darts).to(dtype)
    src, tgt = _batch()
    rev, ref = _seq_grads(net, True, src, tgt), _seq_grads(net, False, src, tgt)
    assert len(rev) == len(ref) and all(g is not None for g in ref)
    for a, b in zip(rev, ref):
        assert float((a - b).abs().max()) <= tol * float(b.abs().max().clamp_min(1e-12))


def test_seq2seq_nasb_reconstruction_equals_autograd() -> None:
    """Reversible NASB equals ordinary NASB: all entries without dropout; with dropout the
    weights and the active entries (inactive ones are re-drawn estimates in both)."""
    src, tgt = _batch()
    for p in (0.0, 0.1):
        net = Supernet(_space(dropout=p), Nasb).double()
        with torch.no_grad():
            for a in net.arch_parameters():
                a.copy_(torch.randn_like(a))
        rev, ref = _seq_grads(net, True, src, tgt), _seq_grads(net, False, src, tgt)
        n_w = len(list(net.weights()))
        for i, (a, b) in enumerate(zip(rev, ref)):
            assert (a is None) == (b is None)
            if a is None:
                continue
            if i >= n_w and p > 0:  # architecture entry: compare the active one
                k = int(net.arch_parameters()[i - n_w].argmax())
                a, b = a[k], b[k]
            assert float((a - b).abs().max()) <= 1e-10 * float(b.abs().max().clamp_min(1e-12))
