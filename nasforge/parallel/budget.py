"""The largest batch a pipeline run fits in a device-memory budget per stage, measured from the
space's own layers.

The arithmetic is :mod:`nasforge.parallel.memory`'s (what each policy keeps on a device: the
whole stage partition for BSP and ASP, the layer cache for CSP, optimizer state, activations
with or without recomputation); this module supplies it with the run's real numbers. Each
candidate layer runs once on two samples of the run's data, after the blocks before it, and
three sizes are read off:

    param_bytes  its parameters
    act_bytes    the bytes it saves for backward per sample (saved-tensor hooks, distinct
                 storages, its parameters excluded)
    io_bytes     its output per sample (the next block's input)

so ``train_supernet(space, memory_budget=2**30, policy="csp")`` trains with the largest batch
whose every stage fits 1 GiB, and BSP's batch under the same budget is smaller whenever its
resident partition is larger than CSP's cache (the memory side of NASPipe's speed-up, §5.1).

Invariants: the batch returned fits: ``mem.used(batch) <= budget`` for every stage.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import torch

from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig, _build_space, _Data
from nasforge.parallel.csp import static_partition
from nasforge.parallel.memory import StageMemory, policy_batch
from nasforge.parallel.supernet import choice_blocks, layer_table

__all__ = ["LayerBytes", "layer_bytes", "fit_batch"]

log = logging.getLogger(__name__)

#: ``[block][candidate]`` tables of parameter, saved-activation and output bytes (per sample)
LayerBytes = tuple[list[list[float]], list[list[float]], list[list[float]]]

#: gradient and momentum buffer per parameter byte: the runtime's per-layer SGD with momentum
SGD_MOMENTUM_STATE = 2.0


def _saved_bytes(module: torch.nn.Module, x: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Returns (bytes saved for backward by ``module(x)``, its output)."""
    exclude = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in exclude:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x.detach().requires_grad_(True))
    return float(sum(seen.values())), out


def layer_bytes(cfg: RunConfig, n_samples: int = 2) -> LayerBytes:
    """Returns the ``(param_bytes, act_bytes, io_bytes)`` tables of the run's space, measured on
    ``n_samples`` samples of its data (act and io per sample)."""
    space = _build_space(cfg)
    n_blocks = len(choice_blocks(space))
    table = layer_table(space)
    x = _Data(replace(cfg, batch_size=n_samples)).batch(0)[0]
    params: list[list[float]] = []
    acts: list[list[float]] = []
    ios: list[list[float]] = []
    for b in range(n_blocks):
        row_p, row_a, row_o = [], [], []
        c = 0
        while (b, c) in table:
            m = table[(b, c)]
            row_p.append(float(sum(p.numel() * p.element_size() for p in m.parameters())))
            saved, out = _saved_bytes(m, x)
            row_a.append(saved / n_samples)
            row_o.append(out.numel() * out.element_size() / n_samples)
            c += 1
        params.append(row_p)
        acts.append(row_a)
        ios.append(row_o)
        with torch.no_grad():
            x = table[(b, 0)](x)  # candidate 0 defines the next block's input shape
    return params, acts, ios


def fit_batch(cfg: RunConfig, budget_bytes: float) -> tuple[int, list[StageMemory]]:
    """Returns ``(batch, per-stage memory)``: the largest batch with which every stage of the
    run ``cfg`` (its policy, stages, window or bulk, cache) fits ``budget_bytes`` of device
    memory. A cache of ``cache_subnets=None`` keeps every layer resident, as BSP does.

    Raises:
        ConfigError: a budget <= 0, or one too small for the stage's parameters and optimizer
            state at any batch (the message gives the bytes they need).
    """
    if not budget_bytes > 0:
        raise ConfigError(f"memory_budget must be > 0 bytes, got {budget_bytes!r}")
    params, acts, ios = layer_bytes(cfg)
    n_blocks = len(params)
    partition = static_partition(n_blocks, cfg.n_stages)
    most = max(len(row) for row in params)
    cache = most if cfg.cache_subnets is None else cfg.cache_subnets
    batch, mems = policy_batch(
        cfg.policy,
        partition,
        params,
        acts,
        ios,
        budget_bytes,
        window=cfg.window or cfg.n_stages,
        bulk=cfg.bulk or cfg.n_stages,
        state_factor=SGD_MOMENTUM_STATE,
        cache_subnets=cache,
    )
    if batch < 1:
        need = max(m.fixed + m.per_sample for m in mems)
        raise ConfigError(
            f"memory_budget={budget_bytes:.0f} bytes does not fit one sample under policy "
            f"{cfg.policy!r} with {cfg.n_stages} stages: the largest stage needs {need:.0f} "
            "bytes for its resident parameters, their optimizer state and one sample; give a "
            "larger budget, more stages, or (csp) a smaller cache_subnets"
        )
    log.info(
        "memory budget %.0f bytes per stage, policy %s: batch %d (stage bytes %s)",
        budget_bytes,
        cfg.policy,
        batch,
        [round(m.used(batch)) for m in mems],
    )
    return batch, mems
