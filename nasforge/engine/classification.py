"""The built-in classification evaluator: train a frozen architecture with a standard loop,
report validation accuracy after each epoch, return accuracy, test accuracy and params."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from nasforge.engine.evaluator import BaseEvaluator, Report
from nasforge.errors import ConfigError
from nasforge.runtime.devices import check_device, resolve_device

__all__ = ["ClassificationEvaluator", "SEARCHED", "training_seed"]

_OPTIMIZERS = ("adam", "adamw", "sgd")
#: the labels of the space's decisions that set the evaluator's own training settings
SEARCHED = ("lr", "weight_decay", "batch_size")


def _searched_settings(history: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """Returns ``defaults`` (``lr``, ``weight_decay``, ``batch_size``) with the values the
    architecture took for the decisions of those labels (a frozen model's
    ``mutation_history``), ranges and choices alike.

    Raises:
        ConfigError: a searched ``batch_size`` that is not a positive int, or an ``lr`` or
            ``weight_decay`` that is not a number.
    """
    out = dict(defaults)
    for m in history:
        if m.label not in SEARCHED or m.kind not in ("float", "int", "value"):
            continue
        value = m.value
        if m.label == "batch_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"the space's batch_size decision took {value!r}; the evaluator trains "
                    "with a positive int batch size: declare it with nf.suggest_int or a "
                    "choice of ints"
                )
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(
                f"the space's {m.label} decision took {value!r}; the optimizer needs a number"
            )
        out[m.label] = value
    return out


def training_seed(seed: int, repeat: int) -> int:
    """Returns the seed of an architecture's ``repeat``-th retraining by an evaluator seeded
    with ``seed``: ``seed`` for the first training (``repeat`` 0), then one far from the
    seeds a user gives runs (0, 1, 2, ...), so that no two of them train alike."""
    return seed if repeat == 0 else seed + 1_000_003 * repeat


class ClassificationEvaluator(BaseEvaluator):
    """Returns ``{"accuracy": val acc, "test_accuracy", "params", "train_seconds"}`` of an
    architecture trained for ``epochs`` with cross-entropy.

    ``data`` is a ``nasforge.data.Splits`` (train/val/test datasets), a zero-argument callable
    returning one (loaded once per run by :meth:`prepare`, before the pool forks its
    workers), or ``"digits"`` for ``nasforge.data.load_digits(seed)``. Training is seeded:
    the same arch and seed give the same metrics at the same thread count. A decision of the
    space labelled ``lr``, ``weight_decay`` or ``batch_size`` (a range or a choice:
    ``nf.suggest_float("lr", 1e-4, 1e-1, log=True)``, ``nf.suggest_int("batch_size", 16,
    128, step=16)``, ``nf.suggest_categorical("batch_size", [32, 64])``) sets that trial's
    setting in place of the evaluator's own (:data:`SEARCHED`). A retraining
    (:meth:`reseeded`) trains on the same splits from another seed (:func:`training_seed`).
    ``device`` None (the default) trains on the trial's device, ``nasforge.trial_device()``
    (a GPU when the experiment gives trials GPUs, else the CPU); ``"cpu"`` or ``"cuda:N"``
    pins every trial there.

    Raises:
        ConfigError: unknown optimizer, non-positive epochs/batch size/lr, bad data, a device
            this machine does not have.
    """

    def __init__(
        self,
        data: Any = "digits",
        epochs: int = 5,
        batch_size: int = 64,
        optimizer: str = "adam",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        device: str | None = None,
        seed: int = 0,
    ) -> None:
        if optimizer not in _OPTIMIZERS:
            raise ConfigError(f"optimizer {optimizer!r} is not one of {_OPTIMIZERS}")
        for name, v in (("epochs", epochs), ("batch_size", batch_size)):
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        if not lr > 0:
            raise ConfigError(f"lr must be > 0, got {lr!r}")
        self.data, self.epochs, self.batch_size = data, epochs, batch_size
        self.optimizer, self.lr, self.weight_decay = optimizer, lr, weight_decay
        self.device, self.seed = device, seed
        self.repeat = 0  # which training of the architecture this is (:meth:`reseeded`)
        self._splits: Any = None

    default_metric = "accuracy"
    metric_names = ("accuracy", "test_accuracy", "params", "train_seconds")

    def config(self) -> dict[str, Any]:
        """Returns the training settings as plain data."""
        return {
            "type": "classification",
            "data": self.data if isinstance(self.data, str) else type(self.data).__name__,
            "rebuildable": isinstance(self.data, str),
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "optimizer": self.optimizer,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "device": self.device,
            "seed": self.seed,
        }

    def reseeded(self, repeat: int) -> ClassificationEvaluator:
        """Returns this evaluator training from the ``repeat``-th other seed on the same data
        splits (loaded once, shared)."""
        other = copy.copy(self)
        other.repeat = repeat
        return other

    def check(self) -> None:
        """Raises ConfigError when ``data`` is none of the accepted forms, or ``device`` is
        not on this machine."""
        check_device(self.device, "the classification evaluator's device")
        if isinstance(self.data, str) and self.data != "digits":
            raise ConfigError(
                f"data {self.data!r}: the only named dataset is 'digits'; pass a "
                "nasforge.data.Splits or a callable returning one"
            )
        if (
            not isinstance(self.data, str)
            and not callable(self.data)
            and not all(hasattr(self.data, a) for a in ("train", "val", "test"))
        ):
            raise ConfigError(f"data must be a Splits, a callable or 'digits', got {self.data!r}")

    def prepare(self, space: Any) -> None:
        """Returns None after loading the data splits and the modules a trial imports, once,
        in the process the trials come from (the pool's children inherit them)."""
        import nasforge.space  # noqa: F401 - imported here for the trials to inherit
        import nasforge.weightsharing  # noqa: F401 - likewise

        self.splits()

    def splits(self) -> Any:
        """Returns the data splits, loading them on first use."""
        if self._splits is None:
            if isinstance(self.data, str):
                from nasforge.data import load_digits

                self._splits = load_digits(seed=self.seed)
            elif callable(self.data) and not hasattr(self.data, "train"):
                self._splits = self.data()
            else:
                self._splits = self.data
        return self._splits

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> dict[str, float]:
        """Returns the metrics of ``arch`` after training it."""
        import torch
        from torch.utils.data import DataLoader

        from nasforge.space import freeze, mutation_history
        from nasforge.weightsharing import accuracy

        device = resolve_device(self.device)
        seed = training_seed(self.seed, self.repeat)
        torch.manual_seed(seed)
        model = freeze(space, arch).to(device)
        self.last_model = model
        # the space's own lr / weight_decay / batch_size, where it searches them
        searched = _searched_settings(
            mutation_history(model),
            {"lr": self.lr, "weight_decay": self.weight_decay, "batch_size": self.batch_size},
        )
        s = self.splits()
        gen = torch.Generator().manual_seed(seed)
        train = DataLoader(s.train, searched["batch_size"], shuffle=True, generator=gen)
        val = DataLoader(s.val, 256)
        test = DataLoader(s.test, 256)
        make: Callable[..., Any] = {
            "adam": torch.optim.Adam,
            "adamw": torch.optim.AdamW,
            "sgd": torch.optim.SGD,
        }[self.optimizer]
        kwargs: dict[str, Any] = {
            "lr": float(searched["lr"]),
            "weight_decay": float(searched["weight_decay"]),
        }
        if self.optimizer == "sgd":
            kwargs["momentum"] = 0.9
        opt = make(model.parameters(), **kwargs)
        loss_fn = torch.nn.CrossEntropyLoss()
        start = time.perf_counter()
        acc = 0.0
        for _ in range(self.epochs):
            model.train()
            for x, y in train:
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
            acc = accuracy(model, val, device=device)
            report({"accuracy": acc})
        return {
            "accuracy": acc,
            "test_accuracy": accuracy(model, test, device=device),
            "params": float(sum(p.numel() for p in model.parameters())),
            "train_seconds": time.perf_counter() - start,
        }
