"""Tests of the built-in classification evaluator and export/load of trained models."""

from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.errors import ConfigError
from nasforge.run.export import export_top, load_model


@dataclass
class _Splits:
    train: TensorDataset
    val: TensorDataset
    test: TensorDataset


def _blobs(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, 1, 4, 4, generator=g) * 0.3 + y.view(-1, 1, 1, 1).float()
    return TensorDataset(x, y)


DATA = _Splits(_blobs(96, 0), _blobs(48, 1), _blobs(48, 2))


class Small(nf.ModelSpace):
    """A tiny classifier space: hidden width and activation."""

    def __init__(self):
        super().__init__()
        h = nf.choice([2, 16], label="hidden")
        self.flat = nn.Flatten()
        self.fc1 = nn.Linear(16, h)
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.fc2 = nn.Linear(h, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(self.flat(x))))


def test_trains_reports_and_exports(tmp_path):
    """Trials train, report val accuracy per epoch; the best exports and reloads in one call."""
    ev = ClassificationEvaluator(DATA, epochs=3, batch_size=16, lr=0.05)
    exp = Experiment(
        Small(), ev, "grid", directory=tmp_path / "x", executor="pool", progress="off"
    ).run()
    trials = exp.trials()
    assert all(t.status == "done" and len(t.intermediates) == 3 for t in trials)
    best = exp.best(1)[0]
    assert best.metrics["accuracy"] > 0.8 and 0 <= best.metrics["test_accuracy"] <= 1
    (path,) = export_top(tmp_path / "x", k=1)
    model = load_model(path, Small())
    x, y = DATA.val.tensors
    with torch.no_grad():
        acc = (model(x).argmax(-1) == y).float().mean().item()
    assert acc == pytest.approx(best.metrics["accuracy"])


def test_a_reseeded_evaluator_trains_from_another_seed_on_the_same_splits():
    """reseeded(n) gives the n-th retraining its own seed: repeat 1 trains other weights
    than repeat 0 and repeat 1 again the same; the splits stay those of the evaluator (one
    data set, loaded once), and the evaluator itself is unchanged."""
    ev = ClassificationEvaluator(DATA, epochs=1, batch_size=16)
    arch = {"hidden": 16, "act": "relu"}

    def weights(e: ClassificationEvaluator) -> torch.Tensor:
        e.evaluate(Small(), arch, lambda v: None)
        return e.last_model.fc1.weight.detach().clone()

    first, again = ev.reseeded(1), ev.reseeded(1)
    assert first is not None and again is not None
    w0, w1 = weights(ev), weights(first)
    assert not torch.equal(w0, w1) and torch.equal(w1, weights(again))
    assert not torch.equal(w1, weights(ev.reseeded(2)))
    assert first.splits() is ev.splits() and ev.repeat == 0 and torch.equal(w0, weights(ev))


def test_same_seed_same_metrics(tmp_path):
    """Training is seeded: two runs give equal metrics."""
    ev = ClassificationEvaluator(DATA, epochs=2, batch_size=16)
    arch = {"hidden": 16, "act": "relu"}
    a = ev.evaluate(Small(), arch, lambda v: None)
    b = ev.evaluate(Small(), arch, lambda v: None)
    a.pop("train_seconds"), b.pop("train_seconds")
    assert a == b


def test_bad_settings():
    """Unknown optimizers and bad data are ConfigErrors naming the value."""
    with pytest.raises(ConfigError, match="rmsprop"):
        ClassificationEvaluator(DATA, optimizer="rmsprop")
    with pytest.raises(ConfigError, match="imagenet"):
        ClassificationEvaluator("imagenet").check()


class _Batched(nf.ModelSpace):
    """A classifier whose batch size, learning rate and dropout are declared Optuna's way, and
    that records the size of each batch it sees while training."""

    def __init__(self, sizes=(12, 32)):
        super().__init__()
        self.batch_size = nf.suggest_categorical("batch_size", list(sizes))
        self.lr = nf.suggest_float("lr", 1e-3, 1e-1, log=True)
        self.fc = nn.Sequential(nn.Flatten(), nn.Dropout(nf.suggest_float("p", 0.0, 0.5)),
                                nn.Linear(16, 3))  # fmt: skip
        self.seen: list[int] = []

    def forward(self, x):
        if self.training:
            self.seen.append(x.shape[0])
        return self.fc(x)


@pytest.mark.parametrize("batch_size", [12, 32])
def test_the_evaluator_trains_with_the_spaces_batch_size(batch_size):
    """A `batch_size` decision of the space (here declared with suggest_categorical) is the
    batch size each trial trains with, in place of the evaluator's own."""
    ev = ClassificationEvaluator(DATA, epochs=1, batch_size=16)
    arch = {"batch_size": batch_size, "lr": 0.01, "p": 0.1}
    ev.evaluate(_Batched(), arch, lambda v: None)
    assert ev.last_model.batch_size == batch_size and ev.last_model.lr == 0.01
    assert ev.last_model.seen[0] == batch_size and sum(ev.last_model.seen) == 96


def test_a_batch_size_that_is_not_a_positive_int_fails_in_one_line():
    """A searched batch size the loader cannot take is one ConfigError naming it."""
    ev = ClassificationEvaluator(DATA, epochs=1)
    with pytest.raises(ConfigError, match=r"batch_size decision took 0; .* positive int"):
        ev.evaluate(_Batched(sizes=(0, 8)), {"batch_size": 0, "lr": 0.01, "p": 0.1},
                    lambda v: None)  # fmt: skip
