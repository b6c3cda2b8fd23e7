"""The configuration of a NASPipe run and its deterministic inputs: :class:`RunConfig`, the
checks a config passes before any process starts (:func:`check_config`), the seeds and thread
count that make training bitwise repeatable (:func:`set_determinism`), and the data and initial
supernet every process rebuilds identically from the config (:func:`digits`, ``_Data``,
``_build_space``).

Invariants:
    * Every process that builds the space or the batches from the same config gets the same
      initial weights and the same batch for each step.
"""

from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from nasforge.errors import ConfigError
from nasforge.parallel.csp import check_subnet, static_partition
from nasforge.parallel.mirror import check_layer_costs
from nasforge.parallel.sampler import get_sampler
from nasforge.parallel.supernet import n_candidates
from nasforge.runtime.devices import check_device

__all__ = [
    "POLICIES",
    "RunConfig",
    "check_checkpoint_every",
    "check_config",
    "config_dict",
    "digits",
    "set_determinism",
]

POLICIES = ("csp", "bsp", "asp")


@dataclass
class RunConfig:
    """Returns nothing; everything a run needs, picklable for spawned stage processes."""

    space_cls: type  # an nf.ModelSpace subclass importable by name (spawn re-imports it)
    space_kwargs: dict = field(default_factory=dict)
    steps: int = 32  # subnets trained, one batch each
    batch_size: int = 16
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0
    policy: str = "csp"
    n_stages: int = 2
    window: int = 0  # subnets in flight (csp/asp); 0 means n_stages
    bulk: int = 0  # bsp flush size; 0 means n_stages
    sampler: str = "uniform"
    feedback_lag: int = 8  # a learning sampler hears subnet s's loss before asking s + lag
    subnets: list[list[int]] | None = None  # an explicit subnet sequence instead of a sampler
    cache_subnets: float | None = 3.0  # device cache per stage, in subnets' stage layers
    device: str = "cpu"
    timeout_s: float = 300.0
    # Where stage processes listen. Loopback (default): a file rendezvous and gloo on the
    # loopback interface, nothing reachable from other hosts. Any other address of this host
    # (or "0.0.0.0") opts in to other hosts: a TCP rendezvous there, gloo on its default device
    # (the host name's address, or the interface named by GLOO_SOCKET_IFNAME).
    bind: str = "127.0.0.1"
    data: tuple[Any, Any] | None = None  # (X float, y int) arrays; None: digits(), standardised
    fail_rank: int = -1  # fault injection for tests: this rank exits at fail_step's forward
    fail_step: int = -1
    # Layer mirroring (§4.2, csp only): each subnet split by its own balanced partition, a
    # stage holding a mirror of every layer it may run, each WRITE pushed to the other mirrors.
    mirror: bool = False
    layer_costs: list[list[float]] | None = None  # mirror: cost[b][c]; None: measured on rank 0
    # Segments (nasforge.parallel.segments): the pipeline drains at every multiple of this
    # many steps, where each stage may write its part of a resumable state; 0: one segment.
    checkpoint_every: int = 0


# -- shared pieces: determinism, data, space ----------------------------------------------------


