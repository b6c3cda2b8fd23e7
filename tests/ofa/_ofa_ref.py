"""Test helper: the ``ofa`` package (once-for-all's reference code) as the ground truth of the
published-format tests, importable without torchvision.

``ofa``'s network modules import ``ofa.utils``, whose data-loading helpers import torchvision
(transforms, datasets) at module level; nothing that the networks, latency tables or predictor
compute uses it. Where torchvision is absent, a minimal stand-in (three empty modules and a base
class for ``MyRandomResizedCrop`` to derive from) is put in ``sys.modules`` for the duration of
the import only. The tutorial's predictor and latency modules are loaded from their files, so
that ``ofa.tutorial``'s package import (which wants ``gdown`` and torchvision's datasets) is not
run. ``require_ofa()`` skips the calling test with the reason when ``ofa`` is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

__all__ = ["require_ofa", "tutorial_module", "OFA_SKIP_REASON"]

OFA_SKIP_REASON = (
    "the `ofa` package (once-for-all's reference code) is not installed; "
    "`pip install --no-deps ofa` to run the equivalence tests"
)


def _torchvision_stand_in() -> dict[str, types.ModuleType]:
    tv = types.ModuleType("torchvision")
    transforms = types.ModuleType("torchvision.transforms")
    functional = types.ModuleType("torchvision.transforms.functional")
    datasets = types.ModuleType("torchvision.datasets")

    class RandomResizedCrop:  # base class of ofa's MyRandomResizedCrop, never instantiated here
        pass

    transforms.RandomResizedCrop = RandomResizedCrop
    transforms.functional = functional
    tv.transforms, tv.datasets = transforms, datasets
    return {
        "torchvision": tv,
        "torchvision.transforms": transforms,
        "torchvision.transforms.functional": functional,
        "torchvision.datasets": datasets,
    }


def require_ofa() -> Any:
    """Returns the ``ofa`` package with its networks imported; skips the test without it."""
    if importlib.util.find_spec("ofa") is None:
        pytest.skip(OFA_SKIP_REASON)
    stand_in = {} if importlib.util.find_spec("torchvision") else _torchvision_stand_in()
    added = [name for name in stand_in if name not in sys.modules]
    sys.modules.update({name: stand_in[name] for name in added})
    try:
        importlib.import_module("ofa.imagenet_classification.elastic_nn.networks")
        importlib.import_module("ofa.nas.efficiency_predictor.latency_lookup_table")
    finally:
        for name in added:  # the stand-in lives only for the import
            sys.modules.pop(name, None)
    return importlib.import_module("ofa")


def tutorial_module(name: str) -> types.ModuleType:
    """Returns ``ofa/tutorial/<name>.py`` loaded from its file (not through ``ofa.tutorial``)."""
    ofa = require_ofa()
    path = Path(ofa.__file__).parent / "tutorial" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_ofa_tutorial_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
