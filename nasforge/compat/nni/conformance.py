"""NNI itself against nasforge: the same NNI architecture frozen by both gives the same network.

:func:`compare` takes one model space built twice, once by the installed NNI 3.0 and once by
:func:`nasforge.compat.nni.load` (the same source, unchanged), draws architectures with NNI's own
sampler, freezes each in both, loads NNI's state dict into nasforge's model (strictly: the same
keys and shapes) and runs both on the same input. An architecture is *equal* when the parameter
counts match, the state dict loads, and the outputs differ by at most ``atol``.

NNI 3.0 has two ways to a fixed network, and they can differ: building the space again under
``nni.nas.space.model_context(arch)`` (what NNI 3.0 tells users to do with an exported
architecture, and how its hub loads searched models) and ``space.freeze(arch)`` (which freezes a
copy of the built space in place). nasforge's ``freeze`` builds the space again, so the count
that decides is against ``model_context``; the count against NNI's ``freeze`` is kept beside it
(``equal_freeze``). They differ only where NNI's in-place freeze gives another network (its
``MobileNetV3Space``: a kept ``Identity`` and batch norms rebuilt with torch's default ``eps``).

:func:`pair` builds such a pair from a file written against NNI or from NNI's hub
(``nni.nas.hub.pytorch``). This needs ``nni==3.0`` installed (not a dependency of nasforge: NNI
pins ``filelock<3.12`` and nasforge needs ``filelock>=3.12``; NNI's model-space code runs with
the newer one, pip only warns). ``benchmarks/nni_equal.py`` runs it on NNI's tutorial space and
its hub spaces.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.compat.nni._importer import load
from nasforge.errors import ConfigError

__all__ = ["Conformance", "compare", "pair", "require_nni", "ATOL"]

log = logging.getLogger(__name__)

#: the largest output difference that still counts as equal (fp32; both run the same ops)
ATOL = 1e-6

_HUB = "nni.nas.hub.pytorch"


@dataclass
class Conformance:
    """Returns how many of ``n`` architectures froze to the same network in NNI and nasforge;
    ``mismatches`` holds one row per other architecture (the architecture, both parameter
    counts, the output difference or the error), ``freeze_differences`` why the others did not
    equal NNI's in-place freeze."""

    space: str
    n: int = 0
    equal: int = 0  # against NNI's model_context build
    equal_freeze: int = 0  # against NNI's in-place space.freeze
    #: why an architecture did not equal NNI's in-place freeze -> how many: the error's first
    #: line (a state dict that does not load: another network), or that the outputs differ
    freeze_differences: dict[str, int] = field(default_factory=dict)
    max_abs_diff: float | None = None  # None until one pair of outputs was compared
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        """Returns the fraction of equal architectures (0.0 when none was compared)."""
        return self.equal / self.n if self.n else 0.0

    @property
    def fraction_freeze(self) -> float:
        """Returns the fraction equal to NNI's in-place ``space.freeze`` (0.0 when none)."""
        return self.equal_freeze / self.n if self.n else 0.0


def require_nni() -> Any:
    """Returns the installed ``nni`` module.

    Raises:
        ConfigError: NNI is not installed (the message says how to install it).
    """
    try:
        return importlib.import_module("nni")
    except ImportError as e:
        raise ConfigError(
            f"comparing with NNI needs NNI installed ({e}): pip install nni==3.0 (pip warns "
            "that NNI pins filelock<3.12; its model-space code runs with nasforge's newer one)"
        ) from e


def pair(source: str, name: str, **kwargs: Any) -> tuple[nn.Module, nn.Module]:
    """Returns class ``name`` of ``source`` built by NNI and by nasforge, with ``kwargs``:
    ``source`` is a ``.py`` file written against NNI or ``"nni.nas.hub.pytorch"``.

    Raises:
        ConfigError: NNI is not installed, or ``source`` is neither a file nor NNI's hub.
        SpaceError: nasforge cannot map a construct of the space (named).
    """
    require_nni()
    if source == _HUB:
        real = importlib.import_module(_HUB)
    elif source.endswith(".py") and Path(source).is_file():
        spec = importlib.util.spec_from_file_location(f"_nni_real_{Path(source).stem}", source)
        assert spec is not None and spec.loader is not None
        real = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(real)
    else:
        raise ConfigError(f"{source!r}: give a .py file written against NNI or {_HUB!r}")
    ours = load(source)
    return getattr(real, name)(**kwargs), getattr(ours, name)(**kwargs)


