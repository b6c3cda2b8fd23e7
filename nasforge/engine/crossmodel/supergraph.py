"""Super-graph weight sharing for multi-trial search (Retiarii §4.2, §7.2.3).

A weight-sharing multi-trial search (SPOS- or ENAS-style through the engine) trains each
sampled architecture for a few batches starting from weights shared by every architecture of
the space, and scores it. Where those shared weights live is the whole difference:

    file        (the naive engine) each trial builds its model with ``freeze``, loads the
                shared weights and the optimizer's momenta from a checkpoint file, trains, and
                saves them back; works across worker processes
    dict        the same, with the checkpoint kept in an in-memory dict of tensors
    supergraph  one in-memory super-graph (:class:`.singlepath.SinglePath`, single-path
                control flow as SPOS) holds every candidate's weights and one optimizer; a
                trial activates its architecture and trains; nothing is built, loaded or saved

The three modes compute the same numbers: the same initial weights (a supernet built with the
seed), the same batches (batch ``s`` of the search is drawn with ``seed`` and the shared step
counter ``s``), and SGD with momentum touches exactly the parameters of the trained path in
each (a parameter without a gradient is skipped by the optimizer, as the checkpoint baseline
leaves its momentum untouched). ``switch`` moves the state between modes at any time.

Invariants: every mode gives the same metrics and the same shared state for the same sequence
of architectures (to float rounding; bitwise at one thread); a trial reads the state that the
previous trial wrote.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.engine.evaluator import BaseEvaluator, Report
from nasforge.errors import ConfigError
from nasforge.runtime.devices import check_device, resolve_device

__all__ = ["SharedWeightsEvaluator", "SHARING_MODES", "path_map"]

log = logging.getLogger(__name__)

#: Where the shared weights live between trials (see the module docstring).
SHARING_MODES = ("file", "dict", "supergraph")


def path_map(space: nn.Module, model: nn.Module, arch: Mapping[str, Any]) -> dict[str, str]:
    """Returns ``frozen model state-dict key -> space state-dict key`` for every parameter and
    buffer of ``model`` (the frozen ``arch``), following the chosen candidate of each
    ``LayerChoice`` of the recorded ``space`` (whose keys are the supernet's keys).

    Raises:
        ConfigError: a frozen module has no counterpart in the space.
    """
    from nasforge.space.modules import LayerChoice

    out: dict[str, str] = {}

    def walk(src: nn.Module, dst: nn.Module, src_path: str, dst_path: str) -> None:
        while isinstance(src, LayerChoice):
            name = str(arch[str(src.label)])
            src, src_path = src.candidate(name), f"{src_path}{name}."
        named: list[tuple[str, torch.Tensor]] = list(dst.named_parameters(recurse=False))
        named += [(n, b) for n, b in dst.named_buffers(recurse=False) if b is not None]
        for name, _ in named:
            out[dst_path + name] = src_path + name
        for name, child in dst.named_children():
            if name not in src._modules:
                raise ConfigError(
                    f"frozen module {dst_path + name!r} has no counterpart in the space; the "
                    "space's __init__ must name modules the same way when frozen"
                )
            sub = src._modules[name]
            assert sub is not None
            walk(sub, child, f"{src_path}{name}.", f"{dst_path}{name}.")

    walk(space, model, "", "")
    return out


class SharedWeightsEvaluator(BaseEvaluator):
    """Returns ``{"accuracy", "loss"}`` of an architecture after ``batches_per_trial`` SGD
    steps from the weights it shares with every architecture of the space.

    ``train`` and ``val`` are ``(x, y)`` tensors; ``accuracy`` is measured on the first
    ``val_size`` validation examples in eval mode (with ``val=None`` it is the accuracy on the
    last training batch before its update). ``sharing`` is one of :data:`SHARING_MODES`;
    ``path`` is the checkpoint of the ``file`` mode (default: a file in the temp directory,
    named after this process and object, so that forked workers share it).

    Invariants: see the module docstring; trials must run one at a time (weight sharing trains
    architectures in sequence), which the engine ensures.

    Raises:
        ConfigError: an unknown ``sharing`` mode, a non-positive batch size or count, a
            ``device`` this machine does not have (None, the default: the trial's device).
    """

    needs_model = True
    default_metric = "accuracy"
    metric_names = ("accuracy", "loss")
    #: The trait the cross-model planner reads: trials share weights through this evaluator.
    shares_weights = True

    def __init__(
        self,
        train: tuple[torch.Tensor, torch.Tensor],
        val: tuple[torch.Tensor, torch.Tensor] | None = None,
        *,
        batches_per_trial: int = 1,
        batch_size: int = 32,
        lr: float = 0.05,
        momentum: float = 0.9,
        val_size: int = 256,
        seed: int = 0,
        sharing: str = "file",
        path: str | Path | None = None,
        device: str | None = None,
    ) -> None:
        check_device(device, "the shared-weights evaluator's device")
        if sharing not in SHARING_MODES:
            raise ConfigError(f"sharing {sharing!r} is not one of {SHARING_MODES}")
        for name, v in (("batches_per_trial", batches_per_trial), ("batch_size", batch_size)):
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        self.train, self.val = train, val
        self.batches_per_trial, self.batch_size = batches_per_trial, batch_size
        self.lr, self.momentum, self.val_size, self.seed = lr, momentum, val_size, seed
        self.sharing, self.device = sharing, device
        default = Path(tempfile.gettempdir()) / f"nasforge-shared-{os.getpid()}-{id(self)}.pt"
        self.path = Path(path) if path is not None else default
        self._net: Any = None  # the supernet (supergraph mode)
        self._opt: torch.optim.Optimizer | None = None
        self._dict: dict[str, Any] | None = None  # the checkpoint (dict mode)
        self._step = 0  # shared step counter (supergraph mode; in the checkpoint otherwise)

    def config(self) -> dict[str, Any]:
        """Returns the evaluator's settings as plain data."""
        return {
            "type": "shared_weights",
            "batches_per_trial": self.batches_per_trial,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "momentum": self.momentum,
            "val_size": self.val_size,
            "seed": self.seed,
            "sharing": self.sharing,
            "device": self.device,
        }

    def _device(self) -> torch.device:
        """Returns where the weights live: ``device``, or (None) the trial's device."""
        return resolve_device(self.device)

    # -- the shared state ------------------------------------------------------------------
    def _new_supernet(self, space: Any) -> Any:
        from nasforge.engine.crossmodel.singlepath import SinglePath

        net = SinglePath(space)
        torch.manual_seed(self.seed)  # the initial shared weights depend on the seed alone
        for m in net.modules():
            reset = getattr(m, "reset_parameters", None)
            if reset is not None:
                reset()
        return net.to(self._device())

    def _initial_state(self, space: Any) -> dict[str, Any]:
        net = self._new_supernet(space)
        return {"weights": dict(net.model.state_dict()), "momentum": {}, "step": 0}

    def _load(self, space: Any) -> dict[str, Any]:
        if self.sharing == "dict":
            if self._dict is None:
                self._dict = self._initial_state(space)
            return self._dict
        if not self.path.exists():
            return self._initial_state(space)
        return torch.load(self.path, weights_only=True, map_location=self._device())

    def _save(self, state: dict[str, Any]) -> None:
        if self.sharing == "dict":
            self._dict = state
            return
        tmp = self.path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.path)

    def state(self, space: Any) -> dict[str, Any]:
        """Returns the shared state (weights, momenta by supernet key, step) of any mode."""
        if self.sharing != "supergraph":
            return self._load(space)
        net = self._supergraph(space)
        names = {id(p): n for n, p in net.model.named_parameters()}
        assert self._opt is not None
        momentum = {
            names[id(p)]: s["momentum_buffer"].clone()
            for p, s in self._opt.state.items()
            if s.get("momentum_buffer") is not None
        }
        weights = {k: v.clone() for k, v in net.model.state_dict().items()}
        return {"weights": weights, "momentum": momentum, "step": self._step}

    def switch(self, space: Any, sharing: str) -> None:
        """Moves the shared state to mode ``sharing`` (the engine's lever; exact).

        Raises:
            ConfigError: an unknown mode.
        """
        if sharing not in SHARING_MODES:
            raise ConfigError(f"sharing {sharing!r} is not one of {SHARING_MODES}")
        if sharing == self.sharing:
            return
        state = self.state(space)
        self.sharing = sharing
        self._net = self._opt = self._dict = None
        if sharing == "supergraph":
            self._supergraph(space, state)
        else:
            self._save(state)
        log.info("shared weights moved to %s mode", sharing)

    def _supergraph(self, space: Any, state: dict[str, Any] | None = None) -> Any:
        if self._net is None or state is not None:
            if state is None:
                state = self._load_for_supergraph(space)
            net = self._new_supernet(space)
            net.model.load_state_dict(state["weights"])
            opt = torch.optim.SGD(net.parameters(), lr=self.lr, momentum=self.momentum)
            params = dict(net.model.named_parameters())
            for name, buf in state["momentum"].items():
                opt.state[params[name]]["momentum_buffer"] = buf.clone()
            self._net, self._opt, self._step = net, opt, int(state["step"])
        return self._net

    def _load_for_supergraph(self, space: Any) -> dict[str, Any]:
        if self.path.exists():  # a file written by file-mode trials before a switch
            return torch.load(self.path, weights_only=True, map_location=self._device())
        return self._initial_state(space)

    # -- one trial -------------------------------------------------------------------------
    def _batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.train
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        idx = torch.randint(len(x), (self.batch_size,), generator=g)
        return x[idx].to(self._device()), y[idx].to(self._device())

    def _train(self, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, float]:
        model.train()
        loss_v = acc = 0.0
        for i in range(self.batches_per_trial):
            x, y = self._batch(step + i)
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_v, acc = float(loss.detach()), float((out.argmax(1) == y).float().mean())
        if self.val is not None:
            from nasforge.weightsharing import accuracy

            vx, vy = self.val
            n = self.val_size
            acc = accuracy(model, (vx[:n], vy[:n]), batch_size=max(1, n), device=self._device())
        return {"accuracy": acc, "loss": loss_v}

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> dict[str, float]:
        """Returns the metrics of ``arch`` after its steps from the shared weights."""
        if self.sharing == "supergraph":
            net = self._supergraph(space)
            net.activate(arch)
            assert self._opt is not None
            metrics = self._train(net, self._opt, self._step)
            self._step += self.batches_per_trial
            return metrics
        return self._evaluate_checkpointed(space, arch)

    def _evaluate_checkpointed(self, space: Any, arch: dict[str, Any]) -> dict[str, float]:
        from nasforge.space import freeze

        state = self._load(space)
        model = freeze(space, arch).to(self._device())
        keys = path_map(space, model, arch)
        weights = state["weights"]
        model.load_state_dict({k: weights[v] for k, v in keys.items()})
        opt = torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum)
        for name, p in model.named_parameters():
            buf = state["momentum"].get(keys[name])
            if buf is not None:
                opt.state[p]["momentum_buffer"] = buf.clone()
        step = int(state["step"])
        metrics = self._train(model, opt, step)
        new = dict(model.state_dict())
        weights = dict(weights)
        momentum = dict(state["momentum"])
        for k, v in keys.items():
            weights[v] = new[k].detach().clone()
        for name, p in model.named_parameters():
            buf = opt.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                momentum[keys[name]] = buf.clone()
        self._save(
            {"weights": weights, "momentum": momentum, "step": step + self.batches_per_trial}
        )
        return metrics