def set_determinism(seed: int) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def digits(n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Returns sklearn's digits ``(X float32 [N, 64], y int64 [N])``, each pixel standardised.

    The default data of a run. Each pixel gets zero mean and unit variance over the first
    ``n`` samples (all when ``None``; pass the training part's size so a held-out part does
    not leak into the statistics); pixels constant there are only centred. Why: the raw
    ``pixels / 16`` share a large common component, and standardised inputs made the 8-block
    example learn faster (docs/naspipe.md has the figures).
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = d.data.astype(np.float64)
    ref = x if n is None else x[:n]
    sd = ref.std(0)
    x = (x - ref.mean(0)) / np.where(sd > 0, sd, 1.0)
    return x.astype(np.float32), d.target.astype(np.int64)


class _Data:
    """Batches as a pure function of (seed, step): every process builds the same ones."""

    def __init__(self, cfg: RunConfig) -> None:
        x, y = digits() if cfg.data is None else cfg.data
        self.x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        self.y = torch.as_tensor(np.asarray(y), dtype=torch.long)
        self.perm = np.random.RandomState(cfg.seed).permutation(len(self.x))
        self.b = cfg.batch_size

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(self.perm[(step * self.b + np.arange(self.b)) % len(self.perm)])
        return self.x[idx], self.y[idx]


def _build_space(cfg: RunConfig) -> Any:
    torch.manual_seed(cfg.seed)  # same initial weights in every process and in sequential
    return cfg.space_cls(**cfg.space_kwargs)


def check_config(cfg: RunConfig) -> None:
    """Returns None when ``cfg`` can run.

    Raises:
        ConfigError: a device this machine does not have; unknown policy or sampler, steps
            < 0, batch size < 1, stages < 1, fewer explicit subnets than steps; ``mirror``
            with a policy other than csp, or ``layer_costs`` not shaped like the space;
            ``checkpoint_every`` not an int >= 0, or under bsp on several stages not a
            multiple of the bulk.
        ScheduleError: more stages than the space has blocks.
        ArchitectureError: an explicit subnet names a missing candidate.
    """
    check_device(cfg.device, "the pipeline's device")
    if cfg.policy not in POLICIES:
        raise ConfigError(f"policy must be one of {POLICIES}, got {cfg.policy!r}")
    if cfg.steps < 0 or cfg.batch_size < 1 or cfg.n_stages < 1:
        raise ConfigError(
            f"need steps >= 0, batch_size >= 1 and n_stages >= 1, got steps={cfg.steps}, "
            f"batch_size={cfg.batch_size}, n_stages={cfg.n_stages}"
        )
    check_checkpoint_every(cfg.checkpoint_every, cfg.policy, cfg.n_stages, cfg.bulk)
    space = _build_space(cfg)
    ncand = n_candidates(space)
    static_partition(len(ncand), cfg.n_stages)
    if cfg.mirror and cfg.policy != "csp":
        raise ConfigError(
            f"layer mirroring (mirror=True) needs policy 'csp', got {cfg.policy!r}: only csp "
            "orders the WRITEs that mirrors receive; use csp or mirror=False"
        )
    if cfg.layer_costs is not None:
        check_layer_costs(cfg.layer_costs, ncand)
    if cfg.subnets is not None:
        if len(cfg.subnets) < cfg.steps:
            raise ConfigError(
                f"{len(cfg.subnets)} subnets given for {cfg.steps} steps; give one per step"
            )
        for seq, sn in enumerate(cfg.subnets[: cfg.steps]):
            check_subnet(list(sn), ncand, seq)
    else:
        source = get_sampler(cfg.sampler, ncand, cfg.seed, cfg.feedback_lag)
        in_flight = max(cfg.window or cfg.n_stages, cfg.bulk or cfg.n_stages)
        if hasattr(source, "report") and in_flight > cfg.feedback_lag:
            raise ConfigError(
                f"sampler {cfg.sampler!r} learns from losses {cfg.feedback_lag} subnets late, "
                f"but {in_flight} subnets can be in flight (window/bulk/stages); raise "
                "feedback_lag to at least that"
            )


def check_checkpoint_every(every: Any, policy: str, n_stages: int, bulk: int = 0) -> None:
    """Returns None when ``every`` steps per segment suit the run (``bulk``: bsp's flush
    size; 0 means ``n_stages``).

    Raises:
        ConfigError: not an int >= 0; under bsp on several stages, not a multiple of the bulk
            (a segment must end where bsp updates).
    """
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
        raise ConfigError(
            f"checkpoint_every must be an int >= 0 (steps per segment; 0: one segment), "
            f"got {every!r}"
        )
    bulk = bulk or n_stages
    if policy == "bsp" and n_stages > 1 and every % bulk:
        raise ConfigError(
            f"policy 'bsp' updates once per bulk of {bulk} subnets, so a segment must end on "
            f"a bulk; checkpoint_every={every} is not a multiple of {bulk}: use a multiple "
            f"(e.g. {every + bulk - every % bulk}) or 0"
        )


def config_dict(cfg: RunConfig) -> dict[str, Any]:
    """Returns the JSON-able part of a config (for export metadata)."""
    d = asdict(cfg)
    d["space_cls"] = f"{cfg.space_cls.__module__}.{cfg.space_cls.__qualname__}"
    d.pop("data", None)
    return d