def _params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _context_build(nni_space: Any, arch: dict[str, Any]) -> nn.Module:
    """Returns NNI's network of ``arch`` built the way NNI 3.0 builds an exported
    architecture: the space's class called again, with its own arguments, under
    ``model_context(arch)``."""
    model_context = importlib.import_module("nni.nas.space").model_context  # NNI: optional

    with model_context(arch):
        return type(nni_space)(*nni_space.trace_args, **nni_space.trace_kwargs)


def _same(theirs: nn.Module, ours: nn.Module, x: Any, atol: float) -> tuple[bool, float, int]:
    """Returns (equal, max |output difference|, NNI's parameter count) after loading
    ``theirs``' state dict into ``ours`` (strictly)."""
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        diff = (theirs(x) - ours(x)).abs().max().item()
    n_params = _params(theirs)
    return n_params == _params(ours) and diff <= atol, diff, n_params


def _why(e: Exception) -> str:
    """Returns an error's type and first line, with the kinds of state-dict difference it
    names (missing keys, unexpected keys, sizes): one reason for many architectures."""
    text = str(e).strip()
    kinds = [k for k in ("Missing key(s)", "Unexpected key(s)", "size mismatch") if k in text]
    shown = f" ({', '.join(kinds)})" if kinds else ""
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}{shown}"


def compare(
    nni_space: Any,
    nf_space: Any,
    example: Callable[[], Any] | tuple[int, ...],
    *,
    n: int = 50,
    seed: int = 0,
    atol: float = ATOL,
    name: str = "",
) -> Conformance:
    """Returns the :class:`Conformance` of ``n`` architectures drawn by NNI's sampler (seeded)
    from ``nni_space``, each built by NNI (under ``model_context``, and by ``freeze``) and
    frozen by nasforge (``nf_space``), NNI's weights loaded into nasforge's model, both run in
    eval mode on ``example`` (an input shape, or a function returning the input).

    Raises:
        ConfigError: NNI is not installed.
    """
    import numpy as np

    require_nni()
    rng = np.random.RandomState(seed)
    out = Conformance(name or type(nf_space).__name__)
    for i in range(n):
        arch: dict[str, Any] = {}
        nni_space.random(memo=arch, random_state=rng)
        row: dict[str, Any] = {"arch": dict(arch)}
        out.n += 1
        torch.manual_seed(seed * 100_003 + i)
        x = example() if callable(example) else torch.randn(*example)
        try:
            ours = nf_space.freeze(arch).eval()
            row["params_nasforge"] = _params(ours)
            theirs = _context_build(nni_space, arch).eval()
            equal, diff, row["params_nni"] = _same(theirs, ours, x, atol)
        except Exception as e:  # any failure is a mismatch, reported with its cause
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            out.mismatches.append(row)
            continue
        row["max_abs_diff"] = diff
        out.max_abs_diff = diff if out.max_abs_diff is None else max(out.max_abs_diff, diff)
        if equal:
            out.equal += 1
        else:
            out.mismatches.append(row)
        try:  # NNI's other way: the built space frozen in place
            same = _same(nni_space.freeze(arch).eval(), ours, x, atol)[0]
            why = None if same else "the outputs differ by more than atol (or the sizes do)"
        except Exception as e:  # a network of another shape is not equal: kept, with why
            why = _why(e)
        if why is None:
            out.equal_freeze += 1
        else:
            out.freeze_differences[why] = out.freeze_differences.get(why, 0) + 1
    log.info(
        "%s: %d of %d architectures equal (%d to NNI's in-place freeze)",
        out.space, out.equal, out.n, out.equal_freeze,
    )  # fmt: skip
    return out
